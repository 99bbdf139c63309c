/* dlpack: an engine that trades device memory with a script as DLPack
   tensors (src/cugraph.h), each side keeping what it owns alive.

   - The engine allocates a field of H x W floats and hands it to the
     script as a DLPack tensor (cugraph_pushdlpack): the Buffer the script
     sees owns the tensor and calls the engine's deleter exactly once,
     when the Buffer goes and no graph pins it any more.
   - The script (trade.lua) captures a graph on the field and replays it;
     then it frees the graph and the field, which runs the deleter.
   - The script returns a buffer of its own; the engine takes it as a
     tensor (cugraph_todlpack), closes the lua_State, and reads the
     tensor's memory afterwards: the tensor keeps it allocated until the
     engine calls its deleter. At the end device memory is as at the start.

     dlpack [trade.lua [lua_dir]]

   libcuda is opened with dlopen (CUGRAPH_LUA_LIBCUDA names another).
   Exits 0 when every check passes. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

#ifndef CUGRAPH_LUA_DIR
#define CUGRAPH_LUA_DIR "lua"
#endif
#ifndef TRADE_SCRIPT
#define TRADE_SCRIPT "examples/embed/trade.lua"
#endif

enum { H = 64, W = 256, STEPS = 10 };

#define ENGINE_FUNCS(X) \
  X(cuInit) X(cuGetErrorName) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemsetD32) X(cuMemcpyDtoH) X(cuMemGetInfo)

#define FIELD(f) __typeof__(f) *f;
static struct { ENGINE_FUNCS(FIELD) } cu;
#undef FIELD
#define STR(x) #x
#define XSTR(x) STR(x)

static int load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  if (!name || !*name) name = "libcuda.so.1";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlpack: no CUDA driver (%s): %s\n", name, dlerror());
    return 0;
  }
  void *p;
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) { \
    fprintf(stderr, "dlpack: %s lacks %s\n", name, XSTR(f)); \
    return 0; \
  } \
  memcpy(&cu.f, &p, sizeof p);
  ENGINE_FUNCS(RESOLVE)
#undef RESOLVE
  return 1;
}

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return 1;
  const char *name = NULL;
  if (cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "?";
  fprintf(stderr, "dlpack: %s: %s (%d)\n", what, name, (int)r);
  return 0;
}
#define CHECK(call) check((call), #call)

/* The engine's tensor: its memory, shape and strides, and how often the
   deleter ran (it must be once). */
static struct {
  DLManagedTensor t;
  int64_t shape[2], strides[2];
  CUdeviceptr mem;
  int deleted;
} field;

static void field_deleter(DLManagedTensor *t) {
  (void)t;
  if (field.deleted++ == 0) cu.cuMemFree(field.mem);
}

static int make_field(void) {
  if (!CHECK(cu.cuMemAlloc(&field.mem, (size_t)H * W * sizeof(float))) ||
      !CHECK(cu.cuMemsetD32(field.mem, 0, (size_t)H * W)) ||
      !CHECK(cu.cuCtxSynchronize()))
    return 0;
  field.shape[0] = H, field.shape[1] = W;
  field.strides[0] = W, field.strides[1] = 1;
  DLTensor *t = &field.t.dl_tensor;
  t->data = (void *)(uintptr_t)field.mem;
  t->device.device_type = kDLCUDA;
  t->device.device_id = 0;
  t->ndim = 2;
  t->dtype.code = kDLFloat;
  t->dtype.bits = 32;
  t->dtype.lanes = 1;
  t->shape = field.shape;
  t->strides = field.strides;
  t->byte_offset = 0;
  field.t.manager_ctx = &field;
  field.t.deleter = field_deleter;
  return 1;
}

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg) luaL_traceback(L, L, msg, 1);
  else if (!luaL_callmeta(L, 1, "__tostring")) lua_pushliteral(L, "(error object)");
  return 1;
}

/* Calls the function below its nargs arguments with a traceback, leaving
   nres results; prints the error. */
static int pcall(lua_State *L, int nargs, int nres, const char *what) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int ok = lua_pcall(L, nargs, nres, base) == LUA_OK;
  if (!ok) {
    fprintf(stderr, "dlpack: %s: %s\n", what, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_remove(L, base);
  return ok;
}

/* Under pcall: the field becomes the global `field`, a Buffer owning it. */
static int publish(lua_State *L) {
  cugraph_pushdlpack(L, lua_touserdata(L, 1));
  lua_setglobal(L, "field");
  return 0;
}

/* Under pcall: the tensor of the Buffer at 1, as light userdata. */
static int take(lua_State *L) {
  lua_pushlightuserdata(L, cugraph_todlpack(L, 1));
  return 1;
}

/* Runs the script; returns the tensor of its result, NULL on a failure.
   The lua_State is closed here, before the engine reads the tensor. */
static DLManagedTensor *run_script(const char *script, const char *lua_dir) {
  lua_State *L = luaL_newstate();
  if (!L) return NULL;
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  lua_pushcfunction(L, publish);
  lua_pushlightuserdata(L, &field.t);
  int ok = pcall(L, 1, 0, "cugraph_pushdlpack");
  if (ok && luaL_loadfile(L, script) != LUA_OK) {
    fprintf(stderr, "dlpack: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    ok = 0;
  }
  ok = ok && pcall(L, 0, 0, script);
  lua_getglobal(L, "setup");
  ok = ok && pcall(L, 0, 0, "setup()");
  for (int i = 1; ok && i <= STEPS; i++) {
    lua_getglobal(L, "step");
    lua_pushinteger(L, i);
    ok = pcall(L, 1, 0, "step()");
  }
  if (ok && field.deleted) {
    fprintf(stderr, "dlpack: the field was deleted while the graph lived\n");
    ok = 0;
  }
  lua_getglobal(L, "finish");
  ok = ok && pcall(L, 0, 1, "finish()");
  DLManagedTensor *sums = NULL;
  if (ok) {
    lua_pushcfunction(L, take);
    lua_insert(L, -2);
    ok = pcall(L, 1, 1, "cugraph_todlpack");
    if (ok) sums = lua_touserdata(L, -1);
    lua_pop(L, ok);
  }
  if (ok && field.deleted != 1) {
    fprintf(stderr, "dlpack: the field's deleter ran %d times on free\n",
            field.deleted);
    ok = 0;
  }
  lua_close(L); /* the script's buffer goes; the tensor keeps its memory */
  if (!ok && sums) sums->deleter(sums);
  return ok ? sums : NULL;
}

/* Step i adds 1 to every element and writes the row sums times i, so the
   last sums are STEPS * W * STEPS. */
static int check_sums(DLManagedTensor *sums) {
  const DLTensor *t = &sums->dl_tensor;
  if (t->ndim != 1 || t->shape[0] != H || t->dtype.code != kDLFloat ||
      t->dtype.bits != 32 || t->device.device_type != kDLCUDA) {
    fprintf(stderr, "dlpack: the sums tensor is not f32[%d] on the GPU\n", H);
    return 0;
  }
  float host[H];
  if (!CHECK(cu.cuMemcpyDtoH(host, (CUdeviceptr)(uintptr_t)t->data +
                             t->byte_offset, sizeof host)))
    return 0;
  float want = (float)STEPS * W * STEPS;
  for (int r = 0; r < H; r++)
    if (host[r] != want) {
      fprintf(stderr, "dlpack: sums[%d] = %g, expected %g\n", r, host[r], want);
      return 0;
    }
  printf("dlpack: after lua_close the script's tensor reads sums[r] = %g\n", want);
  return 1;
}

int main(int argc, char **argv) {
  const char *script = argc > 1 ? argv[1] : TRADE_SCRIPT;
  const char *lua_dir = argc > 2 ? argv[2] : CUGRAPH_LUA_DIR;
  CUdevice dev;
  CUcontext ctx;
  size_t free0 = 0, free1 = 0, total;
  if (!load_driver() || !CHECK(cu.cuInit(0)) || !CHECK(cu.cuDeviceGet(&dev, 0)) ||
      !CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, dev)))
    return 1;
  int ok = CHECK(cu.cuCtxSetCurrent(ctx)) &&
           CHECK(cu.cuMemGetInfo(&free0, &total)) && make_field();
  DLManagedTensor *sums = ok ? run_script(script, lua_dir) : NULL;
  ok = ok && sums && CHECK(cu.cuCtxSetCurrent(ctx)) && check_sums(sums);
  if (sums) sums->deleter(sums); /* the script's memory goes now */
  ok = ok && CHECK(cu.cuCtxSynchronize()) && CHECK(cu.cuMemGetInfo(&free1, &total));
  /* a GPU's driver keeps some memory of its own: 4 MiB of slack there */
  size_t slack = getenv("CUGRAPH_LUA_LIBCUDA") ? 0 : 4 << 20;
  if (ok && free1 + slack < free0) {
    fprintf(stderr, "dlpack: %zu bytes of device memory still in use\n",
            free0 - free1);
    ok = 0;
  }
  if (ok) printf("dlpack: the field's deleter ran once; device memory is as at the start\n");
  if (!field.deleted && field.mem) cu.cuMemFree(field.mem);
  ok = CHECK(cu.cuDevicePrimaryCtxRelease(dev)) && ok;
  puts(ok ? "dlpack: ok" : "dlpack: FAILED");
  return ok ? 0 : 1;
}
