/* A 128-bit hash of bytes, pure C: two unrelated 64-bit lanes, FNV-1a and
   multiply/xorshift, so that no accidental pair of inputs shares a key
   (the compile cache's keys and checksums, the rendezvous record's). */
#ifndef CUGRAPH_HASH_H
#define CUGRAPH_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct cg_hash { uint64_t a, b; } cg_hash;
#define CG_HASH_INIT {0xcbf29ce484222325u, 0x6a09e667f3bcc909u}
void cg_hash_bytes(cg_hash *h, const void *p, size_t n);
/* Length-prefixed, so a sequence of fields hashes unambiguously. */
void cg_hash_field(cg_hash *h, const char *s, size_t n);

#endif
