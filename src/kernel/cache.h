/* The compiler's disk cache (cache.c): pure C. */
#ifndef CUGRAPH_CACHE_H
#define CUGRAPH_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "base/hash.h"

enum { CG_CACHE_DIRLEN = 3968, CG_CACHE_PATHLEN = 4096 };

/* The format's name, part of every key. */
extern const char *const cg_cache_magic;

/* The cache directory into out, made (mode 0700) as needed:
   $CUGRAPH_LUA_CACHE_DIR, else $XDG_CACHE_HOME/cugraph-lua, else
   $HOME/.cache/cugraph-lua; 0 when it is not usable. */
int cg_cache_dir(char *out, size_t n);
/* The size cap into *cap: $CUGRAPH_LUA_CACHE_SIZE (bytes, with K, M or G),
   else 256M. 0, or -1 with the message (naming the variable) in err. */
int cg_cache_cap(uint64_t *cap, char *err, size_t n);
const char *cg_cache_get(const char *path, const char *key, size_t *len,
                         void *(*alloc)(void *ud, size_t n), void *ud);
/* Writes an entry of len bytes, then brings the cache under cap bytes. */
void cg_cache_put(const char *dir, const char *key, const char *data,
                  size_t len, uint64_t cap);
/* The path of key's entry in dir into out; 0 when it does not fit. */
int cg_cache_path(char *out, size_t n, const char *dir, const char *key);

#endif
