/* cugraph.Surface: a surface object over an Array made with {surface =
   true} (cuSurfObjectCreate), through which kernels load and store texels
   (surf2Dwrite, surf2Dread) as a cudaSurfaceObject_t argument; a graph
   that launched it keeps it and its array. Its methods are a Texture's
   (texture.c). */
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
  CUDA_RESOURCE_DESC res;
  cg_sampler *s = cg_sampler_new(L, a, CG_SURFACE, &res);
  CU(L, a->h.ctx, cuSurfObjectCreate, &s->h.drv.surf, &res);
  cg_sampler_opened(s, a);
  return 1;
}

void surface_open(lua_State *L) {
  cg_sampler_type(L, CG_SURFACE, "surface", array_surface);
}
