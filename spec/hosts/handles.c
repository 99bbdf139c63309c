/* Graphs owned by C (src/cugraph.h): a script captures y += k, the host
   takes C handles to the graph and the scalar, and the script drops every
   reference to them and collects. Then

   (a) a second thread replays the graph ROUNDS times with k set to 1 from
       C, while the script keeps running on the main thread: its own graph
       launches with its own scalar, collections, and reloads of the module
       whose kernel the C graph runs (the C graph switches to the new code
       under its lock);
   (b) the state is closed with the handles alive, and a third thread
       replays the graph ROUNDS times more with k = 2: the graph's pins
       (memory, module) outlive the Lua objects and lua_close;
   (c) the host reads y through the address cugraph_checkbuffer gave
       (every y[j] = 3 * ROUNDS), releases the handles, and checks that the
       graph's 64 MiB buffer was held until then and freed by the last
       release (exactly on the test double; within 4 MiB on a GPU, whose
       driver keeps memory of its own).

   The host retains the primary context itself, as an engine does. Prints
   each failed check; exits 0 only if all passed.

     handles LUA_DIR PTX */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"
#include "devmem.h"

enum { N = 1024, ROUNDS = 200 };

#define HOST_FUNCS(X) \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuMemGetInfo) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) \
  X(cuMemcpyDtoHAsync)

#define FIELD(f) __typeof__(f) *f;
static struct { HOST_FUNCS(FIELD) } cu;
#undef FIELD
#define STR(x) #x
#define XSTR(x) STR(x)

static int failures;

static void fail(const char *what, const char *detail) {
  printf("FAIL %s: %s\n", what, detail);
  failures++;
}

static int load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW);
  void *p;
  if (!lib) return 0;
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) return 0; \
  memcpy(&cu.f, &p, sizeof p);
  HOST_FUNCS(RESOLVE)
#undef RESOLVE
  return 1;
}

static const char setup[] =
  "local ptx = ...\n"
  "local cuda = require 'cugraph'\n"
  "local m = cuda.module(ptx)\n"
  "local s = cuda.stream()\n"
  "local y = cuda.buffer('f32', 1024):fill(0)\n"
  "local k = cuda.scalar('f32', 0)\n"
  "local big = cuda.buffer('f32', 16 << 20)\n"
  "local g = s:capture(function()\n"
  "  m.add_scalar_f32:launch(s, 4, 256, y, k, 1024)\n"
  "  m.add_scalar_f32:launch(s, 1, 1, big, k, 0)\n"
  "end)\n"
  "local own = cuda.buffer('f32', 1024):fill(0)\n"
  "local ok = cuda.scalar('f32', 0)\n"
  "local og = s:capture(function()\n"
  "  m.add_scalar_f32:launch(s, 4, 256, own, ok, 1024)\n"
  "end)\n"
  "local f = assert(io.open(ptx)); local src = f:read('a'); f:close()\n"
  "W = { m = m, s = s, own = own, ok = ok, og = og, src = src }\n"
  "return g, k, y\n";

/* The script's own work while C replays: launches, sets, reloads,
   collections, and the handle's Lua objects gone. */
static const char work[] =
  "local i = ...\n"
  "W.ok:set(1); W.og:launch(W.s)\n"
  "if i % 10 == 0 then W.m:reload(W.src, 'kernels.ptx') end\n"
  "if i % 7 == 0 then collectgarbage() end\n";

static const char finish[] =
  "local rounds = ...\n"
  "W.s:synchronize()\n"
  "local t = W.own:download()\n"
  "for j = 1, #t do assert(t[j] == rounds, 'own[' .. j .. '] = ' .. t[j]) end\n"
  "assert(require('cugraph').status().finalizer_errors == 0)\n";

typedef struct replay {
  cugraph_graph *g;
  cugraph_scalar *k;
  float value;
  const char *what;
  CUresult r;
} replay;

static CUcontext primary;

/* An engine thread: its own stream in the primary context. */
static void *replayer(void *arg) {
  replay *rp = arg;
  CUstream s = NULL;
  rp->r = cu.cuCtxSetCurrent(primary);
  if (rp->r == CUDA_SUCCESS)
    rp->r = cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  for (int i = 0; i < ROUNDS && rp->r == CUDA_SUCCESS; i++) {
    cugraph_scalar_set(rp->k, &rp->value);
    rp->r = cugraph_graph_launch(rp->g, s);
  }
  if (rp->r == CUDA_SUCCESS) rp->r = cu.cuStreamSynchronize(s);
  if (s) cu.cuStreamDestroy(s);
  return NULL;
}

static int run(lua_State *L, const char *what, const char *chunk, int nargs,
               int nres) {
  int base = lua_gettop(L) - nargs;
  if (luaL_loadstring(L, chunk) != LUA_OK) {
    fail(what, lua_tostring(L, -1));
    return 0;
  }
  lua_insert(L, base + 1);
  if (lua_pcall(L, nargs, nres, 0) != LUA_OK) {
    fail(what, luaL_tolstring(L, -1, NULL));
    return 0;
  }
  return 1;
}

static void replay_on_thread(replay *rp) {
  pthread_t t;
  if (pthread_create(&t, NULL, replayer, rp)) {
    fail(rp->what, "pthread_create");
    return;
  }
  pthread_join(t, NULL);
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  CUdevice dev;
  CUcontext ctx;
  size_t used0, used1;
  int ok = 1;
  if (!load_driver() || cu.cuInit(0) || cu.cuDeviceGet(&dev, 0) ||
      cu.cuDevicePrimaryCtxRetain(&ctx, dev) || cu.cuCtxSetCurrent(ctx) ||
      (used0 = devmem_used(cu.cuMemGetInfo, dev, &ok), !ok)) {
    printf("FAIL no driver\n");
    return 1;
  }
  primary = ctx;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, argv[1]);
  lua_pushstring(L, argv[2]);
  if (!run(L, "setup", setup, 1, 3)) return 1;
  replay rp = {cugraph_tograph(L, -3), cugraph_toscalar(L, -2), 1.0f,
               "(a) replay beside the script", CUDA_SUCCESS};
  const char *type;
  size_t n;
  CUdeviceptr y = cugraph_checkbuffer(L, -1, &type, &n);
  if (strcmp(type, "f32") || n != N) fail("checkbuffer", "type or count");
  if (strcmp(cugraph_scalar_type(rp.k), "f32")) fail("scalar_type", type);
  lua_pop(L, 3);
  lua_gc(L, LUA_GCCOLLECT);
  lua_gc(L, LUA_GCCOLLECT);

  /* (a) */
  pthread_t t;
  if (pthread_create(&t, NULL, replayer, &rp)) return 1;
  int i;
  for (i = 1; i <= 100; i++) {
    lua_pushinteger(L, i);
    if (!run(L, "(a) the script's own work", work, 1, 0)) break;
  }
  pthread_join(t, NULL);
  if (rp.r) { char m[32]; snprintf(m, sizeof m, "CUresult %d", (int)rp.r); fail(rp.what, m); }
  lua_pushinteger(L, i - 1);
  run(L, "(a) the script's results", finish, 1, 0);
  if (!failures) printf("ok (a) C replays on a second thread beside the script\n");

  /* (b) */
  lua_close(L);
  rp.value = 2.0f;
  rp.what = "(b) replay after lua_close";
  replay_on_thread(&rp);
  if (rp.r) { char m[32]; snprintf(m, sizeof m, "CUresult %d", (int)rp.r); fail(rp.what, m); }

  /* (c) */
  float *host = malloc(N * sizeof *host);
  CUstream s;
  int bad = 0;
  if (!host || cu.cuCtxSetCurrent(ctx) || cu.cuStreamCreate(&s, 0) ||
      cu.cuMemcpyDtoHAsync(host, y, N * sizeof *host, s) ||
      cu.cuStreamSynchronize(s) || cu.cuStreamDestroy(s))
    fail("(c) reading y", "a driver call failed");
  else
    for (int j = 0; j < N && !bad; j++)
      if (host[j] != 3.0f * ROUNDS) {
        char msg[64];
        snprintf(msg, sizeof msg, "y[%d] = %g, expected %g", j, host[j],
                 3.0 * ROUNDS);
        fail("(c) results", msg);
        bad = 1;
      }
  free(host);
  if (!failures) printf("ok (b) C replays after lua_close, pins alive\n");
  /* the driver keeps a little; compute-sanitizer (CUGRAPH_LUA_SANITIZER)
     allocates its own as it goes: still far below the 60 MiB buffer */
  size_t slack = getenv("CUGRAPH_LUA_LIBCUDA") ? 0
               : getenv("CUGRAPH_LUA_SANITIZER") ? 32 << 20 : 4 << 20;
  size_t held = devmem_used(cu.cuMemGetInfo, dev, &ok);
  if (!ok || held < used0 + (60 << 20))
    fail("(c) release", "the graph's buffer is not held after lua_close");
  cugraph_scalar_release(rp.k);
  cugraph_graph_release(rp.g);
  used1 = devmem_settled(cu.cuMemGetInfo, dev, used0 + slack, &ok);
  if (!ok || used1 > used0 + slack)
    fail("(c) release", "device memory still in use after the last release");
  else if (!failures)
    printf("ok (c) the last release frees the pins\n");
  cu.cuDevicePrimaryCtxRelease(dev);
  printf("%s\n", failures ? "handles: FAILED" : "handles: all passed");
  return failures ? 1 : 0;
}
