/* Element types, kernel parameter types and the C spellings of types. Pure
   C, no CUDA and no Lua: the PTX reader (kernel/ptx.c) is fuzzed with it
   alone. */
#ifndef CUGRAPH_CTYPE_H
#define CUGRAPH_CTYPE_H

#include <stddef.h>

/* Element types of buffers and scalars, in the order of cg_type_names; the
   16-bit floats (IEEE binary16 and bfloat16) last. */
typedef enum cg_type {
  CG_F32, CG_F64, CG_I8, CG_U8, CG_I16, CG_U16, CG_I32, CG_U32, CG_I64,
  CG_U64, CG_F16, CG_BF16, CG_NTYPES
} cg_type;
extern const char *const cg_type_names[]; /* "f32", ..., NULL */
extern const unsigned char cg_type_size[];

#define CG_MAX_PARAMS 128

/* A kernel parameter's type: an element type, or one of these. */
enum {
  CG_P_INT = CG_NTYPES, /* integer of `size` bytes, signedness unknown
                           (.b32, .u32 with no C type): accepts
                           -2^(8size-1) .. 2^(8size)-1 */
  CG_P_PTR_OR_INT,      /* .u64/.b64/.s64 with no C type: a pointer or an
                           integer */
  CG_P_PTR,             /* pointer; elem says to what */
  CG_P_BYTES,           /* aggregate (.align A .b8 name[size]): a string */
  CG_P_ANY              /* elem of a void pointer, or a pointee not modelled */
};

typedef struct cg_param {
  unsigned char type;     /* cg_type or CG_P_* */
  unsigned char elem;     /* CG_P_PTR only: an element type or CG_P_ANY */
  unsigned char is_const; /* CG_P_PTR only: pointer to const */
  unsigned int size;      /* bytes the parameter takes */
  unsigned int align;
} cg_param;

/* A parameter by value (elem CG_P_ANY), and a pointer to elem. */
cg_param cg_value_param(int type, unsigned size, unsigned align);
cg_param cg_pointer_param(int elem, int is_const);
/* The elem of a pointer to a value of type t: element types, else any. */
int cg_pointee(int t);

/* Parses a signature string: comma-separated C types ("float, const float*,
   int, unsigned long long") or short names ("f32, f32*, i32, u64");
   "void*" is a pointer to anything. Returns the count, or -1 with err. */
int cg_signature(const char *sig, cg_param *out, int max, char *err,
                 size_t errlen);

/* snprintf into err (when err is not NULL). */
void cg_seterr(char *err, size_t errlen, const char *fmt, ...);

#endif
