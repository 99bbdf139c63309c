#include "base/hash.h"

void cg_hash_bytes(cg_hash *h, const void *p, size_t n) {
  const unsigned char *s = p;
  size_t i;
  for (i = 0; i < n; i++) {
    h->a = (h->a ^ s[i]) * 0x100000001b3u;
    h->b = (h->b ^ s[i]) * 0x9e3779b97f4a7c15u;
    h->b ^= h->b >> 29;
  }
}

/* Length-prefixed, so a sequence of fields hashes unambiguously. */
void cg_hash_field(cg_hash *h, const char *s, size_t n) {
  unsigned char len[8];
  int i;
  for (i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
  cg_hash_bytes(h, len, sizeof len);
  cg_hash_bytes(h, s, n);
}
