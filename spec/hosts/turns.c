/* States on threads that take turns: each Lua file runs in a fresh
   lua_State (cugraph_openlibs) on a thread of its own, all from the same
   moment, with three globals to order one state's calls against another's
   (a wait made while another thread captures):

     post(name)                 marks name as reached;
     await(name [, timeout_s])  waits until name is reached (10 s by
                                default): whether it was;
     now()                      seconds of a monotonic clock.

   Prints "FAIL <n>: <error>" for the n-th file (from 1) if it raised;
   exits 0 only if none did.

     turns LUA_DIR A.lua B.lua [...] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

enum { MAXFILES = 8, MAXNAMES = 64, NAMELEN = 64 };

static const char *lua_dir;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t posted = PTHREAD_COND_INITIALIZER;
static char names[MAXNAMES][NAMELEN]; /* under lock */
static int nnames;

static int reached(const char *name) {
  for (int i = 0; i < nnames; i++)
    if (!strcmp(names[i], name)) return 1;
  return 0;
}

static int post(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  luaL_argcheck(L, strlen(name) < NAMELEN, 1, "name too long");
  pthread_mutex_lock(&lock);
  if (!reached(name)) {
    if (nnames == MAXNAMES) {
      pthread_mutex_unlock(&lock);
      return luaL_error(L, "post: more than %d names", MAXNAMES);
    }
    strcpy(names[nnames++], name);
  }
  pthread_cond_broadcast(&posted);
  pthread_mutex_unlock(&lock);
  return 0;
}

static int await(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_Number t = luaL_optnumber(L, 2, 10);
  struct timespec end;
  clock_gettime(CLOCK_REALTIME, &end);
  end.tv_sec += (time_t)t;
  end.tv_nsec += (long)((t - (lua_Number)(time_t)t) * 1e9);
  if (end.tv_nsec >= 1000000000L) {
    end.tv_sec++;
    end.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&lock);
  int ok = 1;
  while (ok && !reached(name))
    ok = pthread_cond_timedwait(&posted, &lock, &end) == 0;
  ok = reached(name);
  pthread_mutex_unlock(&lock);
  lua_pushboolean(L, ok);
  return 1;
}

static int now(lua_State *L) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  lua_pushnumber(L, (lua_Number)t.tv_sec + (lua_Number)t.tv_nsec * 1e-9);
  return 1;
}

static int traceback(lua_State *L) {
  luaL_traceback(L, L, luaL_tolstring(L, 1, NULL), 1);
  return 1;
}

typedef struct side {
  const char *path;
  char fail[2048];
} side;

static void *run(void *arg) {
  side *s = arg;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  lua_register(L, "post", post);
  lua_register(L, "await", await);
  lua_register(L, "now", now);
  lua_pushcfunction(L, traceback);
  if (luaL_loadfile(L, s->path) != LUA_OK || lua_pcall(L, 0, 0, 1) != LUA_OK)
    snprintf(s->fail, sizeof s->fail, "%s", lua_tostring(L, -1));
  lua_close(L);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4 || argc - 2 > MAXFILES) {
    fprintf(stderr, "usage: turns LUA_DIR A.lua B.lua [... up to %d]\n",
            MAXFILES);
    return 2;
  }
  lua_dir = argv[1];
  int n = argc - 2;
  side sides[MAXFILES];
  pthread_t t[MAXFILES];
  for (int i = 0; i < n; i++) {
    sides[i].path = argv[i + 2];
    sides[i].fail[0] = '\0';
    if (pthread_create(&t[i], NULL, run, &sides[i]) != 0) {
      fprintf(stderr, "turns: pthread_create failed\n");
      exit(2); /* the others may wait for it */
    }
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    if (sides[i].fail[0]) {
      printf("FAIL %d: %s\n", i + 1, sides[i].fail);
      failed = 1;
    }
  }
  fflush(stdout);
  return failed;
}
