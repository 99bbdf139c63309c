/* The interpreter's warp-level instructions, across the lanes of a group:
   redux, shfl, vote and match. Part of the loop's translation unit
   (ptx_exec.c, the only file to include it). */
#ifndef PTX_WARP_H
#define PTX_WARP_H

#include "ptx_exec.h"

/* redux.sync: the lanes of em combine their values; each gets the result. */
static ALWAYS_INLINE void ins_redux(const ins *in, uint32_t em, uint64_t *D,
                                    const uint64_t *A) {
  int k = in->tk;
  uint64_t acc = 0;
  int first = 1;
  LOOP(uint64_t x = zx(A[l], 32);
       if (first) acc = x, first = 0;
       else switch (in->cmp) {
         case A_ADD: acc = zx(acc + x, 32); break;
         case A_AND: acc &= x; break;
         case A_OR: acc |= x; break;
         case A_XOR: acc ^= x; break;
         case A_MIN: acc = k == K_S ? (sx(x, 32) < sx(acc, 32) ? x : acc)
                                    : (x < acc ? x : acc); break;
         case A_MAX: acc = k == K_S ? (sx(x, 32) > sx(acc, 32) ? x : acc)
                                    : (x > acc ? x : acc); break;
         default: break;
       });
  LOOP(D[l] = acc);
}

/* shfl.sync: each lane of em reads a lane's value, or keeps its own. */
static ALWAYS_INLINE void ins_shfl(warp *wp, const ins *in, uint32_t em,
                                   uint64_t *D, const uint64_t *A,
                                   const uint64_t *B, const uint64_t *C) {
  uint64_t v[32];
  uint32_t ok = 0, member = 0;
  LOOP(member = (uint32_t)R(in->e)[l]; (void)member;
       uint32_t lane = (uint32_t)l, bv = (uint32_t)B[l] & 31;
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

/* vote.sync: the predicate across the lanes of em. */
static ALWAYS_INLINE void ins_vote(warp *wp, const ins *in, uint32_t em,
                                   uint64_t *D, const uint64_t *B) {
  uint32_t pv = in->bop ? ~wp->p[in->a] : wp->p[in->a];
  uint32_t member = em ? (uint32_t)B[__builtin_ctz(em)] : 0;
  uint32_t grp = em & member, t = pv & grp;
  if (in->cmp == V_BALLOT) {
    LOOP(D[l] = t);
  } else {
    int r = in->cmp == V_ALL ? t == grp : in->cmp == V_ANY ? t != 0
          : (t == 0 || t == grp);
    wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (r ? em : 0);
  }
}

/* match.sync: the lanes of em with the same value. */
static ALWAYS_INLINE void ins_match(warp *wp, const ins *in, uint32_t em,
                                    uint64_t *D, const uint64_t *A) {
  uint64_t v[32];
  uint32_t eqall = 1;
  int first = -1;
  LOOP(v[l] = zx(A[l], in->tb);
       if (first < 0) first = l;
       else if (v[l] != v[first]) eqall = 0);
  LOOP(uint32_t r = 0;
       if (in->cmp == 0) {
         for (uint32_t q = em; q; q &= q - 1)
           if (v[__builtin_ctz(q)] == v[l]) r |= 1u << __builtin_ctz(q);
       } else {
         r = eqall ? em : 0;
       }
       D[l] = r);
  if (in->d[1] >= 0)
    wp->p[in->d[1]] = (wp->p[in->d[1]] & ~em) | (eqall ? em : 0);
}

#endif
