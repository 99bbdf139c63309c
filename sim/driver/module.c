/* Modules and functions: images (PTX, cubin, fatbin) loaded into modules,
   each function with its parameter layout and host version; the JIT's log
   of a failed load. */
#include "double.h"
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- modules and functions ------------------------------------------------- */

static void free_function(CUfunction f) {
  free(f->name);
  free(f->off);
  free(f);
}

/* Lays the parameters out: pair[2i] is the size of parameter i and
   pair[2i + 1] its alignment. */
static int set_layout(CUfunction f, size_t n, const size_t *pair) {
  f->off = n ? malloc(2 * n * sizeof *f->off) : NULL;
  if (n && !f->off) return 1;
  f->size = n ? f->off + n : NULL;
  f->nparams = n;
  f->layout = 1;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    at = (at + pair[2 * i + 1] - 1) / pair[2 * i + 1] * pair[2 * i + 1];
    f->off[i] = at;
    f->size[i] = pair[2 * i];
    at += pair[2 * i];
  }
  f->argbytes = at;
  return 0;
}

/* Adds a function to m. With a parameter list from PTX (n (size, align)
   pairs), a host version whose parameters differ is not used. */
CUfunction dbl_add_function(CUmodule m, const char *name, size_t len,
                            int from_ptx, size_t n, const size_t *pair) {
  if (m->nfuncs == m->cfuncs) {
    size_t cap = m->cfuncs ? 2 * m->cfuncs : 8;
    CUfunction *v = realloc(m->funcs, cap * sizeof *v);
    if (!v) return NULL;
    m->funcs = v;
    m->cfuncs = cap;
  }
  CUfunction f = calloc(1, sizeof *f);
  if (!f || !(f->name = malloc(len + 1))) {
    free(f);
    return NULL;
  }
  memcpy(f->name, name, len);
  f->name[len] = '\0';
  f->max_dynamic = SHARED_DEFAULT;
  f->impl = dbl_find_kernel(f->name);
  if (f->impl && from_ptx) {
    int same = f->impl->nparams == n;
    for (size_t i = 0; same && i < n; i++)
      same = f->impl->size[i] == pair[2 * i] &&
             pair[2 * i + 1] == (pair[2 * i] > 8 ? 8 : pair[2 * i]);
    if (!same) f->impl = NULL;
  }
  int bad = 0;
  if (from_ptx) {
    bad = set_layout(f, n, pair);
  } else if (f->impl) { /* naturally aligned; aggregates to 8 bytes */
    size_t own[16];
    for (size_t i = 0; i < f->impl->nparams; i++) {
      own[2 * i] = f->impl->size[i];
      own[2 * i + 1] = own[2 * i] > 8 ? 8 : own[2 * i];
    }
    bad = set_layout(f, f->impl->nparams, own);
  }
  if (bad) {
    free_function(f);
    return NULL;
  }
  m->funcs[m->nfuncs++] = f;
  return f;
}

void dbl_free_module(CUmodule m) {
  for (size_t i = 0; i < m->nfuncs; i++) free_function(m->funcs[i]);
  free(m->funcs);
  free(m->image);
#ifdef CUDA_SIM
  const char *name;
  void *data;
  size_t size;
  for (size_t i = 0; sim_global(m->sim, i, &name, &data, &size); i++)
    dbl_drop_module_memory(data);
  sim_unload(m->sim);
#endif
  dbl_free_obj(m);
}

#ifdef CUDA_SIM
/* The simulator's module variables (the double's modules have none). */
CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes,
                                   CUmodule hmod, const char *name) {
  ENTRY(cuModuleGetGlobal);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hmod || !name) return CUDA_ERROR_INVALID_VALUE;
  const char *vname;
  void *data;
  size_t size;
  for (size_t i = 0; hmod->sim && sim_global(hmod->sim, i, &vname, &data,
                                             &size); i++)
    if (!strcmp(vname, name)) {
      if (dptr) *dptr = (CUdeviceptr)(uintptr_t)data;
      if (bytes) *bytes = size;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
#endif

static uint64_t rd_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  while (n--) v = v << 8 | p[n];
  return v;
}

/* Length of a little-endian ELF64 image: the furthest of its headers and
   sections. Zero when it is not one (or claims 4 GiB or more). */
static size_t elf_size(const unsigned char *p) {
  const uint64_t most = (uint64_t)1 << 32;
  if (p[4] != 2 || p[5] != 1 || p[6] != 1) return 0; /* 64-bit, LE, v1 */
  uint64_t phoff = rd_le(p + 0x20, 8), shoff = rd_le(p + 0x28, 8);
  uint64_t phsz = rd_le(p + 0x36, 2), phn = rd_le(p + 0x38, 2);
  uint64_t shsz = rd_le(p + 0x3a, 2), shn = rd_le(p + 0x3c, 2);
  if (phoff >= most || shoff >= most) return 0;
  uint64_t end = 0x40;
  if (phoff + phn * phsz > end) end = phoff + phn * phsz;
  if (shoff + shn * shsz > end) end = shoff + shn * shsz;
  for (uint64_t i = 0; shoff && shsz >= 0x28 && i < shn; i++) {
    const unsigned char *sh = p + shoff + i * shsz;
    uint64_t off = rd_le(sh + 0x18, 8), size = rd_le(sh + 0x20, 8);
    if (rd_le(sh + 4, 4) != 8 /* SHT_NOBITS */ && off + size > end)
      end = off + size;
  }
  return end < ((uint64_t)1 << 32) ? (size_t)end : 0;
}

/* Length of a fatbin: its header (magic, version, header size, fat size). */
static size_t fatbin_size(const unsigned char *p) {
  uint64_t header = rd_le(p + 6, 2), body = rd_le(p + 8, 8);
  return header >= 16 && body < ((uint64_t)1 << 32) ? (size_t)(header + body)
                                                   : 0;
}

/* Whether name occurs in the binary image as a whole NUL-terminated string. */
static int image_has(CUmodule m, const char *name) {
  size_t len = strlen(name) + 1;
  const unsigned char *p = m->image, *end = m->image + m->nimage;
  while (len <= (size_t)(end - p)) {
    const unsigned char *hit = memchr(p, name[0], (size_t)(end - p) - len + 1);
    if (!hit) return 0;
    if ((hit == m->image || hit[-1] == '\0') && !memcmp(hit, name, len))
      return 1;
    p = hit + 1;
  }
  return 0;
}

/* Writes the reason of a failed load ("" after success) where
   CU_JIT_ERROR_LOG_BUFFER asks, and its length back into
   CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, as the driver does. */
static void jit_log(unsigned n, const CUjit_option *options, void **values,
                    const char *why) {
  char *buf = NULL;
  size_t size = 0;
  unsigned at = 0;
  for (unsigned i = 0; i < n; i++) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buf = values[i];
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      size = (uintptr_t)values[i], at = i;
  }
  if (!buf || !size) return;
  snprintf(buf, size, "%s", why);
  values[at] = (void *)(uintptr_t)strlen(buf);
}

/* -- modules --------------------------------------------------------------- */

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int numOptions,
                                    CUjit_option *options,
                                    void **optionValues) {
  ENTRY(cuModuleLoadDataEx);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!module || !image || (numOptions && (!options || !optionValues)))
    return CUDA_ERROR_INVALID_VALUE;
  const unsigned char *p = image;
  CUmodule m = dbl_new_obj(sizeof *m, O_MODULE);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  const char *why = "error   : Binary format for key='0', ident='' is not "
                    "recognized";
  if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')
    m->nimage = elf_size(p);
  else if (p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba)
    m->nimage = fatbin_size(p);
#ifdef CUDA_SIM
  if (m->nimage) {
    r = dbl_load_image_ptx(m, p, &why);
  } else if
#else
  if (m->nimage) {
    if (!(m->image = malloc(m->nimage))) r = CUDA_ERROR_OUT_OF_MEMORY;
    else memcpy(m->image, p, m->nimage);
  } else if
#endif
  (dbl_is_text(p) && strstr(image, ".version")) { /* PTX */
    r = dbl_load_ptx(m, image, &why);
  } else {
    r = CUDA_ERROR_INVALID_IMAGE;
  }
  if (r) {
    jit_log(numOptions, options, optionValues, why);
    dbl_free_module(m);
    return r;
  }
  jit_log(numOptions, options, optionValues, "");
  *module = m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  ENTRY(cuModuleUnload);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hmod) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r; /* the work still to run that uses it runs first */
  dbl_free_module(hmod);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
                                     const char *name) {
  ENTRY(cuModuleGetFunction);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hmod) return CUDA_ERROR_INVALID_HANDLE;
  if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < hmod->nfuncs; i++)
    if (!strcmp(hmod->funcs[i]->name, name)) {
      *hfunc = hmod->funcs[i];
      return CUDA_SUCCESS;
    }
  if (!hmod->image || !*name || !image_has(hmod, name))
    return CUDA_ERROR_NOT_FOUND;
  CUfunction f = dbl_add_function(hmod, name, strlen(name), 0, 0, NULL);
  if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
  *hfunc = f;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc,
                                    CUfunction_attribute attrib, int value) {
  ENTRY(cuFuncSetAttribute);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hfunc) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    if (value < 0 || value > SHARED_OPTIN) return CUDA_ERROR_INVALID_VALUE;
    hfunc->max_dynamic = value;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    return value < -1 || value > 100 ? CUDA_ERROR_INVALID_VALUE
                                     : CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

/* The parameter layout of the host version, or of the PTX entry. A binary
   image's layout is not read: CUDA_ERROR_NOT_SUPPORTED. */
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex,
                                    size_t *paramOffset, size_t *paramSize) {
  ENTRY(cuFuncGetParamInfo);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!func) return CUDA_ERROR_INVALID_HANDLE;
  if (!paramOffset) return CUDA_ERROR_INVALID_VALUE;
  if (!func->layout) return CUDA_ERROR_NOT_SUPPORTED;
  if (paramIndex >= func->nparams) return CUDA_ERROR_INVALID_VALUE;
  *paramOffset = func->off[paramIndex];
  if (paramSize) *paramSize = func->size[paramIndex];
  return CUDA_SUCCESS;
}
