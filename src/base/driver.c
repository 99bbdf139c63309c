/* The only file that knows how libcuda is found. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include "base/driver.h"
#include "base/loader.h"

cg_driver cg_drv;

#define STR(x) #x
#define XSTR(x) STR(x)

static const char *start(char *msg, size_t n) {
  char buf[CG_ERRNAME];
  CUresult r = cg_drv.cuInit(0);
  if (r == CUDA_SUCCESS) return NULL;
  snprintf(msg, n, "cuInit: %s: %s", cg_driver_errname(r, buf),
           r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected"
                                      : "the CUDA driver failed to start");
  return msg;
}

#ifndef CG_SIM_DIR /* where make install puts the simulator */
#define CG_SIM_DIR "/usr/local/lib/cugraph-lua"
#endif

int cg_simulator_paths(char paths[][CG_PATHLEN], int max) {
  static const char *const beside[] = {
    "%s/libcuda-sim.so",                      /* build/cugraph-lua, build/lib* */
    "%s/../libcuda-sim.so",                   /* build/cugraph/core.so */
    "%s/cugraph-lua/libcuda-sim.so",          /* PREFIX/lib/libcugraph-lua.so */
    "%s/../lib/cugraph-lua/libcuda-sim.so",   /* PREFIX/bin/cugraph-lua */
    "%s/../../../cugraph-lua/libcuda-sim.so", /* PREFIX/lib/lua/5.4/cugraph */
    "%s/../cugraph-lua/libcuda-sim.so",       /* a rock's lib/lua/5.4/cugraph */
    "%s/../lib/lua/5.4/cugraph-lua/libcuda-sim.so", /* a rock's bin */
  };
  Dl_info info;
  char dir[CG_PATHLEN / 2];
  int n = 0;
  const char *slash;
  void *self;
  memcpy(&self, &(void (*)(void)){ (void (*)(void))cg_simulator_paths },
         sizeof self);
  if (dladdr(self, &info) && info.dli_fname &&
      (slash = strrchr(info.dli_fname, '/')) &&
      (size_t)(slash - info.dli_fname) < sizeof dir) {
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - info.dli_fname),
             info.dli_fname);
    for (size_t i = 0; i < sizeof beside / sizeof *beside && n < max; i++)
      snprintf(paths[n++], CG_PATHLEN, beside[i], dir);
  }
  if (n < max) snprintf(paths[n++], CG_PATHLEN, "%s/libcuda-sim.so", CG_SIM_DIR);
  return n;
}

/* CUGRAPH_LUA_LIBCUDA names the library; "sim" names the PTX simulator
   wherever it is installed or built; unset, the system's libcuda. */
static cg_library libcuda;

static int candidates(char paths[][CG_PATHLEN], int max) {
  const char *env = getenv("CUGRAPH_LUA_LIBCUDA");
  if (env && !strcmp(env, "sim")) {
    libcuda.hint = "; the simulator is libcuda-sim.so: make builds it in "
                   "build/, make install and the rock install it";
    return cg_simulator_paths(paths, max);
  }
  snprintf(paths[0], CG_PATHLEN, "%s", env && *env ? env : "libcuda.so.1");
  return max > 0;
}

#define SYMBOL(f) { XSTR(f), &cg_drv.f, 0 },
#define OPTIONAL(f) { XSTR(f), &cg_drv.f, 1 },
static const cg_symbol symbols[] = {
  CG_DRIVER_FUNCS(SYMBOL) CG_DRIVER_OPTIONAL(OPTIONAL) { NULL, NULL, 0 }
};
#undef SYMBOL
#undef OPTIONAL

static cg_library libcuda = {
  NULL, "CUDA driver",
  "; without a GPU, run on the PTX simulator: cugraph-lua --sim script.lua "
  "(or CUGRAPH_LUA_LIBCUDA=sim)", candidates, symbols, start,
  CG_LIBRARY_STATE
};

const char *cg_driver_load(void) { return cg_library_load(&libcuda); }

void *cg_driver_handle(void) {
  return cg_driver_load() ? NULL : libcuda.handle;
}

void *cg_driver_symbol(const char *name) {
  void *h = cg_driver_handle();
  return h ? dlsym(h, name) : NULL;
}

CUresult cg_memset_value(CUdeviceptr p, uint64_t bits, unsigned size,
                         CUstream s, const char **api) {
  uint32_t w[2];
  memcpy(w, &bits, 8);
  switch (size) {
  case 1:
    *api = "cuMemsetD8Async";
    return cg_drv.cuMemsetD8Async(p, (unsigned char)w[0], 1, s);
  case 2:
    *api = "cuMemsetD16Async";
    return cg_drv.cuMemsetD16Async(p, (unsigned short)w[0], 1, s);
  default: {
    *api = "cuMemsetD32Async";
    CUresult r = cg_drv.cuMemsetD32Async(p, w[0], 1, s);
    return r != CUDA_SUCCESS || size < 8 ? r
         : cg_drv.cuMemsetD32Async(p + 4, w[1], 1, s);
  }
  }
}

const char *cg_driver_errname(CUresult r, char buf[CG_ERRNAME]) {
  const char *s = NULL;
  if (cg_drv.cuGetErrorName && cg_drv.cuGetErrorName(r, &s) == CUDA_SUCCESS
      && s)
    return s;
  snprintf(buf, CG_ERRNAME, "CUDA_ERROR_%d", (int)r);
  return buf;
}

/* "where: api: name: message"; where (the caller's "chunk:line") only
   when known. */
static int error_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "where");
  lua_getfield(L, 1, "api");
  lua_getfield(L, 1, "name");
  lua_getfield(L, 1, "message");
  lua_pushfstring(L, "%s%s%s: %s: %s", luaL_optstring(L, 2, ""),
                  lua_isstring(L, 2) ? ": " : "", luaL_optstring(L, 3, "?"),
                  luaL_optstring(L, 4, "?"), luaL_optstring(L, 5, "?"));
  return 1;
}

void cg_pusherror(lua_State *L, const char *api, int code, const char *name,
                  const char *msg) {
  size_t len;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, api);
  lua_setfield(L, -2, "api");
  lua_pushinteger(L, code);
  lua_setfield(L, -2, "code");
  lua_pushstring(L, name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, msg);
  lua_setfield(L, -2, "message");
  luaL_where(L, 1); /* "chunk:line: " of the Lua code that made the call */
  lua_tolstring(L, -1, &len);
  if (len > 2) {
    lua_pushlstring(L, lua_tostring(L, -1), len - 2);
    lua_setfield(L, -3, "where");
  }
  lua_pop(L, 1);
  luaL_setmetatable(L, "cugraph.Error");
}

/* cuda.is_error(v) -> whether v is an error object of the runtime */
static int is_error(lua_State *L) {
  int yes = lua_getmetatable(L, 1);
  if (yes) {
    luaL_getmetatable(L, "cugraph.Error");
    yes = lua_rawequal(L, -1, -2);
  }
  lua_pushboolean(L, yes);
  return 1;
}

void cg_driver_pusherror(lua_State *L, const char *api, CUresult r) {
  char buf[CG_ERRNAME];
  const char *s = NULL;
  if (!cg_drv.cuGetErrorString || cg_drv.cuGetErrorString(r, &s) != CUDA_SUCCESS
      || !s)
    s = "unknown error";
  cg_pusherror(L, api, (int)r, cg_driver_errname(r, buf), s);
}

int cg_driver_error(lua_State *L, const char *api, CUresult r) {
  cg_driver_pusherror(L, api, r);
  return lua_error(L);
}

void cg_driver_open(lua_State *L) {
  luaL_newmetatable(L, "cugraph.Error");
  lua_pushcfunction(L, error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushcfunction(L, is_error);
  lua_setfield(L, -2, "is_error");
}
