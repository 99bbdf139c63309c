/* cugraph.Comm: an NCCL communicator (h.drv.comm; NCCL itself is reached
   through base/cg_nccl.h). A collective runs on a stream of the communicator's
   device, eager or recorded by a capture of that stream (NCCL 2.9 and
   later); the graph then pins the communicator. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include "types/types.h"
#include "base/nccl.h"

void cg_need_nccl(lua_State *L) {
  const char *why = cg_nccl_load();
  if (why) luaL_error(L, "%s", why);
}

/* Raises an error object naming the NCCL call; NCCL's last error message
   (what was wrong, in its words) is added when it has one. */
static void check(lua_State *L, ncclComm_t c, const char *api,
                  ncclResult_t r) {
  if (r == ncclSuccess) return;
  char buf[32];
  const char *name = cg_nccl_result_name(r);
  if (!name) {
    snprintf(buf, sizeof buf, "ncclResult %d", r);
    name = buf;
  }
  const char *msg = cg_nccl.ncclGetErrorString(r);
  const char *last = cg_nccl.ncclGetLastError ? cg_nccl.ncclGetLastError(c) : NULL;
  if (last && *last)
    msg = lua_pushfstring(L, "%s (%s)", msg ? msg : "error", last);
  cg_pusherror(L, api, r, name, msg ? msg : "error");
  lua_error(L);
}

#define NCCL(L, c, fn, ...) check((L), (c), #fn, cg_nccl.fn(__VA_ARGS__))

typedef struct cg_comm {
  cg_obj h;             /* h.drv.comm: the ncclComm_t */
  int rank, size;
} cg_comm;

#define COMM(c) ((ncclComm_t)(c)->h.drv.comm)

/* Argument 1 of a method: the metatable compare of cg_checkself. */
static cg_comm *checkcomm(lua_State *L) { return cg_checkself(L, CG_COMM); }

/* The open object of kind at idx, its metatable compared by identity (the
   hot path: a collective of 8 bytes costs microseconds); anything else
   goes through cg_checkobj, which raises the usual error. */
static void *fastobj(lua_State *L, int idx, cg_kind kind, cg_ctx *ctx) {
  cg_obj *o = lua_touserdata(L, idx);
  if (o && lua_getmetatable(L, idx)) {
    int same = lua_topointer(L, -1) == ctx->mt[kind];
    lua_pop(L, 1);
    if (same && o->open) {
      if (kind == CG_STREAM) ctx->root->stream_clock++; /* cg_testobj's */
      return o;
    }
  }
  return cg_checkobj(L, idx, kind);
}

/* -- creation ------------------------------------------------------------- */

/* cuda.nccl_version() -> NCCL's version code (22809 for 2.28.9) */
static int nccl_version(lua_State *L) {
  cg_need_nccl(L);
  int v = 0;
  NCCL(L, NULL, ncclGetVersion, &v);
  lua_pushinteger(L, v);
  return 1;
}

/* cuda.nccl_id() -> a new unique id (a string of 128 bytes): made by one
   rank, given to all before cuda.comm */
int cg_nccl_id(lua_State *L) {
  cg_need_nccl(L);
  ncclUniqueId id;
  NCCL(L, NULL, ncclGetUniqueId, &id);
  lua_pushlstring(L, id.internal, sizeof id.internal);
  return 1;
}

static ncclUniqueId checkid(lua_State *L, int idx) {
  size_t n;
  const char *s = luaL_checklstring(L, idx, &n);
  ncclUniqueId id;
  if (n != sizeof id.internal)
    luaL_argerror(L, idx, lua_pushfstring(L, "an NCCL id is %d bytes, got %d "
                  "(make it with cuda.nccl_id())", (int)sizeof id.internal,
                  (int)n));
  memcpy(id.internal, s, n);
  return id;
}

/* cuda.comm(id, nranks, rank) -> Comm of rank `rank` among nranks, on the
   current device (one GPU per process: every rank calls it with the same
   id, at about the same time) */
static int comm_new(lua_State *L) {
  ncclUniqueId id = checkid(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2), r = luaL_checkinteger(L, 3);
  luaL_argcheck(L, n >= 1 && n <= 1 << 20, 2, "nranks out of range");
  luaL_argcheck(L, r >= 0 && r < n, 3, "rank must be in 0 .. nranks-1");
  cg_need_nccl(L);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot make a communicator",
           "make communicators before capture");
  cg_comm *c = cg_newobj(L, ctx, sizeof *c, CG_COMM);
  ncclComm_t nc = NULL;
  NCCL(L, NULL, ncclCommInitRank, &nc, (int)n, id, (int)r);
  c->h.drv.comm = nc;
  c->rank = (int)r;
  c->size = (int)n;
  c->h.open = 1;
  return 1;
}

/* cuda.comms({ordinal, ...}) -> {Comm, ...}: one communicator per listed
   device, ranks in list order, all in this process (ncclCommInitAll) */
static int comms_new(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  luaL_argcheck(L, n >= 1 && n <= 1024, 1, "a list of 1 to 1024 devices");
  cg_need_nccl(L);
  int *devs = lua_newuserdatauv(L, (size_t)n * sizeof *devs, 0);
  ncclComm_t *h = lua_newuserdatauv(L, (size_t)n * sizeof *h, 0);
  int top = lua_gettop(L);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    lua_Integer d = -1;
    if (!cg_tointeger(L, -1, &d) || d < 0 || d > 1024)
      luaL_error(L, "cuda.comms: entry %d is not a device ordinal", (int)i + 1);
    lua_pop(L, 1);
    for (lua_Integer j = 0; j < i; j++)
      if (devs[j] == d)
        luaL_error(L, "cuda.comms: device %d is listed twice", (int)d);
    devs[i] = (int)d;
    cg_ctx *ctx = cg_device(L, (int)d);
    cg_check_outside(L, ctx, "cannot make a communicator",
             "make communicators before capture");
    cg_newobj(L, ctx, sizeof(cg_comm), CG_COMM);
    lua_rawseti(L, top + 1, i + 1);
  }
  cg_context(L); /* the current device's context current again */
  NCCL(L, NULL, ncclCommInitAll, h, (int)n, devs);
  for (lua_Integer i = 0; i < n; i++) {
    lua_rawgeti(L, top + 1, i + 1);
    cg_comm *c = lua_touserdata(L, -1);
    c->h.drv.comm = h[i];
    c->rank = (int)i;
    c->size = (int)n;
    c->h.open = 1;
    lua_pop(L, 1);
  }
  return 1;
}

static int comm_free(lua_State *L) { return cg_close(L, CG_COMM, 0); }
static int comm_gc(lua_State *L) { return cg_close(L, CG_COMM, 1); }

/* -- collectives ---------------------------------------------------------- */

static int nccl_type(lua_State *L, cg_type t) {
  static const signed char map[CG_NTYPES] = {
    ncclFloat32, ncclFloat64, ncclInt8, ncclUint8, -1, -1, ncclInt32,
    ncclUint32, ncclInt64, ncclUint64, ncclFloat16, ncclBfloat16
  };
  if (map[t] < 0)
    luaL_error(L, "NCCL has no %s type: use a buffer of i32, or a view of "
               "another type", cg_type_names[t]);
  return map[t];
}

/* A reduction at idx: "sum" (absent), "prod", "max", "min" or "avg". */
static int redop(lua_State *L, int idx) {
  static const char *const ops[] = {"sum", "prod", "max", "min", "avg", NULL};
  return cg_checkoption(L, idx, "sum", ops);
}

/* The buffer at idx, on the communicator's device. */
static cg_buffer *buf(lua_State *L, cg_comm *c, int idx) {
  cg_buffer *b = fastobj(L, idx, CG_BUFFER, c->h.ctx);
  if (b->h.ctx != c->h.ctx) cg_error_devices(L, c->h.ctx, b->h.ctx, "cugraph.Comm");
  const char *why = cg_mem_why(L, c->h.ctx, &b->h);
  if (why) luaL_argerror(L, idx, why);
  return b;
}

/* Where a call goes: its stream (at sidx, or the device's own), pinned in
   a capture. Without a stream the call follows all device work, and is
   waited for by done() (by the group's end inside cuda.nccl_group). */
static CUstream begin(lua_State *L, cg_comm *c, int sidx, const char *what) {
  cg_ctx *ctx = c->h.ctx;
  for (int i = 1; i <= sidx; i++) cg_pin(L, ctx, i);
  if (lua_isnoneornil(L, sidx)) {
    if (ctx->capture)
      luaL_error(L, "comm:%s() without a stream inside a graph capture: pass "
                 "the capture stream", what);
    cg_sync(L, ctx);
    return NULL;
  }
  cg_stream *so = fastobj(L, sidx, CG_STREAM, ctx);
  if (so->h.ctx != ctx) cg_error_devices(L, ctx, so->h.ctx, "stream argument");
  CUstream s = so->h.drv.stream;
  if (cg_recording(ctx)) { /* made again when the graph is built: the */
    cg_record_call(L, ctx, s, sidx); /* the caller returns at once */
    return NULL;
  }
  if (ctx->capture) {
    cg_check_captured(L, ctx, s, lua_pushfstring(L, "comm:%s()", what));
    cg_recs_mark(L, ctx, s); /* NCCL may fork and join */
    cg_recs_libcall(L, ctx, s, lua_tostring(L, -1));
  }
  for (int i = 1; i < sidx; i++) /* a finalizer may have run meanwhile */
    if (lua_type(L, i) == LUA_TUSERDATA) cg_check_open(L, lua_touserdata(L, i));
  cg_current(L, ctx);
  return s;
}

static void done(lua_State *L, cg_comm *c, CUstream s) {
  if (!s && !c->h.ctx->root->nccl_group)
    cg_wait_stream(L, c->h.ctx, c->h.ctx->stream, c->h.ctx->root->timeout);
}

#define STREAM(c, s) ((s) ? (s) : (c)->h.ctx->stream)
#define DPTR(b) ((void *)(uintptr_t)(b)->h.drv.mem) /* a buffer's device address */

/* The rank at idx, a root of the communicator's ranks. */
static int checkroot(lua_State *L, cg_comm *c, int idx) {
  lua_Integer root = luaL_checkinteger(L, idx);
  luaL_argcheck(L, root >= 0 && root < c->size, idx, "root is not a rank");
  return (int)root;
}

/* Send a and receive b: of one type, their sizes as rule says (ok). */
static void same(lua_State *L, cg_buffer *a, cg_buffer *b, int ok,
                 const char *what, const char *rule) {
  if (a->type != b->type)
    luaL_error(L, "comm:%s(): send is %s, recv is %s; they must match", what,
               cg_type_names[a->type], cg_type_names[b->type]);
  if (!ok)
    luaL_error(L, "comm:%s(): send has %I elements, recv %I; %s", what,
               (LUAI_UACINT)a->n, (LUAI_UACINT)b->n, rule);
}

/* Optional reduction at idx: shifts the stream index when present. */
static int optop(lua_State *L, int idx, int *sidx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    *sidx = idx + 1;
    return redop(L, idx);
  }
  *sidx = idx;
  return 0;
}

/* c:all_reduce(send, recv [, op] [, stream]): recv = op over the ranks of
   send; send and recv may be the same buffer */
static int comm_all_reduce(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int sidx, op = optop(L, 4, &sidx);
  same(L, s, r, s->n == r->n, "all_reduce", "they must be equal");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, sidx, "all_reduce");
  if (cg_recording(c->h.ctx)) return 0;
  NCCL(L, COMM(c), ncclAllReduce, DPTR(s), DPTR(r), s->n, t, op, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:reduce(send, recv, root [, op] [, stream]): recv of rank root = op over
   the ranks of send */
static int comm_reduce(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int root = checkroot(L, c, 4);
  int sidx, op = optop(L, 5, &sidx);
  same(L, s, r, s->n == r->n, "reduce", "they must be equal");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, sidx, "reduce");
  if (cg_recording(c->h.ctx)) return 0;
  NCCL(L, COMM(c), ncclReduce, DPTR(s), DPTR(r), s->n, t, op, root, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:broadcast(send, recv, root [, stream]): recv = send of rank root */
static int comm_broadcast(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int root = checkroot(L, c, 4);
  same(L, s, r, s->n == r->n, "broadcast", "they must be equal");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, 5, "broadcast");
  if (cg_recording(c->h.ctx)) return 0;
  NCCL(L, COMM(c), ncclBroadcast, DPTR(s), DPTR(r), s->n, t, root, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:all_gather(send, recv [, stream]): recv holds every rank's send, in
   rank order (#recv = #send * size) */
static int comm_all_gather(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  same(L, s, r, r->n % (size_t)c->size == 0 && r->n / (size_t)c->size == s->n,
       "all_gather", "recv must have size() times send's");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, 4, "all_gather");
  if (cg_recording(c->h.ctx)) return 0;
  NCCL(L, COMM(c), ncclAllGather, DPTR(s), DPTR(r), s->n, t, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:reduce_scatter(send, recv [, op] [, stream]): recv of rank i = op over
   the ranks of send's i-th block of #recv elements */
static int comm_reduce_scatter(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int sidx, op = optop(L, 4, &sidx);
  same(L, s, r, s->n % (size_t)c->size == 0 && s->n / (size_t)c->size == r->n,
       "reduce_scatter", "send must have size() times recv's");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, sidx, "reduce_scatter");
  if (cg_recording(c->h.ctx)) return 0;
  NCCL(L, COMM(c), ncclReduceScatter, DPTR(s), DPTR(r), r->n, t, op, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

static int point(lua_State *L, int send) {
  cg_comm *c = checkcomm(L);
  cg_buffer *b = buf(L, c, 2);
  lua_Integer peer = luaL_checkinteger(L, 3);
  luaL_argcheck(L, peer >= 0 && peer < c->size && peer != c->rank, 3,
                "peer must be another rank");
  int t = nccl_type(L, b->type);
  CUstream st = begin(L, c, 4, send ? "send" : "recv");
  if (cg_recording(c->h.ctx)) return 0;
  if (send)
    NCCL(L, COMM(c), ncclSend, DPTR(b), b->n, t, (int)peer,
         COMM(c), STREAM(c, st));
  else
    NCCL(L, COMM(c), ncclRecv, DPTR(b), b->n, t, (int)peer,
         COMM(c), STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:send(buf, peer [, stream]) and c:recv(buf, peer [, stream]): a pair
   of them, of the same size, on two ranks; both inside cuda.nccl_group
   when one thread drives both ranks, or when a rank sends and receives */
static int comm_send(lua_State *L) { return point(L, 1); }
static int comm_recv(lua_State *L) { return point(L, 0); }

/* cuda.nccl_group(fn, ...) -> fn(...): NCCL calls made by fn are one group
   (ncclGroupStart/End): several ranks driven by one thread, or sends and
   receives that pair up. The group ends however fn ends. */
static int nccl_group(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  cg_need_nccl(L);
  cg_ctx *root = cg_sentinel(L);
  if (cg_recording(root))
    luaL_error(L, "cuda.nccl_group cannot be recorded in a graphed function "
               "(cuda.graphed): make the group outside the function, or run "
               "it eagerly (opts.eager)");
  check(L, NULL, "ncclGroupStart", cg_nccl.ncclGroupStart());
  root->nccl_group++;
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  root->nccl_group--;
  ncclResult_t r = cg_nccl.ncclGroupEnd();
  if (status != LUA_OK) return lua_error(L);
  check(L, NULL, "ncclGroupEnd", r);
  if (!root->nccl_group) /* calls without a stream: waited for here */
    for (cg_ctx *d = root; d; d = d->next)
      if (cg_alive(d) && !d->capture) {
        cg_current(L, d);
        cg_wait_stream(L, d, d->stream, d->root->timeout);
      }
  cg_context(L);
  return lua_gettop(L);
}

/* -- the rest of the object ------------------------------------------------ */

static int comm_rank(lua_State *L) {
  lua_pushinteger(L, checkcomm(L)->rank);
  return 1;
}

static int comm_size(lua_State *L) {
  lua_pushinteger(L, checkcomm(L)->size);
  return 1;
}

static int comm_tostring(lua_State *L) {
  cg_comm *c = cg_toobj(L, 1, CG_COMM);
  return cg_tostring(L, &c->h, " (rank %d of %d, device %d)", c->rank,
                     c->size, c->h.ctx->ordinal);
}

void comm_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"all_reduce", comm_all_reduce}, {"reduce", comm_reduce},
    {"broadcast", comm_broadcast}, {"all_gather", comm_all_gather},
    {"reduce_scatter", comm_reduce_scatter}, {"send", comm_send},
    {"recv", comm_recv}, {"rank", comm_rank}, {"size", comm_size},
    {"free", comm_free}, {"close", comm_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", comm_gc}, {"__close", comm_free},
    {"__tostring", comm_tostring}, {NULL, NULL}
  };
  static const luaL_Reg funcs[] = {
    {"nccl_version", nccl_version}, {"nccl_id", cg_nccl_id},
    {"comm", comm_new}, {"comms", comms_new}, {"nccl_group", nccl_group},
    {NULL, NULL}
  };
  cg_newtype(L, CG_COMM, methods, meta, NULL);
  luaL_setfuncs(L, funcs, 0);
}
