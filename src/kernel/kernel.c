/* cugraph.Kernel: a function of a module. Every launch is checked against
   the kernel's signature and the device's limits before cuLaunchKernel, and
   marshals its arguments into storage the kernel owns, so a steady launch
   loop allocates nothing; inside a capture the launch is recorded (its
   node, arguments and Lua line) and what it used is pinned. */
#include <stdio.h>
#include <string.h>
#include "kernel/kernel.h"

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* Parameter i's size from the driver: 1, or 0 past the last parameter, or
   -1 when the driver cannot tell. Its other failures raise. */
static int paraminfo(lua_State *L, cg_kernel *k, int i, size_t *size) {
  size_t off;
  CUresult r = cg_drv.cuFuncGetParamInfo(k->f, (size_t)i, &off, size);
  if (r == CUDA_SUCCESS) return 1;
  if (r == CUDA_ERROR_INVALID_VALUE) return 0;
  if (r == CUDA_ERROR_NOT_SUPPORTED && i == 0) return -1;
  cg_check(L, k->h.ctx, "cuFuncGetParamInfo", r);
  return -1;
}

/* Checks the signature against the sizes the driver reports, where it can
   (drivers from 12.4); without that a cubin's signature is trusted. */
static void crosscheck(lua_State *L, cg_kernel *k) {
  if (!cg_drv.cuFuncGetParamInfo) return;
  size_t size;
  for (int i = 0; i < k->nparams; i++) {
    int got = paraminfo(L, k, i, &size);
    if (got < 0) return;
    if (!got)
      luaL_error(L, "%s: the signature has %d parameter%s, the kernel %d",
                 k->name, k->nparams, plural(k->nparams), i);
    if (size != k->params[i].size)
      luaL_error(L, "%s: the signature gives parameter %d %d bytes, the "
                 "kernel %d", k->name, i + 1, (int)k->params[i].size,
                 (int)size);
  }
  if (paraminfo(L, k, k->nparams, &size) > 0)
    luaL_error(L, "%s: the signature has %d parameter%s, the kernel more",
               k->name, k->nparams, plural(k->nparams));
}

cg_kernel *cg_kernel_new(lua_State *L, cg_module *m, const char *entry,
                         const char *label, const cg_param *ps, int n,
                         const ptx_pdl *pdl) {
  size_t slots = 0;
  for (int i = 0; i < n; i++) slots += (ps[i].size + 7) / 8;
  size_t size = sizeof(cg_kernel) + (size_t)n * sizeof(cg_param);
  size = (size + 7) & ~(size_t)7;
  cg_kernel *k = cg_newobj(L, m->h.ctx, size + 2 * (size_t)n * sizeof(void *)
                           + slots * 8, CG_KERNEL);
  k->h.parent = &m->h;
  k->nparams = n;
  k->nwords = slots;
  snprintf(k->name, sizeof k->name, "%s", label);
  snprintf(k->entry, sizeof k->entry, "%s", entry);
  k->params = (cg_param *)(k + 1);
  memcpy(k->params, ps, (size_t)n * sizeof *ps);
  if (pdl) k->pdl = *pdl;
  else cg_pdl_none(&k->pdl);
  k->argp = (void **)((char *)k + size);
  k->seen = (cg_obj **)(k->argp + n);
  uint64_t *slot = (uint64_t *)(k->seen + n);
  for (int i = 0; i < n; i++) {
    k->argp[i] = slot;
    slot += (ps[i].size + 7) / 8;
  }
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the kernel keeps its module alive */
  lua_getiuservalue(L, 1, 1);  /* ... and the module knows its kernels, */
  lua_pushvalue(L, -2);        /* for reload */
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  cg_check_open(L, &m->h);         /* a finalizer may have freed it */
  CU(L, m->h.ctx, cuModuleGetFunction, &k->f, m->h.drv.module, entry);
  k->h.open = 1;
  crosscheck(L, k);
  return k;
}

/* A stream's last kernel (types.h) may be this one: it is known no more. */
static int kernel_close(lua_State *L, int collected) {
  cg_kernel *k = cg_toobj(L, 1, CG_KERNEL);
  k->h.ctx->root->stream_clock++;
  return cg_close(L, CG_KERNEL, collected);
}
static int kernel_free(lua_State *L) { return kernel_close(L, 0); }
static int kernel_gc(lua_State *L) { return kernel_close(L, 1); }

/* Raises "saxpy: argument 3 (f32): msg". */
static int argerror(lua_State *L, cg_kernel *k, int arg, const char *msg) {
  cg_pushparam(L, &k->params[arg - 1]);
  return luaL_error(L, "%s: argument %d (%s): %s", k->name, arg,
                    lua_tostring(L, -1), msg);
}

static int typeerror(lua_State *L, cg_kernel *k, int arg, int idx,
                     const char *expected) {
  const char *got = luaL_typename(L, idx);
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING)
    got = lua_tostring(L, -1);
  cg_buffer *b = cg_testobj(L, idx, CG_BUFFER);
  if (b) got = lua_pushfstring(L, "%s of %s", got, cg_type_names[b->type]);
  cg_scalar *s = cg_testobj(L, idx, CG_SCALAR);
  if (s) got = lua_pushfstring(L, "%s of %s", got, cg_type_names[s->type]);
  return argerror(L, k, arg,
                  lua_pushfstring(L, "expected %s, got %s", expected, got));
}

/* A device pointer from a Buffer or Scalar at idx (whose element type must
   be elem unless elem is CG_P_ANY); 0 if the value is neither. */
static inline CUdeviceptr pointer(lua_State *L, cg_kernel *k, int arg, int idx,
                           int elem, CUstream st) {
  cg_ctx *ctx = k->h.ctx;
  cg_obj *o = lua_touserdata(L, idx);
  int scalar;
  const char *why;
  if (o && o == k->seen[arg - 1] && lua_type(L, idx) == LUA_TUSERDATA) {
    scalar = o->kind == CG_SCALAR; /* its type passed before, and the */
    if ((!o->open || o->scoped) && (why = cg_mem_why(L, ctx, o))) /* door */
      argerror(L, k, arg, why);
  } else {
    if (!lua_getmetatable(L, idx)) return 0; /* left pushed: kernel_launch */
    const void *mt = lua_topointer(L, -1);
    scalar = mt == ctx->mt[CG_SCALAR];
    if (!scalar && mt != ctx->mt[CG_BUFFER]) return 0;
    int type = scalar ? (int)((cg_scalar *)o)->type
                      : (int)((cg_buffer *)o)->type;
    if (elem != CG_P_ANY && elem != type)
      typeerror(L, k, arg, idx, lua_pushfstring(L, "%s of %s",
                "cugraph.Buffer or cugraph.Scalar", cg_type_names[elem]));
    if ((why = cg_mem_why(L, ctx, o))) argerror(L, k, arg, why);
    if (!cg_in_graphmem(o)) k->seen[arg - 1] = o; /* those are checked */
  }                                              /* at every launch */
  cg_pinobj(L, ctx, o, idx); /* in a capture: before the address is read */
  if (!scalar) return o->drv.mem;
  if (!ctx->capture) cg_scalar_flush(L, (cg_scalar *)o, st);
  return o->drv.mem;
}

/* An integer argument that is not a Lua integer: a float of integral
   value, or an error. */
static lua_Integer intslow(lua_State *L, cg_kernel *k, int arg, int idx) {
  int ok;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok || lua_type(L, idx) != LUA_TNUMBER) {
    if (lua_type(L, idx) == LUA_TNUMBER)
      argerror(L, k, arg, lua_pushfstring(L, "expected an integer, got %f",
                                          lua_tonumber(L, idx)));
    typeerror(L, k, arg, idx, "integer");
  }
  return v;
}

/* An integer argument of `size` bytes; signedness unknown when !typed. */
static inline void intarg(lua_State *L, cg_kernel *k, int arg, int idx,
                   unsigned size, void *slot) {
  lua_Integer v = lua_isinteger(L, idx) ? lua_tointeger(L, idx)
                                        : intslow(L, k, arg, idx);
  if (size < 8) {
    lua_Integer lo = -((lua_Integer)1 << (size * 8 - 1));
    lua_Integer hi = ((lua_Integer)1 << (size * 8)) - 1;
    if (v < lo || v > hi)
      argerror(L, k, arg, lua_pushfstring(L, "%I is out of range",
                                          (LUAI_UACINT)v));
  }
  switch (size) { /* little-endian: the low bytes; sizes known, no call */
  case 1: memcpy(slot, &v, 1); break;
  case 2: memcpy(slot, &v, 2); break;
  case 4: memcpy(slot, &v, 4); break;
  default: memcpy(slot, &v, 8);
  }
}

static inline void setarg(lua_State *L, cg_kernel *k, int arg, int idx,
                   CUstream st) {
  const cg_param *p = &k->params[arg - 1];
  void *slot = k->argp[arg - 1];
  CUdeviceptr ptr;
  switch (p->type) {
  case CG_P_PTR:
    if (!(ptr = pointer(L, k, arg, idx, p->elem, st)))
      typeerror(L, k, arg, idx, p->elem == CG_P_ANY
                ? "cugraph.Buffer or cugraph.Scalar"
                : lua_pushfstring(L, "cugraph.Buffer or cugraph.Scalar of %s",
                                  cg_type_names[p->elem]));
    memcpy(slot, &ptr, 8);
    break;
  case CG_P_PTR_OR_INT:
    if (lua_type(L, idx) == LUA_TNUMBER) intarg(L, k, arg, idx, 8, slot);
    else if ((ptr = pointer(L, k, arg, idx, CG_P_ANY, st))) memcpy(slot, &ptr, 8);
    else if (!cg_condition_arg(L, k->h.ctx, idx, slot) &&
             !cg_sampler_arg(L, k->h.ctx, idx, slot))
      typeerror(L, k, arg, idx, "cugraph.Buffer, cugraph.Scalar, "
                "cugraph.Condition, cugraph.Texture, cugraph.Surface or "
                "integer");
    break;
  case CG_P_INT:
    intarg(L, k, arg, idx, p->size, slot);
    break;
  case CG_P_BYTES: {
    size_t len;
    if (lua_type(L, idx) != LUA_TSTRING) typeerror(L, k, arg, idx, "string");
    const char *s = lua_tolstring(L, idx, &len);
    if (len != p->size)
      argerror(L, k, arg, lua_pushfstring(L, "expected %d bytes, got %d",
                                          (int)p->size, (int)len));
    memcpy(slot, s, len);
    break;
  }
  default: {
    if (lua_type(L, idx) != LUA_TNUMBER) {
      if (p->type == CG_U64 && (cg_condition_arg(L, k->h.ctx, idx, slot) ||
                                cg_sampler_arg(L, k->h.ctx, idx, slot)))
        break; /* a cudaGraphConditionalHandle, a texture or surface object */
      typeerror(L, k, arg, idx, "number");
    }
    const char *msg = cg_bits(L, idx, (cg_type)p->type, slot);
    if (msg) argerror(L, k, arg, msg);
  }
  }
}

/* Launch dimensions: an integer or {x [, y [, z]]}, each 1..limit. */
static void dims(lua_State *L, cg_kernel *k, int idx, const char *what,
                 const int lim[3], unsigned out[3]) {
  static const char xyz[] = "xyz";
  int t = lua_type(L, idx), isnum;
  if (t != LUA_TNUMBER && t != LUA_TTABLE)
    luaL_error(L, "%s: %s must be an integer or {x, y, z}, got %s", k->name,
               what, luaL_typename(L, idx));
  if (t == LUA_TTABLE && !cg_xyz_size(L, idx))
    luaL_error(L, "%s: %s must be an integer or {x [, y [, z]]}, got a table "
               "with other entries (a hole, a fourth, a key)", k->name, what);
  for (int i = 0; i < 3; i++) {
    lua_Integer v = 1;
    isnum = 1;
    if (t == LUA_TNUMBER && i == 0) {
      v = lua_tointegerx(L, idx, &isnum);
    } else if (t == LUA_TTABLE) { /* x is required, y and z default to 1 */
      int vt = lua_rawgeti(L, idx, i + 1);
      if (vt != LUA_TNIL || i == 0) v = lua_tointegerx(L, -1, &isnum);
      if ((vt != LUA_TNIL || i == 0) && vt != LUA_TNUMBER) isnum = 0;
      lua_pop(L, 1);
    }
    if (!isnum || v < 1 || v > lim[i]) {
      if (t == LUA_TTABLE) lua_rawgeti(L, idx, i + 1);
      else lua_pushvalue(L, idx);
      luaL_error(L, "%s: %s.%c must be an integer in 1..%d (the device's "
                 "limit), got %s", k->name, what, xyz[i], lim[i],
                 luaL_tolstring(L, -1, NULL));
    }
    out[i] = (unsigned)v;
  }
}

/* The common launch dimension: an integer x in 1..lim, into out. */
static inline int dim(lua_State *L, int idx, int lim, unsigned out[3]) {
  if (!lua_isinteger(L, idx)) return 0;
  lua_Integer v = lua_tointeger(L, idx);
  if (v < 1 || v > lim) return 0;
  out[0] = (unsigned)v;
  out[1] = out[2] = 1;
  return 1;
}

/* The kernel this thread's last k:launch checked, and cg_epoch then:
   while the count stands still, the same full userdata at argument 1 is
   that kernel, with no metatable to compare. */
static _Thread_local const void *self_seen;
static _Thread_local unsigned self_epoch;

/* Records the launch just made on the capture stream s (programmatic or
   not): the kernel, the stream and the arguments at kidx, kidx + 1 and
   kidx + 4 on, each slot's object in seen. */
static void note(lua_State *L, cg_kernel *k, CUstream s,
                 const unsigned grid[3], const unsigned block[3], int kidx,
                 cg_obj **seen, int prog) {
  cg_launchnote n = { &k->h, k->f, k->nparams, k->params, k->argp,
                      k->nwords, seen, kidx + 4, kidx + 1, kidx,
                      {grid[0], grid[1], grid[2]},
                      {block[0], block[1], block[2]}, k->shared, prog };
  cg_note_kernel(L, k->h.ctx, s, &n);
}

/* k:launch with fewer than its stream, grid and block: the first missing
   one is named with "got no value" (the hot path's checks push values
   where it would be). */
static int launch_missing(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  int top = lua_gettop(L);
  cg_stream *s = cg_checkobj(L, 2, CG_STREAM);
  unsigned grid[3];
  if (top >= 3) dims(L, k, 3, "grid", s->h.ctx->max_grid, grid);
  return luaL_error(L, "%s: %s must be an integer or {x, y, z}, got no "
                    "value", k->name, top < 3 ? "grid" : "block");
}

/* Whether an argument of the launch is a cugraph.Condition (a recording
   makes such a launch again under the capture, where its handle is). */
static int conditions(lua_State *L, cg_kernel *k, int nargs) {
  for (int i = 0; i < nargs; i++)
    if ((k->params[i].type == CG_P_PTR_OR_INT ||
         k->params[i].type == CG_U64) &&
        lua_type(L, i + 5) == LUA_TUSERDATA &&
        cg_testobj(L, i + 5, CG_CONDITION))
      return 1;
  return 0;
}

/* k:launch(stream, grid, block, args...) */
/* The checks leave the metatables they read on the stack (no pops on the
   hot path): the arguments are counted first and read by absolute index. */
static int kernel_launch(lua_State *L) {
  int nargs = lua_gettop(L) - 4;
  if (nargs < 0) return launch_missing(L);
  if (nargs > LUA_MINSTACK - 4) luaL_checkstack(L, nargs + 4, NULL);
  cg_kernel *k = lua_touserdata(L, 1);
  unsigned epoch = cg_epoch_now();
  if (k && k == self_seen && epoch == self_epoch &&
      lua_type(L, 1) == LUA_TUSERDATA) {
    cg_ready(L, &k->h);
  } else {
    k = cg_checkself_keep(L, CG_KERNEL);
    self_seen = k;
    self_epoch = epoch;
  }
  if (!k->h.parent->open)
    return luaL_error(L, "attempt to use a kernel of a freed cugraph.Module");
  cg_ctx *ctx = k->h.ctx;
  if (k->epoch != epoch) { /* a finalizer ran: addresses may be reused */
    k->epoch = epoch;
    k->seen_stream = NULL;
    memset(k->seen, 0, (size_t)k->nparams * sizeof *k->seen);
  }
  cg_stream *s = lua_touserdata(L, 2);
  if (s != k->seen_stream || lua_type(L, 2) != LUA_TUSERDATA) {
    if (!s || !lua_getmetatable(L, 2) ||
        lua_topointer(L, -1) != ctx->mt[CG_STREAM])
      return luaL_typeerror(L, 2, "cugraph.Stream");
    if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, k->name);
    k->seen_stream = s;
  }
  if (!s->h.open) return luaL_error(L, "attempt to use a freed cugraph.Stream");
  unsigned grid[3], block[3];
  if (!dim(L, 3, ctx->max_grid[0], grid))
    dims(L, k, 3, "grid", ctx->max_grid, grid);
  if (!dim(L, 4, ctx->max_block[0], block))
    dims(L, k, 4, "block", ctx->max_block, block);
  if ((uint64_t)block[0] * block[1] * block[2] > (uint64_t)ctx->max_threads)
    return luaL_error(L, "%s: block of %d threads, above the device's limit "
                      "of %d", k->name, (int)(block[0] * block[1] * block[2]),
                      ctx->max_threads);
  if (nargs != k->nparams)
    return luaL_error(L, "%s: expected %d argument%s, got %d", k->name,
                      k->nparams, k->nparams == 1 ? "" : "s", nargs < 0 ? 0 : nargs);
  int recording = 0;
  if (ctx->capture && (recording = ctx->capture->top->recording)) {
    cg_record_stream(L, ctx, s->h.drv.stream, k->name);
    if (conditions(L, k, nargs)) { /* their handles are a capture's */
      cg_record_call(L, ctx, s->h.drv.stream, 4 + nargs);
      return 0;
    }
  } else if (ctx->capture) { /* pins allocate: handles are read after them */
    cg_check_captured(L, ctx, s->h.drv.stream, k->name);
    cg_pinobj(L, ctx, &s->h, 2);
    cg_pinobj(L, ctx, &k->h, 1);
  }
  for (int i = 0; i < nargs; i++) {
    const cg_param *p = &k->params[i];
    int idx = i + 5;
    if (p->type == CG_P_PTR || p->type == CG_P_PTR_OR_INT) {
      /* the buffer this slot passed its checks with, outside a capture
         or pinned by this one already (a recording pins nothing) */
      cg_buffer *b = lua_touserdata(L, idx);
      if (b && &b->h == k->seen[i] && b->h.kind == CG_BUFFER && b->h.open &&
          (!ctx->capture || recording ||
           b->h.pinned == ctx->capture->serial) &&
          lua_type(L, idx) == LUA_TUSERDATA) {
        memcpy(k->argp[i], &b->h.drv.mem, 8);
        continue;
      }
    } else if (p->type == CG_P_INT && p->size == 4 && lua_isinteger(L, idx)) {
      lua_Integer v = lua_tointeger(L, idx);
      if (v >= INT32_MIN && v <= (lua_Integer)UINT32_MAX) {
        memcpy(k->argp[i], &v, 4); /* little-endian: the low bytes */
        continue;
      }
    }
    setarg(L, k, i + 1, idx, s->h.drv.stream); /* every other case, and the errors */
  }
  if (recording) { /* noted, not sent */
    note(L, k, s->h.drv.stream, grid, block, 1, k->seen, 0);
    return 0;
  }
  int t = cg_trace_begin(L, ctx, s->h.drv.stream, "kernel", k->name), prog = 0;
  if (k->nattrs || k->programmatic)
    prog = cg_launch_ex(L, k, s, grid, block, NULL);
  else CU(L, ctx, cuLaunchKernel, k->f, grid[0], grid[1], grid[2], block[0],
          block[1], block[2], k->shared, s->h.drv.stream, k->argp, NULL);
  cg_trace_end(L, ctx, t);
  if (ctx->capture) {
    note(L, k, s->h.drv.stream, grid, block, 1, k->seen, prog);
  } else { /* the stream's last work, for a programmatic launch after it */
    s->last = k;
    s->clock = ctx->root->stream_clock;
  }
  return 0;
}

void cg_kernel_replay(lua_State *L, const cg_recs *r, const cg_rec *e,
                      int kidx) {
  cg_kernel *k = lua_touserdata(L, kidx);
  cg_stream *s = lua_touserdata(L, kidx + 1);
  cg_ctx *ctx = k->h.ctx;
  cg_obj **objs = r->objs + e->arg0;
  cg_check_open(L, &k->h);
  cg_check_open(L, &s->h);
  cg_check_captured(L, ctx, s->h.drv.stream, k->name);
  cg_pinobj(L, ctx, &s->h, kidx + 1); /* pins allocate: handles are read */
  cg_pinobj(L, ctx, &k->h, kidx);     /* after them */
  for (int i = 0; i < e->nargs; i++)
    if (objs[i]) {
      const char *why = cg_mem_why(L, ctx, objs[i]); /* the door, again */
      if (why) argerror(L, k, i + 1, why);
      cg_pinobj(L, ctx, objs[i], kidx + 4 + i);
    }
  if (k->nwords) memcpy(k->argp[0], r->words + e->word0, k->nwords * 8);
  unsigned shared = k->shared;
  k->shared = e->shared;
  int prog = 0;
  if (k->nattrs || k->programmatic) {
    char where[160] = "";
    if (e->src) snprintf(where, sizeof where, "%s:%d", cg_recs_text(r, e->src),
                         e->line);
    prog = cg_launch_ex(L, k, s, e->grid, e->block, where);
  } else CU(L, ctx, cuLaunchKernel, k->f, e->grid[0], e->grid[1], e->grid[2],
          e->block[0], e->block[1], e->block[2], e->shared, s->h.drv.stream,
          k->argp, NULL);
  note(L, k, s->h.drv.stream, e->grid, e->block, kidx, objs, prog);
  k->shared = shared;
}

void cg_kernel_args(lua_State *L, int kidx, int idx, int nargs) {
  cg_kernel *k = lua_touserdata(L, kidx);
  if (nargs != k->nparams)
    luaL_error(L, "%s: expected %d argument%s, got %d", k->name, k->nparams,
               plural(k->nparams), nargs);
  luaL_checkstack(L, nargs + 4, NULL);
  for (int i = 1; i <= nargs; i++, idx++) {
    const cg_param *p = &k->params[i - 1];
    cg_obj *o = cg_testobj(L, idx, CG_BUFFER);
    if (!o) o = cg_testobj(L, idx, CG_SCALAR);
    if (!o || (p->type != CG_P_PTR && p->type != CG_P_PTR_OR_INT)) {
      setarg(L, k, i, idx, NULL); /* raises for an object in another slot */
      continue;
    }
    int type = o->kind == CG_SCALAR ? (int)((cg_scalar *)o)->type
                                    : (int)((cg_buffer *)o)->type;
    if (p->type == CG_P_PTR && p->elem != CG_P_ANY && p->elem != type)
      typeerror(L, k, i, idx, lua_pushfstring(L, "%s of %s",
                "cugraph.Buffer or cugraph.Scalar", cg_type_names[p->elem]));
    const char *why = cg_mem_why(L, k->h.ctx, o);
    if (why) argerror(L, k, i, why);
    memcpy(k->argp[i - 1], &o->drv.mem, 8);
  }
}

/* Like every type but Module, a kernel's interface is methods alone, so
   that its __index is a plain table and k:launch costs one table lookup. */

static int kernel_name(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  lua_pushstring(L, k->name);
  lua_pushstring(L, k->entry);
  return 2;
}

/* k:signature() -> "axpy(f32, const f32*, f32*, i32)" */
static int kernel_signature(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  cg_pushsignature(L, k->name, k->params, k->nparams);
  return 1;
}

static int kernel_params(lua_State *L) {
  lua_pushinteger(L, ((cg_kernel *)cg_checkself(L, CG_KERNEL))->nparams);
  return 1;
}

/* k:shared([bytes]): dynamic shared memory of later launches; without an
   argument, the current amount */
static int kernel_shared(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  if (lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, k->shared);
    return 1;
  }
  lua_Integer v = luaL_checkinteger(L, 2);
  cg_ctx *ctx = k->h.ctx;
  if (!k->h.parent->open)
    return luaL_error(L, "attempt to use a kernel of a freed cugraph.Module");
  if (v < 0 || v > ctx->max_shared_optin)
    return luaL_error(L, "%s: shared memory of %I bytes; the device allows "
                      "0..%d", k->name, (LUAI_UACINT)v, ctx->max_shared_optin);
  if (v > ctx->max_shared)
    CU(L, ctx, cuFuncSetAttribute, k->f,
       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)v);
  k->shared = (unsigned)v;
  lua_settop(L, 1);
  return 1;
}

static int kernel_tostring(lua_State *L) {
  cg_kernel *k = cg_toobj(L, 1, CG_KERNEL);
  if (!k->h.open) return cg_tostring(L, &k->h, "");
  cg_pushsignature(L, k->name, k->params, k->nparams);
  return cg_tostring(L, &k->h, " %s", lua_tostring(L, -1));
}

void kernel_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"launch", kernel_launch}, {"name", kernel_name},
    {"signature", kernel_signature}, {"params", kernel_params},
    {"shared", kernel_shared}, {"config", cg_kernel_config},
    {"programmatic", cg_kernel_programmatic},
    {"occupancy", cg_kernel_occupancy}, {"block_size", cg_kernel_block_size},
    {"free", kernel_free}, {"close", kernel_free},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", kernel_gc}, {"__close", kernel_free},
    {"__tostring", kernel_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_KERNEL, methods, meta, NULL);
}
