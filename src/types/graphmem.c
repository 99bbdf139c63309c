/* Stream-ordered and graph memory: cuda.buffer(type, n, {stream = s})
   allocates on a stream (outside captures), or makes an allocation node of
   the graph being captured, whose memory the graph owns; b:free(stream)
   frees on a stream, or makes a free node. Memory a graph allocates exists
   from a launch of the graph that reaches its allocation node until it is
   freed: outside that time the buffer is refused before the driver. Also
   cuda.memory and cuda.trim. */
#include <string.h>
#include "types/types.h"

static void need_async(lua_State *L) {
  if (!cg_drv.cuMemAllocAsync || !cg_drv.cuMemFreeAsync)
    luaL_error(L, "stream-ordered allocation needs CUDA 11.2 or later (the "
               "driver lacks cuMemAllocAsync)");
}

int cg_buffer_async(lua_State *L, cg_type t, size_t n, int optidx) {
  static const char *const keys[] = { "stream", NULL };
  cg_check_options(L, optidx, "cuda.buffer", keys);
  if (lua_getfield(L, optidx, "stream") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  int sidx = lua_gettop(L);
  cg_stream *s = cg_testobj(L, sidx, CG_STREAM);
  if (!s)
    luaL_argerror(L, optidx, "opts.stream must be a cugraph.Stream");
  cg_check_open(L, &s->h);
  cg_ctx *ctx = cg_context(L);
  if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, "cuda.buffer");
  need_async(L);
  if (ctx->capture) cg_check_captured(L, ctx, s->h.drv.stream, "cuda.buffer");
  cg_pinobj(L, ctx, &s->h, sidx);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  b->type = t;
  b->n = n;
  cg_check_open(L, &s->h);
  CU(L, ctx, cuMemAllocAsync, &b->h.drv.mem, n * cg_type_size[t],
     s->h.drv.stream);
  b->h.open = 1;
  if (!ctx->capture) return 1;
  b->h.owned = 0; /* the graph's, allocated from its launch on */
  b->h.graphmem = CG_GRAPHMEM_GONE;
  cg_pinobj(L, ctx, &b->h, -1);
  cg_note_alloc(L, ctx, s->h.drv.stream, &b->h);
  return 1;
}

const char *cg_graphmem_why(lua_State *L, const cg_obj *o) {
  while (!o->graphmem) o = o->parent;
  return lua_pushfstring(L, "the cugraph.Buffer is memory that cugraph.Graph "
                         "#%d allocates, and is not allocated now: use it "
                         "after a launch of the graph and before its free",
                         (int)o->graph);
}

void cg_graphmem_allocated(lua_State *L, cg_buffer *b, CUstream st) {
  cg_ctx *ctx = b->h.ctx;
  if (!b->allocated)
    CU(L, ctx, cuEventCreate, &b->allocated, CU_EVENT_DISABLE_TIMING);
  CU(L, ctx, cuEventRecord, b->allocated, st);
}

/* st waits for the launch that allocated b's memory. */
static void after_allocation(lua_State *L, cg_buffer *b, CUstream st) {
  if (!b->allocated) return;
  cg_recs_mark(L, b->h.ctx, st); /* a join ends the chain */
  CU(L, b->h.ctx, cuStreamWaitEvent, st, b->allocated, 0);
}

int cg_graphmem_release(cg_buffer *b) {
  cg_ctx *ctx = b->h.ctx;
  CUevent ev = b->allocated;
  int done = 0;
  b->allocated = NULL;
  if (!ev) return 0;
  /* a capture holds frees back (release.c): then a plain free, later */
  if (b->h.graphmem == CG_GRAPHMEM_LIVE && b->h.owned && !b->h.share &&
      !ctx->capture && ctx->ready && !ctx->poison)
    done = cg_free_after(ctx, b->h.drv.mem, ev);
  if (ctx->ready && !ctx->root->closed)
    cg_destroy(CG_H_EVENT, (cg_handle){ .event = ev });
  return done;
}

int cg_buffer_free_async(lua_State *L, int sidx) {
  cg_buffer *b = cg_checkobj(L, 1, CG_BUFFER);
  cg_ctx *ctx = b->h.ctx;
  cg_stream *s = lua_isnoneornil(L, sidx) ? NULL
               : cg_checkobj(L, sidx, CG_STREAM);
  if (!b->h.owned && !b->h.graphmem) return cg_close(L, CG_BUFFER, 0);
  cg_check_no_views(L, b);
  need_async(L);
  if (ctx->capture) {
    if (!s)
      luaL_error(L, "b:free() inside a graph capture: pass the capture "
                 "stream, b:free(s), for a free node");
    if (!b->h.graphmem)
      luaL_error(L, "b:free(stream) inside a graph capture frees only memory "
                 "a graph allocates (cuda.buffer(type, n, {stream = s}) in "
                 "a capture); free other buffers outside captures");
    cg_check_captured(L, ctx, s->h.drv.stream, "b:free");
    cg_pinobj(L, ctx, &b->h, 1);
    cg_pinobj(L, ctx, &s->h, sidx);
    cg_check_open(L, &b->h);
    cg_check_no_views(L, b); /* the pins may have run a finalizer */
    CU(L, ctx, cuMemFreeAsync, b->h.drv.mem, s->h.drv.stream);
    cg_note_free(L, ctx, s->h.drv.stream, &b->h);
    b->h.owned = 0;    /* the graph frees it: the object reads as freed */
    b->h.graphmem = 0; /* from here on */
    b->h.open = 0;
    return 0;
  }
  if (b->h.graphmem == CG_GRAPHMEM_GONE)
    luaL_error(L, "cannot free cugraph.Buffer: a graph allocates it and it "
               "is not allocated now (it is from the graph's launch until "
               "freed)");
  if (!b->h.graphmem) cg_check_unused(L, &b->h);
  CUstream st = s ? s->h.drv.stream : ctx->stream;
  after_allocation(L, b, st);
  CU(L, ctx, cuMemFreeAsync, b->h.drv.mem, st);
  if (!s) cg_wait_stream(L, ctx, st, ctx->root->timeout);
  b->h.owned = 0;
  if (b->h.graphmem && b->h.uses) {
    b->h.graphmem = CG_GRAPHMEM_GONE; /* its graph allocates it again */
    return 0;
  }
  b->h.graphmem = 0;
  return cg_close(L, CG_BUFFER, 0);
}

/* cuda.memory() -> {free, total, used, graph = {...}, pool = {...}} */
static int memory(lua_State *L) {
  cg_ctx *ctx = cg_context(L);
  size_t fr = 0, total = 0;
  CU(L, ctx, cuMemGetInfo, &fr, &total);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, (lua_Integer)fr);
  lua_setfield(L, -2, "free");
  lua_pushinteger(L, (lua_Integer)total);
  lua_setfield(L, -2, "total");
  lua_pushinteger(L, (lua_Integer)(total - fr));
  lua_setfield(L, -2, "used");
  static const char *const names[] = { "used", "used_high", "reserved",
                                       "reserved_high" };
  if (cg_drv.cuDeviceGetGraphMemAttribute) {
    static const CUgraphMem_attribute attrs[] = {
      CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
      CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
      CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH
    };
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; i++) {
      cuuint64_t v = 0;
      CU(L, ctx, cuDeviceGetGraphMemAttribute, ctx->dev, attrs[i], &v);
      lua_pushinteger(L, (lua_Integer)v);
      lua_setfield(L, -2, names[i]);
    }
    lua_setfield(L, -2, "graph");
  }
  if (cg_drv.cuDeviceGetDefaultMemPool && cg_drv.cuMemPoolGetAttribute) {
    static const CUmemPool_attribute attrs[] = {
      CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_HIGH,
      CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
    };
    CUmemoryPool pool;
    CU(L, ctx, cuDeviceGetDefaultMemPool, &pool, ctx->dev);
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; i++) {
      cuuint64_t v = 0;
      CU(L, ctx, cuMemPoolGetAttribute, pool, attrs[i], &v);
      lua_pushinteger(L, (lua_Integer)v);
      lua_setfield(L, -2, names[i]);
    }
    lua_setfield(L, -2, "pool");
  }
  return 1;
}

/* cuda.trim([keep]): gives the device's graph memory and its default
   pool's unused memory (beyond keep bytes) back */
static int trim(lua_State *L) {
  lua_Integer keep = luaL_optinteger(L, 1, 0);
  luaL_argcheck(L, keep >= 0, 1, "keep must not be negative");
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cuda.trim()", "trim after the capture ends");
  if (cg_drv.cuDeviceGraphMemTrim)
    CU(L, ctx, cuDeviceGraphMemTrim, ctx->dev);
  if (cg_drv.cuDeviceGetDefaultMemPool && cg_drv.cuMemPoolTrimTo) {
    CUmemoryPool pool;
    CU(L, ctx, cuDeviceGetDefaultMemPool, &pool, ctx->dev);
    CU(L, ctx, cuMemPoolTrimTo, pool, (size_t)keep);
  }
  return 0;
}

void graphmem_open(lua_State *L) {
  lua_pushcfunction(L, memory);
  lua_setfield(L, -2, "memory");
  lua_pushcfunction(L, trim);
  lua_setfield(L, -2, "trim");
}
