/* The only file that knows how libcuda is found. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include "base/driver.h"

cg_driver cg_drv;

#define STR(x) #x
#define XSTR(x) STR(x)

/* Written by load(), once per process, under the lock; a thread reads them
   (and cg_drv) only after taking the lock in cg_driver_load, or after being
   handed a state by a thread that did. A lock rather than pthread_once, so
   that helgrind and DRD see the ordering too. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static const char *load_error;
static char message[512];

/* Finds every entry point; records the first missing one. */
static const char *resolve(void *lib) {
  void *p;
#define REQUIRED(f) \
  if (!(p = dlsym(lib, XSTR(f)))) return "missing entry point " XSTR(f); \
  memcpy(&cg_drv.f, &p, sizeof p);
#define OPTIONAL(f) \
  p = dlsym(lib, XSTR(f)); memcpy(&cg_drv.f, &p, sizeof p);
  CG_DRIVER_FUNCS(REQUIRED)
  CG_DRIVER_OPTIONAL(OPTIONAL)
#undef REQUIRED
#undef OPTIONAL
  return NULL;
}

static void load(void) {
  char buf[CG_ERRNAME];
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  if (!name || !*name) name = "libcuda.so.1";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(message, sizeof message, "no CUDA driver found (%s): %s", name,
             dlerror());
    load_error = message;
    return;
  }
  const char *why = resolve(lib);
  if (why) {
    snprintf(message, sizeof message, "unusable CUDA driver (%s): %s", name,
             why);
    load_error = message;
    return;
  }
  CUresult r = cg_drv.cuInit(0);
  if (r != CUDA_SUCCESS) {
    snprintf(message, sizeof message, "cuInit: %s: %s",
             cg_driver_errname(r, buf),
             r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected"
                                        : "the CUDA driver failed to start");
    load_error = message;
  } /* the library stays open for the life of the process */
}

const char *cg_driver_load(void) {
  pthread_mutex_lock(&load_lock);
  if (!loaded) load();
  loaded = 1;
  const char *why = load_error;
  pthread_mutex_unlock(&load_lock);
  return why;
}

const char *cg_driver_errname(CUresult r, char buf[CG_ERRNAME]) {
  const char *s = NULL;
  if (cg_drv.cuGetErrorName && cg_drv.cuGetErrorName(r, &s) == CUDA_SUCCESS
      && s)
    return s;
  snprintf(buf, CG_ERRNAME, "CUDA_ERROR_%d", (int)r);
  return buf;
}

int cg_driver_sticky(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    return 1;
  default:
    return 0;
  }
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
