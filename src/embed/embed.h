/* The embedding side of graphs: graphs handed to C (cgraph.c, the
   cugraph_graph of cugraph.h) and kernel hot reload (reload.c), which
   switches Lua and C graphs alike to a module's new code. */
#ifndef CUGRAPH_EMBED_H
#define CUGRAPH_EMBED_H

#include "graph/graph.h"

/* -- reload (reload.c) ---------------------------------------------------- */

/* The kernel nodes of g and of its child graphs switch as sw says, and
   those recs notes in conditional bodies (recs NULL: none); then x (if not
   NULL) is updated from g. No Lua call. */
CUresult cg_swap_kernels(CUgraph g, CUgraphExec x, const cg_recs *recs,
                         const cg_swap *sw, int n, const char **api);

/* -- graphs owned by C (cgraph.c) ----------------------------------------- */

/* The C graphs that launch module share sh's code switch as sw says; then
   sh holds module newmod. The first failure, or SUCCESS. */
CUresult cg_share_swap(cg_share *sh, CUmodule newmod, const cg_swap *sw,
                       int n, const char **api);
/* Whether a C graph that launches module share sh's code has conditional
   nodes (their bodies cannot switch). */
int cg_share_conds(cg_share *sh);

void reload_open(lua_State *L);

#endif
