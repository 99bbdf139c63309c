/* The interpreter's warp-level instructions, across the lanes of a group:
   the wait of the .sync forms for their member masks, then redux, shfl,
   vote and match, each lane over the lanes of its own member mask. Part
   of the loop's translation unit (ptx_exec.c, the only file to include
   it). */
#ifndef PTX_WARP_H
#define PTX_WARP_H

#include "ptx_exec.h"

/* Lanes of f parked at a bar.warp.sync: they have arrived for another
   bar.warp.sync (PTX counts any bar.warp.sync of the mask). */
static uint32_t parked_wsync(const frame *f, const ins *code) {
  uint32_t r = 0;
  for (uint32_t q = f->park; q; q &= q - 1) {
    int l = __builtin_ctz(q);
    if (code[f->pcs[l]].op == OP_WSYNC) r |= 1u << l;
  }
  return r;
}

/* A .sync warp instruction at f's PC: the lanes of *em wait until every
   lane of their member masks that is not exited, not at a barrier (wait)
   and in this frame executes it too. Lanes parked here join the group
   (*em grows: their guard held when they parked, and nothing of theirs has
   run since). When some member runs elsewhere, the group parks and 1 is
   returned; the others run, and meet it here, or leave it released. */
static int warp_wait(warp *wp, frame *f, const ins *code, const ins *in,
                     uint32_t *em, uint32_t wait) {
  int pc = f->pc;
  if (f->park) {
    uint32_t here = 0;
    for (uint32_t q = f->park; q; q &= q - 1)
      if (f->pcs[__builtin_ctz(q)] == pc) here |= 1u << __builtin_ctz(q);
    f->park &= ~here;
    f->mask |= here;
    *em |= here;
  }
  if (f->release) {
    f->release = 0;
    return 0;
  }
  uint32_t others = f->live & ~f->mask & ~wp->exited & ~wait;
  if (!others) return 0; /* every lane that could come is here */
  const uint64_t *M = R(in->e);
  uint32_t need = 0;
  for (uint32_t q = *em; q; q &= q - 1) need |= (uint32_t)M[__builtin_ctz(q)];
  uint32_t absent = need & others;
  if (in->op == OP_WSYNC && absent) {
    uint32_t there = parked_wsync(f, code) & absent;
    absent &= ~there;
    if (!absent) /* they pass their bar.warp.sync with this group */
      for (uint32_t q = there; q; q &= q - 1) {
        int l = __builtin_ctz(q), next = ++f->pcs[l];
        f->park &= ~(1u << l);
        if (next < f->other) f->other = next;
      }
  }
  if (!absent) return 0;
  for (uint32_t q = f->mask; q; q &= q - 1) {
    int l = __builtin_ctz(q);
    f->pcs[l] = *em >> l & 1 ? pc : pc + 1; /* guarded off: they go on */
  }
  f->park |= *em;
  f->mask = 0;
  return 1;
}

/* The member mask of lane l (the lanes running together for the forms
   without .sync). */
#define MEMBER(l) (M ? (uint32_t)M[l] & em : em)

/* redux.sync: each lane combines the values of the lanes of its member
   mask; lanes of the same mask get the same result. */
static ALWAYS_INLINE void ins_redux(warp *wp, const ins *in, uint32_t em,
                                    uint64_t *D, const uint64_t *A) {
  const uint64_t *M = R(in->e);
  uint32_t v[32], r[32];
  LOOP(v[l] = (uint32_t)A[l]);
  for (uint32_t todo = em; todo; ) {
    uint32_t grp = MEMBER(__builtin_ctz(todo)), same = 0;
    for (uint32_t q = todo; q; q &= q - 1)
      if (MEMBER(__builtin_ctz(q)) == grp) same |= 1u << __builtin_ctz(q);
    uint32_t acc = 0;
    int first = 1;
    for (uint32_t q = grp; q; q &= q - 1) {
      uint32_t x = v[__builtin_ctz(q)];
      if (first) { acc = x; first = 0; continue; }
      switch (in->cmp) {
      case A_ADD: acc += x; break;
      case A_AND: acc &= x; break;
      case A_OR: acc |= x; break;
      case A_XOR: acc ^= x; break;
      case A_MIN:
        acc = in->tk == K_S ? ((int32_t)x < (int32_t)acc ? x : acc)
                            : (x < acc ? x : acc);
        break;
      default: /* A_MAX */
        acc = in->tk == K_S ? ((int32_t)x > (int32_t)acc ? x : acc)
                            : (x > acc ? x : acc);
      }
    }
    for (uint32_t q = same; q; q &= q - 1) r[__builtin_ctz(q)] = acc;
    todo &= ~same;
  }
  LOOP(D[l] = r[l]);
}

/* shfl: each lane of em reads a lane's value, or keeps its own. A source
   lane outside the mask or not running gives what its register holds
   (PTX: unpredictable). */
static ALWAYS_INLINE void ins_shfl(warp *wp, const ins *in, uint32_t em,
                                   uint64_t *D, const uint64_t *A,
                                   const uint64_t *B, const uint64_t *C) {
  uint64_t v[32];
  uint32_t ok = 0;
  LOOP(uint32_t lane = (uint32_t)l, bv = (uint32_t)B[l] & 31;
       uint32_t cv = (uint32_t)C[l], seg = cv >> 8 & 31, cl = cv & 31;
       uint32_t maxl = (lane & seg) | (cl & ~seg), minl = lane & seg;
       int64_t j;
       int p;
       switch (in->cmp) {
       case SH_UP: j = (int64_t)lane - bv; p = j >= (int64_t)maxl; break;
       case SH_DOWN: j = lane + bv; p = j <= (int64_t)maxl; break;
       case SH_BFLY: j = lane ^ bv; p = j <= (int64_t)maxl; break;
       default: j = minl | (bv & ~seg); p = j <= (int64_t)maxl;
       }
       if (!p) j = lane;
       v[l] = (uint32_t)A[j];
       ok |= (uint32_t)p << l);
  LOOP(D[l] = v[l]);
  if (in->d[1] >= 0) wp->p[in->d[1]] = (wp->p[in->d[1]] & ~em) | (ok & em);
}

/* vote: the predicate across the lanes of each lane's member mask; a lane
   outside it gives 0 to ballot. */
static ALWAYS_INLINE void ins_vote(warp *wp, const ins *in, uint32_t em,
                                   uint64_t *D) {
  const uint64_t *M = in->e >= 0 ? R(in->e) : NULL;
  uint32_t pv = in->bop ? ~wp->p[in->a] : wp->p[in->a], res = 0;
  if (in->cmp == V_BALLOT) {
    LOOP(D[l] = pv & MEMBER(l));
    return;
  }
  LOOP(uint32_t grp = MEMBER(l), t = pv & grp;
       int r = in->cmp == V_ALL ? t == grp : in->cmp == V_ANY ? t != 0
             : (t == 0 || t == grp);
       res |= (uint32_t)r << l);
  wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | res;
}

/* match.sync: the lanes of each lane's member mask with its value (.any),
   or the mask itself when all of them have one value (.all, and p). */
static ALWAYS_INLINE void ins_match(warp *wp, const ins *in, uint32_t em,
                                    uint64_t *D, const uint64_t *A) {
  const uint64_t *M = R(in->e);
  uint64_t v[32];
  uint32_t r[32], all = 0;
  LOOP(v[l] = zx(A[l], in->tb));
  LOOP(uint32_t grp = MEMBER(l), same = 0;
       for (uint32_t q = grp; q; q &= q - 1)
         if (v[__builtin_ctz(q)] == v[l]) same |= 1u << __builtin_ctz(q);
       if (in->cmp == 0) {
         r[l] = same;
       } else {
         r[l] = same == grp ? grp : 0;
         all |= (uint32_t)(same == grp) << l;
       });
  LOOP(D[l] = r[l]);
  if (in->d[1] >= 0) wp->p[in->d[1]] = (wp->p[in->d[1]] & ~em) | all;
}

#endif
