/* The object model every type shares: creation marked closed, the two
   checkers (one that accepts freed objects, for __gc and __tostring, and
   one that raises on them), type registration, tostring, and close three
   ways through one idempotent function. */
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include "base/base.h"

const char *const cg_kind_names[] = {
#define CG_KIND_NAME(k, name, hk, shared) "cugraph." name,
  CG_KINDS(CG_KIND_NAME)
#undef CG_KIND_NAME
};

void *cg_newobj(lua_State *L, cg_ctx *ctx, size_t size, cg_kind kind) {
  return cg_newobjuv(L, ctx, size, kind, 2);
}

static void remember(const void *u);

void *cg_newobjuv(lua_State *L, cg_ctx *ctx, size_t size, cg_kind kind,
                  int nuv) {
  cg_obj *o = lua_newuserdatauv(L, size, nuv);
  memset(o, 0, size);
  o->ctx = ctx;
  o->kind = (unsigned char)kind;
  o->owned = 1;
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->root->mtref[kind]);
  lua_setmetatable(L, -2);
  remember(o);
  return o; /* open stays 0 until the driver call that fills it succeeds */
}

/* Full userdata this thread found to be objects of the binding while
   cg_epoch stood where it stands: no finalizer of the binding has run
   since, so each such address is still that object (any state's: one
   state's values never reach another's stack), and a second look at it
   needs no metatable. A finalizer advances cg_epoch after its work too:
   the objects it looked up (a graph's pins) may be unreachable as well,
   and freed by the next cycle without a finalizer of their own. */
enum { NSETS = 32 }; /* two ways each: a loop's few objects seldom clash */
static _Thread_local struct { const void *p[NSETS][2]; unsigned epoch; } known;

static inline const void **known_set(const void *u) {
  return known.p[((uintptr_t)u * 0x9e3779b97f4a7c15u) >> 59]; /* 32 */
}

static inline cg_obj *known_obj(lua_State *L, int idx, void *u) {
  const void **s = known_set(u);
  return u && (s[0] == u || s[1] == u) && known.epoch == cg_epoch_now() &&
         lua_type(L, idx) == LUA_TUSERDATA ? u : NULL;
}

static void remember(const void *u) {
  unsigned e = cg_epoch_now();
  if (known.epoch != e) {
    memset(known.p, 0, sizeof known.p);
    known.epoch = e;
  }
  const void **s = known_set(u);
  if (s[0] != u) { /* the newer way first */
    s[1] = s[0];
    s[0] = u;
  }
}

void *cg_testobj(lua_State *L, int idx, cg_kind kind) {
  cg_obj *o = known_obj(L, idx, lua_touserdata(L, idx));
  if (o) return o->kind == kind ? o : NULL;
  cg_ctx *ctx = cg_sentinel(L);
  if (!lua_getmetatable(L, idx)) return NULL;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  if (mt != ctx->mt[kind]) return NULL;
  o = lua_touserdata(L, idx);
  remember(o);
  return o;
}

cg_obj *cg_toany(lua_State *L, const cg_ctx *ctx, int idx) {
  void *u = lua_touserdata(L, idx);
  cg_obj *o = known_obj(L, idx, u);
  if (o || !ctx || !u || !lua_getmetatable(L, idx)) return o;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  for (int k = 0; k < CG_NKINDS; k++)
    if (mt == ctx->mt[k]) {
      remember(u);
      return u;
    }
  return NULL;
}

void *cg_toobj(lua_State *L, int idx, cg_kind kind) {
  void *o = cg_testobj(L, idx, kind);
  return o ? o : luaL_checkudata(L, idx, cg_kind_names[kind]); /* raises */
}

/* A view of a map scope's buffer is freed with the scope. */
void cg_check_open(lua_State *L, const cg_obj *o) {
  if (!o->open)
    luaL_error(L, "attempt to use a freed %s", cg_kind_names[o->kind]);
  for (const cg_obj *p = o->scoped ? o->parent : NULL; p; p = p->parent)
    if (!p->open)
      luaL_error(L, "attempt to use a view of a GLResource's mapped buffer "
                 "after its map scope");
}

/* A poisoned context raises the sticky error again; the context is made
   current on this thread. */
static void sane(lua_State *L, cg_obj *o) {
  cg_sim_line(L);
  if (o->ctx->poison) cg_error_poisoned(L, o->ctx);
  cg_current(L, o->ctx);
}

void *cg_checkobj(lua_State *L, int idx, cg_kind kind) {
  cg_obj *o = luaL_checkudata(L, idx, cg_kind_names[kind]);
  cg_check_open(L, o);
  sane(L, o);
  return o;
}

void cg_ready_slow(lua_State *L, cg_obj *o) {
  cg_check_open(L, o);
  sane(L, o);
}

atomic_uint cg_epoch;

void cg_collected(void) {
  atomic_fetch_add_explicit(&cg_epoch, 1, memory_order_relaxed);
}

void *cg_checkself_keep(lua_State *L, cg_kind kind) {
  cg_obj *o = lua_touserdata(L, 1);
  if (!o || !lua_getmetatable(L, 1) || /* topointer: cheaper than rawequal */
      lua_topointer(L, -1) != lua_topointer(L, lua_upvalueindex(1))) {
    o = cg_checkobj(L, 1, kind); /* not ours: raises the usual error */
    lua_pushnil(L);
    return o;
  }
  if (!o->open || o->scoped) cg_check_open(L, o);
  sane(L, o);
  remember(o);
  return o;
}

void *cg_checkself(lua_State *L, cg_kind kind) {
  cg_obj *o = known_obj(L, 1, lua_touserdata(L, 1));
  if (o && o->kind == kind) {
    cg_ready(L, o);
    return o;
  }
  o = cg_checkself_keep(L, kind);
  lua_pop(L, 1);
  return o;
}

void cg_check_unused(lua_State *L, const cg_obj *o) {
  if (!o->uses) return;
  if (o->graph)
    luaL_error(L, "cannot free %s: it is used by live cugraph.Graph #%d%s; "
               "free the graph first", cg_kind_names[o->kind], (int)o->graph,
               o->uses > 1 ? " and others" : "");
  luaL_error(L, "cannot free %s: it is used by %d live cugraph.Graph%s; "
             "free them first", cg_kind_names[o->kind], (int)o->uses,
             o->uses > 1 ? "s" : "");
}

int cg_method(lua_State *L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  return 0;
}

int cg_tostring(lua_State *L, cg_obj *o, const char *fmt, ...) {
  if (!o->open) {
    lua_pushfstring(L, "%s (freed)", cg_kind_names[o->kind]);
    return 1;
  }
  va_list ap;
  va_start(ap, fmt);
  lua_pushstring(L, cg_kind_names[o->kind]);
  lua_pushvfstring(L, fmt, ap);
  lua_concat(L, 2);
  va_end(ap);
  return 1;
}

/* Frees what the type holds beside its handle, then the handle. */
static void release(lua_State *L, cg_obj *o) {
  o->open = 0;
  cg_releaser extra = o->ctx->release[o->kind];
  if (extra) extra(L, o);
  cg_release_obj(L, o);
}

int cg_close(lua_State *L, cg_kind kind, int collected) {
  cg_obj *o = cg_toobj(L, 1, kind);
  if (collected) cg_collected(); /* its address may now be reused */
  if (!o->open) return 0;
  if (o->uses) {
    if (collected) {
      o->zombie = 1;
      return 0;
    }
    cg_check_unused(L, o);
  }
  release(L, o);
  if (collected) cg_collected(); /* what the release looked up, too */
  return 0;
}

void cg_close_later(lua_State *L, cg_obj *o) {
  if (!o->open) return;
  if (o->uses) o->zombie = 1;
  else release(L, o);
}

void cg_unpinned(lua_State *L, cg_obj *o) {
  if (!o->zombie) return;
  o->zombie = 0;
  release(L, o);
}

void cg_newtype(lua_State *L, cg_kind kind, const luaL_Reg *methods,
                const luaL_Reg *meta, cg_releaser extra) {
  cg_ctx *ctx = cg_sentinel(L);
  ctx->release[kind] = extra;
  luaL_newmetatable(L, cg_kind_names[kind]);
  ctx->mt[kind] = lua_topointer(L, -1);
  lua_pushvalue(L, -1);
  ctx->mtref[kind] = luaL_ref(L, LUA_REGISTRYINDEX);
  luaL_setfuncs(L, meta, 0);
  lua_pushstring(L, cg_kind_names[kind]);
  lua_setfield(L, -2, "__metatable");
  if (methods) { /* methods have the metatable as upvalue (cg_checkself); */
    lua_newtable(L); /* an __index function has them as its upvalue */
    lua_pushvalue(L, -2);
    luaL_setfuncs(L, methods, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "methods"); /* for the layers above to add to */
    if (lua_getfield(L, -2, "__index") == LUA_TFUNCTION) {
      lua_CFunction f = lua_tocfunction(L, -1);
      lua_pop(L, 1);
      lua_pushcclosure(L, f, 1);
    } else {
      lua_pop(L, 1);
    }
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

void cg_check_options(lua_State *L, int idx, const char *what,
                      const char *const *keys) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    int i = 0;
    if (lua_type(L, -1) == LUA_TSTRING) { /* "stream\0x" is no key */
      cg_checkname(L, -1, what);
      while (keys[i] && strcmp(keys[i], lua_tostring(L, -1))) i++;
    }
    if (lua_type(L, -1) == LUA_TSTRING && keys[i]) continue;
    luaL_Buffer b;
    const char *key = luaL_tolstring(L, -1, NULL);
    luaL_buffinit(L, &b);
    for (i = 0; keys[i]; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, keys[i]);
    }
    luaL_pushresult(&b);
    luaL_error(L, "%s: unknown option '%s' (valid: %s)", what, key,
               lua_tostring(L, -1));
  }
}
