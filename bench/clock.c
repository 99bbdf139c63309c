/* clock: the wall clock of bench-ref for the Lua side of the benchmarks
   (os.clock is CPU time). clock.now() -> CLOCK_MONOTONIC seconds, a float;
   it allocates nothing. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <lua.h>
#include <lauxlib.h>

int luaopen_clock(lua_State *L);

static int now(lua_State *L) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  lua_pushnumber(L, (lua_Number)t.tv_sec + (lua_Number)t.tv_nsec * 1e-9);
  return 1;
}

int luaopen_clock(lua_State *L) {
  static const luaL_Reg funcs[] = { {"now", now}, {NULL, NULL} };
  luaL_newlib(L, funcs);
  return 1;
}
