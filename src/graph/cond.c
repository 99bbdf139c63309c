/* Conditional nodes: s:loop_while, s:branch and s:switch make a node in
   the graph being captured, steered by a cugraph.Condition, and capture Lua
   closures as its bodies (cg_capture_body), nested to any depth. */
#include <string.h>
#include "graph/graph.h"

static const char *const type_names[] = { "if", "while", "switch" };

/* s:loop_while(cond, fn), s:branch(cond, then_fn [, else_fn]),
   s:switch(cond, {fn0, fn1, ...}): a conditional node after the stream's
   work, whose bodies are the functions, captured in turn; each gets s,
   which stands for the body's stream while it runs. */
static int node(lua_State *L, CUgraphConditionalNodeType type,
                const char *what) {
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
  cg_condition *c = cg_checkobj(L, 2, CG_CONDITION);
  cg_ctx *ctx = s->h.ctx;
  int n = 1;
  if (type == CU_GRAPH_COND_TYPE_SWITCH) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_Integer len = luaL_len(L, 3);
    luaL_argcheck(L, len >= 1 && len <= 65536, 3,
                  "expected a list of 1 to 65536 functions");
    n = (int)len;
    lua_settop(L, 3);
    luaL_checkstack(L, n + 8, NULL);
    for (int i = 1; i <= n; i++)
      if (lua_rawgeti(L, 3, i) != LUA_TFUNCTION)
        luaL_error(L, "s:switch(): case %d (list item %d) is a %s, not a "
                   "function", i - 1, i, luaL_typename(L, -1));
  } else {
    luaL_checktype(L, 3, LUA_TFUNCTION);
    if (type == CU_GRAPH_COND_TYPE_IF && !lua_isnoneornil(L, 4)) {
      luaL_checktype(L, 4, LUA_TFUNCTION);
      n = 2;
    }
    lua_settop(L, 2 + n);
  }
  int first = lua_gettop(L) - n + 1; /* the bodies */
  cg_check_conditional(L);
  if (!ctx->capture)
    luaL_error(L, "%s outside a capture: conditional nodes are made inside "
               "s:capture(fn)", what);
  if (cg_recording(ctx)) { /* made again when the graph is built; the */
    cg_record_call(L, ctx, s->h.drv.stream, /* the bodies' work is */
                   type == CU_GRAPH_COND_TYPE_SWITCH ? 3 : 2 + n); /* recorded */
    for (int i = 0; i < n; i++) cg_record_body(L, ctx, 1, first + i);
    lua_settop(L, 1);
    return 1;
  }
  if (n > 1 || type == CU_GRAPH_COND_TYPE_SWITCH) {
    int version = 0;
    CU(L, ctx, cuDriverGetVersion, &version);
    if (version < 12080)
      luaL_error(L, "%s: switch nodes and else branches need CUDA 12.8 or "
                 "later", what);
  }
  cg_capture *top = ctx->capture->top;
  if (c->node == top->serial)
    luaL_error(L, "%s: this cugraph.Condition already drives a conditional "
               "node in this graph; make one condition per node", what);
  cg_pinobj(L, ctx, &s->h, 1);
  if (!(c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT) && c->bound != top->serial) {
    /* nothing of this graph set it before the node reads it */
    luaL_where(L, 1);
    lua_warning(L, "cugraph: ", 1);
    lua_warning(L, lua_tostring(L, -1), 1);
    lua_warning(L, what, 1);
    lua_warning(L, ": the condition has no default and nothing in this "
                "capture set it before the node, which reads a value never "
                "set (the node does nothing when it is 0): give "
                "cuda.condition a default or set it first (c:set, "
                "c:set_when or a kernel)", 0);
    lua_pop(L, 1);
  }
  cg_condition_handle(L, ctx, c, 2);
  cg_check_captured(L, ctx, s->h.drv.stream, what);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->capture->pins);
  lua_createtable(L, n, 1); /* for g:nodes(true): the type, the bodies */
  lua_pushstring(L, type_names[type]);
  lua_setfield(L, -2, "type");
  int info = lua_gettop(L);
  CUgraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = c->handle;
  p.conditional.type = type;
  p.conditional.size = (unsigned)n;
  p.conditional.ctx = ctx->cu;
  CUgraphNode nd = cg_capture_node(L, ctx, s->h.drv.stream, &p);
  c->node = top->serial;
  top->conds++;
  for (int i = 0; i < n; i++) { /* the driver's array lives with the node */
    lua_pushlightuserdata(L, p.conditional.phGraph_out[i]);
    lua_rawseti(L, info, i + 1);
  }
  lua_pushlightuserdata(L, nd);
  lua_pushvalue(L, info);
  lua_rawset(L, info - 1);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, info, i + 1);
    CUgraph body = lua_touserdata(L, -1);
    lua_pop(L, 1);
    cg_capture_body(L, ctx, 1, first + i, body);
  }
  lua_settop(L, 1);
  return 1; /* the stream, as methods that record work return it */
}

static int stream_loop_while(lua_State *L) {
  return node(L, CU_GRAPH_COND_TYPE_WHILE, "s:loop_while()");
}

static int stream_branch(lua_State *L) {
  return node(L, CU_GRAPH_COND_TYPE_IF, "s:branch()");
}

static int stream_switch(lua_State *L) {
  return node(L, CU_GRAPH_COND_TYPE_SWITCH, "s:switch()");
}

void cond_open(lua_State *L) {
  static const luaL_Reg smethods[] = {
    {"loop_while", stream_loop_while}, {"branch", stream_branch},
    {"switch", stream_switch}, {NULL, NULL}
  };
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, smethods, 0);
  lua_pop(L, 2);
}
