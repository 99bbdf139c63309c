/* cugraph.Buffer: typed device memory. Calls that name no stream are
   synchronous with all device work; with a stream they are ordered on it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "types/types.h"

static cg_buffer *check(lua_State *L) { return cg_checkobj(L, 1, CG_BUFFER); }

/* Element offset (argument oidx, absent: 0) and count within the buffer;
   *count == SIZE_MAX means to the end. */
static size_t checkrange(lua_State *L, cg_buffer *b, int oidx, size_t *count,
                         const char *what) {
  lua_Integer off = oidx ? luaL_optinteger(L, oidx, 0) : 0;
  if (off < 0 || (uint64_t)off > b->n)
    luaL_argerror(L, oidx, lua_pushfstring(L, "offset %I out of range: "
                  "element offsets are 0-based, 0..%I", (LUAI_UACINT)off,
                  (LUAI_UACINT)b->n));
  if (*count == SIZE_MAX) *count = b->n - (size_t)off;
  if (*count > b->n - (size_t)off)
    luaL_error(L, "%s: %I elements at offset %I pass the end of the buffer "
               "(%I elements)", what, (LUAI_UACINT)*count, (LUAI_UACINT)off,
               (LUAI_UACINT)b->n);
  return (size_t)off;
}

static const char *host_data(lua_State *L, cg_type t, int didx,
                             size_t *count, const char *fn);

/* cuda.buffer(type, n | table | string [, {stream = s}]): with a stream,
   a stream-ordered allocation (node.c) */
static int buffer_new(lua_State *L) {
  cg_type t = cg_checktype(L, 1);
  if (lua_istable(L, 3) && lua_type(L, 2) == LUA_TNUMBER &&
      cg_buffer_async(L, t, cg_checkcount(L, 2, t), 3))
    return 1;
  int init;
  size_t n = cg_checkinit(L, 2, t, &init, "no elements to upload");
  lua_settop(L, 2);
  /* the elements are converted (3) before any driver call */
  const char *src = init ? host_data(L, t, 2, &n, "cugraph.buffer") : NULL;
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot allocate a buffer", "allocate buffers before capture");
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  b->type = t;
  b->n = n;
  CU(L, ctx, cuMemAlloc, &b->h.drv.mem, n * cg_type_size[t]);
  b->h.open = 1;
  if (init) {
    CU(L, ctx, cuMemcpyHtoDAsync, b->h.drv.mem, src, n * cg_type_size[t],
       ctx->stream);
    cg_work_finish(L, ctx, NULL);
  }
  return 1;
}

/* A view's parent (its user value 1) counts one open view fewer; a DLPack
   tensor closes with the Buffer made from it. */
static void buffer_release(lua_State *L, cg_obj *o) {
  /* graph memory a launch allocated: freed after that launch */
  if (o->graphmem && cg_graphmem_release((cg_buffer *)o)) o->owned = 0;
  if (!o->parent) return;
  cg_unview(L, o->parent);
  if (o->parent->kind == CG_DLTENSOR) cg_close_later(L, o->parent);
}

void cg_check_no_views(lua_State *L, const cg_buffer *b) {
  if (b->h.open && b->h.views)
    luaL_error(L, "cannot free %s %s[%I]: %d open view%s over it (b:view); "
               "free the views first", cg_kind_names[CG_BUFFER],
               cg_type_names[b->type], (LUAI_UACINT)b->n, (int)b->h.views,
               b->h.views > 1 ? "s" : "");
}

/* An open view reads its parent's memory: the parent is freed after its
   views (a collected parent's views are garbage too). */
static int buffer_free(lua_State *L) {
  cg_check_no_views(L, cg_toobj(L, 1, CG_BUFFER));
  return cg_close(L, CG_BUFFER, 0);
}

/* b:free([stream]): with a stream, or for memory a graph allocates, a
   stream-ordered free (node.c) */
static int buffer_free_method(lua_State *L) {
  cg_buffer *b = cg_toobj(L, 1, CG_BUFFER);
  if (!lua_isnoneornil(L, 2) || b->h.graphmem)
    return cg_buffer_free_async(L, 2);
  return buffer_free(L);
}
static int buffer_gc(lua_State *L) { return cg_close(L, CG_BUFFER, 1); }

/* b:view(first [, count [, type]]): count elements of type (b's type when
   absent) from element first of b; count absent: as many as fill the rest.
   A view shares b's memory; its address must suit the new type. */
static int buffer_view(lua_State *L) {
  cg_buffer *b = check(L);
  lua_Integer first = luaL_checkinteger(L, 2);
  cg_type t = lua_isnoneornil(L, 4) ? b->type : cg_checktype(L, 4);
  size_t es = cg_type_size[t], bes = cg_type_size[b->type];
  if (first < 0 || (uint64_t)first >= b->n)
    luaL_argerror(L, 2, lua_pushfstring(L, "first %I out of range: element "
                  "offsets are 0-based, 0..%I", (LUAI_UACINT)first,
                  (LUAI_UACINT)b->n - 1));
  size_t off = (size_t)first * bes, rest = b->n * bes - off, n;
  if (lua_isnoneornil(L, 3)) {
    if (rest % es)
      luaL_error(L, "view: the %I bytes from element %I are not a whole "
                 "number of %s; give a count", (LUAI_UACINT)rest,
                 (LUAI_UACINT)first, cg_type_names[t]);
    n = rest / es;
    luaL_argcheck(L, n > 0, 2, "no whole element of the view's type left");
  } else {
    n = cg_checkcount(L, 3, t);
    if (n > rest / es)
      luaL_error(L, "view: %I %s from element %I pass the end of the "
                 "buffer (%s[%I])", (LUAI_UACINT)n, cg_type_names[t],
                 (LUAI_UACINT)first, cg_type_names[b->type],
                 (LUAI_UACINT)b->n);
  }
  if ((b->h.drv.mem + off) % es)
    luaL_error(L, "view: element %I of %s is at byte %I, not aligned for %s "
               "(%d bytes)", (LUAI_UACINT)first, cg_type_names[b->type],
               (LUAI_UACINT)off, cg_type_names[t], (int)es);
  cg_buffer *v = cg_newobj(L, b->h.ctx, sizeof *v, CG_BUFFER);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  cg_check_open(L, &b->h); /* the allocations may have run a finalizer */
  v->type = t;
  v->n = n;
  v->h.drv.mem = b->h.drv.mem + off;
  v->h.parent = &b->h;
  v->h.owned = 0;
  v->h.scoped = b->h.scoped;
  v->managed = b->managed;
  b->h.views++;
  v->h.open = 1;
  return 1;
}

const char *cg_mem_why(lua_State *L, cg_ctx *ctx, const cg_obj *o) {
  if (!o->open)
    return lua_pushfstring(L, "attempt to use a freed %s",
                           cg_kind_names[o->kind]);
  for (const cg_obj *p = o->scoped ? o->parent : NULL; p; p = p->parent)
    if (!p->open)
      return lua_pushliteral(L, "attempt to use a view of a GLResource's "
                             "mapped buffer after its map scope");
  if (!ctx->capture && cg_graphmem_gone(o)) return cg_graphmem_why(L, o);
  return cg_reach_why(L, ctx, o->ctx);
}

void cg_check_mem(lua_State *L, cg_ctx *ctx, const cg_obj *o,
                  const char *what) {
  const char *why = cg_mem_why(L, ctx, o);
  if (why) luaL_error(L, "%s: %s", what, why);
}

/* b:parent(): the buffer a view was made from (or the ExternalMemory a
   mapping was), or nil */
static int buffer_parent(lua_State *L) {
  cg_buffer *b = check(L);
  if (!b->h.parent) return 0;
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/* Work named with no stream (sidx 0 or nil) runs on the default stream,
   after all device work, and is complete on return. */
CUstream cg_work_begin(lua_State *L, cg_ctx *ctx, int sidx, const char *what) {
  if (sidx && !lua_isnoneornil(L, sidx)) {
    CUstream st = cg_optstream(L, sidx, ctx);
    if (ctx->capture) cg_check_captured(L, ctx, st, what);
    return st;
  }
  if (ctx->capture)
    luaL_error(L, "%s without a stream inside a graph capture: pass the "
               "capture stream", what);
  cg_sync(L, ctx);
  return NULL;
}

void cg_work_finish(lua_State *L, cg_ctx *ctx, CUstream st) {
  if (!st) cg_wait_stream(L, ctx, ctx->stream, ctx->root->timeout);
}

/* The bytes of a table (a sequence of numbers, converted into a string
   pushed on the stack) or of a binary string at didx, as elements of t;
   *count is set to their number. Errors name fn and the element. */
static const char *host_data(lua_State *L, cg_type t, int didx,
                             size_t *count, const char *fn) {
  size_t es = cg_type_size[t], bytes;
  if (lua_type(L, didx) == LUA_TSTRING) {
    const char *src = lua_tolstring(L, didx, &bytes);
    if (bytes % es)
      luaL_error(L, "%s: string of %I bytes is not a whole number of %s", fn,
                 (LUAI_UACINT)bytes, cg_type_names[t]);
    *count = bytes / es;
    return src;
  }
  luaL_checktype(L, didx, LUA_TTABLE);
  size_t n = lua_rawlen(L, didx);
  luaL_Buffer lb;
  char *dst = luaL_buffinitsize(L, &lb, n * es), what[64];
  for (size_t i = 0; i < n; i++) {
    if (lua_rawgeti(L, didx, (lua_Integer)i + 1) == LUA_TNIL)
      luaL_error(L, "%s: element %I is nil (a table must be a sequence)", fn,
                 (LUAI_UACINT)i + 1);
    snprintf(what, sizeof what, "%s: element %llu", fn,
             (unsigned long long)i + 1);
    cg_tobits(L, -1, t, dst + i * es, what);
    lua_pop(L, 1);
  }
  luaL_pushresultsize(&lb, n * es);
  *count = n;
  return lua_tostring(L, -1);
}

/* A recording's work: the stream at sidx, which must be given and
   part of the recording. */
static CUstream recorded_stream(lua_State *L, cg_ctx *ctx, int sidx,
                                const char *what) {
  if (lua_isnoneornil(L, sidx))
    luaL_error(L, "%s without a stream in a graphed function: pass the "
               "stream the function runs on", what);
  CUstream st = cg_optstream(L, sidx, ctx);
  cg_record_stream(L, ctx, st, what);
  return st;
}

/* Copies a table or a binary string (host_data) to the buffer at element
   offset (index oidx, 0 = none), on the stream at sidx or synchronously
   (0). The stream is looked up after the conversion, whose allocations may
   run finalizers. */
static void upload_data(lua_State *L, cg_buffer *b, int didx, int oidx,
                        int sidx) {
  cg_ctx *ctx = b->h.ctx;
  size_t es = cg_type_size[b->type], count;
  if (lua_istable(L, didx)) { /* the range is checked before converting */
    count = lua_rawlen(L, didx);
    checkrange(L, b, oidx, &count, "upload");
  }
  const char *src = host_data(L, b->type, didx, &count, "upload");
  size_t off = checkrange(L, b, oidx, &count, "upload");
  if (count == 0) return;
  CUstream st = cg_work_begin(L, ctx, sidx, "upload");
  cg_check_open(L, &b->h);
  int t = cg_trace_begin(L, ctx, st ? st : ctx->stream, "copy", "upload");
  CU(L, ctx, cuMemcpyHtoDAsync, b->h.drv.mem + off * es, src, count * es,
     st ? st : ctx->stream);
  cg_trace_end(L, ctx, t);
  cg_work_finish(L, ctx, st);
}

/* An offset may be left out before a stream: b:upload(h, s). */
static void optoffset_stream(lua_State *L) {
  if (lua_type(L, 3) == LUA_TUSERDATA) {
    lua_settop(L, 3);
    lua_pushnil(L);
    lua_insert(L, 3);
  }
}

/* Copies between b (from element offset at 3) and the whole of the host
   buffer h at 2, to b when up: on the stream at 4, where a capture may
   record it (pinning h), or synchronously. */
static int hostcopy(lua_State *L, cg_buffer *b, int up) {
  const char *what = up ? "upload" : "download_into";
  cg_check_mem(L, b->h.ctx, &b->h, what);
  cg_hostbuf *h = cg_checkobj(L, 2, CG_HOSTBUF);
  if (h->type != b->type)
    luaL_error(L, "%s: host buffer of %s, device buffer of %s; they must "
               "match (b:view(0, nil, \"%s\") reinterprets the device "
               "buffer)", what, cg_type_names[h->type],
               cg_type_names[b->type], cg_type_names[h->type]);
  size_t count = h->n;
  size_t off = checkrange(L, b, 3, &count, what);
  if (cg_recording(b->h.ctx)) { /* made again when the graph is built */
    cg_record_call(L, b->h.ctx, recorded_stream(L, b->h.ctx, 4, what), 4);
    lua_settop(L, 1);
    return 1;
  }
  cg_pin(L, b->h.ctx, 1); /* pins allocate: handles are read after them */
  cg_pin(L, b->h.ctx, 2);
  CUstream st = cg_work_begin(L, b->h.ctx, 4, what);
  cg_check_open(L, &h->h);
  cg_check_open(L, &b->h);
  size_t bytes = count * cg_type_size[b->type];
  CUdeviceptr dp = b->h.drv.mem + off * cg_type_size[b->type];
  int t = cg_trace_begin(L, b->h.ctx, st ? st : b->h.ctx->stream, "copy",
                         what);
  if (up)
    CU(L, b->h.ctx, cuMemcpyHtoDAsync, dp, h->h.drv.host, bytes,
       st ? st : b->h.ctx->stream);
  else
    CU(L, b->h.ctx, cuMemcpyDtoHAsync, h->h.drv.host, dp, bytes,
       st ? st : b->h.ctx->stream);
  cg_trace_end(L, b->h.ctx, t);
  if (b->h.ctx->capture) /* g:rebind then refuses the buffer, not skips it */
    cg_note_hostcopy(L, b->h.ctx, st, &b->h, &h->h);
  cg_work_finish(L, b->h.ctx, st);
  lua_settop(L, 1);
  return 1;
}

/* b:download_into(h [, offset] [, stream]): #h elements of b from offset */
static int buffer_download_into(lua_State *L) {
  cg_buffer *b = check(L);
  optoffset_stream(L);
  return hostcopy(L, b, 0);
}

/* b:upload(table | string | host buffer [, offset] [, stream]) */
static int buffer_upload(lua_State *L) {
  cg_buffer *b = check(L);
  optoffset_stream(L);
  if (cg_testobj(L, 2, CG_HOSTBUF)) return hostcopy(L, b, 1);
  cg_check_mem(L, b->h.ctx, &b->h, "upload");
  cg_check_outside(L, b->h.ctx, "upload from host memory",
           "upload before capture, copy from a device buffer, or upload "
           "a cuda.host_buffer on the capture stream");
  if (!lua_isnoneornil(L, 4)) cg_checkobj(L, 4, CG_STREAM); /* early word */
  if (lua_isnone(L, 2)) luaL_typeerror(L, 2, "table"); /* before settop */
  lua_settop(L, 4); /* the stream's slot stays 4 while the data converts */
  upload_data(L, b, 2, 3, 4);
  lua_settop(L, 1);
  return 1;
}

/* b:download(["table" | "string" [, offset [, count]]]): waits for all
   device work first */
static int buffer_download(lua_State *L) {
  static const char *const fmts[] = { "table", "string", NULL };
  cg_buffer *b = check(L);
  cg_ctx *ctx = b->h.ctx;
  int fmt = cg_checkoption(L, 2, "table", fmts);
  cg_check_mem(L, ctx, &b->h, "download");
  lua_Integer c = luaL_optinteger(L, 4, -1);
  luaL_argcheck(L, c >= -1, 4, "count must not be negative");
  size_t count = c < 0 ? SIZE_MAX : (size_t)c;
  size_t off = checkrange(L, b, 3, &count, "download");
  size_t es = cg_type_size[b->type];
  cg_check_outside(L, ctx, "download", "download after the capture ends");
  luaL_Buffer lb;
  char *dst = luaL_buffinitsize(L, &lb, count * es + 1);
  cg_check_open(L, &b->h);
  cg_sync(L, ctx);
  int t = cg_trace_begin(L, ctx, ctx->stream, "copy", "download");
  CU(L, ctx, cuMemcpyDtoHAsync, dst, b->h.drv.mem + off * es, count * es,
     ctx->stream);
  cg_trace_end(L, ctx, t);
  cg_work_finish(L, ctx, NULL);
  if (fmt == 1) {
    luaL_pushresultsize(&lb, count * es);
    return 1;
  }
  lua_createtable(L, (int)(count < INT32_MAX ? count : INT32_MAX), 0);
  for (size_t i = 0; i < count; i++) {
    cg_pushbits(L, b->type, dst + i * es);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* Sets every element to the pattern v; for 8-byte types the halves are set
   with two strided 2D memsets. In a capture each memset's node is noted;
   a recording notes them without sending them (the stream object at sidx,
   the buffer at 1). */
static void fill(lua_State *L, cg_ctx *ctx, cg_buffer *b, const void *v,
                 CUstream st, int sidx) {
  CUdeviceptr p = b->h.drv.mem;
  size_t n = b->n;
  uint32_t w[2] = {0, 0};
  uint16_t h;
  int send = !cg_recording(ctx), vals[2] = { sidx, 1 };
  int t = send ? cg_trace_begin(L, ctx, st, "fill", NULL) : -1;
  switch (cg_type_size[b->type]) {
  case 1:
    w[0] = *(const uint8_t *)v;
    if (send) CU(L, ctx, cuMemsetD8Async, p, (unsigned char)w[0], n, st);
    break;
  case 2:
    memcpy(&h, v, 2);
    w[0] = h;
    if (send) CU(L, ctx, cuMemsetD16Async, p, h, n, st);
    break;
  case 4:
    memcpy(w, v, 4);
    if (send) CU(L, ctx, cuMemsetD32Async, p, w[0], n, st);
    break;
  default:
    memcpy(w, v, 8);
    for (int half = 0; half < 2; half++) {
      if (send)
        CU(L, ctx, cuMemsetD2D32Async, p + 4 * (size_t)half, 8, w[half], 1,
           n, st);
      if (ctx->capture) {
        cg_note_fill(L, ctx, st, &b->h, 4 * (size_t)half, w[half], 4, 1, n, 8);
        cg_note_vals(L, ctx, st, vals, 2);
      }
    }
    cg_trace_end(L, ctx, t);
    return;
  }
  cg_trace_end(L, ctx, t);
  if (ctx->capture) {
    cg_note_fill(L, ctx, st, &b->h, 0, w[0], cg_type_size[b->type], n, 1, 0);
    cg_note_vals(L, ctx, st, vals, 2);
  }
}

void cg_fill_replay(lua_State *L, const cg_rec *e, int sidx) {
  cg_stream *s = lua_touserdata(L, sidx);
  cg_buffer *b = lua_touserdata(L, sidx + 1);
  cg_ctx *ctx = b->h.ctx;
  cg_check_open(L, &s->h);
  cg_check_mem(L, ctx, &b->h, "fill");
  cg_check_captured(L, ctx, s->h.drv.stream, "fill");
  cg_pinobj(L, ctx, &s->h, sidx); /* pins allocate: handles are read after */
  cg_pinobj(L, ctx, &b->h, sidx + 1);
  CUdeviceptr p = b->h.drv.mem + e->off;
  CUstream st = s->h.drv.stream;
  unsigned v = e->value;
  size_t w = e->width, h = e->height, pitch = e->pitch;
  switch (e->elem) { /* the memset that made the node (fill's: strided */
  case 1:                                   /* only for 8-byte elements) */
    CU(L, ctx, cuMemsetD8Async, p, (unsigned char)v, w, st);
    break;
  case 2:
    CU(L, ctx, cuMemsetD16Async, p, (unsigned short)v, w, st);
    break;
  default:
    if (pitch) CU(L, ctx, cuMemsetD2D32Async, p, pitch, v, w, h, st);
    else CU(L, ctx, cuMemsetD32Async, p, v, w, st);
  }
  cg_note_fill(L, ctx, st, &b->h, e->off, v, e->elem, w, h, pitch);
}

void cg_copy_replay(lua_State *L, const cg_rec *e, int sidx) {
  cg_stream *s = lua_touserdata(L, sidx);
  cg_buffer *d = lua_touserdata(L, sidx + 1), *src = lua_touserdata(L, sidx + 2);
  cg_ctx *ctx = d->h.ctx;
  cg_check_open(L, &s->h);
  cg_check_mem(L, ctx, &d->h, "copy");
  cg_check_mem(L, ctx, &src->h, "copy");
  cg_check_captured(L, ctx, s->h.drv.stream, "copy");
  for (int i = 0; i < 3; i++) /* pins allocate: handles are read after */
    cg_pinobj(L, ctx, lua_touserdata(L, sidx + i), sidx + i);
  CU(L, ctx, cuMemcpyDtoDAsync, d->h.drv.mem + e->off,
     src->h.drv.mem + e->soff, e->bytes, s->h.drv.stream);
  cg_note_copy(L, ctx, s->h.drv.stream, &d->h, &src->h, e->bytes, e->off,
               e->soff);
}

/* b:fill(v [, stream]) */
static int buffer_fill(lua_State *L) {
  cg_buffer *b = check(L);
  uint64_t v;
  cg_tobits(L, 2, b->type, &v, NULL);
  cg_check_mem(L, b->h.ctx, &b->h, "fill");
  if (cg_recording(b->h.ctx)) {
    fill(L, b->h.ctx, b, &v, recorded_stream(L, b->h.ctx, 3, "fill"), 3);
    lua_settop(L, 1);
    return 1;
  }
  cg_pin(L, b->h.ctx, 1); /* pins allocate: handles are read after them */
  CUstream st = cg_work_begin(L, b->h.ctx, 3, "fill");
  fill(L, b->h.ctx, b, &v, st ? st : b->h.ctx->stream, 3);
  cg_work_finish(L, b->h.ctx, st);
  lua_settop(L, 1);
  return 1;
}

/* An offset field of a copy's options (0 when absent), in elements. */
static size_t optoffset(lua_State *L, const char *key) {
  lua_getfield(L, 3, key);
  lua_Integer v = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
  if (v < 0) luaL_error(L, "copy: %s %I is negative", key, (LUAI_UACINT)v);
  lua_pop(L, 1);
  return (size_t)v;
}

/* A copy between buffers of two devices (cuMemcpyPeerAsync): on the stream
   at sidx, of either device, or synchronously after all work of both.
   Inside a capture it becomes a copy node of the capture's graph, which
   g:rebind leaves alone (as host copies); the stream's device must have
   access to the other's memory, enabled before the capture. */
static int peer_copy(lua_State *L, cg_buffer *d, cg_buffer *s, int sidx,
                     size_t bytes, size_t doff, size_t soff) {
  cg_ctx *dc = d->h.ctx, *sc = s->h.ctx, *ctx = dc;
  if (!cg_drv.cuMemcpyPeerAsync)
    luaL_error(L, "copy between devices needs cuMemcpyPeerAsync, which the "
               "driver lacks");
  cg_stream *st = NULL;
  if (!lua_isnoneornil(L, sidx)) {
    st = cg_checkobj(L, sidx, CG_STREAM);
    if (st->h.ctx != dc && st->h.ctx != sc)
      luaL_error(L, "copy: a stream of device %d for a copy from device %d "
                 "to device %d; use a stream of either device",
                 st->h.ctx->ordinal, sc->ordinal, dc->ordinal);
    ctx = st->h.ctx;
  } else if (ctx->capture) {
    luaL_error(L, "copy without a stream inside a graph capture: pass the "
               "capture stream");
  }
  cg_pin(L, ctx, 1); /* pins allocate: handles are read after them */
  cg_pin(L, ctx, 2);
  if (st) cg_pin(L, ctx, sidx);
  if (ctx->capture && !cg_capturing_on(L, ctx, st->h.drv.stream))
    luaL_error(L, "copy inside a graph capture on a stream that is not part "
               "of it; make the stream wait on the capture stream first");
  cg_check_open(L, &d->h);
  cg_check_open(L, &s->h);
  if (!st) { /* after all work of both devices */
    cg_current(L, sc);
    cg_sync(L, sc);
    cg_current(L, dc);
    cg_sync(L, dc);
  }
  cg_current(L, ctx);
  if (bytes && ctx->capture) { /* cuMemcpyPeerAsync cannot be captured: a
    copy by unified addressing, which the stream's device runs */
    cg_check_reach(L, ctx, ctx == dc ? sc : dc, "copy");
    CU(L, ctx, cuMemcpyDtoDAsync, d->h.drv.mem + doff, s->h.drv.mem + soff,
       bytes, st->h.drv.stream);
    cg_note_hostcopy(L, ctx, st->h.drv.stream, &d->h, &s->h);
  } else if (bytes) {
    CUstream on = st ? st->h.drv.stream : dc->stream;
    int t = cg_trace_begin(L, ctx, on, "copy", "peer copy");
    CU(L, ctx, cuMemcpyPeerAsync, d->h.drv.mem + doff, dc->cu, s->h.drv.mem + soff,
       sc->cu, bytes, on);
    cg_trace_end(L, ctx, t);
  }
  if (!st) cg_wait_stream(L, ctx, dc->stream, ctx->root->timeout);
  lua_settop(L, 1);
  return 1;
}

/* dst:copy(src [, {dst_offset=, src_offset=, count=}] [, stream]): bytes
   from device memory to device memory. Without options, the whole of src
   into dst, of equal byte size (a view may reinterpret either); with them,
   count elements of src (absent: the rest of src) from element src_offset
   to element dst_offset of dst, in range of both. */
static int buffer_copy(lua_State *L) {
  cg_buffer *d = check(L);
  cg_buffer *s = cg_checkobj(L, 2, CG_BUFFER);
  cg_check_mem(L, d->h.ctx, &d->h, "copy");
  cg_check_mem(L, s->h.ctx, &s->h, "copy");
  size_t des = cg_type_size[d->type], ses = cg_type_size[s->type];
  size_t doff = 0, soff = 0, bytes = s->n * ses;
  int sidx = 3;
  if (lua_istable(L, 3)) {
    static const char *const keys[] = { "dst_offset", "src_offset", "count",
                                        NULL };
    cg_check_options(L, 3, "copy", keys);
    sidx = 4;
    doff = optoffset(L, "dst_offset");
    soff = optoffset(L, "src_offset");
    if (soff > s->n)
      luaL_error(L, "copy: src_offset %I passes the end of the source "
                 "(%s[%I])", (LUAI_UACINT)soff, cg_type_names[s->type],
                 (LUAI_UACINT)s->n);
    lua_getfield(L, 3, "count");
    size_t count = lua_isnil(L, -1) ? s->n - soff
                 : (size_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    if (count > s->n - soff)
      luaL_error(L, "copy: %I elements from src_offset %I pass the end of "
                 "the source (%s[%I])", (LUAI_UACINT)count, (LUAI_UACINT)soff,
                 cg_type_names[s->type], (LUAI_UACINT)s->n);
    bytes = count * ses;
    if (doff > d->n || bytes > (d->n - doff) * des)
      luaL_error(L, "copy: %I bytes at dst_offset %I pass the end of the "
                 "destination (%s[%I])", (LUAI_UACINT)bytes,
                 (LUAI_UACINT)doff, cg_type_names[d->type],
                 (LUAI_UACINT)d->n);
  } else if (bytes != d->n * des) {
    luaL_error(L, "copy: source is %s[%I], destination %s[%I]; their byte "
               "sizes must match (or give offsets and a count)",
               cg_type_names[s->type], (LUAI_UACINT)s->n,
               cg_type_names[d->type], (LUAI_UACINT)d->n);
  }
  if (d->h.ctx != s->h.ctx) return peer_copy(L, d, s, sidx, bytes,
                                             doff * des, soff * ses);
  if (cg_recording(d->h.ctx)) { /* noted, not sent */
    CUstream st = recorded_stream(L, d->h.ctx, sidx, "copy");
    int vals[3] = { sidx, 1, 2 };
    if (bytes) {
      cg_note_copy(L, d->h.ctx, st, &d->h, &s->h, bytes, doff * des,
                   soff * ses);
      cg_note_vals(L, d->h.ctx, st, vals, 3);
    }
    lua_settop(L, 1);
    return 1;
  }
  cg_pin(L, d->h.ctx, 1); /* pins allocate: handles are read after them */
  cg_pin(L, d->h.ctx, 2);
  CUstream st = cg_work_begin(L, d->h.ctx, sidx, "copy");
  cg_check_open(L, &s->h);
  if (bytes) {
    int t = cg_trace_begin(L, d->h.ctx, st ? st : d->h.ctx->stream, "copy",
                           "copy");
    CU(L, d->h.ctx, cuMemcpyDtoDAsync, d->h.drv.mem + doff * des,
       s->h.drv.mem + soff * ses, bytes, st ? st : d->h.ctx->stream);
    cg_trace_end(L, d->h.ctx, t);
    if (d->h.ctx->capture)
      cg_note_copy(L, d->h.ctx, st, &d->h, &s->h, bytes, doff * des,
                   soff * ses);
  }
  cg_work_finish(L, d->h.ctx, st);
  lua_settop(L, 1);
  return 1;
}

static int buffer_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check(L)->n);
  return 1;
}

static int buffer_type(lua_State *L) {
  lua_pushstring(L, cg_type_names[((cg_buffer *)cg_checkself(L, CG_BUFFER))->type]);
  return 1;
}

static int buffer_bytes(lua_State *L) {
  cg_buffer *b = cg_checkself(L, CG_BUFFER);
  lua_pushinteger(L, (lua_Integer)(b->n * cg_type_size[b->type]));
  return 1;
}

/* b:address(): the device address, for foreign code */
static int buffer_address(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)
                  ((cg_buffer *)cg_checkself(L, CG_BUFFER))->h.drv.mem);
  return 1;
}

static int buffer_tostring(lua_State *L) {
  cg_buffer *b = cg_toobj(L, 1, CG_BUFFER);
  if (b->pitch)
    return cg_tostring(L, &b->h, " %s[%I] (%p, pitched %Ix%Ix%I, rows of %I "
                       "bytes)", cg_type_names[b->type], (LUAI_UACINT)b->n,
                       (void *)(uintptr_t)b->h.drv.mem,
                       (LUAI_UACINT)b->width, (LUAI_UACINT)b->height,
                       (LUAI_UACINT)b->depth, (LUAI_UACINT)b->pitch);
  return cg_tostring(L, &b->h, " %s[%I] (%p%s)", cg_type_names[b->type],
                     (LUAI_UACINT)b->n, (void *)(uintptr_t)b->h.drv.mem,
                     b->managed && !b->h.parent ? ", managed"
                     : !b->h.parent ? (b->h.owned || b->h.graphmem ? ""
                                                       : ", borrowed")
                     : b->h.parent->kind == CG_MODULE ? ", module global"
                     : b->h.parent->kind == CG_DLTENSOR ? ", DLPack"
                     : b->h.parent->kind == CG_EXTMEM ? ", external"
                     : ", view");
}

void buffer_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"upload", buffer_upload}, {"download", buffer_download},
    {"fill", buffer_fill}, {"copy", buffer_copy},
    {"free", buffer_free_method},
    {"close", buffer_free}, {"type", buffer_type}, {"bytes", buffer_bytes},
    {"address", buffer_address}, {"view", buffer_view},
    {"parent", buffer_parent}, {"download_into", buffer_download_into},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", buffer_gc}, {"__close", buffer_free}, {"__len", buffer_len},
    {"__tostring", buffer_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_BUFFER, methods, meta, buffer_release);
  lua_pushcfunction(L, buffer_new);
  lua_setfield(L, -2, "buffer");
}
