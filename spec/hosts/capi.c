/* The embedding API from a host, two ways.

     capi LUA_DIR          the checks of cugraph_pushbuffer, each through
                           lua_pcall: one line per case, "name: message" for
                           a refusal or "name: ok"
     capi LUA_DIR SCRIPT   runs SCRIPT in a state that has a global `capi`:
                           capi.tograph(g) -> handle, capi.launch(h) ->
                           nil | error name, capi.release(h), and
                           capi.after(h, address, n, type, value): after
                           lua_close the host launches h, reads n elements
                           of type ("f32" or "i32") at address and checks
                           each equals value. Then it releases every handle
                           and checks that device memory is as before the
                           state (exactly on a software driver; within 4 MiB
                           on a GPU, whose driver keeps memory of its own),
                           or as at capi.baseline(), which a script calls
                           after what a library keeps for the process (NCCL
                           keeps 192 MiB on an H200 after its first
                           communicator is destroyed).

   Prints one line per failed check and "capi: all passed" (or "capi:
   FAILED"); exits 0 only if all passed. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

typedef struct { const char *type; CUdeviceptr ptr; size_t n; } bufcase;

static int pushbuffer(lua_State *L) {
  const bufcase *c = lua_touserdata(L, 1);
  cugraph_pushbuffer(L, c->ptr, c->type, c->n);
  return 1;
}

static int checks(const char *lua_dir) {
  static struct { const char *name; bufcase c; } cases[] = {
    {"f64 of 2^61+1", {"f64", 0x1000, ((size_t)1 << 61) + 1}},
    {"u8 of SIZE_MAX", {"u8", 0x1000, SIZE_MAX}},
    {"f32 of 2^62", {"f32", 0x1000, (size_t)1 << 62}},
    {"null pointer", {"f32", 0, 4}},
    {"unknown type", {"float4", 0x1000, 4}},
    {"f32 of 4", {"f32", 0x1000, 4}},
  };
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lua_pushcfunction(L, pushbuffer);
    lua_pushlightuserdata(L, &cases[i].c);
    int r = lua_pcall(L, 1, 1, 0);
    printf("%s: %s\n", cases[i].name, r ? lua_tostring(L, -1) : "ok");
    lua_pop(L, 1);
  }
  lua_close(L);
  return 0;
}

/* -- scripts -------------------------------------------------------------- */

#define HOST_FUNCS(X) \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
  X(cuMemGetInfo) X(cuMemcpyDtoH) X(cuGetErrorName)

#define FIELD(f) __typeof__(f) *f;
static struct { HOST_FUNCS(FIELD) } cu;
#undef FIELD
#define STR(x) #x
#define XSTR(x) STR(x)

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

enum { MAXHANDLES = 64 };
static struct after {
  cugraph_graph *g;
  int check;            /* launch and read after lua_close */
  CUdeviceptr addr;
  size_t n;
  int f32;
  double value;
} handles[MAXHANDLES];
static int nhandles, failures;

static void fail(const char *what, const char *detail) {
  printf("FAIL %s: %s\n", what, detail);
  failures++;
}

static struct after *handle_at(lua_State *L, int idx) {
  struct after *a = lua_touserdata(L, idx);
  luaL_argcheck(L, a >= handles && a < handles + nhandles && a->g, idx,
                "not a live C graph handle");
  return a;
}

static int l_tograph(lua_State *L) {
  if (nhandles == MAXHANDLES) return luaL_error(L, "too many handles");
  cugraph_graph *g = cugraph_tograph(L, 1);
  handles[nhandles].g = g;
  lua_pushlightuserdata(L, &handles[nhandles++]);
  return 1;
}

static const char *errname(CUresult r) {
  const char *s = NULL;
  return cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "CUresult";
}

static int l_launch(lua_State *L) {
  CUresult r = cugraph_graph_launch(handle_at(L, 1)->g, NULL);
  if (r == CUDA_SUCCESS) r = cu.cuCtxSynchronize();
  if (r == CUDA_SUCCESS) return 0;
  lua_pushstring(L, errname(r));
  return 1;
}

static int l_release(lua_State *L) {
  struct after *a = handle_at(L, 1);
  cugraph_graph_release(a->g);
  a->g = NULL;
  return 0;
}

static int l_after(lua_State *L) {
  struct after *a = handle_at(L, 1);
  a->addr = (CUdeviceptr)luaL_checkinteger(L, 2);
  a->n = (size_t)luaL_checkinteger(L, 3);
  a->f32 = !strcmp(luaL_checkstring(L, 4), "f32");
  a->value = luaL_checknumber(L, 5);
  a->check = 1;
  return 0;
}

/* After lua_close: each handle the script named is launched and its
   memory read back. */
static void check_after(struct after *a) {
  char msg[128];
  CUresult r = cugraph_graph_launch(a->g, NULL);
  if (r == CUDA_SUCCESS) r = cu.cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    snprintf(msg, sizeof msg, "launch after lua_close: %s", errname(r));
    fail("after", msg);
    return;
  }
  unsigned char *host = malloc(a->n * 4);
  if (!host || cu.cuMemcpyDtoH(host, a->addr, a->n * 4)) {
    fail("after", "reading the memory back");
    free(host);
    return;
  }
  for (size_t i = 0; i < a->n; i++) {
    double v;
    if (a->f32) { float f; memcpy(&f, host + 4 * i, 4); v = f; }
    else { int32_t k; memcpy(&k, host + 4 * i, 4); v = k; }
    if (v != a->value) {
      snprintf(msg, sizeof msg, "element %zu is %g, expected %g", i, v,
               a->value);
      fail("after", msg);
      break;
    }
  }
  free(host);
}

static size_t free0; /* device memory free at the start, or at baseline() */

static int l_baseline(lua_State *L) {
  size_t total;
  cu.cuCtxSynchronize();
  if (cu.cuMemGetInfo(&free0, &total)) return luaL_error(L, "cuMemGetInfo");
  return 0;
}

static int script(const char *lua_dir, const char *path) {
  CUdevice dev;
  CUcontext ctx;
  size_t free1, total;
  if (!load_driver() || cu.cuInit(0) || cu.cuDeviceGet(&dev, 0) ||
      cu.cuDevicePrimaryCtxRetain(&ctx, dev) || cu.cuCtxSetCurrent(ctx) ||
      cu.cuMemGetInfo(&free0, &total)) {
    printf("FAIL no driver\n");
    return 1;
  }
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  static const luaL_Reg funcs[] = {
    {"tograph", l_tograph}, {"launch", l_launch}, {"release", l_release},
    {"after", l_after}, {"baseline", l_baseline}, {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  lua_setglobal(L, "capi");
  if (luaL_dofile(L, path) != LUA_OK)
    fail("script", luaL_tolstring(L, -1, NULL));
  lua_close(L);
  cu.cuCtxSetCurrent(ctx);
  for (int i = 0; i < nhandles; i++)
    if (handles[i].g && handles[i].check) check_after(&handles[i]);
  for (int i = 0; i < nhandles; i++) cugraph_graph_release(handles[i].g);
  size_t slack = getenv("CUGRAPH_LUA_LIBCUDA") ? 0 : 4 << 20;
  cu.cuCtxSynchronize();
  if (cu.cuMemGetInfo(&free1, &total) || free1 + slack < free0) {
    char msg[96];
    snprintf(msg, sizeof msg, "%zu bytes of device memory still in use",
             free0 - free1);
    fail("release", msg);
  }
  cu.cuDevicePrimaryCtxRelease(dev);
  printf("capi: %s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 2) return checks(argv[1]);
  if (argc == 3) return script(argv[1], argv[2]);
  return 2;
}
