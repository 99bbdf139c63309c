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
  const char *s = lua_tostring(L, idx);
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
        lua_rawgeti(L, -1, i + 1);
        border[i] = (float)luaL_optnumber(L, -1, 0);
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
  lua_settop(L, 1);
  cg_sampler *t = cg_newobj(L, a->h.ctx, sizeof *t, CG_TEXTURE);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  cg_check_open(L, &a->h); /* the allocation may have run a finalizer */
  CUDA_RESOURCE_DESC res;
  memset(&res, 0, sizeof res);
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = a->h.drv.array;
  CUDA_TEXTURE_DESC td;
  memset(&td, 0, sizeof td);
  for (int i = 0; i < 3; i++) td.addressMode[i] = (CUaddress_mode)address[i];
  td.filterMode = filter ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
  td.flags = (norm ? CU_TRSF_NORMALIZED_COORDINATES : 0) |
             (read ? 0 : CU_TRSF_READ_AS_INTEGER);
  memcpy(td.borderColor, border, sizeof border);
  CU(L, a->h.ctx, cuTexObjectCreate, &t->h.drv.tex, &res, &td, NULL);
  t->h.parent = &a->h;
  a->h.views++;
  t->h.open = 1;
  return 1;
}

void cg_sampler_release(lua_State *L, cg_obj *o) {
  (void)L;
  if (o->parent) o->parent->views--;
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

static int texture_free(lua_State *L) { return cg_close(L, CG_TEXTURE, 0); }
static int texture_gc(lua_State *L) { return cg_close(L, CG_TEXTURE, 1); }

/* t:array(): the Array it samples */
static int texture_array(lua_State *L) {
  cg_checkobj(L, 1, CG_TEXTURE);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/* t:handle(): the CUtexObject, for foreign code */
static int texture_handle(lua_State *L) {
  cg_sampler *t = cg_checkobj(L, 1, CG_TEXTURE);
  cg_check_open(L, &t->h);
  lua_pushinteger(L, (lua_Integer)t->h.drv.tex);
  return 1;
}

static int texture_tostring(lua_State *L) {
  cg_sampler *t = cg_toobj(L, 1, CG_TEXTURE);
  return cg_tostring(L, &t->h, " #%I", (LUAI_UACINT)t->h.drv.tex);
}

void texture_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"array", texture_array}, {"handle", texture_handle},
    {"free", texture_free}, {"close", texture_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", texture_gc}, {"__close", texture_free},
    {"__tostring", texture_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_TEXTURE, methods, meta, cg_sampler_release);
  luaL_getmetatable(L, cg_kind_names[CG_ARRAY]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, array_texture);
  lua_setfield(L, -2, "texture");
  lua_pop(L, 2);
}
