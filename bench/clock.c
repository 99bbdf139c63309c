/* clock: the wall clock and the CPU pinning of bench/bench.lua (os.clock is
   CPU time).
     clock.now() -> CLOCK_MONOTONIC seconds, a float; allocates nothing
     clock.pin([cpu]) -> cpu, or nil and a message: binds the calling
       thread to one CPU (by default the one it runs on), so that the C and
       Lua sides of a case run on the same core. Threads started before
       (the driver's) keep their CPUs.
     clock.unpin(): the calling thread's CPUs from before the first pin. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <lua.h>
#include <lauxlib.h>

int luaopen_clock(lua_State *L);

static cpu_set_t saved;
static int have_saved;

static int now(lua_State *L) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  lua_pushnumber(L, (lua_Number)t.tv_sec + (lua_Number)t.tv_nsec * 1e-9);
  return 1;
}

static int failed(lua_State *L, const char *what) {
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", what, strerror(errno));
  return 2;
}

static int pin(lua_State *L) {
  cpu_set_t one;
  int cpu = (int)luaL_optinteger(L, 1, sched_getcpu());
  if (!have_saved) {
    if (sched_getaffinity(0, sizeof saved, &saved) != 0)
      return failed(L, "sched_getaffinity");
    have_saved = 1;
  }
  luaL_argcheck(L, cpu >= 0 && cpu < CPU_SETSIZE, 1, "no such CPU");
  if (!CPU_ISSET(cpu, &saved)) {
    lua_pushnil(L);
    lua_pushfstring(L, "CPU %d is not in the process's affinity mask", cpu);
    return 2;
  }
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0)
    return failed(L, "sched_setaffinity");
  lua_pushinteger(L, cpu);
  return 1;
}

static int unpin(lua_State *L) {
  if (have_saved) sched_setaffinity(0, sizeof saved, &saved);
  return 0;
}

int luaopen_clock(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"now", now}, {"pin", pin}, {"unpin", unpin}, {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  return 1;
}
