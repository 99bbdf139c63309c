/* The one way a library is found and opened: libcuda, NVRTC and NCCL are
   each a cg_library, loaded with dlopen once per process whichever threads
   ask first and at once, their entry points resolved into a table. */
#ifndef CUGRAPH_LOADER_H
#define CUGRAPH_LOADER_H

#include <pthread.h>
#include <stddef.h>

enum { CG_PATHLEN = 512, CG_MAXPATHS = 8 };

typedef struct cg_symbol {
  const char *name;     /* the symbol, as the library exports it */
  void *slot;           /* the table's field its address is copied to */
  int optional;         /* may be missing: the field stays NULL */
} cg_symbol;

typedef struct cg_library {
  const char *env;      /* a variable that names the file instead */
  const char *what;     /* "CUDA driver", "NVRTC", "NCCL" */
  const char *hint;     /* the rest of the not-found message */
  /* The files to try in turn when env is unset: fills paths, returns how
     many. Runs under the lock, once. */
  int (*candidates)(char paths[][CG_PATHLEN], int max);
  const cg_symbol *symbols; /* ends with a NULL name */
  /* After resolution: NULL, or why the library is unusable (written into
     msg): cuInit, nvrtcVersion. */
  const char *(*start)(char *msg, size_t n);
  /* Written once under lock; read after cg_library_load took it. */
  pthread_mutex_t lock;
  int tried;
  void *handle;         /* the open library (kept for the process) */
  const char *error;    /* why it is unusable, or NULL */
  char message[1024];
  int users;            /* cg_library_acquire's holders, under lock */
} cg_library;

#define CG_LIBRARY_STATE PTHREAD_MUTEX_INITIALIZER, 0, NULL, NULL, "", 0

/* Opens lib on the first call; returns NULL when it is usable, else a
   message that stays valid for the life of the process. */
const char *cg_library_load(cg_library *lib);

/* A library that may be closed again while nothing uses it (cuFFT, whose
   per-process allocations go only when it is closed): acquire loads it
   (as cg_library_load) and counts a user, who later drops it; unload
   closes it when it is open and has no users, so that the next acquire
   opens it again. */
const char *cg_library_acquire(cg_library *lib);
void cg_library_drop(cg_library *lib);
void cg_library_unload(cg_library *lib, const char *keep);
/* (keep: a symbol whose presence says the library stays open) */

/* The folder of the file that holds symbol sym of an open library, into
   out; 0 when unknown. */
int cg_library_dir(void *handle, const char *sym, char *out, size_t n);

#endif
