/* cugraph.Texture: a texture object over an Array (cuTexObjectCreate), the
   way kernels sample an image: filtering, addressing and normalized
   coordinates as the texture unit does them. A kernel takes it as a
   cudaTextureObject_t argument; a graph that launched it keeps it and its
   array. */
#include <string.h>
#include "types/types.h"

static const char *const filters[] = { "point", "linear", NULL };
static const char *const modes[] = { "wrap", "clamp", "mirror", "border",
                                     NULL }; /* CUaddress_mode's order */
static const char *const reads[] = { "element", "normalized", NULL };

/* The index in names of the string at idx (opts.key), or an error. */
static int name_at(lua_State *L, int idx, const char *key,
                   const char *const *names) {
  idx = lua_absindex(L, idx);
  const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
  if (s && strlen(s) != lua_rawlen(L, idx)) /* raises */
    cg_checkname(L, idx, lua_pushfstring(L, "a:texture: opts.%s", key));
  for (int i = 0; s && names[i]; i++)
    if (!strcmp(s, names[i])) return i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; names[i]; i++) {
    luaL_addstring(&b, i ? ", \"" : "\"");
    luaL_addstring(&b, names[i]);
    luaL_addchar(&b, '"');
  }
  luaL_pushresult(&b);
  const char *list = lua_tostring(L, -1);
  const char *got = luaL_tolstring(L, idx, NULL);
  return luaL_error(L, "a:texture: opts.%s must be one of %s, got %s", key,
                    list, got);
}

/* opts.key by name, dflt when absent. */
static int option(lua_State *L, int opts, const char *key,
                  const char *const *names, int dflt) {
  int v = lua_getfield(L, opts, key) == LUA_TNIL
          ? dflt : name_at(L, -1, key, names);
  lua_pop(L, 1);
  return v;
}

/* a:texture([opts]): opts {filter = "point" | "linear", address = "clamp" |
   "wrap" | "mirror" | "border" (or one a dimension, {x, y, z}),
   normalized = coordinates in [0, 1), read = "element" | "normalized"
   (integer texels read as floats in [0, 1] or [-1, 1]), border = {r, g, b,
   a}} */
static int array_texture(lua_State *L) {
  static const char *const keys[] = { "filter", "address", "normalized",
                                      "read", "border", NULL };
  cg_array *a = cg_checkobj(L, 1, CG_ARRAY);
  cg_check_open(L, &a->h);
  int opts = 0;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    cg_check_options(L, 2, "a:texture", keys);
    opts = 2;
  }
  int filter = 0, read = 0, norm = 0, address[3] = { 1, 1, 1 };
  float border[4] = { 0, 0, 0, 0 };
  if (opts) {
    filter = option(L, opts, "filter", filters, 0);
    read = option(L, opts, "read", reads, 0);
    lua_getfield(L, opts, "normalized");
    norm = lua_toboolean(L, -1);
    lua_pop(L, 1);
    int at = lua_getfield(L, opts, "address");
    if (at == LUA_TTABLE) { /* one a dimension; the last repeats */
      for (int i = 0; i < 3; i++) {
        if (lua_rawgeti(L, -1, i + 1) != LUA_TNIL)
          address[i] = name_at(L, -1, "address", modes);
        else if (i) address[i] = address[i - 1];
        lua_pop(L, 1);
      }
    } else if (at != LUA_TNIL) {
      address[0] = address[1] = address[2] = name_at(L, -1, "address", modes);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "border") != LUA_TNIL) {
      luaL_checktype(L, -1, LUA_TTABLE);
      for (int i = 0; i < 4; i++) {
        if (lua_rawgeti(L, -1, i + 1) != LUA_TNIL)
          cg_tobits(L, -1, CG_F32, &border[i], "a:texture: opts.border");
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  int is_float = a->type == CG_F32 || a->type == CG_F16;
  int small_int = cg_type_size[a->type] < 4 && !is_float;
  if (read && !small_int)
    return luaL_error(L, "a:texture: read = \"normalized\" is for 8- and "
                      "16-bit integer texels; these are %s",
                      cg_type_names[a->type]);
  if (filter && !is_float && !read)
    return luaL_error(L, "a:texture: linear filtering needs float texels "
                      "(f32, f16) or read = \"normalized\" of 8- or 16-bit "
                      "integers; these are %s", cg_type_names[a->type]);
  for (int i = 0; i < 3; i++)
    if (!norm && (address[i] == CU_TR_ADDRESS_MODE_WRAP ||
                  address[i] == CU_TR_ADDRESS_MODE_MIRROR))
      return luaL_error(L, "a:texture: address \"%s\" needs normalized "
                        "coordinates (normalized = true)", modes[address[i]]);
  if (!cg_drv.cuTexObjectCreate)
    return luaL_error(L, "a:texture: this CUDA driver has no texture objects");
  CUDA_RESOURCE_DESC res;
  cg_sampler *t = cg_sampler_new(L, a, CG_TEXTURE, &res);
  CUDA_TEXTURE_DESC td;
  memset(&td, 0, sizeof td);
  for (int i = 0; i < 3; i++) td.addressMode[i] = (CUaddress_mode)address[i];
  td.filterMode = filter ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
  td.flags = (norm ? CU_TRSF_NORMALIZED_COORDINATES : 0) |
             (read ? 0 : CU_TRSF_READ_AS_INTEGER);
  memcpy(td.borderColor, border, sizeof border);
  CU(L, a->h.ctx, cuTexObjectCreate, &t->h.drv.tex, &res, &td, NULL);
  cg_sampler_opened(t, a);
  return 1;
}

void cg_sampler_opened(cg_sampler *s, cg_array *a) {
  s->h.parent = &a->h;
  a->h.views++;
  s->h.open = 1;
}

cg_sampler *cg_sampler_new(lua_State *L, cg_array *a, cg_kind kind,
                           CUDA_RESOURCE_DESC *res) {
  lua_settop(L, 1);
  cg_sampler *s = cg_newobj(L, a->h.ctx, sizeof *s, kind);
  s->h.scoped = a->h.scoped; /* over a GL image's map: ends with it */
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  cg_check_open(L, &a->h); /* the allocation may have run a finalizer */
  memset(res, 0, sizeof *res);
  res->resType = CU_RESOURCE_TYPE_ARRAY;
  res->res.array.hArray = a->h.drv.array;
  return s;
}

void cg_sampler_release(lua_State *L, cg_obj *o) {
  if (o->parent) cg_unview(L, o->parent);
}

int cg_sampler_arg(lua_State *L, cg_ctx *ctx, int idx, void *slot) {
  cg_sampler *t = cg_testobj(L, idx, CG_TEXTURE);
  if (!t) t = cg_testobj(L, idx, CG_SURFACE);
  if (!t) return 0;
  cg_check_open(L, &t->h);
  if (t->h.ctx != ctx) cg_check_reach(L, ctx, t->h.ctx, "kernel");
  cg_pinobj(L, ctx, &t->h, idx);
  memcpy(slot, &t->h.drv.tex, 8);
  return 1;
}

/* The Texture or Surface at 1: they share their methods. */
static cg_sampler *check_sampler(lua_State *L) {
  cg_sampler *s = cg_testobj(L, 1, CG_TEXTURE);
  if (!s) s = cg_testobj(L, 1, CG_SURFACE);
  if (!s) luaL_typeerror(L, 1, "cugraph.Texture or cugraph.Surface");
  return s;
}

static int sampler_free(lua_State *L) {
  return cg_close(L, (cg_kind)check_sampler(L)->h.kind, 0);
}
static int sampler_gc(lua_State *L) {
  return cg_close(L, (cg_kind)check_sampler(L)->h.kind, 1);
}

/* t:array(), s:array(): the Array it reaches */
static int sampler_array(lua_State *L) {
  check_sampler(L);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/* t:handle(), s:handle(): the CUtexObject or CUsurfObject, for foreign
   code */
static int sampler_handle(lua_State *L) {
  cg_sampler *s = check_sampler(L);
  cg_check_open(L, &s->h);
  lua_pushinteger(L, (lua_Integer)s->h.drv.tex);
  return 1;
}

static int sampler_tostring(lua_State *L) {
  cg_sampler *s = check_sampler(L);
  return cg_tostring(L, &s->h, " #%I", (LUAI_UACINT)s->h.drv.tex);
}

void cg_sampler_type(lua_State *L, cg_kind kind, const char *method,
                     lua_CFunction make) {
  static const luaL_Reg methods[] = {
    {"array", sampler_array}, {"handle", sampler_handle},
    {"free", sampler_free}, {"close", sampler_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", sampler_gc}, {"__close", sampler_free},
    {"__tostring", sampler_tostring}, {NULL, NULL}
  };
  cg_newtype(L, kind, methods, meta, cg_sampler_release);
  luaL_getmetatable(L, cg_kind_names[CG_ARRAY]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, make);
  lua_setfield(L, -2, method);
  lua_pop(L, 2);
}

void texture_open(lua_State *L) {
  cg_sampler_type(L, CG_TEXTURE, "texture", array_texture);
}
