/* The engine's side of bench.lua's "C handle" row: the loop an engine runs
   on its own thread, cugraph_scalar_set then cugraph_graph_launch, against
   bench/ref.c's raw cuMemsetD32Async then cuGraphLaunch. Built as the Lua
   module build/bench/engine.so; its cugraph_* symbols resolve to those of
   the cugraph-lua executable that loads it (linked -rdynamic), so it drives
   the very core the script runs in.

     engine.take(graph, scalar, stream)   C handles to them; returns the
                                          C graph's CUgraphExec
     engine.run(n)                        n iterations: scalar = i, launch
     engine.release()                     lets the handles go */
#include <stdint.h>
#include <lauxlib.h>
#include <lua.h>
#include "cugraph.h"

int luaopen_engine(lua_State *L);

static cugraph_graph *graph;
static cugraph_scalar *scalar;
static CUstream stream;

static int release(lua_State *L) {
  cugraph_graph_release(graph);
  cugraph_scalar_release(scalar);
  graph = NULL;
  scalar = NULL;
  return 0;
}

static int take(lua_State *L) {
  release(L);
  stream = cugraph_checkstream(L, 3);
  graph = cugraph_tograph(L, 1);
  scalar = cugraph_toscalar(L, 2);
  lua_pushinteger(L, (lua_Integer)(intptr_t)cugraph_graph_exec(graph));
  return 1;
}

/* for i = 1, n do pos:set(i); g:launch() end, from C */
static int run(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (!graph) return luaL_error(L, "engine.run: no graph taken");
  for (lua_Integer i = 1; i <= n; i++) {
    unsigned v = (unsigned)i;
    cugraph_scalar_set(scalar, &v);
    CUresult r = cugraph_graph_launch(graph, stream);
    if (r != CUDA_SUCCESS)
      return luaL_error(L, "cugraph_graph_launch: CUresult %d", (int)r);
  }
  return 0;
}

int luaopen_engine(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"take", take}, {"run", run}, {"release", release}, {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  return 1;
}
