/* The compiler's disk cache: entries named by a 128-bit hash of everything
   that decides the output, each used only when its header, length and
   checksum agree, written so that readers in any thread or process see a
   whole entry or none, and kept under a size cap by evicting the least
   recently used. Pure C, no Lua. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "base/env.h"
#include "kernel/cache.h"

#define CACHE_MAGIC "cugraph-lua-nvrtc 3" /* bump when the format changes */
#define CACHE_EXT ".nvrtc"
#define CACHE_MAX ((off_t)1 << 30)       /* larger entries are not read */
#define CACHE_CAP ((uint64_t)256 << 20)  /* default size cap of the cache */
enum { PATHLEN = CG_CACHE_PATHLEN };

const char *const cg_cache_magic = CACHE_MAGIC;

/* Two unrelated 64-bit lanes, FNV-1a and multiply/xorshift: a 128-bit key
   that no accidental pair of inputs shares. */

/* Writes the cache directory into out, creating it (and its parents) mode
   0700 as needed: $CUGRAPH_LUA_CACHE_DIR, else $XDG_CACHE_HOME/cugraph-lua,
   else $HOME/.cache/cugraph-lua; returns 0 when it is not usable. */
int cg_cache_dir(char *out, size_t n) {
  const char *own = getenv("CUGRAPH_LUA_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  struct stat st;
  char *p;
  int w;
  if (own && *own)
    w = snprintf(out, n, "%s", own);
  else if (xdg && xdg[0] == '/') /* XDG: relative paths are invalid */
    w = snprintf(out, n, "%s/cugraph-lua", xdg);
  else if (home && home[0] == '/')
    w = snprintf(out, n, "%s/.cache/cugraph-lua", home);
  else
    return 0;
  if (w <= 0 || (size_t)w >= n) return 0;
  for (p = out + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(out, 0700); /* failures show in the stat below */
    *p = '/';
  }
  mkdir(out, 0700);
  return stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

int cg_cache_cap(uint64_t *cap, char *err, size_t n) {
  *cap = CACHE_CAP;
  return cg_env_bytes("CUGRAPH_LUA_CACHE_SIZE", cap, err, n) < 0 ? -1 : 0;
}

static size_t read_all(int fd, char *buf, size_t n) {
  size_t got = 0;
  ssize_t r;
  while (got < n) {
    r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  return got;
}

static int write_all(int fd, const char *buf, size_t n) {
  ssize_t r;
  while (n > 0) {
    r = write(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    buf += r;
    n -= (size_t)r;
  }
  return 1;
}

/* Entry: "<magic> <key> <payload length> <checksum>\n" then the payload:
   "<ptx length> <cubin length>\n", the PTX, the cubin, the types text. */
static int cache_header(char *out, size_t n, const char *key, const char *data,
                        size_t len) {
  cg_hash h = CG_HASH_INIT;
  cg_hash_bytes(&h, data, len);
  return snprintf(out, n, "%s %s %zu %016llx\n", CACHE_MAGIC, key, len,
                  (unsigned long long)(h.a ^ h.b));
}

/* The payload of the entry at path, in memory from alloc (which may raise
   or return NULL), with its length in *len; NULL when the entry is absent
   or fails any check. A hit makes the entry the most recently used (its
   times are the LRU clock). */
const char *cg_cache_get(const char *path, const char *key, size_t *len,
                         void *(*alloc)(void *ud, size_t n), void *ud) {
  struct stat st;
  char *buf, *p, want[128];
  size_t size, got = 0, hdr, skip = strlen(CACHE_MAGIC) + 34;
  int fd;
  *len = 0;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CACHE_MAX)
    return NULL;
  size = (size_t)st.st_size;
  buf = alloc(ud, size + 1); /* +1: sees a file that grew */
  if (!buf) return NULL;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    got = read_all(fd, buf, size + 1);
    close(fd);
  }
  buf[got < size ? got : size] = '\0';
  p = memchr(buf, '\n', got);
  if (got != size || !p) return NULL;
  hdr = (size_t)(p - buf) + 1;
  /* the length follows "<magic> <32 hex> "; all of it is checked below */
  if (hdr > 100 || hdr <= skip) return NULL;
  for (p = buf + skip; *p >= '0' && *p <= '9' && *len <= size; p++)
    *len = *len * 10 + (size_t)(*p - '0');
  if (*len != size - hdr ||
      (size_t)cache_header(want, sizeof want, key, buf + hdr, *len) != hdr ||
      memcmp(want, buf, hdr))
    return NULL;
  utimensat(AT_FDCWD, path, NULL, 0);
  return buf + hdr;
}

typedef struct cache_file {
  struct timespec used;
  uint64_t size;
  char name[40];
} cache_file;

static int older(const void *a, const void *b) {
  const struct timespec *x = &((const cache_file *)a)->used;
  const struct timespec *y = &((const cache_file *)b)->used;
  if (x->tv_sec != y->tv_sec) return x->tv_sec < y->tv_sec ? -1 : 1;
  return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* An entry's file name: 32 hex digits and the extension (or ".ptx", the
   entries of the first format, left to age out). */
static int entry_name(const char *s) {
  size_t n = strlen(s);
  return n > 32 && strspn(s, "0123456789abcdef") == 32 &&
         (!strcmp(s + 32, CACHE_EXT) || !strcmp(s + 32, ".ptx"));
}

/* Removes the least recently used entries until the rest fit in cap. No
   Lua call: the list is plain malloc'd memory. */
static void cache_evict(const char *dir, uint64_t cap) {
  DIR *d = opendir(dir);
  struct dirent *de;
  struct stat st;
  cache_file *v = NULL, *grown;
  size_t n = 0, c = 0, i;
  uint64_t total = 0;
  char path[PATHLEN];
  if (!d) return;
  while ((de = readdir(d)) != NULL) {
    if (!entry_name(de->d_name) ||
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= PATHLEN ||
        stat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (n == c) {
      c = c ? 2 * c : 64;
      if (!(grown = realloc(v, c * sizeof *v))) break;
      v = grown;
    }
    v[n].used = st.st_mtim;
    v[n].size = (uint64_t)st.st_size;
    size_t len = strnlen(de->d_name, sizeof v[n].name); /* entry_name: short */
    if (len == sizeof v[n].name) continue;
    memcpy(v[n].name, de->d_name, len + 1);
    total += v[n++].size;
  }
  closedir(d);
  if (total > cap) qsort(v, n, sizeof *v, older);
  for (i = 0; i < n && total > cap; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
    if (unlink(path) == 0) total -= v[i].size;
  }
  free(v);
}

/* Writes the entry to a private temporary file, then renames it into place,
   so readers, in any thread or process, see a whole entry or none. The
   temporary name holds the pid and a hash of the time and the thread, so
   concurrent writers do not share one; O_EXCL turns a clash into one lost
   write. Failures leave no file behind. Then the cache is brought under
   its cap. */
void cg_cache_put(const char *dir, const char *key, const char *data,
                  size_t len, uint64_t cap) {
  char path[PATHLEN], tmp[PATHLEN], hdr[128];
  struct timespec ts;
  cg_hash h = CG_HASH_INIT;
  pthread_t self = pthread_self();
  int fd, n, ok;
  clock_gettime(CLOCK_REALTIME, &ts);
  cg_hash_bytes(&h, &ts, sizeof ts);
  cg_hash_bytes(&h, &self, sizeof self);
  if (snprintf(path, sizeof path, "%s/%s" CACHE_EXT, dir, key) >= PATHLEN ||
      snprintf(tmp, sizeof tmp, "%s/%s" CACHE_EXT ".tmp.%ld.%016llx", dir, key,
               (long)getpid(), (unsigned long long)(h.a ^ h.b)) >= PATHLEN)
    return;
  n = cache_header(hdr, sizeof hdr, key, data, len);
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ok = write_all(fd, hdr, (size_t)n) && write_all(fd, data, len);
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
  cache_evict(dir, cap);
}


int cg_cache_path(char *out, size_t n, const char *dir, const char *key) {
  int w = snprintf(out, n, "%s/%s" CACHE_EXT, dir, key);
  return w > 0 && (size_t)w < n;
}
