/* cugraph.Scalar: one value in device memory that kernels read through its
   pointer. set(v) only records the value on the host; it is written to the
   device (a memset, so no host memory stays in flight) on the stream of the
   next launch that reads the scalar, just before that launch. So each graph
   replay sees the value set before it, on whatever stream it runs. */
#include <string.h>
#include "types/types.h"

static cg_scalar *check(lua_State *L) { return cg_checkobj(L, 1, CG_SCALAR); }

void cg_scalar_flush(lua_State *L, cg_scalar *sc, CUstream s) {
  if (!sc->pending) return;
  const char *api;
  sc->h.ctx->root->stream_clock++; /* a copy on s */
  CUresult r = cg_memset_value(sc->h.drv.mem, sc->bits,
                               cg_type_size[sc->type], s, &api);
  cg_check(L, sc->h.ctx, api, r);
  sc->pending = 0;
}

/* cuda.scalar(type [, value]) */
static int scalar_new(lua_State *L) {
  cg_type t = cg_checktype(L, 1);
  uint64_t bits = 0;
  if (!lua_isnoneornil(L, 2)) cg_tobits(L, 2, t, &bits, NULL);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot allocate a scalar", "allocate scalars before capture");
  cg_scalar *sc = cg_newobj(L, ctx, sizeof *sc, CG_SCALAR);
  sc->type = t;
  CU(L, ctx, cuMemAlloc, &sc->h.drv.mem, 8);
  sc->h.open = 1;
  sc->bits = bits;
  sc->pending = 1;
  return 1;
}

static int scalar_free(lua_State *L) { return cg_close(L, CG_SCALAR, 0); }
static int scalar_gc(lua_State *L) { return cg_close(L, CG_SCALAR, 1); }

/* sc:set(v): no driver call, no allocation */
static int scalar_set(lua_State *L) {
  cg_scalar *sc = cg_checkself(L, CG_SCALAR);
  if (sc->h.ctx->capture)
    luaL_error(L, "scalar:set() inside a graph capture: set the value before "
               "launching the graph; each launch reads the value set last");
  uint64_t bits = 0;
  cg_tobits(L, 2, sc->type, &bits, NULL);
  sc->bits = bits;
  sc->pending = 1;
  return 0;
}

/* sc:get(): the value on the device, after all device work */
static int scalar_get(lua_State *L) {
  cg_scalar *sc = check(L);
  cg_ctx *ctx = sc->h.ctx;
  cg_check_outside(L, ctx, "scalar:get()", "read the scalar after the capture ends");
  cg_scalar_flush(L, sc, ctx->stream);
  cg_sync(L, ctx);
  uint64_t bits = 0;
  CU(L, ctx, cuMemcpyDtoHAsync, &bits, sc->h.drv.mem, cg_type_size[sc->type],
     ctx->stream);
  cg_wait_stream(L, ctx, ctx->stream, ctx->root->timeout);
  sc->bits = bits;
  cg_pushbits(L, sc->type, &bits);
  return 1;
}

static int scalar_type(lua_State *L) {
  lua_pushstring(L, cg_type_names[((cg_scalar *)cg_checkself(L, CG_SCALAR))->type]);
  return 1;
}

/* sc:address(): the device address, for foreign code */
static int scalar_address(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)
                  ((cg_scalar *)cg_checkself(L, CG_SCALAR))->h.drv.mem);
  return 1;
}

static int scalar_tostring(lua_State *L) {
  cg_scalar *sc = cg_toobj(L, 1, CG_SCALAR);
  if (!sc->h.open) return cg_tostring(L, &sc->h, "");
  cg_pushbits(L, sc->type, &sc->bits);
  return cg_tostring(L, &sc->h, " %s = %s (%p)", cg_type_names[sc->type],
                     lua_tostring(L, -1), (void *)(uintptr_t)sc->h.drv.mem);
}

void scalar_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"set", scalar_set}, {"get", scalar_get}, {"free", scalar_free},
    {"close", scalar_free}, {"type", scalar_type},
    {"address", scalar_address}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", scalar_gc}, {"__close", scalar_free},
    {"__tostring", scalar_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_SCALAR, methods, meta, NULL);
  lua_pushcfunction(L, scalar_new);
  lua_setfield(L, -2, "scalar");
}
