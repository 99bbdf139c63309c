/* Kernels' launch attributes (k:config: cooperative launches, thread
   block clusters, priority, programmatic launches), launched through
   cuLaunchKernelEx, eagerly and under capture; and occupancy
   (k:occupancy, k:block_size). A kernel without attributes launches
   through cuLaunchKernel (kernel.c), the hot path.

   A programmatic edge lets a kernel start before the kernel before it
   ends. It is made only between two kernels whose PTX proves it safe
   (kernel/pdl.c): the consumer (asking with k:config{programmatic =
   true}) waits before touching global memory, the producer triggers
   after its last global write. Eagerly the producer is the kernel that
   k:launch sent last to the stream, while nothing else has used it (the
   stream's last kernel, types.h); in a capture it is the single kernel
   node the stream's next work depends on, found among the capture's
   records by its function. Otherwise the launch is made as any other. */
#include <stdio.h>
#include <string.h>
#include "kernel/kernel.h"

static int attr(lua_State *L, cg_ctx *ctx, CUdevice_attribute a) {
  int v = 0;
  CU(L, ctx, cuDeviceGetAttribute, &v, a, ctx->dev);
  return v;
}

static void check_module(lua_State *L, cg_kernel *k) {
  if (!k->h.parent->open)
    luaL_error(L, "attempt to use a kernel of a freed cugraph.Module");
}

static void need(lua_State *L, cg_kernel *k, int have, const char *what) {
  if (!have)
    luaL_error(L, "%s: this CUDA driver has no %s", k->name, what);
}

/* opts.cluster: an integer or {x [, y [, z]]}, each at least 1. */
static void cluster_dims(lua_State *L, cg_kernel *k, int idx, unsigned c[3]) {
  c[0] = c[1] = c[2] = 1;
  lua_Integer v;
  if (cg_tointeger(L, idx, &v)) {
    if (v < 1 || v > 64) goto bad;
    c[0] = (unsigned)v;
    return;
  }
  int n = lua_istable(L, idx) ? cg_xyz_size(L, idx) : 0;
  if (!n) goto bad;
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    int ok = cg_tointeger(L, -1, &v);
    lua_pop(L, 1);
    if (!ok || v < 1 || v > 64) goto bad;
    c[i] = (unsigned)v;
  }
  return;
bad:
  luaL_error(L, "%s: opts.cluster must be an integer or {x, y, z} of "
             "integers from 1 to 64", k->name);
}

void cg_pdl_none(ptx_pdl *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->consumer_why, sizeof p->consumer_why, "no PTX to check (a "
           "cubin or fatbin module loaded without its PTX)");
  memcpy(p->producer_why, p->consumer_why, sizeof p->consumer_why);
}

/* k:config(opts): the attributes of later launches, each checked against
   the device here; {} takes them all away. */
int cg_kernel_config(lua_State *L) {
  static const char *const keys[] = { "cooperative", "cluster", "priority",
                                      "programmatic", NULL };
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  luaL_checktype(L, 2, LUA_TTABLE);
  cg_check_options(L, 2, "k:config", keys);
  check_module(L, k);
  cg_ctx *ctx = k->h.ctx;
  CUlaunchAttribute a[3];
  unsigned n = 0, cluster[3] = { 0, 0, 0 };
  int coop = 0, prog = 0;
  memset(a, 0, sizeof a);
  if (lua_getfield(L, 2, "cooperative") != LUA_TNIL) {
    luaL_argexpected(L, lua_isboolean(L, -1), 2, "opts.cooperative: a boolean");
    if ((coop = lua_toboolean(L, -1))) {
      if (!attr(L, ctx, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH))
        return luaL_error(L, "%s: the device has no cooperative launches",
                          k->name);
      a[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      a[n++].value.cooperative = 1;
    }
  }
  if (lua_getfield(L, 2, "cluster") != LUA_TNIL) {
    cluster_dims(L, k, lua_gettop(L), cluster);
    if (attr(L, ctx, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) < 9)
      return luaL_error(L, "%s: thread block clusters need compute "
                        "capability 9.0 or later", k->name);
    if (cluster[0] * cluster[1] * cluster[2] > 8)
      return luaL_error(L, "%s: a cluster of %d blocks; at most 8 (the "
                        "portable cluster size)", k->name,
                        (int)(cluster[0] * cluster[1] * cluster[2]));
    a[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a[n].value.clusterDim.x = cluster[0];
    a[n].value.clusterDim.y = cluster[1];
    a[n++].value.clusterDim.z = cluster[2];
  }
  if (lua_getfield(L, 2, "priority") != LUA_TNIL) {
    int ok;
    lua_Integer p = lua_tointegerx(L, -1, &ok);
    if (!ok || p < -1000 || p > 1000)
      return luaL_error(L, "%s: opts.priority must be an integer", k->name);
    a[n].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    a[n++].value.priority = (int)p;
  }
  if (lua_getfield(L, 2, "programmatic") != LUA_TNIL) {
    luaL_argexpected(L, lua_isboolean(L, -1), 2,
                     "opts.programmatic: a boolean");
    if ((prog = lua_toboolean(L, -1)) && !k->pdl.consumer)
      return luaL_error(L, "%s: k:config{programmatic = true} refused: it "
                        "cannot start before the kernel before it ends: %s",
                        k->name, k->pdl.consumer_why);
  }
  if (n || prog) need(L, k, cg_drv.cuLaunchKernelEx != NULL,
                      "cuLaunchKernelEx");
  if (coop)
    need(L, k, cg_drv.cuOccupancyMaxActiveBlocksPerMultiprocessor != NULL,
         "occupancy queries");
  memcpy(k->attrs, a, sizeof a);
  k->nattrs = n;
  k->cooperative = (unsigned char)coop;
  k->programmatic = (unsigned char)prog;
  memcpy(k->cluster, cluster, sizeof cluster);
  lua_settop(L, 1);
  return 1;
}

/* Blocks of block threads and shared bytes one SM holds at once. */
static int per_sm(lua_State *L, cg_kernel *k, int block, size_t shared) {
  int n = 0;
  CU(L, k->h.ctx, cuOccupancyMaxActiveBlocksPerMultiprocessor, &n, k->f,
     block, shared);
  return n;
}

/* k:occupancy(block [, shared]) -> blocks resident per SM, and on the
   whole device */
int cg_kernel_occupancy(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  lua_Integer block = luaL_checkinteger(L, 2);
  lua_Integer shared = luaL_optinteger(L, 3, k->shared);
  cg_ctx *ctx = k->h.ctx;
  luaL_argcheck(L, block >= 1 && block <= ctx->max_threads, 2,
                lua_pushfstring(L, "block size must be 1..%d", ctx->max_threads));
  luaL_argcheck(L, shared >= 0 && shared <= ctx->max_shared_optin, 3,
                lua_pushfstring(L, "shared memory must be 0..%d bytes",
                                ctx->max_shared_optin));
  check_module(L, k);
  need(L, k, cg_drv.cuOccupancyMaxActiveBlocksPerMultiprocessor != NULL,
       "occupancy queries");
  int n = per_sm(L, k, (int)block, (size_t)shared);
  lua_pushinteger(L, n);
  lua_pushinteger(L, (lua_Integer)n *
                  attr(L, ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  return 2;
}

/* k:block_size([shared]) -> the block size of the highest occupancy, and
   the smallest grid that fills the device with it */
int cg_kernel_block_size(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  lua_Integer shared = luaL_optinteger(L, 2, k->shared);
  luaL_argcheck(L, shared >= 0 && shared <= k->h.ctx->max_shared_optin, 2,
                lua_pushfstring(L, "shared memory must be 0..%d bytes",
                                k->h.ctx->max_shared_optin));
  check_module(L, k);
  need(L, k, cg_drv.cuOccupancyMaxPotentialBlockSize != NULL,
       "occupancy queries");
  int grid = 0, block = 0;
  CU(L, k->h.ctx, cuOccupancyMaxPotentialBlockSize, &grid, &block, k->f,
     NULL, (size_t)shared, 0);
  lua_pushinteger(L, block);
  lua_pushinteger(L, grid);
  return 2;
}

/* k:programmatic() -> {consumer =, producer =, consumer_why =,
   producer_why =, launches =} */
int cg_kernel_programmatic(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  cg_pushpdl(L, &k->pdl);
  lua_pushinteger(L, k->pdl_launches);
  lua_setfield(L, -2, "launches");
  return 1;
}

/* Raises: consumer k's launch after producer p, whose code is unsafe. */
static int unsafe_pair(lua_State *L, const cg_kernel *k, const cg_kernel *p,
                       const char *where) {
  int at = where && *where;
  return luaL_error(L, "%s: a programmatic launch after %s%s%s%s is "
                    "refused: %s could still be writing what %s reads: %s",
                    k->name, p->name, at ? " (recorded at " : "",
                    at ? where : "", at ? ")" : "", p->name, k->name,
                    p->pdl.producer_why);
}

/* The kernel node that the next work of capture stream s depends on,
   alone, found among the capture's records by its function (a kernel of
   this state); NULL when there is none or another dependency. */
static cg_kernel *captured_producer(lua_State *L, cg_ctx *ctx, CUstream s) {
  CUstreamCaptureStatus st;
  const CUgraphNode *deps = NULL;
  size_t nd = 0;
  if (!cg_drv.cuStreamGetCaptureInfo) return NULL;
  CU(L, ctx, cuStreamGetCaptureInfo, s, &st, NULL, NULL, &deps, NULL, &nd);
  if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || nd != 1) return NULL;
  CUgraphNode node = deps[0];
  CUgraphNodeType t;
  CU(L, ctx, cuGraphNodeGetType, node, &t);
  if (t != CU_GRAPH_NODE_TYPE_KERNEL) return NULL;
  CUDA_KERNEL_NODE_PARAMS kp;
  CU(L, ctx, cuGraphKernelNodeGetParams, node, &kp);
  const cg_recs *r = ctx->capture->top->recs;
  for (size_t i = r ? r->n : 0; i-- > 0;)
    if (r->v[i].kind == NK_KERNEL && r->v[i].f == kp.func)
      return (cg_kernel *)r->v[i].kernel;
  return NULL;
}

/* The producer of k's launch on s when it is made programmatic: k asks
   for it (its code a consumer, k:config and m:reload saw to it) and the
   work before it is a kernel whose code is a producer; raising when it is
   a kernel whose code is not. NULL: an ordinary launch. */
static cg_kernel *producer(lua_State *L, cg_kernel *k, cg_stream *s,
                           const char *where) {
  cg_ctx *ctx = k->h.ctx;
  cg_kernel *p = NULL;
  if (!k->programmatic) return NULL;
  if (ctx->capture)
    p = captured_producer(L, ctx, s->h.drv.stream);
  else if (s->last && s->clock == ctx->root->stream_clock && s->h.owned &&
           !s->lent)
    p = s->last;
  if (p && !p->pdl.producer) unsafe_pair(L, k, p, where);
  return p;
}

int cg_launch_ex(lua_State *L, cg_kernel *k, cg_stream *st,
                 const unsigned grid[3], const unsigned block[3],
                 const char *where) {
  CUstream s = st->h.drv.stream;
  if (k->cluster[0])
    for (int i = 0; i < 3; i++)
      if (grid[i] % k->cluster[i])
        luaL_error(L, "%s: grid {%d, %d, %d} is not a whole number of "
                   "clusters {%d, %d, %d}", k->name, (int)grid[0],
                   (int)grid[1], (int)grid[2], (int)k->cluster[0],
                   (int)k->cluster[1], (int)k->cluster[2]);
  if (k->cooperative) {
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    int sm = per_sm(L, k, (int)(block[0] * block[1] * block[2]), k->shared);
    int sms = attr(L, k->h.ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    if (blocks > (uint64_t)sm * (uint64_t)sms)
      luaL_error(L, "%s: a cooperative launch of %I blocks; at most %d are "
                 "resident at once (%d per SM on %d SMs: k:occupancy)",
                 k->name, (LUAI_UACINT)blocks, sm * sms, sm, sms);
  }
  CUlaunchConfig c;
  memset(&c, 0, sizeof c);
  c.gridDimX = grid[0];
  c.gridDimY = grid[1];
  c.gridDimZ = grid[2];
  c.blockDimX = block[0];
  c.blockDimY = block[1];
  c.blockDimZ = block[2];
  c.sharedMemBytes = k->shared;
  c.hStream = s;
  CUlaunchAttribute a[4];
  memcpy(a, k->attrs, sizeof k->attrs);
  c.attrs = a;
  c.numAttrs = k->nattrs;
  cg_kernel *p = producer(L, k, st, where);
  if (p) {
    memset(&a[c.numAttrs], 0, sizeof a[0]);
    a[c.numAttrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a[c.numAttrs++].value.programmaticStreamSerializationAllowed = 1;
  }
  CU(L, k->h.ctx, cuLaunchKernelEx, &c, k->f, k->argp, NULL);
  if (!p) return 0;
  k->pdl_launches++;
  if (k->h.ctx->capture) { /* m:reload keeps their code safe for the edge */
    k->pdl_graphs |= CG_PDL_CONSUMER;
    p->pdl_graphs |= CG_PDL_PRODUCER;
  }
  return 1;
}
