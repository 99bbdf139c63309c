/* dlopen once per process, under a lock rather than pthread_once, so that
   helgrind and DRD see the ordering too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/loader.h"

static void load(cg_library *lib) {
  char paths[CG_MAXPATHS][CG_PATHLEN], first[CG_PATHLEN] = "";
  const char *env = lib->env ? getenv(lib->env) : NULL;
  int n = 0;
  if (env && *env) snprintf(paths[n++], CG_PATHLEN, "%s", env);
  else n = lib->candidates(paths, CG_MAXPATHS);
  void *h = NULL;
  for (int i = 0; i < n && !h; i++) {
    h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
    if (!h && !first[0]) snprintf(first, sizeof first, "%s", dlerror());
  }
  if (!h) { /* name every place tried, the first one's reason */
    char tried[sizeof lib->message / 2] = "";
    for (int i = 0, len = 0; i < n && len < (int)sizeof tried; i++)
      len += snprintf(tried + len, sizeof tried - len, "%s%s", i ? ", " : "",
                      paths[i]);
    snprintf(lib->message, sizeof lib->message, "no %s found (%s): %s%s",
             lib->what, tried, first, lib->hint);
    lib->error = lib->message;
    return;
  }
  for (const cg_symbol *s = lib->symbols; s->name; s++) {
    void *p = dlsym(h, s->name);
    if (!p && !s->optional) {
      snprintf(lib->message, sizeof lib->message, "unusable %s (%s): "
               "missing entry point %s", lib->what, env && *env ? env
               : paths[0], s->name);
      lib->error = lib->message;
      dlclose(h);
      return;
    }
    memcpy(s->slot, &p, sizeof p);
  }
  lib->handle = h; /* open for the life of the process, or until unloaded */
  if (lib->start) lib->error = lib->start(lib->message, sizeof lib->message);
}

const char *cg_library_load(cg_library *lib) {
  pthread_mutex_lock(&lib->lock);
  if (!lib->tried) load(lib);
  lib->tried = 1;
  const char *why = lib->error;
  pthread_mutex_unlock(&lib->lock);
  return why;
}

const char *cg_library_acquire(cg_library *lib) {
  pthread_mutex_lock(&lib->lock);
  if (!lib->tried) load(lib);
  lib->tried = 1;
  const char *why = lib->error;
  if (!why) lib->users++;
  pthread_mutex_unlock(&lib->lock);
  return why;
}

void cg_library_drop(cg_library *lib) {
  pthread_mutex_lock(&lib->lock);
  if (lib->users > 0) lib->users--;
  pthread_mutex_unlock(&lib->lock);
}

void cg_library_unload(cg_library *lib, const char *keep) {
  pthread_mutex_lock(&lib->lock);
  if (lib->handle && !lib->users && !(keep && dlsym(lib->handle, keep))) {
    dlclose(lib->handle);
    lib->handle = NULL;
    lib->tried = 0;
    lib->error = NULL;
    for (const cg_symbol *s = lib->symbols; s->name; s++)
      memset(s->slot, 0, sizeof(void *));
  }
  pthread_mutex_unlock(&lib->lock);
}

int cg_library_dir(void *handle, const char *sym, char *out, size_t n) {
  Dl_info info;
  void *p = handle ? dlsym(handle, sym) : NULL;
  if (!p || !dladdr(p, &info) || !info.dli_fname) return 0;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash) return 0;
  snprintf(out, n, "%.*s", (int)(slash - info.dli_fname), info.dli_fname);
  return 1;
}
