/* What cuda.graphed's calls are told apart and matched by (graphed.c):
   the key a call's arguments give, how one recording differs from a
   graph's, and the parameters a recording's nodes take, hashed. */
#include <string.h>
#include "graph/graph.h"

/* -- keys ----------------------------------------------------------------- */

uint64_t cg_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
  return h * 0x100000001b3u;
}

/* What of the value at idx changes a call's work: its type, an object's
   kind and element type, a boolean, a string (short strings are interned:
   their address); numbers and tables only through opts.key. */
uint64_t cg_graphed_keyof(lua_State *L, cg_ctx *ctx, int idx, int numbers) {
  int t = lua_type(L, idx);
  uint64_t h = (uint64_t)t;
  cg_obj *o;
  switch (t) {
  case LUA_TBOOLEAN: return cg_mix(h, (uint64_t)lua_toboolean(L, idx));
  case LUA_TSTRING:
    return cg_mix(h, (uint64_t)(uintptr_t)lua_tostring(L, idx));
  case LUA_TNUMBER:
    if (!numbers) return h;
    if (lua_isinteger(L, idx))
      return cg_mix(h, (uint64_t)lua_tointeger(L, idx));
    lua_Number n = lua_tonumber(L, idx);
    uint64_t bits;
    memcpy(&bits, &n, 8);
    return cg_mix(h + 1, bits);
  case LUA_TUSERDATA:
    if (!(o = cg_toany(L, ctx, idx))) return h;
    h = cg_mix(h, o->kind);
    if (o->kind == CG_BUFFER) h = cg_mix(h, ((cg_buffer *)o)->type);
    if (o->kind == CG_SCALAR) h = cg_mix(h, ((cg_scalar *)o)->type);
    if (o->kind == CG_STREAM) h = cg_mix(h, (uint64_t)(uintptr_t)o);
    return h;
  default: return h;
  }
}

/* -- comparing recordings ------------------------------------------------- */

/* Whether the values at x and y are the same argument: raw-equal (an
   integer and a float apart), two functions (a body's work is recorded on
   its own: a closure made anew each call is the same body), or plain
   tables whose contents are the same so. */
static int same_value(lua_State *L, int x, int y) {
  if (lua_isinteger(L, x) != lua_isinteger(L, y)) return 0;
  if (lua_rawequal(L, x, y)) return 1;
  if (lua_isfunction(L, x) && lua_isfunction(L, y)) return 1;
  if (!lua_istable(L, x) || !lua_istable(L, y)) return 0;
  if (lua_getmetatable(L, x) || lua_getmetatable(L, y)) {
    lua_pop(L, 1);
    return 0;
  }
  x = lua_absindex(L, x);
  y = lua_absindex(L, y);
  int same = 1;
  for (int pass = 0; pass < 2 && same; pass++) { /* x's keys in y, y's in x */
    int a = pass ? y : x, b = pass ? x : y;
    lua_pushnil(L);
    while (same && lua_next(L, a)) {
      lua_pushvalue(L, -2);
      lua_rawget(L, b);
      same = lua_rawequal(L, -1, -2) ||
             (lua_isfunction(L, -1) && lua_isfunction(L, -2));
      lua_pop(L, 2);
    }
    if (!same) lua_pop(L, 1); /* the key the loop stopped at */
  }
  return same;
}

/* Whether record y of graph gr's recording takes x's parameters in its
   node, in place (its record in the graph has a node the driver changes). */
static int in_place(const cg_graph *gr, const cg_rec *x, const cg_rec *y) {
  if (x->depth || x->kind == NK_CALL || y->peer >= gr->recs->n) return 0;
  const cg_rec *e = &gr->recs->v[y->peer];
  if (e->kind != x->kind || !e->node) return 0;
  if (x->kind == NK_KERNEL) return !((const cg_kernel *)x->kernel)->nattrs;
  return x->kind != NK_FILL || x->height <= 1;
}

/* How recording a (values at av) differs from recording b (at bv) of
   graph gr: -1 in its work (another graph), 0 not at all, 1 only in
   parameters gr's nodes take in place (ch[i] set for those records), 2 in
   what only a graph built again takes. */
int cg_graphed_differ(lua_State *L, const cg_recs *a, int av,
                      const cg_recs *b, int bv, const cg_graph *gr,
                      unsigned char *ch) {
  if (a->n != b->n) return -1;
  int worst = 0;
  for (size_t i = 0; i < a->n; i++) {
    const cg_rec *x = &a->v[i], *y = &b->v[i];
    ch[i] = 0;
    if (x->kind != y->kind || x->depth != y->depth ||
        x->stream != y->stream || x->nvals != y->nvals)
      return -1;
    int diff = 0;
    switch (x->kind) {
    case NK_KERNEL:
      if (x->f != y->f || x->kernel != y->kernel || x->nargs != y->nargs)
        return -1;
      diff = memcmp(x->grid, y->grid, sizeof x->grid) ||
             memcmp(x->block, y->block, sizeof x->block) ||
             x->shared != y->shared ||
             memcmp(a->words + x->word0, b->words + y->word0,
                    (((const cg_kernel *)x->kernel)->nwords) * 8) ||
             memcmp(a->objs + x->arg0, b->objs + y->arg0,
                    (size_t)x->nargs * sizeof *a->objs);
      break;
    case NK_FILL:
      if (x->elem != y->elem || x->height != y->height ||
          x->pitch != y->pitch)
        return -1;
      diff = x->obj[0] != y->obj[0] || x->off != y->off ||
             x->value != y->value || x->width != y->width;
      break;
    case NK_COPY:
      diff = x->obj[0] != y->obj[0] || x->obj[1] != y->obj[1] ||
             x->off != y->off || x->soff != y->soff || x->bytes != y->bytes;
      break;
    default: /* a call: the same function, its arguments compared */
      lua_rawgeti(L, av, (lua_Integer)x->v0);
      lua_rawgeti(L, bv, (lua_Integer)y->v0);
      diff = lua_rawequal(L, -1, -2);
      lua_pop(L, 2);
      if (!diff) return -1;
      diff = 0;
      for (size_t j = 1; j < x->nvals && !diff; j++) {
        lua_rawgeti(L, av, (lua_Integer)(x->v0 + j));
        lua_rawgeti(L, bv, (lua_Integer)(y->v0 + j));
        diff = !same_value(L, -2, -1);
        lua_pop(L, 2);
      }
    }
    if (!diff) continue;
    if (in_place(gr, x, y)) {
      ch[i] = 1;
      if (!worst) worst = 1;
    } else {
      worst = 2;
    }
  }
  return worst;
}

/* The value at idx, hashed by identity (an object's address, a number's
   bits, a boolean, an interned string's address; a plain table by its
   contents, in any order, one level deep: options made anew each call). */
static uint64_t ident(lua_State *L, int idx, int deep) {
  switch (lua_type(L, idx)) {
  case LUA_TTABLE:
    if (deep && !lua_getmetatable(L, idx)) {
      uint64_t h = 0;
      idx = lua_absindex(L, idx);
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        h += cg_mix(ident(L, -2, 0), ident(L, -1, 0));
        lua_pop(L, 1);
      }
      return h;
    }
    if (deep) lua_pop(L, 1);
    return (uint64_t)(uintptr_t)lua_topointer(L, idx);
  case LUA_TNUMBER: {
    if (lua_isinteger(L, idx)) return (uint64_t)lua_tointeger(L, idx);
    lua_Number n = lua_tonumber(L, idx);
    uint64_t bits;
    memcpy(&bits, &n, 8);
    return bits;
  }
  case LUA_TBOOLEAN: return (uint64_t)lua_toboolean(L, idx);
  case LUA_TNIL: case LUA_TFUNCTION: return 0; /* bodies: recorded apart */
  default: return (uint64_t)(uintptr_t)lua_topointer(L, idx);
  }
}

/* What the nodes of recording r (its values at rv) take (kernels' arguments
   and shapes, fills' and copies' targets and values, other calls'
   arguments), hashed: calls that alternate between a few sets of buffers
   or values are told by it. */
uint64_t cg_graphed_params(lua_State *L, const cg_recs *r, int rv,
                           uint64_t h) {
  for (size_t i = 0; i < r->n; i++) {
    const cg_rec *e = &r->v[i];
    h = cg_mix(h, e->kind);
    switch (e->kind) {
    case NK_KERNEL:
      for (size_t j = 0; j < ((const cg_kernel *)e->kernel)->nwords; j++)
        h = cg_mix(h, r->words[e->word0 + j]);
      for (int j = 0; j < e->nargs; j++)
        h = cg_mix(h, (uintptr_t)r->objs[e->arg0 + (size_t)j]);
      for (int j = 0; j < 3; j++)
        h = cg_mix(cg_mix(h, e->grid[j]), e->block[j]);
      break;
    case NK_FILL:
      h = cg_mix(cg_mix(cg_mix(h, (uintptr_t)e->obj[0]), e->off), e->value);
      h = cg_mix(h, e->width);
      break;
    case NK_COPY:
      h = cg_mix(cg_mix(h, (uintptr_t)e->obj[0]), (uintptr_t)e->obj[1]);
      h = cg_mix(cg_mix(cg_mix(h, e->off), e->soff), e->bytes);
      break;
    case NK_CALL:
      for (size_t j = 0; j < e->nvals; j++) {
        lua_rawgeti(L, rv, (lua_Integer)(e->v0 + j));
        h = cg_mix(h, ident(L, -1, 1));
        lua_pop(L, 1);
      }
      break;
    default: break;
    }
  }
  return h;
}
