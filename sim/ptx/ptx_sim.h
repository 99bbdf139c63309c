/* The PTX simulator: PTX text decoded once into a compact form, then run
   warp by warp (32 lanes in lock step, an active mask, reconvergence at the
   lowest waiting PC), blocks in parallel on host threads. Pure C with no
   driver in it: sim/driver built with -DCUDA_SIM puts it behind the
   driver table (build/libcuda-sim.so). Device memory is host memory; the
   caller says which ranges are live. */
#ifndef PTX_SIM_H
#define PTX_SIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_module sim_module;
typedef struct sim_kernel sim_kernel;

/* The live allocation holding [p, p + n): 1 with its bounds in *lo, *hi
   (a later access in them is taken as live without asking), else 0. */
typedef int sim_live_fn(void *ud, uint64_t p, size_t n, uint64_t *lo,
                        uint64_t *hi);
/* cudaGraphSetConditional(handle, value): 0, or nonzero for a handle that is
   not one of the running graph's. Calls are serialized. */
typedef int sim_cond_fn(void *ud, uint64_t handle, unsigned value);

/* A texture fetch: the texel of texture object handle at coords (dims of
   them, texel or normalized as the object says), filtered, in out[4]; 0,
   or a fault code for a handle that is not a texture object. */
typedef int sim_tex_fn(void *ud, uint64_t handle, int dims,
                       const float coords[3], float out[4]);
/* A surface load or store of n bytes at byte x of row y of slice z of
   surface object handle (mode: 0 out of bounds faults, 1 clamps, 2 reads
   zero and drops the store); 0, or a fault code. */
typedef int sim_surf_fn(void *ud, uint64_t handle, int dims, int64_t x,
                        int64_t y, int64_t z, void *v, size_t n, int store,
                        int mode);

/* Whether the caller wants the launch to stop now (nonzero: it ends with
   SIM_STOPPED); polled from any worker thread. */
typedef int sim_stop_fn(void *arg);

/* What a launch's printf and assert wrote: n bytes of text, for stdout
   (err 0) or stderr (an assertion's message), once the launch is over, in
   the order of the threads (block by block, thread by thread). */
typedef void sim_print_fn(void *ud, const char *text, size_t n, int err);
/* The span [lo, hi) of a launch's global reads (write 0) or writes (1,
   atomics too) in the live allocation that begins at base, once the
   launch is over (or a worker lets the allocation go). Calls are
   serialized. */
typedef void sim_touch_fn(void *ud, uint64_t base, uint64_t lo, uint64_t hi,
                          int write);
/* A global access of [p, p + n) (write: a store or an atomic) by a thread
   that has not run griddepcontrol.wait: nonzero (the caller's token) when
   it is a race. Called from any worker, unserialized: it must only read. */
typedef unsigned sim_early_fn(void *ud, uint64_t p, uint64_t n, int write);

typedef struct sim_launch {
  unsigned grid[3], block[3];
  unsigned dynamic_shared;      /* bytes of dynamic shared memory */
  const unsigned char *params;  /* the parameter bytes, laid out as on GPU */
  size_t nparams;
  sim_live_fn *live;
  sim_cond_fn *cond;
  void *ud;                     /* passed to live and cond */
  unsigned threads;             /* host threads (0: CUDA_SIM_THREADS or the
                                   machine's cores) */
  uint64_t executed;            /* out: thread-instructions run */
  sim_tex_fn *tex;              /* texture and surface objects: NULL when */
  sim_surf_fn *surf;            /* the caller has none (a launch faults) */
  sim_stop_fn *stop;            /* polled at every block and every 4096 */
  void *stop_arg;               /* backward branches of a warp (NULL: the
                                   launch runs to its end) */
  sim_print_fn *print;          /* printf's output (NULL: dropped) */
  sim_touch_fn *touch;          /* the accesses (NULL: not followed) */
  sim_early_fn *early;          /* a programmatic launch: its accesses
                                   before griddepcontrol.wait (NULL: not
                                   followed) */
  /* out: the first race early found (the lowest block's first): its
     token (0: none), the access, and where it was, "(x,y,z) of block
     (x,y,z) (source line, PTX line)" */
  unsigned early_hit;
  uint64_t early_p, early_n;
  int early_write;
  char early_at[320];
  /* out: whether a thread ran griddepcontrol.wait, and whether one did
     before its block ran griddepcontrol.launch_dependents (the grids
     after this one then start after the one before it ended) */
  int waited, wait_first;
} sim_launch;

/* Fault kinds sim_run returns (they are the driver's codes). */
enum {
  SIM_OK = 0,
  SIM_ILLEGAL_ADDRESS = 700,
  SIM_LAUNCH_FAILED = 719,
  SIM_LAUNCH_TIMEOUT = 702,
  SIM_MISALIGNED = 716,
  SIM_ILLEGAL_INSTRUCTION = 715,
  SIM_ASSERT = 710,    /* a failed assert: its message went to print */
  SIM_OUT_OF_MEMORY = 2,
  SIM_STOPPED = 909,   /* the caller's stop said so (CUDA_ERROR_TIMEOUT):
                          not a fault of the kernel, and no diagnostic */
};

/* Decodes PTX text. NULL with the reason in err (instruction and line for
   what the simulator does not run) when it cannot. */
sim_module *sim_load(const char *ptx, char *err, size_t nerr);
void sim_unload(sim_module *m);
/* The entry called name, or NULL. */
const sim_kernel *sim_kernel_find(const sim_module *m, const char *name);
/* Module variable i (global or const space): its name, host storage and
   size; 0 past the last. */
int sim_global(const sim_module *m, size_t i, const char **name, void **data,
               size_t *size);
/* Bytes of static shared memory the entry's module declares. */
size_t sim_static_shared(const sim_kernel *k);
/* Runs a launch to its end or its first fault: SIM_OK or a fault code, with
   a diagnostic naming kernel, source line (where the PTX has .loc lines:
   NVRTC's -lineinfo), PTX line, thread and block in diag. */
int sim_run(const sim_kernel *k, sim_launch *l, char *diag, size_t ndiag);
/* The interpreter's variant sim_run uses on this host: "avx512", "avx2"
   or "generic" (CUDA_SIM_ISA caps it). */
const char *sim_isa(void);
/* The PTX image inside a fatbin of nbytes: a malloc'd NUL-terminated copy,
   NULL with the reason in err ("no PTX in this image; ..."). */
char *sim_fatbin_ptx(const unsigned char *fatbin, size_t nbytes, char *err,
                     size_t nerr);

#endif
