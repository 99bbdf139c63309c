/* The kernel layer: modules (module.c), kernels and their checked launches
   (kernel.c), NVRTC (nvrtc.c) and its disk cache (cache.c); the pure-C
   readers of PTX signatures and binary images are ptx.h and image.h. */
#ifndef CUGRAPH_KERNEL_H
#define CUGRAPH_KERNEL_H

#include "types/types.h"
#include "kernel/image.h"
#include "kernel/ptx.h"

/* cugraph.Module: h.drv.module. */
typedef struct cg_module {
  cg_obj h;             /* h.views: open buffers over its globals */
  ptx_entry *entries;   /* user value 2; NULL for cubin and fatbin */
  int nentries;
  ptx_global *globals;  /* in the same user value, after the entries */
  int nglobals;
  char name[64];        /* for messages */
} cg_module;

/* cugraph.Kernel: a function of its module (h.parent, user value 1). Its
   launches are checked against its signature and the device's limits, and
   marshal the arguments into storage it owns. */
typedef struct cg_kernel {
  cg_obj h;
  CUfunction f;
  unsigned shared;      /* dynamic shared memory per launch */
  int nparams;
  size_t nwords;        /* the argument slots' 8-byte words, contiguous
                           from argp[0], each slot's unused bytes 0 */
  char name[208];       /* for messages and k:name(): the C++ name of
                           opts.names, the base name or the entry's */
  char entry[256];      /* the PTX entry (the lowered, mangled name) */
  unsigned epoch;       /* cg_epoch when the seen entries were made */
  const void *seen_stream; /* stream and arguments checked by an earlier */
  cg_obj **seen;        /* launch: the same userdata needs no new check */
  cg_param *params;     /* the rest of the userdata: params, then argp, */
  void **argp;          /* then seen, then one 8-aligned slot per argument */
  /* k:config: launch attributes of later launches (cuLaunchKernelEx);
     none, and not programmatic: cuLaunchKernel */
  CUlaunchAttribute attrs[3];
  unsigned nattrs;
  unsigned char cooperative;
  unsigned char programmatic; /* its launches take programmatic edges from
                                 the kernel before them, where safe */
  unsigned char pdl_graphs;   /* CG_PDL_*: a graph was captured with such
                                 an edge into it, or out of it (m:reload
                                 keeps its code safe for them) */
  unsigned cluster[3];  /* 0: none */
  unsigned pdl_launches; /* launches made programmatic */
  ptx_pdl pdl;          /* what its code allows, from its module's PTX */
} cg_kernel;

enum { CG_PDL_CONSUMER = 1, CG_PDL_PRODUCER = 2 };

/* A recording's kernel launch e (of records r) made again under the
   capture in progress: the kernel, its stream, two values (for grid and
   block, unread) and its arguments are on the stack from kidx, as k:launch
   has them. */
void cg_kernel_replay(lua_State *L, const cg_recs *r, const cg_rec *e,
                      int kidx);
/* A kernel of `module` at 1 for entry `entry` with parameters ps[n],
   labelled `label` in messages, its code judged pdl (NULL: no PTX):
   pushed. */
cg_kernel *cg_kernel_new(lua_State *L, cg_module *m, const char *entry,
                         const char *label, const cg_param *ps, int n,
                         const ptx_pdl *pdl);
/* What a kernel without PTX (a cubin or fatbin module) allows: nothing. */
void cg_pdl_none(ptx_pdl *p);
/* {consumer =, producer =, consumer_why =, producer_why =}, pushed. */
void cg_pushpdl(lua_State *L, const ptx_pdl *p);
/* -- launch attributes and occupancy (config.c) --------------------------- */

int cg_kernel_config(lua_State *L);     /* k:config(opts) */
int cg_kernel_programmatic(lua_State *L); /* k:programmatic() */
int cg_kernel_occupancy(lua_State *L);  /* k:occupancy(block [, shared]) */
int cg_kernel_block_size(lua_State *L); /* k:block_size([shared]) */
/* Launches k on stream s with its attributes, checked first (cooperative:
   the grid resident at once; clusters: the grid a whole number of them),
   and programmatic when k asks for it and the edge from the work before
   it is proven safe (raising when that work is a kernel whose code is
   not): then 1 is returned. where: the Lua line a recording noted the
   launch at, or NULL. */
int cg_launch_ex(lua_State *L, cg_kernel *k, cg_stream *s,
                 const unsigned grid[3], const unsigned block[3],
                 const char *where);

/* The values at idx.. into the slots of the kernel at kidx, checked as a
   launch checks them (count, types, ranges); no pin, no scalar flush. */
void cg_kernel_args(lua_State *L, int kidx, int idx, int nargs);
/* "axpy(f32, const f32*, f32*, i32)", pushed. */
void cg_pushsignature(lua_State *L, const char *name, const cg_param *ps,
                      int n);
void cg_pushparam(lua_State *L, const cg_param *p);

/* One kernel switched to new code by a reload: nodes launching from launch
   to, with the same parameters (nparams of size[i] bytes). */
typedef struct cg_swap {
  CUfunction from, to;
  int nparams;
  const unsigned *size;
} cg_swap;

/* m:reload's first and last steps (the graph layer switches the graphs
   between them). cg_reload_plan loads image (at iidx, named by the string
   at nidx) as a new module (pushed), and for every kernel made from the
   module at midx finds its entry there (pushed: the plan), raising when one
   is missing or its parameters differ; *sw gets the swaps, the count is
   returned. cg_reload_commit gives the module the new code and its kernels
   the new functions; the new module object (at nmidx) takes the old code,
   which its close unloads. */
int cg_reload_plan(lua_State *L, int midx, int iidx, int nidx, cg_swap **sw);
void cg_reload_commit(lua_State *L, int midx, int nmidx, int planidx);

/* core.module(image [, name [, ptx [, types]]]) */
int cg_module_new(lua_State *L);

void module_open(lua_State *L);
void kernel_open(lua_State *L);
void nvrtc_open(lua_State *L);

#endif
