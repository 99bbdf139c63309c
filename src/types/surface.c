/* cugraph.Surface: a surface object over an Array made with {surface =
   true} (cuSurfObjectCreate), through which kernels load and store texels
   (surf2Dwrite, surf2Dread) as a cudaSurfaceObject_t argument; a graph
   that launched it keeps it and its array. */
#include <string.h>
#include "types/types.h"

/* a:surface() */
static int array_surface(lua_State *L) {
  cg_array *a = cg_checkobj(L, 1, CG_ARRAY);
  cg_check_open(L, &a->h);
  if (!a->surface)
    return luaL_error(L, "a:surface: the array was not made for surface "
                      "stores (cuda.array(..., {surface = true}))");
  if (!cg_drv.cuSurfObjectCreate)
    return luaL_error(L, "a:surface: this CUDA driver has no surface objects");
  lua_settop(L, 1);
  cg_sampler *s = cg_newobj(L, a->h.ctx, sizeof *s, CG_SURFACE);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  cg_check_open(L, &a->h); /* the allocation may have run a finalizer */
  CUDA_RESOURCE_DESC res;
  memset(&res, 0, sizeof res);
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = a->h.drv.array;
  CU(L, a->h.ctx, cuSurfObjectCreate, &s->h.drv.surf, &res);
  s->h.parent = &a->h;
  a->h.views++;
  s->h.open = 1;
  return 1;
}

static int surface_free(lua_State *L) { return cg_close(L, CG_SURFACE, 0); }
static int surface_gc(lua_State *L) { return cg_close(L, CG_SURFACE, 1); }

/* s:array(): the Array it reaches */
static int surface_array(lua_State *L) {
  cg_checkobj(L, 1, CG_SURFACE);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/* s:handle(): the CUsurfObject, for foreign code */
static int surface_handle(lua_State *L) {
  cg_sampler *s = cg_checkobj(L, 1, CG_SURFACE);
  cg_check_open(L, &s->h);
  lua_pushinteger(L, (lua_Integer)s->h.drv.surf);
  return 1;
}

static int surface_tostring(lua_State *L) {
  cg_sampler *s = cg_toobj(L, 1, CG_SURFACE);
  return cg_tostring(L, &s->h, " #%I", (LUAI_UACINT)s->h.drv.surf);
}

void surface_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"array", surface_array}, {"handle", surface_handle},
    {"free", surface_free}, {"close", surface_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", surface_gc}, {"__close", surface_free},
    {"__tostring", surface_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_SURFACE, methods, meta, cg_sampler_release);
  luaL_getmetatable(L, cg_kind_names[CG_ARRAY]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, array_surface);
  lua_setfield(L, -2, "surface");
  lua_pop(L, 2);
}
