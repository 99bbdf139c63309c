/* The graph core: graphs captured from Lua closures (graph.c, the capture
   itself in stream_capture.c), conditional nodes (cond.c), node handles
   (node.c), in-place changes (rebind.c) and the state's open graphs
   (registry.c). What reads graphs (profiles, g:dot, memory reports) is
   the layer src/inspect/ above it; what hands them to C and reloads their
   code, src/embed/. */
#ifndef CUGRAPH_GRAPH_H
#define CUGRAPH_GRAPH_H

#include "kernel/kernel.h"

typedef struct cg_graph cg_graph;

/* A node of the top graph whose value is a Scalar's (an external
   semaphore's wait or signal, a stream memory operation's wait or write):
   set in the exec before a launch when the scalar changed. */
typedef struct cg_valnode {
  CUgraphNode node;
  unsigned char kind;   /* NK_EXTWAIT, NK_EXTSIGNAL, NK_MEMWAIT, NK_MEMWRITE */
  unsigned char known;  /* the exec holds last */
  unsigned char wide;   /* a memory operation on a 64-bit counter */
  unsigned flags;       /* a memory operation's wait: its comparison */
  CUexternalSemaphore sem; /* a semaphore node's */
  CUdeviceptr addr;     /* a memory operation's counter, in context cu */
  CUcontext cu;
  void *value;          /* the cg_scalar (graph.c), or its cg_share (cgraph.c) */
  uint64_t last;        /* the value the exec holds, when known is set */
} cg_valnode;
/* Sets node v of exec x to value bits. */
CUresult cg_valnode_set(CUgraphExec x, const cg_valnode *v, uint64_t bits,
                        const char **api);
/* How many records of r take their value from a Scalar; *memops: how
   many of them are memory operations. */
int cg_count_valnodes(const cg_recs *r, int *memops);
/* What the valued records of r are, for messages. */
const char *cg_valued_kinds(const cg_recs *r);
/* Their nodes, in a new array (*n of them; NULL when none); raises when
   the driver cannot set them. */
cg_valnode *cg_valnodes_of(lua_State *L, const cg_recs *r, int *n);

/* cugraph.Graph: h.drv.exec, and the driver graph it was made from. Its
   user values: 1 the set of pins, 2 its capture stream, 3 the closure it
   was captured from or last updated with (g:profile runs it again). */
struct cg_graph {
  cg_obj h;
  CUgraph g;
  CUstream stream;      /* the capture stream: launches default to it */
  CUstreamCaptureMode mode;
  unsigned id;
  lua_Integer launches;
  unsigned conds;       /* conditional nodes, at any depth */
  int nscalars;
  cg_scalar **scalars;  /* pinned scalars, flushed before each launch */
  int nvalnodes;
  cg_valnode *valnodes; /* nodes set from scalars at each launch */
  cg_recs *recs;        /* the nodes its capture recorded */
  cg_keep *keep;        /* what g's nodes use, kept until the last launch
                           is over (keep_leave); NULL: none held */
  unsigned allocs;      /* allocation nodes whose memory it does not free */
  unsigned scoped;      /* pinned buffers of a map scope (cg_obj.scoped) */
  unsigned char auto_free; /* instantiated with AUTO_FREE_ON_LAUNCH */
  unsigned char updated;   /* g:update ran: exec's nodes are not recs' */
  unsigned char graphed;   /* a graphed function's: its calls set the nodes */
  unsigned char traced;    /* its exec's nodes are the trace's (positions.c) */
  CUstream last_stream;    /* the stream of its latest launch, and that */
  unsigned long last_launch; /* launch's number in the state */
  cg_graph *prev, *next;   /* while open: the state's list (reload.c) */
};

/* What the graph layer keeps per state (the root context's graphstate). */
struct cg_graphstate {
  cg_graph *graphs;     /* the open graphs */
  unsigned long launches; /* launches of graphs so far */
  size_t cap;           /* cuda.graph_memory_cap: the bytes the open graphs'
                           allocation nodes may allocate together (0: any) */
};

/* Raises when gr is a graphed function's, whose nodes only its calls set
   (what: the call refused). */
void cg_check_own(lua_State *L, const cg_graph *gr, const char *what);

/* -- the open graphs (registry.c) ----------------------------------------- */

cg_graphstate *cg_graphstate_of(lua_State *L, cg_ctx *ctx);
void cg_track_graph(cg_graph *gr);   /* one opened */
void cg_untrack_graph(cg_graph *gr); /* one closed */
/* What a graph's nodes keep, by kind (bytes, counts): its allocation
   nodes' memory, and the device and host memory its nodes refer to. */
typedef struct cg_tally {
  size_t allocs, device, host;
  unsigned buffers, host_buffers, scalars, conditions, arrays, others;
} cg_tally;
/* The objects the graph's nodes refer to (its records, any depth), each
   once, tallied. Calls no Lua function, so no finalizer can run and free
   the records meanwhile. 0 when out of host memory. */
int cg_graph_tally(const cg_graph *gr, cg_tally *t);
/* Under a cap, when gr (open, tracked) takes the open graphs' allocations
   past it: pushes the message naming the graphs that hold the most and
   returns 1; else 0. */
int cg_graph_over_cap(lua_State *L, cg_graph *gr);

/* -- capture (stream_capture.c) ------------------------------------------- */

/* Runs fn (at fnidx) under capture on the stream at sidx; see the file. */
CUgraph cg_capture_graph(lua_State *L, cg_ctx *ctx, cg_stream *s, int sidx,
                         int fnidx, CUstreamCaptureMode mode, unsigned id,
                         int *scalars, unsigned *conds, cg_recs **recs,
                         int restamp, const unsigned char *alive,
                         cg_stamps *stamps);
/* Captures fn (at fnidx) into body, a body graph of a conditional node,
   with the stream object at sidx standing for the body's stream; raises
   fn's error (or the driver's) once the body's capture is over. */
void cg_capture_body(lua_State *L, cg_ctx *ctx, int sidx, int fnidx,
                     CUgraph body);
/* In a recording, fn (at fnidx) recorded as a body of the conditional node
   just recorded, with the stream object at sidx standing for the body's
   stream: its work is noted a level deeper, never sent. */
void cg_record_body(lua_State *L, cg_ctx *ctx, int sidx, int fnidx);
/* The stream that captures bodies nested depth deep, made once per state
   (a cugraph.Stream kept in the registry, never given out). */
CUstream cg_bodystream(lua_State *L, cg_ctx *ctx, int depth);
/* Lets go of the pins at idx of graph id, which nothing else holds now,
   and keeps the set, empty, for the next capture. */
void cg_unpin_spare(lua_State *L, cg_ctx *ctx, int idx, unsigned id);

/* -- graphs (graph.c) ----------------------------------------------------- */

/* One launch of gr (the Graph at gidx) on st, as g:launch makes it (its
   scalars written first, its allocations' state kept); outside captures. */
void cg_graph_launch(lua_State *L, cg_graph *gr, int gidx, CUstream st);

/* The driver graph and executable graph of the Graph at idx (NULL when it
   is freed), its nodes up to date with its exec. */
void cg_graph_parts(lua_State *L, int idx, CUgraph *g, CUgraphExec *x);
/* Collects the scalars among the pins of the graph at gidx again. */
void cg_graph_rescan(lua_State *L, cg_graph *gr, int gidx);

/* -- CUPTI's names of the nodes (positions.c) ---------------------------- */

/* Each record's position + 1 in the instantiation of gr (the Graph at
   gidx), or of copy, its clone, when not NULL, as CUPTI's kernel records
   number its nodes (pos: a slot per record; 0: no node), and *total, the
   positions; and, when callpos is not NULL, the position + 1 of each
   library call's first node (a slot per call; 0: none): NULL, or why they
   cannot be known. */
const char *cg_graph_positions(lua_State *L, cg_graph *gr, int gidx,
                               CUgraph copy, size_t *pos, size_t *total,
                               size_t *callpos);
/* When the script's trace is on: hands it the names of exec's nodes, the
   instantiation of gr (the Graph at gidx) or of copy, its clone
   (cg_trace_graph); marks gr traced for its own exec. */
void cg_graph_trace(lua_State *L, cg_graph *gr, int gidx, CUgraphExec exec,
                    CUgraph copy);

/* -- changes in place (rebind.c) ------------------------------------------ */

/* The graph's nodes take what rebinding changed in its exec (raising;
   cg_graph_follow: no Lua, the first failure or SUCCESS). */
void cg_graph_sync(lua_State *L, cg_graph *gr);
/* Finds the nodes of gr's lazy records (cg_recs_resolve), or raises: first
   in every reader of records' nodes. */
void cg_graph_resolve(lua_State *L, cg_graph *gr);
CUresult cg_graph_follow(cg_graph *gr, const char **api);
/* Raises unless record i of gr can change in place. */
void cg_check_changeable(lua_State *L, cg_graph *gr, const cg_rec *e,
                         size_t i);
/* Sets e's node in exec x (x NULL: in the graph) to its recorded values,
   the objects olds[i] replaced by news[i]; argument bytes from argw when
   not NULL. */
CUresult cg_rec_apply(cg_ctx *ctx, const cg_recs *r, const cg_rec *e,
                      CUgraphExec x, cg_obj *const *olds,
                      cg_obj *const *news, int np, const uint64_t *argw,
                      const char **api);
/* Whether an update of a graph from driver graph a (records ra) to b (rb)
   would change its programmatic edges, which the instantiated graph keeps
   while its nodes take b's kernels, proven only for b's edges (*changed).
   A driver call's failure is returned, its name in *api (else NULL). */
CUresult cg_edges_changed(lua_State *L, CUgraph a, const cg_recs *ra,
                          CUgraph b, const cg_recs *rb, int *changed,
                          const char **api);
/* Whether record e, or any record of r, uses object o. */
int cg_rec_uses(const cg_recs *r, const cg_rec *e, const cg_obj *o);
int cg_recs_use(const cg_recs *r, const cg_obj *o);
/* Pushes record i of r as g:nodes("detail") gives it: index, kind, name,
   source, line, label, depth, enabled (node.c). */
void cg_push_record(lua_State *L, const cg_recs *r, size_t i);

void graph_open(lua_State *L);
void cond_open(lua_State *L);
void node_open(lua_State *L);
void rebind_open(lua_State *L);
void registry_open(lua_State *L);
void graphed_open(lua_State *L); /* cuda.graphed (graphed.c) */

/* -- cuda.graphed's keys and matches (graphed_match.c) ------------------- */

uint64_t cg_mix(uint64_t h, uint64_t v);
/* What of the value at idx changes a call's work (numbers: its value too,
   for opts.key). */
uint64_t cg_graphed_keyof(lua_State *L, cg_ctx *ctx, int idx, int numbers);
/* How recording a (values at av) differs from recording b (at bv) of
   graph gr: -1 in its work, 0 not at all, 1 only in parameters gr's nodes
   take in place (ch[i] set for those records), 2 in what only a graph
   built again takes. */
int cg_graphed_differ(lua_State *L, const cg_recs *a, int av,
                      const cg_recs *b, int bv, const cg_graph *gr,
                      unsigned char *ch);
/* The parameters recording r's nodes take (values at rv), hashed into h. */
uint64_t cg_graphed_params(lua_State *L, const cg_recs *r, int rv,
                           uint64_t h);

#endif
