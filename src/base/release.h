/* What the owner of handles (release.c) lends the keeps of graphs
   (keep.c), inside the base layer. */
#ifndef CG_BASE_RELEASE_H
#define CG_BASE_RELEASE_H
#include <time.h>
#include "base/base.h"

/* Counts work left to the runtime's threads (cg_settle waits for none). */
void cg_loose_add(int d);
/* Whether a handle of kind hk of ctx may be destroyed now (a context lost
   or closed leaves its handles to the process's end, but DLPack's). */
int cg_may_destroy(cg_ctx *ctx, cg_hkind hk);
/* Drops a reference to sh on the thread of ctx's state: the last frees
   the handle as cg_release frees, then the share. */
void cg_let_go(lua_State *L, cg_ctx *ctx, cg_share *sh);
/* Hands sh, whose last reference was just dropped, to the reaper, whose
   thread frees its handle and it (sh->waits); 0 when no thread could be
   made: the caller frees it. cg_reaping: whether this is that thread. */
int cg_reap_share(cg_share *sh);
int cg_reaping(void);
/* *ts: t seconds from now, on CLOCK_REALTIME (pthread_cond_timedwait's). */
void cg_deadline_in(struct timespec *ts, double t);

#endif
