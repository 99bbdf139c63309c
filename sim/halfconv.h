/* f16 and bf16 to and from float, rounded to nearest even: for the
   stand-ins' arithmetic on half precision data (sim/nccl, sim/blas). */
#ifndef SIM_HALFCONV_H
#define SIM_HALFCONV_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float half_to_float(uint16_t h, int bf) {
  if (bf) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  unsigned e = (h >> 10) & 31, m = h & 1023;
  float v = e == 31 ? (m ? NAN : INFINITY)
          : e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m + 1024), (int)e - 25);
  return h & 0x8000 ? -v : v;
}

static inline uint16_t float_to_half(float f, int bf) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (bf) { /* round to nearest even */
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  float a = fabsf(f);
  if (isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < ldexpf(1, -14)) return sign | (uint16_t)nearbyintf(a * ldexpf(1, 24));
  int e;
  float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
  unsigned r = (unsigned)nearbyintf(ldexpf(m, 11)); /* 11 bits */
  if (r == 2048) { r = 1024; e++; }
  return sign | (uint16_t)((unsigned)(e + 14) << 10 | (r - 1024));
}

#endif
