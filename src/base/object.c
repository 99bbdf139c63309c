/* The object model every type shares: creation marked closed, the two
   checkers (one that accepts freed objects, for __gc and __tostring, and
   one that raises on them), type registration, tostring, and close three
   ways through one idempotent function. */
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include "base/base.h"

const char *const cg_kind_names[] = {
#define CG_KIND_NAME(k, name, hk, shared, recv) "cugraph." name,
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

/* A stream an API door takes may get work other than k:launch's: the
   stream's last kernel (types.h) no longer holds. */
static inline cg_obj *used(cg_obj *o) {
  if (o->kind == CG_STREAM) o->ctx->root->stream_clock++;
  return o;
}

void *cg_testobj(lua_State *L, int idx, cg_kind kind) {
  cg_obj *o = known_obj(L, idx, lua_touserdata(L, idx));
  if (o) return o->kind == kind ? used(o) : NULL;
  cg_ctx *ctx = cg_sentinel(L);
  if (!lua_getmetatable(L, idx)) return NULL;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  if (mt != ctx->mt[kind]) return NULL;
  o = lua_touserdata(L, idx);
  remember(o);
  return used(o);
}

cg_obj *cg_toany(lua_State *L, const cg_ctx *ctx, int idx) {
  void *u = lua_touserdata(L, idx);
  cg_obj *o = known_obj(L, idx, u);
  if (o) return used(o);
  if (!ctx || !u || !lua_getmetatable(L, idx)) return NULL;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  for (int k = 0; k < CG_NKINDS; k++)
    if (mt == ctx->mt[k]) {
      remember(u);
      return used(u);
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
  return used(o);
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
  return used(o);
}

void *cg_checkself(lua_State *L, cg_kind kind) {
  cg_obj *o = known_obj(L, 1, lua_touserdata(L, 1));
  if (o && o->kind == kind) {
    cg_ready(L, o);
    return used(o);
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

/* -- unknown fields -------------------------------------------------------- */

/* How the docs name an object of each kind in `b:download()` and `#b`. */
static const char *const receivers[] = {
#define CG_KIND_RECEIVER(k, name, hk, shared, recv) recv,
  CG_KINDS(CG_KIND_RECEIVER)
#undef CG_KIND_RECEIVER
};

/* Keys other libraries' users reach for, and what they are here; %s is
   the receiver. A number key's entry has key NULL. */
static const struct hint { cg_kind kind; const char *key, *hint; } hints[] = {
  { CG_BUFFER, NULL, "its elements are in device memory; read them with "
    "%s:download() (a table, 1-based) or %s:download('table', i, 1)" },
  { CG_BUFFER, "size", "its element count is #%s" },
  { CG_BUFFER, "len", "its element count is #%s" },
  { CG_BUFFER, "length", "its element count is #%s" },
  { CG_BUFFER, "count", "its element count is #%s" },
  { CG_BUFFER, "nbytes", "its size in bytes is %s:bytes()" },
  { CG_BUFFER, "dtype", "its element type is %s:type()" },
  { CG_BUFFER, "ndim", "its shape is %s:shape()" },
  { CG_BUFFER, "data", "its device address is %s:address()" },
  { CG_BUFFER, "ptr", "its device address is %s:address()" },
  { CG_BUFFER, "get", "read it with %s:download()" },
  { CG_BUFFER, "tolist", "read it with %s:download()" },
  { CG_BUFFER, "totable", "read it with %s:download()" },
  { CG_BUFFER, "read", "read it with %s:download()" },
  { CG_BUFFER, "set", "write it with %s:upload(t)" },
  { CG_BUFFER, "write", "write it with %s:upload(t)" },
  { CG_HOSTBUF, "size", "its element count is #%s" },
  { CG_HOSTBUF, "len", "its element count is #%s" },
  { CG_HOSTBUF, "length", "its element count is #%s" },
  { CG_HOSTBUF, "nbytes", "its size in bytes is %s:bytes()" },
  { CG_HOSTBUF, "dtype", "its element type is %s:type()" },
  { CG_HOSTBUF, "get", "its elements are %s[0] .. %s[#h - 1]" },
  { CG_HOSTBUF, "tolist", "read it with %s:totable()" },
  { CG_SCALAR, "value", "read it with %s:get(), write it with %s:set(v)" },
  { CG_SCALAR, "read", "read it with %s:get()" },
  { CG_SCALAR, "write", "write it with %s:set(v)" },
  { CG_SCALAR, "dtype", "its element type is %s:type()" },
  { CG_STREAM, "sync", "wait for it with %s:synchronize()" },
  { CG_STREAM, "record", "an event records a stream: e:record(%s)" },
  { CG_EVENT, "sync", "wait for it with %s:synchronize()" },
  { CG_EVENT, "elapsed_time", "the milliseconds since start are "
    "%s:elapsed(start)" },
  { CG_GRAPH, "run", "replay it with %s:launch()" },
  { CG_GRAPH, "execute", "replay it with %s:launch()" },
  { CG_GRAPH, "instantiate", "a captured graph is ready: %s:launch()" },
  { CG_KERNEL, "run", "%s:launch(s, grid, block, args...) launches it" },
  { CG_KERNEL, "call", "%s:launch(s, grid, block, args...) launches it" },
  { CG_ARRAY, "size", "its extent is %s:shape()" },
  { CG_ARRAY, "dtype", "its element format is %s:format()" },
};

size_t cg_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), row[32];
  if (la > 31 || lb > 31) return 99;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

/* "chunk:line:" of the nearest Lua function below the index, or "". */
static void where(lua_State *L) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++)
    if (lua_getinfo(L, "l", &ar) && ar.currentline > 0) {
      luaL_where(L, level);
      return;
    }
  lua_pushliteral(L, "");
}

/* Raises for key (at index key) of an object of type name (kind, or -1
   for a type of the front end's), whose methods are the table at index
   methods and which the docs call r: "cugraph.Buffer has no field 'size':
   its element count is #b", or a method of a near spelling where one is. */
static int error_field(lua_State *L, int kind, const char *name,
                       const char *r, int methods, int key) {
  const char *k = lua_type(L, key) == LUA_TSTRING ? lua_tostring(L, key)
                                                  : NULL;
  const char *best = NULL;
  size_t bestd = 3;
  where(L);
  for (size_t i = 0; i < sizeof hints / sizeof *hints; i++)
    if ((int)hints[i].kind == kind &&
        (hints[i].key ? k && !strcmp(hints[i].key, k)
                      : lua_type(L, key) == LUA_TNUMBER)) {
      if (k) lua_pushfstring(L, "%s has no field '%s': ", name, k);
      else {
        lua_pushfstring(L, "%s cannot be indexed with %s: ", name,
                        luaL_tolstring(L, key, NULL));
        lua_remove(L, -2);
      }
      lua_pushfstring(L, hints[i].hint, r, r, r);
      lua_concat(L, 3);
      return lua_error(L);
    }
  if (!k) {
    if (lua_type(L, key) == LUA_TNUMBER) {
      lua_pushfstring(L, "%s cannot be indexed with %s", name,
                      luaL_tolstring(L, key, NULL));
      lua_remove(L, -2);
    } else {
      lua_pushfstring(L, "%s cannot be indexed with a %s", name,
                      luaL_typename(L, key));
    }
    lua_concat(L, 2);
    return lua_error(L);
  }
  lua_pushnil(L);
  while (lua_next(L, methods)) {
    lua_pop(L, 1);
    size_t d = lua_type(L, -1) == LUA_TSTRING
             ? cg_distance(k, lua_tostring(L, -1)) : 99;
    if (d < bestd && d < strlen(k)) {
      bestd = d;
      best = lua_tostring(L, -1); /* a key of methods: stays valid */
    }
  }
  if (best)
    lua_pushfstring(L, "%s has no field '%s' (did you mean %s:%s?)", name,
                    k, r, best);
  else
    lua_pushfstring(L, "%s has no field '%s'", name, k);
  lua_concat(L, 2);
  return lua_error(L);
}

/* A methods table's __index (upvalues: the kind or -1, the type's name,
   its receiver): what the object's __index (the methods table, or a
   type's own function) did not find. */
static int no_field(lua_State *L) {
  return error_field(L, (int)lua_tointeger(L, lua_upvalueindex(1)),
                     lua_tostring(L, lua_upvalueindex(2)),
                     lua_tostring(L, lua_upvalueindex(3)), 1, 2);
}

/* Gives the table at idx the metatable whose __index is no_field. */
static void guard(lua_State *L, int idx, int kind, const char *name,
                  const char *r) {
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 1);
  lua_pushinteger(L, kind);
  lua_pushstring(L, name);
  lua_pushstring(L, r);
  lua_pushcclosure(L, no_field, 3);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, idx);
}

int cg_guard_methods(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  guard(L, 1, -1, luaL_checkstring(L, 2), luaL_checkstring(L, 3));
  return 0;
}

int cg_index(lua_State *L) {
  lua_pushvalue(L, 2);
  lua_gettable(L, lua_upvalueindex(1)); /* a miss raises (no_field) */
  return 1;
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
  if (collected && (o->uses || o->views)) { /* by hand, or out of order */
    o->zombie = 1;
    return 0;
  }
  cg_check_unused(L, o);
  release(L, o);
  if (collected) cg_collected(); /* what the release looked up, too */
  return 0;
}

void cg_close_later(lua_State *L, cg_obj *o) {
  if (!o->open) return;
  if (o->uses || o->views) o->zombie = 1;
  else release(L, o);
}

void cg_unpinned(lua_State *L, cg_obj *o) {
  if (!o->zombie || o->uses || o->views) return;
  o->zombie = 0;
  release(L, o);
}

void cg_unview(lua_State *L, cg_obj *parent) {
  parent->views--;
  cg_unpinned(L, parent);
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
    /* a method looked up stays one table read; an unknown key raises */
    guard(L, -1, (int)kind, cg_kind_names[kind], receivers[kind]);
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
