/* The capture layer: the capture in progress, the pins that keep what it
   used alive (pins.c), and the records of the nodes it made (records.c),
   which graphs read to change themselves in place. */
#ifndef CUGRAPH_CAPTURE_H
#define CUGRAPH_CAPTURE_H

#include "base/base.h"

typedef struct cg_recs cg_recs;
/* A library call (cuBLAS, cuFFT, NCCL) in a capture: its nodes are the
   driver's, made by the library, and have no record; the first of them is
   the first made in graph after the first nodes already there. The trace
   names their kernels' runs by it. */
typedef struct cg_libcall {
  CUgraph graph;
  size_t first;
  size_t src, name;     /* offsets + 1 in the records' text (0: none) */
  int line;
} cg_libcall;
typedef struct cg_follow cg_follow;

/* A profiling capture's stamps (g:profile, graph/profile_stamps.c): after
   each node the capture records, a one-thread kernel on the node's stream
   (cg_stamp of src/types/setters.cu) reads the global timer and adds the
   time since the stream's previous stamp to the record's cell. */
enum { CG_STAMP_SLOTS = 15 }; /* clocks: streams of the top level and
                                 bodies; past them, the last is shared */
typedef struct cg_stamps {
  CUfunction f;
  CUdeviceptr clocks;   /* u64: [0] the replay's start, [i] slot i's */
  CUdeviceptr sums, runs, last; /* u64, u32, 2 u64 a record */
  int ncells;           /* records with cells: a stamp of another is left out */
  CUstream streams[CG_STAMP_SLOTS]; /* slot i + 1's stream (NULL: a body's) */
  int nslots;           /* slots taken */
} cg_stamps;

/* A capture in progress: the top level (s:capture, g:update), or the body
   of a conditional node, captured into its body graph while the node's
   stream object stands for the body's stream. Bodies share the top level's
   pins, serial and id. A recording (cuda.graphed's, graph/graphed.c) is a
   capture to every rule and guard, but no driver call is made: each piece
   of work is noted in recs (and its Lua values in the table vals) instead
   of being sent, to be compared with a graph's and made again under a
   real capture when a graph must be built from it. */
struct cg_capture {
  CUstream origin;      /* the stream this level began on */
  unsigned id;          /* the graph's id, for messages */
  unsigned serial;      /* this capture's number: cg_obj.pinned */
  int pins;             /* registry ref: set of pinned objects */
  int scalars;          /* top: scalars among them */
  CUstreamCaptureMode mode;
  cg_capture *top;      /* the top level (itself there) */
  int depth;            /* 0 at the top, n in a body nested n deep */
  cuuint64_t seq;       /* bodies: the driver's id of this capture */
  int stampslot;        /* bodies of a profiling capture: their clock's slot */
  CUgraph root;         /* top: the graph captured into, once asked for */
  unsigned handles;     /* top: condition handles made in this capture */
  unsigned conds;       /* top: conditional nodes made in it */
  cg_recs *recs;        /* top: its nodes so far, made on demand */
  const void *fn;       /* top: the closure captured */
  cg_stamps *stamps;    /* top: a profiling capture's, or NULL */
  /* top: streams that joined it by a wait (s2:wait(s)), where, and
     whether a wait joined them back: named when the end finds work
     unjoined (the first CG_MAXFORKS) */
  struct cg_fork { CUstream s; unsigned char back; char where[94]; }
      forks[8];
  int nforks;
  unsigned char recording; /* top: a recording */
  int vals;             /* top, a recording: registry ref of its values */
  size_t nvals;         /* values in it so far */
  cg_follow *follow;    /* top, a recording: the logs it follows, or NULL */
};

/* The records of earlier recordings a recording follows (cuda.graphed's,
   of the graphs of the call's key): while one of them has the work so far,
   record by record, kernels, fills and copies are only compared with
   theirs, and nothing is noted; at the first difference, or any other
   work, the records matched are copied from one of them (their values
   from the table at ref, log i's at vals[i]) and noting goes on. */
enum { CG_FOLLOW_MAX = 64 };
struct cg_follow {
  const cg_recs *log[CG_FOLLOW_MAX];
  int vals[CG_FOLLOW_MAX];
  int n, ref;
  uint64_t live;        /* the logs matching every record so far */
  size_t at;            /* records matched */
  unsigned char hit;    /* the last note was matched (cg_note_vals skips) */
  unsigned char stopped;
};
/* At the recording's end: the log (its index in f->log) the recording
   matched whole, or -1, its records then noted as if nothing was followed. */
int cg_follow_end(lua_State *L, cg_ctx *ctx);
enum { CG_MAXFORKS = 8 };
/* s2 (waiter) waited on stream s (waited) inside the capture in progress:
   records a fork, or a join back (stream.c). */
void cg_capture_wait(lua_State *L, cg_ctx *ctx, CUstream waiter,
                     CUstream waited);
/* Pushes "the streams that joined at chunk:line, chunk:line" of the forks
   not joined back, or nil. */
void cg_capture_pushforks(lua_State *L, const cg_capture *cap);

/* What the capture layer keeps per state (the root context's capstate). */
struct cg_capstate {
  int pins_slot;        /* registry slot: the set of pins of the capture in
                           progress, or between captures a spare one */
  cg_recs *spare;       /* records a capture may reuse */
  size_t hint[3];       /* sizes of the last capture's records */
};
cg_capstate *cg_capstate_of(lua_State *L, cg_ctx *ctx);
void capture_open(lua_State *L);

/* -- pins (pins.c) -------------------------------------------------------- */

/* Records that the capture in progress uses the object at idx (any value:
   only objects of the runtime are pinned). */
void cg_pin(lua_State *L, cg_ctx *ctx, int idx);
void cg_pin_new(lua_State *L, cg_ctx *ctx, cg_obj *o, int idx);
/* o (at idx) is pinned by the capture in progress, if any, and so are its
   parents: a compare when this capture pinned it before */
static inline void cg_pinobj(lua_State *L, cg_ctx *ctx, cg_obj *o, int idx) {
  if (ctx->capture && o->pinned != ctx->capture->serial &&
      !ctx->capture->top->recording) /* a recording's graph pins later */
    cg_pin_new(L, ctx, o, idx);
}
/* The counts every pin keeps: one more live graph (id) uses o, or one
   fewer (its last release lets a collected o go). All pin bookkeeping
   goes through these two. */
static inline void cg_use(cg_obj *o, unsigned id) {
  if (o->uses++ == 0) o->graph = id;
}
void cg_unuse(lua_State *L, cg_obj *o, unsigned id);
/* The set of pins at pidx of graph id, changed in place (g:rebind,
   node:set): the object at oidx pinned there unless it is, or unpinned. */
void cg_pin_in(lua_State *L, int pidx, int oidx, unsigned id);
void cg_unpin_in(lua_State *L, int pidx, int oidx, unsigned id);
/* Releases every pin of graph id in the set at idx (emptied when empty is
   set); an object a collection left for the last unpin is released. */
void cg_unpin_set(lua_State *L, cg_ctx *ctx, int idx, unsigned id,
                  int empty);
/* Marks every object of the set at idx as held by graph id. */
void cg_stamp_set(lua_State *L, cg_ctx *ctx, int idx, unsigned id);
/* Whether work on stream s is recorded by the capture in progress. */
int cg_capturing_on(lua_State *L, cg_ctx *ctx, CUstream s);
/* Raises "what: the stream is not part of the capture ..." unless work on
   s is recorded by the capture in progress. */
void cg_check_captured(lua_State *L, cg_ctx *ctx, CUstream s,
                       const char *what);
/* A profiling capture's clocks: a new slot (each body capture takes one,
   so that bodies that run at once never share), and the slot of stream s
   in the level in progress (its body's, or the stream's own). */
int cg_stamp_newslot(cg_stamps *st);
int cg_stamp_slot(cg_ctx *ctx, CUstream s);
/* A stamp on capture stream s that sets clock slot: after the record rec
   (its time from the slot's last stamp is added), or with rec -1 the
   start of the next node there, -2 also the replay's. The driver's
   result. */
CUresult cg_stamp_launch(cg_ctx *ctx, CUstream s, int slot, int rec);
/* In a profiling capture, the stamp after the record just made on s, or
   (start) the start of s's next node when s is part of the capture;
   raises. Else nothing. */
void cg_stamp_after(lua_State *L, cg_ctx *ctx, CUstream s);
void cg_stamp_start(lua_State *L, cg_ctx *ctx, CUstream s);
/* A node added to the graph that stream s captures into, after its work;
   the stream's later work depends on it. */
CUgraphNode cg_capture_node(lua_State *L, cg_ctx *ctx, CUstream s,
                            CUgraphNodeParams *p);

/* -- recordings (records.c) ---------------------------------------------- */

/* Whether the capture in progress is a recording: no work is sent. */
static inline int cg_recording(const cg_ctx *ctx) {
  return ctx->capture && ctx->capture->top->recording;
}
/* Raises unless work on s is part of the recording (its stream, or one that
   waited on it: s2:wait(s)). */
void cg_record_stream(lua_State *L, cg_ctx *ctx, CUstream s,
                      const char *what);
/* In a recording, the running C function's call (the function and its
   arguments 1..nargs, as it was called), made again when the graph is
   built: a piece of work the graph cannot change in place (a library
   call, a fork or join, a conditional node). The caller returns what it
   returns after the work. s: the stream it goes to. */
void cg_record_call(lua_State *L, cg_ctx *ctx, CUstream s, int nargs);
/* In a recording, the stream and the Lua values (the stack's at idx[0 ..
   n-1], absolute) of the record just noted: a fill's stream and buffer, a
   copy's stream, destination and source. Nothing outside one. */
void cg_note_vals(lua_State *L, cg_ctx *ctx, CUstream s, const int *idx,
                  int n);

/* -- records (records.c) -------------------------------------------------- */

enum { NK_KERNEL, NK_FILL, NK_COPY, NK_ALLOC, NK_FREE, NK_COND, NK_GRAPH,
       NK_HOSTCOPY, NK_COPY3D, NK_EXTWAIT, NK_EXTSIGNAL, NK_MEMWAIT,
       NK_MEMWRITE, NK_HOST, NK_CALL };
extern const char *const cg_nk_names[];

typedef struct cg_rec {
  CUgraphNode node;     /* NULL when the driver could not say which */
  unsigned char kind, enabled;
  unsigned char lazy;   /* a kernel of the top stream whose node is found
                           when first asked for (cg_recs_resolve) */
  unsigned char freed;  /* NK_ALLOC: the same graph frees the memory */
  unsigned char dirty;  /* changed in the exec only: the graph follows on
                           demand (cg_graph_sync) */
  unsigned char hit;    /* g:rebind's scratch: uses one of the olds */
  unsigned char programmatic; /* NK_KERNEL: launched programmatic (its
                                 edge from the kernel before it) */
  int depth;            /* 0: a node of the top graph; n: in a body */
  int line;             /* of the Lua code that made it; 0: unknown */
  size_t src, label;    /* offsets in text + 1; 0: none */
  cg_obj *kernel;       /* NK_KERNEL, its function and parameters */
  CUfunction f;
  const cg_param *params;
  cg_obj *obj[2];       /* FILL: dst; COPY: dst, src; ALLOC, FREE: buffer;
                           EXTWAIT, EXTSIGNAL: the semaphore, its value's
                           Scalar (or NULL: the value is off); MEMWAIT,
                           MEMWRITE: the counter, the value's Scalar (or
                           NULL: the value is off) */
  unsigned grid[3], block[3], shared;
  int nargs;            /* NK_KERNEL: its arguments' objects from objs[arg0] */
  size_t arg0, word0;   /* and their bytes from words[word0], 8-aligned */
  size_t off, bytes, width, height, pitch; /* FILL: off and shape; COPY */
  size_t soff;          /* COPY: the source's byte offset (off: dst's) */
  unsigned value, elem;  /* FILL; COND: value is the CUgraphConditionalNodeType;
                            MEMWAIT: value is the comparison's flags */
  /* a recording's: the stream the work went to, its Lua values (vals[v0],
     ... vals[v0 + nvals - 1]: a kernel's stream and arguments, a fill's
     stream and buffer, a copy's stream, destination and source; a CALL's
     function and arguments), and the record of the graph built from it
     that made the same node */
  CUstream stream;
  size_t v0, nvals, peer;
} cg_rec;

/* Objects are referenced by pointer: the graph's pins keep them alive. */
struct cg_recs {
  cg_rec *v;
  size_t n, cap;
  cg_obj **objs;        /* a buffer or scalar argument, or NULL */
  size_t nobjs, cobjs;
  uint64_t *words;
  size_t nwords, cwords;
  char *text;           /* sources and labels, each NUL-terminated */
  size_t ntext, ctext;
  size_t lastsrc;       /* while capturing: the latest source, offset + 1, */
  const void *lastfn;   /* of this function */
  size_t label;         /* while capturing: the label of nodes made now */
  size_t lazy;          /* lazy records not yet resolved */
  CUgraphNode tail;     /* the top stream's last node when they were */
  cg_libcall *calls;    /* the library calls captured, in order */
  size_t ncalls, ccalls;
};

/* A kernel launch as the kernel layer checked it: its parameters, the
   bytes of each argument and the object each pointer slot took. */
typedef struct cg_launchnote {
  cg_obj *kernel;
  CUfunction f;
  int nparams;
  const cg_param *params;
  void *const *argp;    /* the slots, nwords 8-byte words from argp[0] */
  size_t nwords;
  cg_obj *const *seen;
  int argidx;           /* stack index of the first argument */
  int streamidx;        /* ... of the stream object, and of the kernel */
  int kernelidx;
  unsigned grid[3], block[3], shared;
  int programmatic;     /* made with a programmatic edge */
} cg_launchnote;

/* Notes the node that work just sent to s (a capture's stream) made. */
void cg_note_kernel(lua_State *L, cg_ctx *ctx, CUstream s,
                    const cg_launchnote *k);
void cg_note_fill(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  size_t off, unsigned value, unsigned elem, size_t width,
                  size_t height, size_t pitch);
void cg_note_copy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  cg_obj *src, size_t bytes, size_t doff, size_t soff);
/* a copy between device and pinned host memory, or between devices:
   recorded so that g:rebind refuses its buffer (such copy nodes are not
   changed in place) */
/* A 2-D or 3-D copy (b:copy2d, b:copy3d) between dst and src, each a
   buffer or a host buffer; its node is not changed in place. */
void cg_note_copy3d(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                    cg_obj *src);
void cg_note_hostcopy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dev,
                      cg_obj *host);
/* an external semaphore's wait (or signal) node, made with cuGraphAddNode:
   of semaphore sem, for value v, or the one the Scalar value holds */
void cg_note_extsem(lua_State *L, cg_ctx *ctx, CUgraphNode node, int wait,
                    cg_obj *sem, cg_obj *value, uint64_t v);
/* a stream memory operation's node (s:wait_value, s:write_value): on
   counter c (a Buffer, HostBuffer or Scalar), for value v or the one the
   Scalar value holds, with the wait's comparison flags */
void cg_note_memop(lua_State *L, cg_ctx *ctx, CUgraphNode node, int wait,
                   cg_obj *c, cg_obj *value, uint64_t v, unsigned flags);
/* a node made with cuGraphAddNode: a child graph, conditional or host
   node (an external semaphore's and a memory operation's are noted by
   cg_note_extsem and cg_note_memop) */
void cg_note_node(lua_State *L, cg_ctx *ctx, CUgraphNode node,
                  const CUgraphNodeParams *p);
/* an allocation node of buffer b, and a free node of it */
void cg_note_alloc(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *b);
void cg_note_free(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *b);
/* s:label's: the nodes made until cg_label_end are labelled name */
size_t cg_label_begin(lua_State *L, cg_ctx *ctx, const char *name);
void cg_label_end(cg_ctx *ctx, size_t saved);
const char *cg_recs_text(const cg_recs *r, size_t at);
void cg_recs_free(cg_recs *r);
/* Lets go of a graph's records: kept for the state's next capture (one
   set), else freed. */
void cg_recs_release(cg_ctx *ctx, cg_recs *r);
/* Empties r, its arrays kept; and makes to (a new one when NULL) a copy of
   from (raising when out of host memory). */
void cg_recs_reset(cg_recs *r);
cg_recs *cg_recs_copy(lua_State *L, const cg_recs *from, cg_recs *to);
size_t cg_recs_count(const cg_recs *r); /* records in r (NULL: 0) */
void cg_recs_done(cg_ctx *ctx, const cg_recs *r);
/* Kernel launches on the top capture stream are recorded without their
   node (no driver call per launch), while the stream's nodes form a chain.
   cg_recs_mark notes the chain's end when s is that stream: before it
   waits for other work (a join) or takes a library call, which may fork
   and join inside; cg_recs_end notes it at the end of the capture.
   cg_recs_resolve finds the nodes of the marked records, walking the
   chain back from its end and matching each kernel node to its launch
   (function, shape, argument bytes); a graph's readers of nodes call it
   first. 0, or the failing call's result in *api. */
void cg_recs_mark(lua_State *L, cg_ctx *ctx, CUstream s);
/* Notes a library call what about to add its nodes on capturing stream s
   (cg_libcall); nothing outside a capture or in a recording. */
void cg_recs_libcall(lua_State *L, cg_ctx *ctx, CUstream s, const char *what);
CUresult cg_recs_end(cg_ctx *ctx); /* whatever the stream, not raising */
CUresult cg_recs_resolve(cg_recs *r, const char **api);
/* Whether r's graph may launch a kernel of module mod: a kernel node does,
   or a child graph node's copy may. */
int cg_recs_launch(const cg_recs *r, const cg_obj *mod);
/* Allocation nodes of r whose memory the graph does not free. */
unsigned cg_recs_allocs(const cg_recs *r);
/* Message handler of the closures a capture runs: a string error gains
   the traceback; others stay as they are. */
int cg_traceback(lua_State *L);

#endif
