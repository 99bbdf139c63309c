/* The capture in progress and its pins: every object a capture uses is
   put in a set (the graph's user value once it exists), and counts the
   live graphs that use it, so the collector never frees what a graph reads
   and an explicit free is refused. An object's parents are pinned with it
   (a view's buffer, a kernel's module). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture/capture.h"

static const char capstate_key = 'c';

static void capstate_close(lua_State *L, cg_ctx *root) {
  cg_capstate *cs = root->capstate;
  if (!cs) return;
  cg_recs_free(cs->spare);
  cs->spare = NULL;
}

cg_capstate *cg_capstate_of(lua_State *L, cg_ctx *ctx) {
  cg_ctx *root = ctx->root;
  if (root->capstate) return root->capstate;
  /* plain userdata in the registry: freed after every finalizer */
  cg_capstate *cs = lua_newuserdatauv(L, sizeof *cs, 0);
  memset(cs, 0, sizeof *cs);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &capstate_key);
  lua_pushboolean(L, 0);
  cs->pins_slot = luaL_ref(L, LUA_REGISTRYINDEX);
  root->capstate = cs;
  cg_at_close(root, capstate_close);
  return cs;
}

void capture_open(lua_State *L) { cg_capstate_of(L, cg_sentinel(L)); }

/* Work that reaches a capture's checks in a recording is work the
   recording does not know how to note: refused, never sent. */
static void unrecorded(lua_State *L, const char *what) {
  luaL_error(L, "%s cannot be recorded in a graphed function "
             "(cuda.graphed): make the call outside the function, or run "
             "it eagerly (opts.eager)", what);
}

int cg_capturing_on(lua_State *L, cg_ctx *ctx, CUstream s) {
  if (cg_recording(ctx)) unrecorded(L, "this work");
  if (ctx->capture && s == ctx->capture->origin) return 1;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (ctx->capture && ctx->capture->depth) { /* a body: its own capture */
    cuuint64_t seq = 0;
    CU(L, ctx, cuStreamGetCaptureInfo, s, &st, &seq, NULL, NULL, NULL, NULL);
    return st == CU_STREAM_CAPTURE_STATUS_ACTIVE && seq == ctx->capture->seq;
  }
  CU(L, ctx, cuStreamIsCapturing, s, &st);
  return st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

void cg_check_captured(lua_State *L, cg_ctx *ctx, CUstream s,
                       const char *what) {
  if (cg_recording(ctx)) unrecorded(L, what);
  if (!cg_capturing_on(L, ctx, s))
    luaL_error(L, "%s: the stream is not part of the capture; make it wait "
               "on the capture stream first", what);
}

void cg_pin(lua_State *L, cg_ctx *ctx, int idx) {
  cg_obj *o;
  if (ctx->capture && (o = cg_toany(L, ctx, idx))) cg_pinobj(L, ctx, o, idx);
}

/* o is the object at idx. It counts as used before the set grows, so a
   finalizer that the allocation runs cannot free it; one freed earlier in
   the same call is refused here. */
void cg_unuse(lua_State *L, cg_obj *o, unsigned id) {
  if (o->uses) o->uses--;
  if (!o->uses || o->graph == id) o->graph = 0;
  if (!o->uses) cg_unpinned(L, o);
}

/* Whether the object at oidx is in the set at pidx: known without a
   lookup when no graph's set has it, or only graph id's. */
static int in_set(lua_State *L, int pidx, int oidx, unsigned id) {
  const cg_obj *o = lua_touserdata(L, oidx);
  if (!o->uses) return 0;
  if (o->uses == 1 && o->graph == id) return 1;
  lua_pushvalue(L, oidx);
  int there = lua_rawget(L, pidx) != LUA_TNIL;
  lua_pop(L, 1);
  return there;
}

void cg_pin_in(lua_State *L, int pidx, int oidx, unsigned id) {
  oidx = lua_absindex(L, oidx);
  if (in_set(L, pidx, oidx, id)) return;
  cg_use(lua_touserdata(L, oidx), id); /* before the set grows */
  lua_pushvalue(L, oidx);
  lua_pushboolean(L, 1);
  lua_rawset(L, pidx);
}

void cg_unpin_in(lua_State *L, int pidx, int oidx, unsigned id) {
  oidx = lua_absindex(L, oidx);
  if (!in_set(L, pidx, oidx, id)) return;
  lua_pushvalue(L, oidx);
  lua_pushnil(L);
  lua_rawset(L, pidx);
  cg_unuse(L, lua_touserdata(L, oidx), id);
}

void cg_pin_new(lua_State *L, cg_ctx *ctx, cg_obj *o, int idx) {
  o->pinned = ctx->capture->serial;
  cg_use(o, ctx->capture->id);
  ctx->capture->top->scalars += o->kind == CG_SCALAR;
  idx = lua_absindex(L, idx);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->capture->pins);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  cg_check_open(L, o);
  cg_obj *up = o->parent; /* its user value 1 */
  if (up && up->pinned != ctx->capture->serial) {
    lua_getiuservalue(L, idx, 1);
    cg_pin_new(L, ctx, up, -1);
    lua_pop(L, 1);
  }
}

/* An object keeps the id of a graph that holds it, or 0 when that is not
   known. Sets are only reached through the debug library otherwise; keys
   that are not objects of ours are passed over. */
void cg_unpin_set(lua_State *L, cg_ctx *ctx, int idx, unsigned id,
                  int empty) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (empty) { /* an existing key: allowed while traversing */
      lua_pushvalue(L, -1);
      lua_pushnil(L);
      lua_rawset(L, idx);
    }
    cg_obj *o = cg_toany(L, ctx, -1);
    if (o) cg_unuse(L, o, id);
  }
}

void cg_stamp_set(lua_State *L, cg_ctx *ctx, int idx, unsigned id) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    cg_obj *o = cg_toany(L, ctx, -2);
    if (o) o->graph = id;
    lua_pop(L, 1);
  }
}

int cg_stamp_newslot(cg_stamps *st) {
  if (st->nslots == CG_STAMP_SLOTS) return CG_STAMP_SLOTS;
  st->streams[st->nslots] = NULL;
  return ++st->nslots;
}

int cg_stamp_slot(cg_ctx *ctx, CUstream s) {
  cg_capture *c = ctx->capture;
  cg_stamps *st = c->top->stamps;
  if (c->depth && s == c->origin) return c->stampslot;
  for (int i = 0; i < st->nslots; i++)
    if (st->streams[i] == s) return i + 1;
  int slot = cg_stamp_newslot(st);
  st->streams[slot - 1] = s;
  return slot;
}

CUresult cg_stamp_launch(cg_ctx *ctx, CUstream s, int slot, int rec) {
  cg_stamps *st = ctx->capture->top->stamps;
  if (rec >= st->ncells) return CUDA_SUCCESS; /* more records than cells */
  void *args[] = { &st->clocks, &st->sums, &st->runs, &st->last, &slot,
                   &slot, &rec };
  return cg_drv.cuLaunchKernel(st->f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

void cg_stamp_after(lua_State *L, cg_ctx *ctx, CUstream s) {
  if (!ctx->capture || !ctx->capture->top->stamps) return;
  size_t n = cg_recs_count(ctx->capture->top->recs);
  if (n)
    cg_check(L, ctx, "cuLaunchKernel",
             cg_stamp_launch(ctx, s, cg_stamp_slot(ctx, s), (int)n - 1));
}

void cg_stamp_start(lua_State *L, cg_ctx *ctx, CUstream s) {
  if (ctx->capture && ctx->capture->top->stamps && cg_capturing_on(L, ctx, s))
    cg_check(L, ctx, "cuLaunchKernel",
             cg_stamp_launch(ctx, s, cg_stamp_slot(ctx, s), -1));
}

CUgraphNode cg_capture_node(lua_State *L, cg_ctx *ctx, CUstream s,
                            CUgraphNodeParams *p) {
  if (!cg_drv.cuGraphAddNode || !cg_drv.cuStreamGetCaptureInfo ||
      !cg_drv.cuStreamUpdateCaptureDependencies)
    luaL_error(L, "child graph and conditional nodes need CUDA 12.4 or later "
               "(the driver lacks cuGraphAddNode_v2)");
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph g = NULL;
  const CUgraphNode *deps = NULL; /* the driver's: valid until the next call */
  size_t n = 0;
  CUgraphNode node = NULL;
  CU(L, ctx, cuStreamGetCaptureInfo, s, &st, NULL, &g, &deps, NULL, &n);
  CU(L, ctx, cuGraphAddNode, &node, g, deps, NULL, n, p);
  CU(L, ctx, cuStreamUpdateCaptureDependencies, s, &node, NULL, 1,
     CU_STREAM_SET_CAPTURE_DEPENDENCIES);
  cg_note_node(L, ctx, node, p);
  if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL ||
      p->type == CU_GRAPH_NODE_TYPE_GRAPH)
    cg_stamp_after(L, ctx, s);
  return node;
}

int cg_traceback(lua_State *L) {
  if (lua_type(L, 1) == LUA_TSTRING)
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
  else
    lua_settop(L, 1);
  return 1;
}

void cg_capture_wait(lua_State *L, cg_ctx *ctx, CUstream waiter,
                     CUstream waited) {
  cg_capture *cap = ctx->capture ? ctx->capture->top : NULL;
  if (!cap || ctx->capture->depth) return;
  int known = waiter == cap->origin;
  for (int i = 0; i < cap->nforks; i++) {
    if (cap->forks[i].s == waited) cap->forks[i].back = 1;
    if (cap->forks[i].s == waiter) known = 1;
  }
  if (known || cap->nforks == CG_MAXFORKS) return;
  struct cg_fork *f = &cap->forks[cap->nforks++];
  f->s = waiter;
  f->back = 0;
  cg_lua_line(L, f->where, sizeof f->where);
}

void cg_capture_pushforks(lua_State *L, const cg_capture *cap) {
  luaL_Buffer b;
  int n = 0;
  luaL_buffinit(L, &b);
  for (int i = 0; i < cap->nforks; i++) {
    if (cap->forks[i].back) continue;
    luaL_addstring(&b, n++ ? ", " : "");
    luaL_addstring(&b, cap->forks[i].where[0] ? cap->forks[i].where : "?");
  }
  luaL_pushresult(&b);
  if (!n) {
    lua_pop(L, 1);
    lua_pushnil(L);
  } else {
    lua_pushfstring(L, "the stream%s that joined at %s", n > 1 ? "s" : "",
                    lua_tostring(L, -1));
    lua_remove(L, -2);
  }
}
