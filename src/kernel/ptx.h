/* Kernel signatures: PTX .entry parameters (ptx.c) and Itanium-mangled C++
   names (demangle.c); module variables (ptx.c); what an entry's code
   allows of programmatic dependent launch (pdl.c); signature strings:
   base/ctype.h. Pure C, no CUDA and no Lua, so it can be fuzzed alone. */
#ifndef CUGRAPH_PTX_H
#define CUGRAPH_PTX_H

#include <stddef.h>
#include "base/ctype.h"

/* Whether an entry's code may take either side of a programmatic edge
   (pdl.c has the rules): as its consumer, it waits (griddepcontrol.wait)
   on every path before anything that may touch global memory and before
   it ends; as its producer, no global write can follow its block's first
   griddepcontrol.launch_dependents. Each why names the instruction that
   breaks the rule, its PTX line and its source line (.loc), or why the
   body could not be read; "" where the rule holds. */
typedef struct ptx_pdl {
  unsigned char read;     /* the body was found and read */
  unsigned char consumer, producer;
  char consumer_why[320], producer_why[400];
} ptx_pdl;

typedef struct ptx_entry {
  char name[256];         /* entry name as written in the PTX */
  char base[128];         /* demangled function name (no scope), or name */
  char cxx[208];          /* the C++ name cuda.compile's opts.names gave
                             for it (an instantiation), or "" */
  int typed;              /* 1: C types from the mangled name; 0: PTX only */
  int nparams;
  cg_param params[CG_MAX_PARAMS];
  ptx_pdl pdl;            /* from ptx_pdl_scan; zero from ptx_parse */
} ptx_entry;

/* Parses every .entry of a PTX text (len bytes, need not be NUL-terminated).
   Returns a malloc'd array (free it) and sets *n; on error returns NULL with
   a message in err: not PTX, truncated, malformed, too many parameters. */
ptx_entry *ptx_parse(const char *src, size_t len, int *n, char *err,
                     size_t errlen);

/* Fills e[i].pdl for the n entries ptx_parse found in the same text (len
   bytes): reads each .entry body once. Never fails: an entry whose body
   cannot be read (or memory runs out) holds neither side, and says why. */
void ptx_pdl_scan(const char *src, size_t len, ptx_entry *e, int n);

/* A module variable in global or constant memory (`.global`/`.const` at
   module scope), for m:global. */
typedef struct ptx_global {
  char name[256];
  int type;               /* its cg_type, or -1 when PTX does not say
                             (.b8 .b16 .b32 .b64: bytes or bits) */
  int constant;           /* declared .const */
  unsigned long long bytes; /* its size from the declaration */
} ptx_global;

/* Every global and constant variable of a PTX text: a malloc'd array (free
   it) and *n, or NULL with a message in err (out of memory). Variables
   whose names start with '$' (string literals) are left out. */
ptx_global *ptx_globals(const char *src, size_t len, int *n, char *err,
                        size_t errlen);

/* Demangles the parameters of an Itanium-mangled function name
   ("_Z4axpyfPKfPfi"): writes the base name and the parameters. Returns the
   count, or -1 when the name is not mangled or uses what is not modelled. */
int ptx_demangle(const char *mangled, char *base, size_t baselen,
                 cg_param *out, int max);

#endif
