/* Closes a lua_State from an atexit handler registered before the driver
   starts, so that it runs after any exit-time teardown the driver registers
   when it starts: the finalizers then meet a driver that may be
   deinitialized (CUDA_ERROR_DEINITIALIZED) and must skip it silently.
   Warnings are on, so a finalizer error would show on stderr. Prints what
   the driver answers after the close (4: deinitialized).

     late_close LUA_DIR PTX */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

static lua_State *L;

static void late_close(void) {
  lua_close(L);
  /* what the driver says now: 0 if it is still up, 4 once deinitialized */
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW);
  CUresult (*version)(int *) = NULL;
  CUresult (*info)(size_t *, size_t *) = NULL;
  if (lib) {
    *(void **)&version = dlsym(lib, "cuDriverGetVersion");
    *(void **)&info = dlsym(lib, "cuMemGetInfo_v2");
  }
  size_t f, t;
  int v;
  printf("closed; driver %d, cuMemGetInfo after close: %d\n",
         version && version(&v) == CUDA_SUCCESS ? v : -1,
         info ? (int)info(&f, &t) : -1);
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  atexit(late_close); /* before the driver can register a teardown */
  L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, argv[1]);
  lua_warning(L, "@on", 0);
  const char *script =
    "local cuda = require 'cugraph'\n"
    "local m = cuda.load_module(...)\n"
    "local s = cuda.stream()\n"
    "local x = cuda.buffer('i32', 64):fill(0)\n"
    "local p = cuda.scalar('u32', 1)\n"
    "local g = s:capture(function() m.mark_u32:launch(s, 1, 1, x, p, 64) end)\n"
    "g:launch(); s:synchronize()\n"
    "KEEP = { m, s, x, p, g, cuda.event():record(s) }\n";
  if (luaL_loadstring(L, script) != LUA_OK) return 1;
  lua_pushstring(L, argv[2]);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    fprintf(stderr, "late_close: %s\n", lua_tostring(L, -1));
    return 1;
  }
  puts("objects made; exiting");
  return 0;
}
