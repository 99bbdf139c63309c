/* hostfn: a C host function for the specs that run in cugraph-lua, whose
   cugraph_pushhostfn (src/cugraph.h) this module calls (the program is
   linked with -rdynamic):

     local hf = package.loadlib(build .. "/hostfn.so", "luaopen_hostfn")()
     local fn, data = hf.fn()    -- for s:host(fn, data)
     hf.calls()                  -- how often it was called since */
#include <stdatomic.h>
#include <lua.h>
#include <lauxlib.h>
#include "cugraph.h"

int luaopen_hostfn(lua_State *L);

static atomic_int calls;

static void CUDA_CB count(void *data) { /* data NULL: s:host(fn) */
  atomic_fetch_add(data ? (atomic_int *)data : &calls, 1);
}

static int l_fn(lua_State *L) {
  cugraph_pushhostfn(L, count);
  lua_pushlightuserdata(L, &calls);
  return 2;
}

static int l_calls(lua_State *L) {
  lua_pushinteger(L, atomic_load(&calls));
  return 1;
}

int luaopen_hostfn(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"fn", l_fn}, {"calls", l_calls}, {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  return 1;
}
