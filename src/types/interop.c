/* cugraph.GLResource: an OpenGL buffer object registered with CUDA, so that
   kernels read and write the memory the renderer draws from, with no host
   copy. The GL context that owns the object must be current on the calling
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
} cg_resource;

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
  static const char *const access[] = {"read_write", "read_only",
                                       "write_discard", NULL};
  static const unsigned flags[] = {CU_GRAPHICS_REGISTER_FLAGS_NONE,
                                   CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY,
                                   CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD};
  lua_Integer id = luaL_checkinteger(L, 1);
  luaL_argcheck(L, id > 0 && id <= 0xffffffff, 1, "not a GL buffer name");
  cg_type t = cg_checktype(L, 2);
  int a = cg_checkoption(L, 3, "read_write", access);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot register a GL buffer", "register before capture");
  if (!cg_drv.cuGraphicsGLRegisterBuffer || !cg_drv.cuGraphicsMapResources ||
      !cg_drv.cuGraphicsUnmapResources ||
      !cg_drv.cuGraphicsResourceGetMappedPointer ||
      !cg_drv.cuGraphicsUnregisterResource)
    return luaL_error(L, "this CUDA driver has no OpenGL interop");
  cg_resource *r = cg_newobj(L, ctx, sizeof *r, CG_GLRESOURCE);
  r->type = t;
  CU(L, ctx, cuGraphicsGLRegisterBuffer, &r->h.drv.res, (unsigned)id, flags[a]);
  r->h.open = 1;
  return 1;
}

/* Unmaps r and detaches the borrowed buffer b. */
static CUresult unmap(cg_resource *r, cg_buffer *b) {
  b->h.open = 0;
  r->ismapped = 0;
  return cg_drv.cuGraphicsUnmapResources(1, &r->h.drv.res, r->mapped);
}

/* r:map(stream, fn): maps the object on stream (work the renderer issued
   before completes first), calls fn(buffer) with the mapped memory as a
   borrowed Buffer, and unmaps it on stream when fn returns or raises
   (the renderer's later work sees what CUDA wrote). The buffer is freed
   on return; a graph that captured it must be freed inside the scope. */
static int resource_map(lua_State *L) {
  cg_resource *r = cg_checkself(L, CG_GLRESOURCE);
  cg_ctx *ctx = r->h.ctx;
  cg_check_outside(L, ctx, "GLResource:map()", "map before the capture");
  luaL_checktype(L, 3, LUA_TFUNCTION);
  if (r->ismapped) return luaL_error(L, "GLResource:map(): already mapped");
  lua_settop(L, 3);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER); /* 4 */
  b->h.owned = 0;
  b->h.scoped = 1;
  b->type = r->type;
  CUstream s = ((cg_stream *)cg_checkobj(L, 2, CG_STREAM))->h.drv.stream;
  cg_check_open(L, &r->h);
  CU(L, ctx, cuGraphicsMapResources, 1, &r->h.drv.res, s);
  r->ismapped = 1;
  r->mapped = s;
  size_t bytes = 0;
  CUresult e = cg_drv.cuGraphicsResourceGetMappedPointer(&b->h.drv.mem, &bytes,
                                                          r->h.drv.res);
  if (e != CUDA_SUCCESS || bytes < cg_type_size[r->type]) {
    unmap(r, b);
    if (e == CUDA_SUCCESS)
      return luaL_error(L, "GLResource:map(): the GL buffer holds no %s",
                        cg_type_names[r->type]);
    cg_check(L, ctx, "cuGraphicsResourceGetMappedPointer", e);
  }
  b->n = bytes / cg_type_size[r->type];
  b->h.open = 1;
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  ctx->root->mapped++;
  int status = lua_pcall(L, 1, 0, 0); /* its views end with it (scoped) */
  ctx->root->mapped--;
  int pinned = b->h.uses != 0;
  e = unmap(r, b);
  if (status != LUA_OK) return lua_error(L);
  cg_check(L, ctx, "cuGraphicsUnmapResources", e);
  if (pinned) /* and the graph refuses to launch from now on */
    return luaL_error(L, "GLResource:map(): a live graph captured the mapped "
                      "buffer; free it inside the map scope");
  return 0;
}

static int resource_tostring(lua_State *L) {
  cg_resource *r = cg_toobj(L, 1, CG_GLRESOURCE);
  return cg_tostring(L, &r->h, " of %s (%p%s)", cg_type_names[r->type],
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
}
