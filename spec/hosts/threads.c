/* The core's threading contract: any number of lua_States, each used by one
   thread at a time, on any thread.

   (a) N threads start at once (a barrier), so their first GPU calls race:
       each makes its own state, loads the spec kernels, uploads, launches;
       then, all at once, captures small graphs in a loop, replays each and
       downloads a result (a wait for the whole device) while the others
       capture: no thread's capture breaks another's; then, all at once
       again, checks the result and compiles one fixed source with NVRTC
       twice into the shared cache (XDG_CACHE_HOME): every thread must get
       the same PTX and no temporary file may stay;
   (b) a state made and used on one thread is used on another (the first
       joined before), with the same objects, then closed there;
   (c) a state's objects are collected on a second thread that made no other
       call, and the state is closed on a third: no finalizer error.

   Prints each failed check; exits 0 only if all passed.

     threads LUA_DIR PTX [N] */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

static const char *lua_dir, *ptx_path;

/* One state and what happened to it; fail is set at the first failure. */
typedef struct job {
  int id;
  lua_State *L;
  pthread_barrier_t *start;
  char *ptx;            /* (a): the PTX NVRTC gave, malloc'd */
  char cache[1024];     /* (a): the cache directory, or "" */
  unsigned warnings;    /* Lua warnings (finalizer errors) */
  char fail[1024];
} job;

static void failf(job *j, const char *fmt, ...) {
  if (j->fail[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(j->fail, sizeof j->fail, fmt, ap);
  va_end(ap);
}

/* Counts whole warnings; control messages ("@on") are not warnings. */
static void warnf(void *ud, const char *msg, int tocont) {
  job *j = ud;
  if (!tocont && msg[0] != '@') j->warnings++;
}

static int traceback(lua_State *L) {
  luaL_traceback(L, L, luaL_tolstring(L, 1, NULL), 1);
  return 1;
}

/* Runs chunk with the nargs values on top of the stack as its ...; leaves
   nres results. Returns 0 (and records why) when it raised. */
static int run(job *j, const char *what, const char *chunk, int nargs,
               int nres) {
  lua_State *L = j->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  if (luaL_loadstring(L, chunk) != LUA_OK) {
    failf(j, "%s: %s", what, lua_tostring(L, -1));
    return 0;
  }
  lua_rotate(L, base + 1, 2); /* handler, chunk, args */
  if (lua_pcall(L, nargs, nres, base + 1) != LUA_OK) {
    failf(j, "%s: %s", what, lua_tostring(L, -1));
    lua_settop(L, base);
    return 0;
  }
  lua_remove(L, base + 1);
  return 1;
}

static void open_state(job *j) {
  j->L = luaL_newstate();
  luaL_openlibs(j->L);
  lua_setwarnf(j->L, warnf, j);
  cugraph_openlibs(j->L, lua_dir);
}

static void close_state(job *j, const char *what) {
  lua_close(j->L);
  j->L = NULL;
  if (j->warnings)
    failf(j, "%s: %u finalizer warning%s", what, j->warnings,
          j->warnings == 1 ? "" : "s");
}

/* Spawns fn(j) on a new thread and joins it: one thread at a time. */
static void on_thread(void *(*fn)(void *), job *j) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, j) != 0) {
    failf(j, "pthread_create failed");
    return;
  }
  pthread_join(t, NULL);
}

/* ---- (a) -------------------------------------------------------------- */

static const char kernel_source[] =
  "extern \"C\" __global__ void twice(float *x, int n) {\n"
  "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
  "  if (i < n) x[i] *= 2.0f;\n"
  "}\n";

/* Phase 1, all threads at once: y = 2x + id by saxpy. Work goes to s, so
   nothing synchronizes the whole context. */
static const char race_start[] =
  "local ptx, id = ...\n"
  "local cuda = require 'cugraph'\n"
  "local m = cuda.load_module(ptx)\n"
  "local s = cuda.stream()\n"
  "local n = 1000\n"
  "local x, y = cuda.buffer('f32', n), cuda.buffer('f32', n)\n"
  "local xs, ys = {}, {}\n"
  "for i = 1, n do xs[i] = i; ys[i] = id end\n"
  "x:upload(xs, 0, s); y:upload(ys, 0, s)\n"
  "m.saxpy:launch(s, 4, 256, 2, x, y, n)\n"
  "s:synchronize()\n"
  "G = { cuda = cuda, m = m, s = s, x = x, y = y, n = n, id = id,\n"
  "      k = cuda.scalar('f32', 0) }\n";

/* Phase 2, all threads at once: ROUNDS times a capture of y += k, a replay
   with k = 1, 2 or 3, and a download of y[1]: the downloads wait for the
   whole device while other threads capture. */
enum { ROUNDS = 200 };
static const char race_capture[] =
  "local rounds = ...\n"
  "local m, s, y, k, n = G.m, G.s, G.y, G.k, G.n\n"
  "local sum = 0\n"
  "for r = 1, rounds do\n"
  "  local g = s:capture(function()\n"
  "    m.add_scalar_f32:launch(s, 4, 256, y, k, n)\n"
  "  end)\n"
  "  local v = r % 3 + 1\n"
  "  k:set(v); g:launch(s); sum = sum + v\n"
  "  local got = y:download('table', 0, 1)[1]\n"
  "  assert(got == 2 + G.id + sum, ('round %d: y[1] is %s, expected %s')\n"
  "         :format(r, got, 2 + G.id + sum))\n"
  "  g:free()\n"
  "end\n"
  "G.sum = sum\n";

/* Phase 3, all at once: check, then compile one source twice through the
   shared cache. */
static const char race_end[] =
  "local src = ...\n"
  "local cuda, id = G.cuda, G.id\n"
  "local out = G.y:download()\n"
  "for i = 1, G.n do\n"
  "  local want = 2 * i + id + G.sum\n"
  "  if out[i] ~= want then\n"
  "    error(('y[%d] is %s, expected %s'):format(i, out[i], want))\n"
  "  end\n"
  "end\n"
  "local p1 = cuda.ptx(src, { arch = 'sm_90' })\n"
  "local p2 = cuda.ptx(src, { arch = 'sm_90' })\n"
  "assert(p1 == p2, 'two compiles of one source differ')\n"
  "assert(p1:find('.entry twice', 1, true), 'no entry twice in the PTX')\n"
  "return p1, cuda.compile_cache_dir() or ''\n";

/* Every thread reaches every barrier, failed or not. */
static void *race(void *arg) {
  job *j = arg;
  pthread_barrier_wait(j->start);
  open_state(j);
  lua_pushstring(j->L, ptx_path);
  lua_pushinteger(j->L, j->id);
  run(j, "race", race_start, 2, 0);
  pthread_barrier_wait(j->start);
  if (!j->fail[0]) {
    lua_pushinteger(j->L, ROUNDS);
    run(j, "race", race_capture, 1, 0);
  }
  pthread_barrier_wait(j->start);
  if (!j->fail[0]) {
    lua_pushstring(j->L, kernel_source);
    if (run(j, "race", race_end, 1, 2)) {
      j->ptx = strdup(lua_tostring(j->L, -2));
      snprintf(j->cache, sizeof j->cache, "%s", lua_tostring(j->L, -1));
      lua_pop(j->L, 2);
    }
  }
  close_state(j, "race");
  return NULL;
}

/* Temporary files of the cache ("<key>.ptx.tmp.*") left behind. */
static int stray_files(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  if (!d) return 0;
  while ((e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

static int check_race(int n) {
  pthread_barrier_t start;
  job *jobs = calloc((size_t)n, sizeof *jobs);
  pthread_t *t = calloc((size_t)n, sizeof *t);
  int failed = 0, i;
  pthread_barrier_init(&start, NULL, (unsigned)n);
  for (i = 0; i < n; i++) {
    jobs[i].id = i;
    jobs[i].start = &start;
    if (pthread_create(&t[i], NULL, race, &jobs[i]) != 0) {
      fprintf(stderr, "threads: pthread_create failed\n");
      exit(1); /* the others wait at the barrier for ever */
    }
  }
  for (i = 0; i < n; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  for (i = 0; i < n; i++) {
    job *j = &jobs[i];
    if (!j->fail[0] && jobs[0].ptx && strcmp(j->ptx, jobs[0].ptx))
      failf(j, "race: the PTX differs from thread 0's");
    if (j->fail[0]) {
      printf("FAIL (a) thread %d: %s\n", i, j->fail);
      failed++;
    }
  }
  if (jobs[0].cache[0] && stray_files(jobs[0].cache)) {
    printf("FAIL (a) temporary files left in %s\n", jobs[0].cache);
    failed++;
  }
  if (!failed) printf("ok (a) %d states on %d threads at once\n", n, n);
  for (i = 0; i < n; i++) free(jobs[i].ptx);
  free(jobs);
  free(t);
  return failed;
}

/* ---- (b) -------------------------------------------------------------- */

static const char made_chunk[] =
  "local ptx = ...\n"
  "local cuda = require 'cugraph'\n"
  "local m = cuda.load_module(ptx)\n"
  "local s = cuda.stream()\n"
  "local u = cuda.buffer('u32', 64):fill(0)\n"
  "local base = cuda.scalar('u32', 0)\n"
  "local g = s:capture(function() m.iota_u32:launch(s, 1, 64, u, 7, 64) end)\n"
  "g:launch(s); s:synchronize()\n"
  "assert(u:download()[64] == 70, 'iota on the first thread')\n"
  "T = { cuda = cuda, m = m, s = s, u = u, g = g, base = base }\n";

static const char handed_chunk[] =
  "local cuda, m, s, u, g = T.cuda, T.m, T.s, T.u, T.g\n"
  "u:fill(1)\n"
  "assert(u:download()[64] == 1, 'fill on the second thread')\n"
  "g:launch(s); s:synchronize()\n"
  "assert(u:download()[64] == 70, 'replay on the second thread')\n"
  "m.iota_u32:launch(s, 1, 64, u, 100, 64); s:synchronize()\n"
  "assert(u:download()[1] == 100, 'launch on the second thread')\n"
  "local y = cuda.buffer('u32', 64)\n"
  "local g2 = s:capture(function() y:copy(u, s) end)\n"
  "g2:launch(s); s:synchronize()\n"
  "assert(y:download()[64] == 163, 'new graph on the second thread')\n"
  "g2:free(); y:free(); T.base:free()\n"
  "assert(cuda.status().finalizer_errors == 0, cuda.status().last_finalizer_error)\n";

static void *made(void *arg) {
  job *j = arg;
  open_state(j);
  lua_pushstring(j->L, ptx_path);
  run(j, "made on thread 1", made_chunk, 1, 0);
  return NULL;
}

static void *handed(void *arg) {
  job *j = arg;
  if (!j->fail[0]) run(j, "used on thread 2", handed_chunk, 0, 0);
  close_state(j, "closed on thread 2");
  return NULL;
}

static int check_handed(void) {
  job j = {0};
  on_thread(made, &j);
  if (j.L) on_thread(handed, &j);
  if (j.fail[0]) {
    printf("FAIL (b) %s\n", j.fail);
    return 1;
  }
  printf("ok (b) a state made on one thread, used and closed on another\n");
  return 0;
}

/* ---- (c) -------------------------------------------------------------- */

static const char collected_chunk[] =
  "T = nil\n"
  "collectgarbage(); collectgarbage()\n"
  "local st = require('cugraph').status()\n"
  "assert(st.finalizer_errors == 0, st.last_finalizer_error)\n";

static void *collect(void *arg) {
  job *j = arg;
  if (!j->fail[0]) run(j, "collected on thread 2", collected_chunk, 0, 0);
  return NULL;
}

/* Closes the state with KEEP's objects still alive. */
static void *closing(void *arg) {
  close_state(arg, "closed on thread 3");
  return NULL;
}

static const char kept_chunk[] =
  "local ptx = ...\n"
  "local cuda = require 'cugraph'\n"
  "local m = cuda.load_module(ptx)\n"
  "local s = cuda.stream()\n"
  "local x = cuda.buffer('i32', 64):fill(0)\n"
  "local p = cuda.scalar('u32', 1)\n"
  "local g = s:capture(function() m.mark_u32:launch(s, 1, 1, x, p, 64) end)\n"
  "g:launch(s); s:synchronize()\n"
  "KEEP = { m, s, x, p, g, cuda.event():record(s) }\n";

/* made_chunk's objects (T), then one live object of each kind (KEEP). */
static void *kept(void *arg) {
  job *j = arg;
  made(j);
  lua_pushstring(j->L, ptx_path);
  run(j, "made on thread 1", kept_chunk, 1, 0);
  return NULL;
}

static int check_collected(void) {
  job j = {0};
  on_thread(kept, &j);
  if (j.L) on_thread(collect, &j);
  if (j.L) on_thread(closing, &j);
  if (j.fail[0]) {
    printf("FAIL (c) %s\n", j.fail);
    return 1;
  }
  printf("ok (c) objects collected and the state closed on other threads\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: threads LUA_DIR PTX [N]\n");
    return 2;
  }
  lua_dir = argv[1];
  ptx_path = argv[2];
  int n = argc == 4 ? atoi(argv[3]) : 8;
  if (n < 1 || n > 256) {
    fprintf(stderr, "threads: N must be 1 to 256\n");
    return 2;
  }
  int failed = check_race(n) + check_handed() + check_collected();
  printf("%s\n", failed ? "threads: FAILED" : "threads: all passed");
  return failed ? 1 : 0;
}
