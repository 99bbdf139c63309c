/* What the files of cugraph.Blas share (blas.c: the object, the argument
   checks, the call's set-up and the level-1 and level-2 calls;
   blas_gemm.c: the matrix products). */
#ifndef CUGRAPH_BLAS_CALL_H
#define CUGRAPH_BLAS_CALL_H

#include "types/types.h"
#include "base/blas.h"

typedef struct cg_blas {
  cg_obj h;             /* h.drv.blas */
  CUstream stream;      /* the stream cuBLAS was last given ... */
  int bound;            /* ... once it was given one */
  int mode;             /* the pointer mode last set */
} cg_blas;

#define RES(b) ((b)->h.drv.blas)
#define DPTR(b) ((void *)(uintptr_t)(b)->h.drv.mem)

/* Raises an error object naming the cuBLAS call and its status. */
void cg_blas_check(lua_State *L, const char *api, cublasStatus_t r);
#define BLAS(L, fn, ...) cg_blas_check((L), #fn, cg_cublas.fn(__VA_ARGS__))

cg_blas *cg_blas_checkblas(lua_State *L);
/* Where the options and the stream of a call are, the fixed arguments
   ending before first: (..., [opts,] [stream]). The stream is left at
   *sidx: the one named, else the handle's (nil for none). */
void cg_blas_tail(lua_State *L, int first, int *oidx, int *sidx);
/* The buffer at idx, on the handle's device, usable now. */
cg_buffer *cg_blas_buf(lua_State *L, cg_blas *b, int idx, const char *fn,
                       const char *name);
/* An integer option of at least lo that cuBLAS takes as an int (dflt when
   absent; dflt < 0: required), and a boolean one. */
int cg_blas_optint(lua_State *L, int oidx, const char *key, lua_Integer dflt,
                   lua_Integer lo, const char *fn);
int cg_blas_optbool(lua_State *L, int oidx, const char *key);
/* Elements a rows x cols matrix of leading dimension ld spans, batch of
   them stride apart; raises unless x holds need of them. */
uint64_t cg_blas_span(int rows, int cols, int ld, int batch, int64_t stride);
void cg_blas_fits(lua_State *L, cg_buffer *x, uint64_t need, const char *fn,
                  const char *name, const char *shape);

typedef struct scale {
  CUdeviceptr dev;      /* the DeviceScalar's memory, or 0 */
  double v;
} scale;

/* The option key as a scale, left on the stack (a DeviceScalar is pinned
   from there); a DeviceScalar must be of type t. */
void cg_blas_optscale(lua_State *L, int oidx, const char *key, double dflt,
                      cg_type t, cg_blas *b, const char *fn, scale *s);

/* Pointers to alpha and beta, in one pointer mode (cuBLAS has one per
   call): numbers on the host, or both in device memory, a number beside a
   DeviceScalar then 0 or 1, read from the handle's constants. */
typedef struct scales {
  int mode;
  const void *alpha, *beta;
  float f[2];
  double d[2];
} scales;

void cg_blas_pointers(lua_State *L, cg_blas *b, scale *s, int n, cg_type t,
                      const char *fn, const char *const *names, scales *out);

/* The stream of the call (after the capture checks, NULL for none: then
   after all device work); pins the call's objects, writes pending
   DeviceScalars, and gives cuBLAS the stream, its workspace and mode. */
/* In a recording (cuda.graphed): the call recorded instead, NULL returned,
   and the caller returns at once. */
CUstream cg_blas_begin(lua_State *L, cg_blas *b, int sidx, int mode,
                       const char *what);

/* h:gemm and h:matmul (blas_gemm.c), and their options. */
int cg_blas_gemm(lua_State *L);
int cg_blas_matmul(lua_State *L);
extern const char *const cg_blas_gemm_keys[], *const cg_blas_matmul_keys[];

#endif
