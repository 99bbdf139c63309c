/* The C reference of bench/nccl.lua: the all-reduce loop the binding runs,
   as direct calls of libcuda and libnccl (both opened with dlopen;
   CUGRAPH_LUA_LIBCUDA and CUGRAPH_LUA_LIBNCCL override the names, as in
   the binding). Built as the Lua module build/bench/nccl_ref.so; each rank
   of the benchmark loads it and calls, in step with the other ranks:

     ref.open(id, nranks, rank, device, max_bytes)
                          the device's primary context, a stream, a buffer
                          of max_bytes and a communicator of its own
     ref.eager(bytes, n)  n in-place f32 sum all-reduces of bytes and a
                          stream synchronize: seconds
     ref.capture(bytes)   a graph of one such all-reduce, instantiated
     ref.replay(n)        n launches of it and a synchronize: seconds
     ref.close() */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda.h>
#include <lua.h>
#include <lauxlib.h>

int luaopen_nccl_ref(lua_State *L);

#define STR(x) #x
#define XSTR(x) STR(x)

#define DRIVER(X) \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuStreamCreate) \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) \
  X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)

typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;

static struct {
#define FIELD(f) __typeof__(f) *f;
  DRIVER(FIELD)
#undef FIELD
  int (*ncclCommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  int (*ncclCommDestroy)(ncclComm_t);
  int (*ncclAllReduce)(const void *, void *, size_t, int, int, ncclComm_t,
                       CUstream);
} d;

static CUdevice dev;
static CUcontext ctx;
static CUstream stream;
static CUdeviceptr buf;
static ncclComm_t comm;
static CUgraph graph;
static CUgraphExec exec;
static size_t graph_bytes;

static void check(lua_State *L, const char *api, int r) {
  if (r) luaL_error(L, "nccl_ref: %s failed (%d)", api, r);
}
#define CK(call) check(L, #call, (int)d.call)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *lib(lua_State *L, const char *env, const char *dflt) {
  const char *name = getenv(env);
  void *h = dlopen(name && *name ? name : dflt, RTLD_NOW | RTLD_LOCAL);
  if (!h) luaL_error(L, "nccl_ref: %s", dlerror());
  return h;
}

static void sym(lua_State *L, void *h, const char *name, void *out) {
  void *p = dlsym(h, name);
  if (!p) luaL_error(L, "nccl_ref: missing %s", name);
  memcpy(out, &p, sizeof p);
}

static int ref_open(lua_State *L) {
  size_t n;
  const char *id = luaL_checklstring(L, 1, &n);
  int nranks = (int)luaL_checkinteger(L, 2), rank = (int)luaL_checkinteger(L, 3);
  int ordinal = (int)luaL_checkinteger(L, 4);
  size_t max = (size_t)luaL_checkinteger(L, 5);
  luaL_argcheck(L, n == sizeof(ncclUniqueId), 1, "an NCCL id");
  void *cu = lib(L, "CUGRAPH_LUA_LIBCUDA", "libcuda.so.1");
  void *nc = lib(L, "CUGRAPH_LUA_LIBNCCL", "libnccl.so.2");
#define FIND(f) sym(L, cu, XSTR(f), &d.f);
  DRIVER(FIND)
#undef FIND
  sym(L, nc, "ncclCommInitRank", &d.ncclCommInitRank);
  sym(L, nc, "ncclCommDestroy", &d.ncclCommDestroy);
  sym(L, nc, "ncclAllReduce", &d.ncclAllReduce);
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, ordinal));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&buf, max));
  ncclUniqueId uid;
  memcpy(uid.internal, id, n);
  CK(ncclCommInitRank(&comm, nranks, uid, rank));
  return 0;
}

/* ncclFloat32 = 7, ncclSum = 0 */
static int ref_eager(lua_State *L) {
  size_t bytes = (size_t)luaL_checkinteger(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2);
  CK(cuCtxSetCurrent(ctx));
  double t0 = now();
  for (lua_Integer i = 0; i < n; i++)
    CK(ncclAllReduce((void *)(uintptr_t)buf, (void *)(uintptr_t)buf,
                     bytes / 4, 7, 0, comm, stream));
  CK(cuStreamSynchronize(stream));
  lua_pushnumber(L, now() - t0);
  return 1;
}

static void drop_graph(void) {
  if (exec) d.cuGraphExecDestroy(exec);
  if (graph) d.cuGraphDestroy(graph);
  exec = NULL;
  graph = NULL;
}

static int ref_capture(lua_State *L) {
  size_t bytes = (size_t)luaL_checkinteger(L, 1);
  CK(cuCtxSetCurrent(ctx));
  drop_graph();
  CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  int r = d.ncclAllReduce((void *)(uintptr_t)buf, (void *)(uintptr_t)buf,
                          bytes / 4, 7, 0, comm, stream);
  CUresult e = d.cuStreamEndCapture(stream, &graph);
  check(L, "ncclAllReduce", r);
  check(L, "cuStreamEndCapture", (int)e);
  CK(cuGraphInstantiate(&exec, graph, 0));
  graph_bytes = bytes;
  return 0;
}

static int ref_replay(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (!exec) return luaL_error(L, "nccl_ref: no graph (ref.capture)");
  CK(cuCtxSetCurrent(ctx));
  double t0 = now();
  for (lua_Integer i = 0; i < n; i++) CK(cuGraphLaunch(exec, stream));
  CK(cuStreamSynchronize(stream));
  lua_pushnumber(L, now() - t0);
  return 1;
}

static int ref_close(lua_State *L) {
  if (!comm) return 0;
  d.cuCtxSetCurrent(ctx);
  drop_graph();
  d.ncclCommDestroy(comm);
  d.cuMemFree(buf);
  d.cuStreamDestroy(stream);
  d.cuDevicePrimaryCtxRelease(dev);
  comm = NULL;
  (void)L;
  return 0;
}

int luaopen_nccl_ref(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"open", ref_open}, {"eager", ref_eager}, {"capture", ref_capture},
    {"replay", ref_replay}, {"close", ref_close}, {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  return 1;
}
