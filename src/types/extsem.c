/* cugraph.ExternalSemaphore: a semaphore another API exported (a Vulkan
   binary or timeline semaphore's opaque file descriptor), imported with
   cuImportExternalSemaphore; and the Stream methods that wait for and
   signal one, eagerly or as external-semaphore nodes of a capture. A
   timeline's value may be a u64 Scalar: a graph then waits for or
   signals the value the scalar holds at each launch (graph.c sets the
   node before the launch), so one captured frame serves every frame. */
#include <string.h>
#include "types/types.h"

static const char *const kinds[] = { "binary", "timeline", NULL };

static void check_driver(lua_State *L, const char *what) {
  if (!cg_drv.cuImportExternalSemaphore || !cg_drv.cuDestroyExternalSemaphore ||
      !cg_drv.cuSignalExternalSemaphoresAsync ||
      !cg_drv.cuWaitExternalSemaphoresAsync)
    luaL_error(L, "%s: this CUDA driver has no external semaphores", what);
}

static cg_extsem *push(lua_State *L, cg_ctx *ctx, int timeline) {
  cg_extsem *e = cg_newobj(L, ctx, sizeof *e, CG_EXTSEM);
  e->timeline = timeline;
  return e;
}

/* cuda.external_semaphore(handle [, kind]): kind "binary" (the default)
   or "timeline"; the handle an opaque file descriptor */
static int extsem_new(lua_State *L) {
  const char *what = "cuda.external_semaphore";
  int timeline = cg_checkoption(L, 2, "binary", kinds);
  int fd = cg_check_fd(L, 1, what);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot import an external semaphore",
                   "import before capture");
  check_driver(L, what);
  lua_settop(L, 0);
  cg_extsem *e = push(L, ctx, timeline);
  CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d;
  memset(&d, 0, sizeof d);
  d.type = timeline ? CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
                    : CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = fd;
  CU(L, ctx, cuImportExternalSemaphore, &e->h.drv.extsem, &d);
  e->h.open = 1;
  return 1;
}

void cg_push_extsem(lua_State *L, cg_ctx *ctx, CUexternalSemaphore s,
                    int timeline) {
  if (!s) luaL_error(L, "cugraph_pushexternalsemaphore: null semaphore");
  check_driver(L, "cugraph_pushexternalsemaphore");
  cg_extsem *e = push(L, ctx, timeline != 0);
  e->h.drv.extsem = s;
  e->h.owned = 0;
  e->h.open = 1;
}

/* The value argument at idx of s:wait_external / s:signal_external: its
   bits, and the u64 Scalar it came from (or NULL). */
static uint64_t value_of(lua_State *L, cg_extsem *e, int idx,
                         const char *what, cg_scalar **sc) {
  *sc = NULL;
  if (lua_isnoneornil(L, idx)) {
    if (e->timeline)
      luaL_error(L, "%s: a timeline semaphore needs a value (an integer >= "
                 "0 or a u64 cugraph.Scalar)", what);
    return 0;
  }
  if (!e->timeline)
    luaL_error(L, "%s: a binary semaphore takes no value", what);
  if ((*sc = cg_testobj(L, idx, CG_SCALAR))) {
    cg_check_open(L, &(*sc)->h);
    if ((*sc)->type != CG_U64)
      luaL_error(L, "%s: the value's cugraph.Scalar must be u64, not %s",
                 what, cg_type_names[(*sc)->type]);
    return (*sc)->bits;
  }
  int ok;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok || v < 0)
    luaL_error(L, "%s: the value must be an integer >= 0 or a u64 "
               "cugraph.Scalar, got %s", what, luaL_tolstring(L, idx, NULL));
  return (uint64_t)v;
}

/* s:wait_external(sem [, value]) and s:signal_external(sem [, value]) */
static int external(lua_State *L, int wait) {
  const char *what = wait ? "s:wait_external" : "s:signal_external";
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
  cg_extsem *e = cg_checkobj(L, 2, CG_EXTSEM);
  if (lua_gettop(L) > 3)
    return luaL_error(L, "%s: takes a semaphore and a value, got %d "
                      "arguments", what, lua_gettop(L) - 1);
  cg_scalar *sc;
  uint64_t v = value_of(L, e, 3, what, &sc);
  cg_ctx *ctx = s->h.ctx;
  if (e->h.ctx != ctx) cg_error_devices(L, ctx, e->h.ctx, what);
  CUstream st = s->h.drv.stream;
  CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp;
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp;
  memset(&wp, 0, sizeof wp);
  memset(&sp, 0, sizeof sp);
  wp.params.fence.value = sp.params.fence.value = v;
  if (cg_recording(ctx)) { /* made again when the graph is built */
    cg_record_call(L, ctx, st, 3);
  } else if (ctx->capture && cg_capturing_on(L, ctx, st)) {
    if (sc && ctx->capture->depth)
      return luaL_error(L, "%s: a u64 cugraph.Scalar value is set per "
                        "launch in the top graph only, not in the body of "
                        "a conditional node: give an integer there", what);
    cg_pinobj(L, ctx, &s->h, 1);
    cg_pinobj(L, ctx, &e->h, 2);
    if (sc) cg_pinobj(L, ctx, &sc->h, 3);
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    if (wait) {
      p.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT;
      p.extSemWait.extSemArray = &e->h.drv.extsem;
      p.extSemWait.paramsArray = &wp;
      p.extSemWait.numExtSems = 1;
    } else {
      p.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
      p.extSemSignal.extSemArray = &e->h.drv.extsem;
      p.extSemSignal.paramsArray = &sp;
      p.extSemSignal.numExtSems = 1;
    }
    CUgraphNode nd = cg_capture_node(L, ctx, st, &p);
    cg_note_extsem(L, ctx, nd, wait, &e->h, sc ? &sc->h : NULL, v);
  } else if (wait) {
    CU(L, ctx, cuWaitExternalSemaphoresAsync, &e->h.drv.extsem, &wp, 1, st);
  } else {
    CU(L, ctx, cuSignalExternalSemaphoresAsync, &e->h.drv.extsem, &sp, 1,
       st);
  }
  lua_settop(L, 1);
  return 1; /* the stream, as methods that record work return it */
}
static int stream_wait_external(lua_State *L) { return external(L, 1); }
static int stream_signal_external(lua_State *L) { return external(L, 0); }

static cg_extsem *check(lua_State *L) { return cg_checkobj(L, 1, CG_EXTSEM); }

/* e:kind(): "binary" or "timeline" */
static int extsem_kind(lua_State *L) {
  lua_pushstring(L, kinds[check(L)->timeline]);
  return 1;
}

/* e:handle(): the CUexternalSemaphore, for foreign code */
static int extsem_handle(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(uintptr_t)check(L)->h.drv.extsem);
  return 1;
}

static int extsem_free(lua_State *L) { return cg_close(L, CG_EXTSEM, 0); }
static int extsem_gc(lua_State *L) { return cg_close(L, CG_EXTSEM, 1); }

static int extsem_tostring(lua_State *L) {
  cg_extsem *e = cg_toobj(L, 1, CG_EXTSEM);
  return cg_tostring(L, &e->h, " %s%s (%p)", kinds[e->timeline],
                     e->h.owned ? "" : ", borrowed", (void *)e->h.drv.extsem);
}

void extsem_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"kind", extsem_kind}, {"handle", extsem_handle},
    {"free", extsem_free}, {"close", extsem_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", extsem_gc}, {"__close", extsem_free},
    {"__tostring", extsem_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_EXTSEM, methods, meta, NULL);
  lua_pushcfunction(L, extsem_new);
  lua_setfield(L, -2, "external_semaphore");
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, stream_wait_external);
  lua_setfield(L, -2, "wait_external");
  lua_pushcfunction(L, stream_signal_external);
  lua_setfield(L, -2, "signal_external");
  lua_pop(L, 2);
}
