/* The interpreter's memory: global accesses checked against module
   variables and live allocations, with a fast path for the allocation last
   found live; accesses of every space; atomics; and the instructions ld, st
   and atom. Part of the loop's translation unit (ptx_exec.c, the only file
   to include it). */
#ifndef PTX_MEM_H
#define PTX_MEM_H

#include "ptx_convert.h"

/* -- memory --------------------------------------------------------------- */

static const char *space_name(int s) {
  static const char *const n[] = {"generic", "global", "shared", "local",
                                  "param", "param", "const"};
  return n[s];
}

/* The host address of an n-byte global access at p, or NULL after a
   fault. */
/* Widens what the launch read or wrote (write) in allocation i to hold
   [a, b), while the caller follows accesses. */
static inline void touch(worker *w, unsigned i, int write, uint64_t a,
                         uint64_t b) {
  if (a < w->tlo[write][i]) w->tlo[write][i] = a;
  if (b > w->thi[write][i]) w->thi[write][i] = b;
}

static unsigned char *global_slow(worker *w, warp *wp, int lane,
                                  const ins *in, uint64_t p, unsigned n,
                                  int write) {
  if (p % n) {
    exec_fault(w, wp, lane, in, SIM_MISALIGNED, "misaligned %s access of %u "
               "bytes at 0x%llx", space_name(in->space), n,
               (unsigned long long)p);
    return NULL;
  }
  const sim_module *m = w->rc->m;
  for (size_t i = 0; i < m->nvars; i++) {
    uint64_t b = (uint64_t)(uintptr_t)m->vars[i].data;
    if (p >= b && p - b <= m->vars[i].size && n <= m->vars[i].size - (p - b))
      return (unsigned char *)(uintptr_t)p;
  }
  sim_launch *l = w->rc->l;
  uint64_t lo, hi;
  if (l->live && l->live(l->ud, p, n, &lo, &hi)) {
    unsigned i = w->nextr++ % SIM_RANGES;
    exec_touch_flush(w, i); /* what was read and written where it was */
    w->lo[i] = lo, w->hi[i] = hi;
    if (w->touch) touch(w, i, write, p, p + n);
    if (w->early && !(wp->waited >> lane & 1))
      exec_early(w, wp, lane, in, p, n, write);
    return (unsigned char *)(uintptr_t)p;
  }
  exec_fault(w, wp, lane, in, SIM_ILLEGAL_ADDRESS, "out-of-bounds %s access of "
             "%u bytes at 0x%llx, in no live allocation",
             space_name(in->space), n, (unsigned long long)p);
  return NULL;
}

static inline unsigned char *global_at(worker *w, warp *wp, int lane,
                                       const ins *in, uint64_t p, unsigned n,
                                       int write) {
  for (int i = 0; i < SIM_RANGES; i++)
    if (p >= w->lo[i] && p < w->hi[i] && w->hi[i] - p >= n && !(p & (n - 1))) {
      if (w->touch) touch(w, (unsigned)i, write, p, p + n);
      if (w->early && !(wp->waited >> lane & 1))
        exec_early(w, wp, lane, in, p, n, write);
      return (unsigned char *)(uintptr_t)p;
    }
  return global_slow(w, wp, lane, in, p, n, write);
}

/* The host address of an n-byte access at p in space sp for a lane (a
   store or an atomic: write), or NULL after a fault. */
static unsigned char *addr_of(worker *w, warp *wp, int lane, const ins *in,
                              int sp, uint64_t p, unsigned n, int write) {
  const run_ctx *rc = w->rc;
  if (sp == SP_GENERIC) {
    if (p >= GEN_SHARED) sp = SP_SHARED, p -= GEN_SHARED;
    else if (p >= GEN_LOCAL) sp = SP_LOCAL, p -= GEN_LOCAL;
    else sp = SP_GLOBAL;
  }
  switch (sp) {
  case SP_GLOBAL: case SP_CONST:
    return global_at(w, wp, lane, in, p, n, write);
  case SP_SHARED:
    if (p > rc->nshared || n > rc->nshared - p) break;
    if (p % n) goto misaligned;
    return w->shared + p;
  case SP_LOCAL:
    if (p > rc->m->local_size || n > rc->m->local_size - p) break;
    if (p % n) goto misaligned;
    return wp->local + (size_t)lane * rc->m->local_size + p;
  case SP_FPARAM:
    if (p > rc->m->pframe || n > rc->m->pframe - p) break;
    return wp->pf + (size_t)lane * rc->m->pframe + p;
  case SP_PARAM:
    if (p > rc->l->nparams || n > rc->l->nparams - p) break;
    return (unsigned char *)(uintptr_t)rc->l->params + p;
  }
  exec_fault(w, wp, lane, in, SIM_ILLEGAL_ADDRESS, "out-of-bounds %s access of "
             "%u bytes at offset 0x%llx", space_name(sp), n,
             (unsigned long long)p);
  return NULL;
misaligned:
  exec_fault(w, wp, lane, in, SIM_MISALIGNED, "misaligned %s access of %u "
             "bytes at offset 0x%llx", space_name(sp), n,
             (unsigned long long)p);
  return NULL;
}

static inline uint64_t load(const unsigned char *h, unsigned n, int sgn) {
  switch (n) {
  case 1: { uint8_t v = *h; return sgn ? (uint64_t)(int64_t)(int8_t)v : v; }
  case 2: { uint16_t v; memcpy(&v, h, 2);
            return sgn ? (uint64_t)(int64_t)(int16_t)v : v; }
  case 4: { uint32_t v; memcpy(&v, h, 4);
            return sgn ? (uint64_t)(int64_t)(int32_t)v : v; }
  default: { uint64_t v; memcpy(&v, h, 8); return v; }
  }
}

static inline void store(unsigned char *h, unsigned n, uint64_t v) {
  switch (n) {
  case 1: *h = (uint8_t)v; break;
  case 2: { uint16_t x = (uint16_t)v; memcpy(h, &x, 2); break; }
  case 4: { uint32_t x = (uint32_t)v; memcpy(h, &x, 4); break; }
  default: memcpy(h, &v, 8);
  }
}

/* -- atomics -------------------------------------------------------------- */

/* atom.add.noftz of f16, bf16 (16 bits at h) or their pairs (32): each
   half added, rounded to nearest; the old value. */
static uint64_t atomic_add_half(const ins *in, unsigned char *h, uint64_t a) {
  int bf = in->tk == K_BF || in->tk == K_BH2;
  if (in->tb == 16) {
    uint16_t *p = (uint16_t *)(void *)h, nw;
    uint16_t old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    double x = narrow_value((uint16_t)a, bf);
    do nw = narrow_add(narrow_value(old, bf), x, bf);
    while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
    return old;
  }
  uint32_t *p = (uint32_t *)(void *)h, nw;
  uint32_t old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  do {
    nw = 0;
    for (int i = 0; i < 32; i += 16)
      nw |= (uint32_t)narrow_add(narrow_value((uint16_t)(old >> i), bf),
                                 narrow_value((uint16_t)(a >> i), bf), bf) << i;
  } while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
  return old;
}

/* The atomic operation of in at h with operands a and b; the old value.
   global: h is in global memory, where atom.add.f32 flushes subnormal
   operands and results to zero (as PTX says the GPU does; in shared
   memory it keeps them). */
static uint64_t atomic_op(const ins *in, unsigned char *h, uint64_t a,
                          uint64_t b, int global) {
  int bits = in->tb, k = in->tk;
  if ((k == K_F && bits == 16) || k == K_BF || k == K_H2 || k == K_BH2)
    return atomic_add_half(in, h, a);
  if (bits == 16) { /* atom.cas.b16 */
    uint16_t *p = (uint16_t *)(void *)h, exp = (uint16_t)a;
    __atomic_compare_exchange_n(p, &exp, (uint16_t)b, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return exp;
  }
  if (bits == 32) {
    uint32_t *p = (uint32_t *)(void *)h, x = (uint32_t)a;
    switch (in->cmp) {
    case A_ADD:
      if (k != K_F) return __atomic_fetch_add(p, x, __ATOMIC_SEQ_CST);
      break;
    case A_AND: return __atomic_fetch_and(p, x, __ATOMIC_SEQ_CST);
    case A_OR: return __atomic_fetch_or(p, x, __ATOMIC_SEQ_CST);
    case A_XOR: return __atomic_fetch_xor(p, x, __ATOMIC_SEQ_CST);
    case A_EXCH: return __atomic_exchange_n(p, x, __ATOMIC_SEQ_CST);
    case A_CAS: {
      uint32_t exp = x;
      __atomic_compare_exchange_n(p, &exp, (uint32_t)b, 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST);
      return exp;
    }
    default: break;
    }
    uint32_t old = __atomic_load_n(p, __ATOMIC_SEQ_CST), nw;
    do {
      switch (in->cmp) {
      case A_ADD:
        nw = (uint32_t)bf(global ? ftz(ftz(f32(old)) + ftz(f32(x)))
                                 : f32(old) + f32(x));
        break;
      case A_MIN:
        nw = k == K_S ? ((int32_t)old < (int32_t)x ? old : x)
                      : (old < x ? old : x);
        break;
      case A_MAX:
        nw = k == K_S ? ((int32_t)old > (int32_t)x ? old : x)
                      : (old > x ? old : x);
        break;
      case A_INC: nw = old >= x ? 0 : old + 1; break;
      case A_DEC: nw = old == 0 || old > x ? x : old - 1; break;
      default: nw = old;
      }
    } while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    return old;
  }
  uint64_t *p = (uint64_t *)(void *)h;
  switch (in->cmp) {
  case A_ADD:
    if (k != K_F) return __atomic_fetch_add(p, a, __ATOMIC_SEQ_CST);
    break;
  case A_AND: return __atomic_fetch_and(p, a, __ATOMIC_SEQ_CST);
  case A_OR: return __atomic_fetch_or(p, a, __ATOMIC_SEQ_CST);
  case A_XOR: return __atomic_fetch_xor(p, a, __ATOMIC_SEQ_CST);
  case A_EXCH: return __atomic_exchange_n(p, a, __ATOMIC_SEQ_CST);
  case A_CAS: {
    uint64_t exp = a;
    __atomic_compare_exchange_n(p, &exp, b, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return exp;
  }
  default: break;
  }
  uint64_t old = __atomic_load_n(p, __ATOMIC_SEQ_CST), nw;
  do {
    switch (in->cmp) {
    case A_ADD: nw = bd(f64(old) + f64(a)); break;
    case A_MIN:
      nw = k == K_S ? ((int64_t)old < (int64_t)a ? old : a)
                    : (old < a ? old : a);
      break;
    case A_MAX:
      nw = k == K_S ? ((int64_t)old > (int64_t)a ? old : a)
                    : (old > a ? old : a);
      break;
    case A_INC: nw = old >= a ? 0 : old + 1; break;
    case A_DEC: nw = old == 0 || old > a ? a : old - 1; break;
    default: nw = old;
    }
  } while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
  return old;
}

/* Whether the n-byte accesses at Bs[l] + off of the lanes of em (Bs the
   register of slot in->base) all lie in [lo, hi), aligned to n: the fast
   forms' one check for the whole group, from the register's span where
   it has one, else from a loop the compiler vectorizes, which records the
   span. It answers 0 (the general code runs, and finds the lane that
   faults) also for a group whose offsets from lo do not all fit in 31
   bits. */
static ALWAYS_INLINE int span_ok(warp *wp, const ins *in, uint32_t em,
                                 const uint64_t *Bs, uint64_t off, unsigned n,
                                 uint64_t lo, uint64_t hi, int64_t *amn,
                                 int64_t *amx) {
  if (!em) return 1;
  if (hi < lo || hi - lo < n || (lo & (n - 1))) return 0;
  uint64_t last = hi - lo - n, from = off - lo, any = 0;
  span *s = &wp->spans[(uint32_t)in->base % SIM_SPANS];
  if (s->slot == in->base && !(em & ~s->mask) && s->lo == lo) {
    int64_t delta = (int64_t)(from - s->from);
    *amn = s->mn + delta;
    *amx = s->mx + delta;
    return last < INT64_MAX && delta >= -s->mn
           && delta <= (int64_t)last - s->mx
           && !((s->any | (uint64_t)delta) & (n - 1));
  }
  int32_t mn = INT32_MAX, mx = 0;
  LOOP(uint64_t d = Bs[l] + from;
       int32_t t = (int32_t)(uint32_t)d;
       any |= d;
       mn = t < mn ? t : mn;
       mx = t > mx ? t : mx);
  if (any >= 0x80000000u) return 0;
  if (!in->inval) { /* (it would change the register it has read) */
    s->slot = in->base;
    s->mask = em;
    s->lo = lo, s->from = from, s->any = any;
    s->mn = mn, s->mx = mx;
  }
  *amn = mn;
  *amx = mx;
  return (uint64_t)mx <= last && !(any & (n - 1));
}

/* Forgets the spans of the registers in writes. */
static inline void span_forget(warp *wp, const ins *in) {
  for (int j = 0; j < 4; j++) {
    span *s = &wp->spans[(uint32_t)in->d[j] % SIM_SPANS];
    if (in->d[j] >= 0 && s->slot == in->d[j]) s->slot = -1;
  }
}

/* The allocation found live that holds address p, or -1. */
static inline int range_of(const worker *w, uint64_t p) {
  for (int i = 0; i < SIM_RANGES; i++)
    if (p >= w->lo[i] && p < w->hi[i]) return i;
  return -1;
}

/* span_ok for a global access (a store: write): in the allocation found
   live that holds the first lane's address. */
static ALWAYS_INLINE int global_span_ok(worker *w, warp *wp, const ins *in,
                                        uint32_t em, const uint64_t *Bs,
                                        uint64_t off, unsigned n, int write) {
  if (!em) return 1;
  int i = range_of(w, Bs[__builtin_ctz(em)] + off);
  int64_t mn, mx;
  if (i < 0 || !span_ok(wp, in, em, Bs, off, n, w->lo[i], w->hi[i], &mn, &mx))
    return 0;
  if (w->touch)
    touch(w, (unsigned)i, write, w->lo[i] + (uint64_t)mn,
          w->lo[i] + (uint64_t)mx + n);
  for (uint32_t q = w->early ? em & ~wp->waited : 0; q; q &= q - 1) {
    int l = __builtin_ctz(q); /* lanes before their wait, one by one */
    exec_early(w, wp, l, in, Bs[l] + off, n, write);
  }
  return 1;
}

/* The fast forms' loads and stores of n bytes at host address H + Bs[l]
   (H an integer, checked by span_ok); a signed load of 4 sign-extends. */
#define LD_LANES(H, n, sgn)                                                 \
  LOOP(const unsigned char *h_ = (const unsigned char *)(H + Bs[l]);      \
       if (n == 8) { memcpy(&D[l], h_, 8); }                               \
       else { uint32_t v_; memcpy(&v_, h_, 4);                             \
              D[l] = sgn ? (uint64_t)(int64_t)(int32_t)v_ : v_; })
#define ST_LANES(H, n)                                                      \
  LOOP(unsigned char *h_ = (unsigned char *)(H + Bs[l]);                  \
       if (n == 8) { memcpy(h_, &V[l], 8); }                               \
       else { uint32_t v_ = (uint32_t)V[l]; memcpy(h_, &v_, 4); })

/* tex, suld, sust: each lane of em through the texture or surface object
   in its base register, by the caller's functions; 1 after a fault. */
static int ins_texture(worker *w, warp *wp, const ins *in, uint32_t em) {
  const sim_launch *sl = w->rc->l;
  const uint64_t *H = R(in->base);
  const int32_t src[3] = { in->a, in->b, in->c };
  int dims = in->cmp;
  if (in->op == OP_TEX ? !sl->tex : !sl->surf) {
    exec_fault(w, wp, 0, in, SIM_ILLEGAL_INSTRUCTION,
               "texture or surface instruction with no texture unit here");
    return 1;
  }
  LOOP(int code;
       if (in->op == OP_TEX) {
         float c[3] = { 0, 0, 0 }, out[4];
         for (int i = 0; i < dims; i++) {
           uint32_t u = (uint32_t)R(src[i])[l];
           if (in->t2k == K_S) c[i] = (float)(int32_t)u;
           else memcpy(&c[i], &u, 4);
         }
         code = sl->tex(sl->ud, H[l], dims, c, out);
         for (int i = 0; i < 4 && !code; i++) {
           uint32_t u;
           memcpy(&u, &out[i], 4);
           R(in->d[i])[l] = u;
         }
       } else {
         int64_t x[3] = { 0, 0, 0 };
         for (int i = 0; i < dims; i++)
           x[i] = (int64_t)(int32_t)(uint32_t)R(src[i])[l];
         size_t n = in->tb / 8;
         unsigned char v[32];
         if (in->op == OP_SUST)
           for (int i = 0; i < in->vec; i++) memcpy(v + i * n, &R(in->d[i])[l], n);
         code = sl->surf(sl->ud, H[l], dims, x[0], x[1], x[2], v, n * in->vec,
                         in->op == OP_SUST, in->bop);
         if (in->op == OP_SULD && !code)
           for (int i = 0; i < in->vec; i++) {
             uint64_t u = 0;
             memcpy(&u, v + i * n, n);
             R(in->d[i])[l] = u;
           }
       }
       if (code) {
         exec_fault(w, wp, l, in, code, in->op == OP_TEX
                    ? "not a texture object" : "surface access out of bounds "
                    "or not a surface object");
         return 1;
       });
  return 0;
}

/* ld: each lane of em loads from in's space; 1 after a fault. */
static ALWAYS_INLINE int ins_ld(worker *w, warp *wp, const ins *in, uint32_t em,
                                uint64_t *D) {
  unsigned n = in->tb / 8;
  int sgn = in->tk == K_S, sp = in->space;
  const uint64_t *Bs = in->base >= 0 ? R(in->base) : NULL;
  if (sp == SP_PARAM && !Bs) { /* a kernel parameter: one value */
    const unsigned char *h = addr_of(w, wp, 0, in, sp, (uint64_t)in->off,
                                     n * in->vec, 0);
    if (!h) return 1;
    for (int i = 0; i < in->vec; i++) {
      uint64_t v = load(h + i * n, n, sgn), *E = R(in->d[i]);
      LOOP(E[l] = v);
    }
    return 0;
  }
  if (sp == SP_GLOBAL && in->vec == 1) {
    uint64_t off = (uint64_t)in->off;
    LOOP(const unsigned char *h = global_at(w, wp, l, in, Bs[l] + off, n, 0);
         if (!h) return 1;
         D[l] = load(h, n, sgn));
    return 0;
  }
  if (sp == SP_SHARED && in->vec == 1) {
    uint64_t off = (uint64_t)in->off, top = w->rc->nshared;
    LOOP(uint64_t a = Bs[l] + off;
         if (a >= top || top - a < n || (a & (n - 1))) {
           addr_of(w, wp, l, in, sp, a, n, 0); /* the fault */
           return 1;
         }
         D[l] = load(w->shared + a, n, sgn));
    return 0;
  }
  LOOP(uint64_t a = (Bs ? Bs[l] : 0) + (uint64_t)in->off;
       const unsigned char *h = addr_of(w, wp, l, in, sp, a, n * in->vec, 0);
       if (!h) return 1;
       for (int i = 0; i < in->vec; i++)
         R(in->d[i])[l] = load(h + i * n, n, sgn));
  return 0;
}

/* st: each lane of em stores to in's space; 1 after a fault. */
static ALWAYS_INLINE int ins_st(worker *w, warp *wp, const ins *in,
                                uint32_t em) {
  unsigned n = in->tb / 8;
  int sp = in->space;
  const uint64_t *Bs = in->base >= 0 ? R(in->base) : NULL;
  if (sp == SP_GLOBAL && in->vec == 1) {
    uint64_t off = (uint64_t)in->off;
    const uint64_t *V = R(in->d[0]);
    LOOP(unsigned char *h = global_at(w, wp, l, in, Bs[l] + off, n, 1);
         if (!h) return 1;
         store(h, n, V[l]));
    return 0;
  }
  if (sp == SP_SHARED && in->vec == 1) {
    uint64_t off = (uint64_t)in->off, top = w->rc->nshared;
    const uint64_t *V = R(in->d[0]);
    LOOP(uint64_t a = Bs[l] + off;
         if (a >= top || top - a < n || (a & (n - 1))) {
           addr_of(w, wp, l, in, sp, a, n, 1); /* the fault */
           return 1;
         }
         store(w->shared + a, n, V[l]));
    return 0;
  }
  if (sp == SP_PARAM) {
    exec_fault(w, wp, 0, in, SIM_ILLEGAL_ADDRESS,
               "store to a kernel parameter");
    return 1;
  }
  LOOP(uint64_t a = (Bs ? Bs[l] : 0) + (uint64_t)in->off;
       unsigned char *h = addr_of(w, wp, l, in, sp, a, n * in->vec, 1);
       if (!h) return 1;
       for (int i = 0; i < in->vec; i++)
         store(h + i * n, n, R(in->d[i])[l]));
  return 0;
}

/* atom and red: each lane of em in turn; 1 after a fault. */
static ALWAYS_INLINE int ins_atom(worker *w, warp *wp, const ins *in,
                                  uint32_t em, uint64_t *D, const uint64_t *A,
                                  const uint64_t *B) {
  unsigned n = in->tb / 8;
  const uint64_t *Bs = R(in->base);
  LOOP(uint64_t a = Bs[l] + (uint64_t)in->off;
       unsigned char *h = addr_of(w, wp, l, in, in->space, a, n, 1);
       if (!h) return 1;
       int global = in->space == SP_GLOBAL
                    || (in->space == SP_GENERIC && a < GEN_LOCAL);
       D[l] = atomic_op(in, h, A[l], B[l], global));
  return 0;
}

#endif
