/* The PTX inside a fatbin. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rd(const unsigned char *p, int n) {
  uint64_t v = 0;
  while (n--) v = v << 8 | p[n];
  return v;
}

/* A fatbin: a header (magic 0xba55ed50, version, header size, body size),
   then entries, each with a header (kind 1 PTX, 2 ELF; header size; payload
   size; flags, 0x2000 compressed; ...; uncompressed size at 0x38). */
char *sim_fatbin_ptx(const unsigned char *p, size_t n, char *err,
                     size_t nerr) {
  if (n < 16 || rd(p, 4) != 0xba55ed50u) {
    snprintf(err, nerr, "not a fatbin");
    return NULL;
  }
  size_t at = rd(p + 4, 2) >= 1 ? (size_t)rd(p + 6, 2) : 16;
  size_t end = at + (size_t)rd(p + 8, 8);
  if (end > n) end = n;
  int compressed = 0;
  while (at + 0x40 <= end) {
    const unsigned char *e = p + at;
    size_t hsize = (size_t)rd(e + 4, 4), psize = (size_t)rd(e + 8, 8);
    unsigned kind = (unsigned)rd(e, 2);
    uint64_t flags = rd(e + 0x10, 8);
    if (hsize < 0x40 || at + hsize + psize > end) break;
    if (kind == 1) {
      if (flags & 0x2000) {
        compressed = 1;
      } else {
        const char *text = (const char *)e + hsize;
        size_t len = strnlen(text, psize);
        char *s = malloc(len + 1);
        if (!s) {
          snprintf(err, nerr, "out of memory");
          return NULL;
        }
        memcpy(s, text, len);
        s[len] = '\0';
        return s;
      }
    }
    at += hsize + psize;
  }
  snprintf(err, nerr, compressed
           ? "no PTX in this image the simulator can read (its PTX is "
             "compressed: build it with nvcc -Xfatbin=-compress-all=false "
             "or --no-compress); the simulator runs PTX"
           : "no PTX in this image; the simulator runs PTX");
  return NULL;
}
