/* cugraph.GLResource: an OpenGL buffer object or image (a texture or
   renderbuffer) registered with CUDA, so that kernels read and write the
   memory the renderer draws from, with no host copy: a buffer is mapped as
   a Buffer, an image as an Array. The GL context that owns the object must be current on the calling
   thread when it is registered and mapped (the engine's, e.g. through
   EGL). The entry points come from libcuda through the driver table, as
   optional ones: a driver without them (the test double) says so at
   registration. No GL library is linked or loaded here. */
#include <string.h>
#include "types/types.h"

typedef struct cg_resource {
  cg_obj h;             /* h.drv.res */
  CUstream mapped;      /* the stream it is mapped on, while mapped */
  cg_type type;
  int ismapped;
  int image;            /* a texture or renderbuffer: mapped as an Array */
} cg_resource;

static const char *const access_names[] = { "read_write", "read_only",
                                            "write_discard", NULL };
static const unsigned access_flags[] = {
  CU_GRAPHICS_REGISTER_FLAGS_NONE, CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY,
  CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD };

/* Raises unless the driver has OpenGL interop (image: for textures). */
static void check_interop(lua_State *L, int image) {
  if (!cg_drv.cuGraphicsGLRegisterBuffer || !cg_drv.cuGraphicsMapResources ||
      !cg_drv.cuGraphicsUnmapResources ||
      !cg_drv.cuGraphicsResourceGetMappedPointer ||
      !cg_drv.cuGraphicsUnregisterResource ||
      (image && (!cg_drv.cuGraphicsGLRegisterImage ||
                 !cg_drv.cuGraphicsSubResourceGetMappedArray ||
                 !cg_drv.cuArray3DGetDescriptor)))
    luaL_error(L, "this CUDA driver has no OpenGL interop");
}

static int resource_free(lua_State *L) {
  cg_resource *r = cg_toobj(L, 1, CG_GLRESOURCE);
  if (r->ismapped)
    return luaL_error(L, "cannot free a cugraph.GLResource inside its own "
                      "map scope");
  return cg_close(L, CG_GLRESOURCE, 0);
}

static int resource_gc(lua_State *L) { return cg_close(L, CG_GLRESOURCE, 1); }

/* cuda.gl_buffer(id, type [, access]): GL buffer object id, seen as a
   buffer of type; access "read_write" (default), "read_only" (CUDA only
   reads) or "write_discard" (CUDA overwrites it all). */
static int gl_buffer(lua_State *L) {
  lua_Integer id = luaL_checkinteger(L, 1);
  luaL_argcheck(L, id > 0 && id <= 0xffffffff, 1, "not a GL buffer name");
  cg_type t = cg_checktype(L, 2);
  int a = cg_checkoption(L, 3, "read_write", access_names);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot register a GL buffer", "register before capture");
  check_interop(L, 0);
  cg_resource *r = cg_newobj(L, ctx, sizeof *r, CG_GLRESOURCE);
  r->type = t;
  CU(L, ctx, cuGraphicsGLRegisterBuffer, &r->h.drv.res, (unsigned)id,
     access_flags[a]);
  r->h.open = 1;
  return 1;
}

/* cuda.gl_image(id, target [, opts]): GL texture or renderbuffer id, of
   target "2d", "rectangle" or "renderbuffer"; opts {access = as
   gl_buffer's, surface = true (surface stores into it), gather = true
   (texture gather)}. Mapped as an Array of the image's format. */
static int gl_image(lua_State *L) {
  static const char *const targets[] = { "2d", "rectangle", "renderbuffer",
                                         NULL };
  static const unsigned gl_targets[] = { 0x0DE1, 0x84F5, 0x8D41 };
  static const char *const keys[] = { "access", "surface", "gather", NULL };
  lua_Integer id = luaL_checkinteger(L, 1);
  luaL_argcheck(L, id > 0 && id <= 0xffffffff, 1, "not a GL texture name");
  int target = cg_checkoption(L, 2, NULL, targets);
  unsigned flags = 0;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    cg_check_options(L, 3, "cuda.gl_image", keys);
    lua_getfield(L, 3, "access");
    flags = access_flags[cg_checkoption(L, -1, "read_write", access_names)];
    lua_getfield(L, 3, "surface");
    if (lua_toboolean(L, -1)) flags |= CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST;
    lua_getfield(L, 3, "gather");
    if (lua_toboolean(L, -1)) flags |= CU_GRAPHICS_REGISTER_FLAGS_TEXTURE_GATHER;
    lua_settop(L, 2);
  }
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot register a GL image", "register before capture");
  check_interop(L, 1);
  cg_resource *r = cg_newobj(L, ctx, sizeof *r, CG_GLRESOURCE);
  r->image = 1;
  CU(L, ctx, cuGraphicsGLRegisterImage, &r->h.drv.res, (unsigned)id,
     gl_targets[target], flags);
  r->h.open = 1;
  return 1;
}

/* Unmaps r and detaches the borrowed buffer or array o. */
static CUresult unmap(cg_resource *r, cg_obj *o) {
  if (o) o->open = 0;
  r->ismapped = 0;
  return cg_drv.cuGraphicsUnmapResources(1, &r->h.drv.res, r->mapped);
}

/* Pushes the mapped array (light userdata 1) as a borrowed Array of the
   context (2), for a protected call: an image whose format arrays lack
   raises while mapped. */
static int push_mapped(lua_State *L) {
  cg_push_array(L, lua_touserdata(L, 2), lua_touserdata(L, 1));
  return 1;
}

/* The mapped memory of r as a new borrowed object at the top: a Buffer,
   or an Array for an image; else r is unmapped and the error raised, or
   NULL with it at the top. */
static cg_obj *mapped(lua_State *L, cg_resource *r, cg_ctx *ctx) {
  if (r->image) {
    CUarray a = NULL;
    CUresult e = cg_drv.cuGraphicsSubResourceGetMappedArray(&a, r->h.drv.res,
                                                            0, 0);
    if (e != CUDA_SUCCESS) {
      unmap(r, NULL);
      cg_check(L, ctx, "cuGraphicsSubResourceGetMappedArray", e); /* raises */
    }
    lua_pushcfunction(L, push_mapped);
    lua_pushlightuserdata(L, a);
    lua_pushlightuserdata(L, ctx);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
      unmap(r, NULL);
      return NULL;
    }
    cg_obj *o = lua_touserdata(L, -1);
    o->scoped = 1;
    return o;
  }
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  b->h.owned = 0;
  b->h.scoped = 1;
  b->type = r->type;
  size_t bytes = 0;
  CUresult e = cg_drv.cuGraphicsResourceGetMappedPointer(&b->h.drv.mem, &bytes,
                                                          r->h.drv.res);
  if (e != CUDA_SUCCESS || bytes < cg_type_size[r->type]) {
    unmap(r, NULL);
    cg_check(L, ctx, "cuGraphicsResourceGetMappedPointer", e); /* raises */
    lua_pushfstring(L, "GLResource:map(): the GL buffer holds no %s",
                    cg_type_names[r->type]);
    return NULL;
  }
  b->n = bytes / cg_type_size[r->type];
  b->h.open = 1;
  return &b->h;
}

/* r:map(stream, fn): maps the object on stream (work the renderer issued
   before completes first), calls fn(buffer) with the mapped memory as a
   borrowed Buffer (an Array for an image), and unmaps it on stream when
   fn returns or raises (the renderer's later work sees what CUDA wrote).
   The buffer or array is freed on return; a graph that captured it must
   be freed inside the scope. */
static int resource_map(lua_State *L) {
  cg_resource *r = cg_checkself(L, CG_GLRESOURCE);
  cg_ctx *ctx = r->h.ctx;
  cg_check_outside(L, ctx, "GLResource:map()", "map before the capture");
  luaL_checktype(L, 3, LUA_TFUNCTION);
  if (r->ismapped) return luaL_error(L, "GLResource:map(): already mapped");
  lua_settop(L, 3);
  CUstream s = ((cg_stream *)cg_checkobj(L, 2, CG_STREAM))->h.drv.stream;
  cg_check_open(L, &r->h);
  CU(L, ctx, cuGraphicsMapResources, 1, &r->h.drv.res, s);
  r->ismapped = 1;
  r->mapped = s;
  cg_obj *o = mapped(L, r, ctx); /* 4 */
  if (!o) return lua_error(L);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  ctx->root->mapped++;
  int status = lua_pcall(L, 1, 0, 0); /* its views end with it (scoped) */
  ctx->root->mapped--;
  int pinned = o->uses != 0;
  CUresult e = unmap(r, o);
  if (status != LUA_OK) return lua_error(L);
  cg_check(L, ctx, "cuGraphicsUnmapResources", e);
  if (pinned) /* and the graph refuses to launch from now on */
    return luaL_error(L, "GLResource:map(): a live graph captured the mapped "
                      "%s; free it inside the map scope",
                      r->image ? "array" : "buffer");
  return 0;
}

static int resource_tostring(lua_State *L) {
  cg_resource *r = cg_toobj(L, 1, CG_GLRESOURCE);
  return cg_tostring(L, &r->h, " of %s (%p%s)",
                     r->image ? "an image" : cg_type_names[r->type],
                     (void *)r->h.drv.res, r->ismapped ? ", mapped" : "");
}

void interop_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"map", resource_map}, {"free", resource_free}, {"close", resource_free},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", resource_gc}, {"__close", resource_free},
    {"__tostring", resource_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_GLRESOURCE, methods, meta, NULL);
  lua_pushcfunction(L, gl_buffer);
  lua_setfield(L, -2, "gl_buffer");
  lua_pushcfunction(L, gl_image);
  lua_setfield(L, -2, "gl_image");
}
