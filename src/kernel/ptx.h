/* Kernel signatures: PTX .entry parameters, Itanium-mangled C++ names and
   signature strings. Pure C, no CUDA and no Lua, so it can be fuzzed alone. */
#ifndef CUGRAPH_PTX_H
#define CUGRAPH_PTX_H

#include <stddef.h>

#define PTX_MAX_PARAMS 128

/* Parameter types. The first twelve follow cg_type (core.h) in order. */
enum {
  PTX_F32, PTX_F64, PTX_I8, PTX_U8, PTX_I16, PTX_U16, PTX_I32, PTX_U32,
  PTX_I64, PTX_U64, PTX_F16, PTX_BF16, /* __half, __nv_bfloat16 */
  PTX_INT,        /* integer of `size` bytes, signedness unknown (.b32, .u32
                     with no C type): accepts -2^(8size-1) .. 2^(8size)-1 */
  PTX_PTR_OR_INT, /* .u64/.b64/.s64 with no C type: a pointer or an integer */
  PTX_PTR,        /* pointer; elem says to what */
  PTX_BYTES,      /* aggregate (.align A .b8 name[size]): a string of size */
  PTX_ANY         /* elem of a void pointer, or a pointee we do not model */
};

typedef struct ptx_param {
  unsigned char type;     /* PTX_* */
  unsigned char elem;     /* PTX_PTR only: PTX_F32..PTX_BF16 or PTX_ANY */
  unsigned char is_const; /* PTX_PTR only: pointer to const */
  unsigned int size;      /* bytes the parameter takes */
  unsigned int align;
} ptx_param;

typedef struct ptx_entry {
  char name[256];         /* entry name as written in the PTX */
  char base[128];         /* demangled function name (no scope), or name */
  int typed;              /* 1: C types from the mangled name; 0: PTX only */
  int nparams;
  ptx_param params[PTX_MAX_PARAMS];
} ptx_entry;

/* Parses every .entry of a PTX text (len bytes, need not be NUL-terminated).
   Returns a malloc'd array (free it) and sets *n; on error returns NULL with
   a message in err: not PTX, truncated, malformed, too many parameters. */
ptx_entry *ptx_parse(const char *src, size_t len, int *n, char *err,
                     size_t errlen);

/* Parses a signature string: comma-separated C types ("float, const float*,
   int, unsigned long long") or short names ("f32, f32*, i32, u64");
   "void*" is a pointer to anything. Returns the count, or -1 with err. */
int ptx_signature(const char *sig, ptx_param *out, int max, char *err,
                  size_t errlen);

/* Demangles the parameters of an Itanium-mangled function name
   ("_Z4axpyfPKfPfi"): writes the base name and the parameters. Returns the
   count, or -1 when the name is not mangled or uses what is not modelled. */
int ptx_demangle(const char *mangled, char *base, size_t baselen,
                 ptx_param *out, int max);

#endif
