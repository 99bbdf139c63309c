/* The embedding API from a host, two ways.

     capi LUA_DIR          the checks of cugraph_pushbuffer, each through
                           lua_pcall: one line per case, "name: message" for
                           a refusal or "name: ok"
     capi LUA_DIR SCRIPT   runs SCRIPT in a state that has a global `capi`:
                           capi.tograph(g) -> handle, capi.launch(h) ->
                           nil | error name (waiting for the device),
                           capi.start(h, s) the same on the Stream s, not
                           waiting, capi.release(h), capi.settle(t) ->
                           cugraph_settle(t) as a boolean, and
                           capi.after(h, address, n, type, value): after
                           lua_close the host launches h, reads n elements
                           of type ("f32" or "i32") at address and checks
                           each equals value. Then it releases every handle
                           and checks that device memory is as before the
                           state (exactly on a software driver; within 4 MiB
                           on a GPU, whose driver keeps memory of its own),
                           or as at capi.baseline(), which a script calls
                           after what a library keeps for the process (NCCL
                           keeps 192 MiB on an H200 after its first
                           communicator is destroyed).
                           DLPack: capi.tensor(opts) -> t, a tensor of the
                           host's device memory (opts: code, bits, lanes,
                           device, device_id, shape, strides, offset,
                           versioned, major, flags, null, value: an f32 or
                           i32 to fill it with), capi.push(t) -> Buffer
                           (cugraph_pushdlpack[_versioned]), capi.deleted(t)
                           -> how often its deleter ran, capi.delete(t) (the
                           host's own, for one the state refused);
                           capi.take(b_or_dltensor [, versioned]) -> slot,
                           info (cugraph_todlpack[_versioned]: the tensor's
                           fields), capi.read(slot, n) -> its first n
                           elements, as f32 (or i32 when its code says
                           int), capi.give(slot) calls its deleter,
                           capi.pushslot(slot) hands it back to the state
                           (cugraph_pushdlpack[_versioned]) -> Buffer,
                           capi.keep(slot, n, value): after lua_close the
                           host reads n elements, checks each equals value
                           and then calls the deleter. At the end every
                           tensor the host made must have been deleted
                           exactly once, and every slot once.
                           Arrays: capi.array(w, h, channels) -> an Array
                           of f32 texels the host made (cuArray3DCreate)
                           and pushed (cugraph_pusharray); capi.same(a)
                           -> whether cugraph_checkarray gives it back.
                           The host destroys each after lua_close and the
                           graphs' release, and checks that it could.
                           External: capi.extmem(fd, size) and
                           capi.extsem(fd, timeline) import as the host
                           (cuImportExternal*) and push borrowed objects
                           (cugraph_pushexternal*), destroyed by the host
                           at the end, which checks it could;
                           capi.scalar(sc) -> a C scalar (cugraph_toscalar),
                           capi.set(cs, v) sets its u64 value
                           (cugraph_scalar_set), released at the end.
                           Host memory: capi.hostmem(type, n [, pageable])
                           pushes the host's page-locked memory
                           (cuMemHostAlloc, freed by the host at the end,
                           which checks it could), or malloc's, as a
                           borrowed HostBuffer (cugraph_pushhostbuffer);
                           capi.store(h, i, v) and capi.load(h, i) write
                           and read its u64 element i through
                           cugraph_checkhostbuffer, as an engine does.
                           Host hooks: capi.hostfn([probe]) -> fn, data
                           (cugraph_pushhostfn, for s:host(fn, data)): a C
                           function that counts its calls and, with probe,
                           makes a CUDA call (cuMemGetInfo) inside;
                           capi.hooked() -> its calls, and the name of what
                           the CUDA call inside returned last (or nil).

   Prints one line per failed check and "capi: all passed" (or "capi:
   FAILED"); exits 0 only if all passed. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"
#include "devmem.h"

typedef struct { const char *type; CUdeviceptr ptr; size_t n; } bufcase;

static int pushbuffer(lua_State *L) {
  const bufcase *c = lua_touserdata(L, 1);
  cugraph_pushbuffer(L, c->ptr, c->type, c->n);
  return 1;
}

static int checks(const char *lua_dir) {
  static struct { const char *name; bufcase c; } cases[] = {
    {"f64 of 2^61+1", {"f64", 0x1000, ((size_t)1 << 61) + 1}},
    {"u8 of SIZE_MAX", {"u8", 0x1000, SIZE_MAX}},
    {"f32 of 2^62", {"f32", 0x1000, (size_t)1 << 62}},
    {"null pointer", {"f32", 0, 4}},
    {"unknown type", {"float4", 0x1000, 4}},
    {"f32 of 4", {"f32", 0x1000, 4}},
  };
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lua_pushcfunction(L, pushbuffer);
    lua_pushlightuserdata(L, &cases[i].c);
    int r = lua_pcall(L, 1, 1, 0);
    printf("%s: %s\n", cases[i].name, r ? lua_tostring(L, -1) : "ok");
    lua_pop(L, 1);
  }
  lua_close(L);
  return 0;
}

/* -- scripts -------------------------------------------------------------- */

#define HOST_FUNCS(X) \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
  X(cuMemGetInfo) X(cuMemcpyDtoH) X(cuGetErrorName) X(cuMemAlloc) \
  X(cuMemFree) X(cuMemsetD32) X(cuArray3DCreate) X(cuArrayDestroy) \
  X(cuImportExternalMemory) X(cuDestroyExternalMemory) \
  X(cuImportExternalSemaphore) X(cuDestroyExternalSemaphore) \
  X(cuMemHostAlloc) X(cuMemFreeHost)

#define FIELD(f) __typeof__(f) *f;
static struct { HOST_FUNCS(FIELD) } cu;
#undef FIELD
#define STR(x) #x
#define XSTR(x) STR(x)

static int load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW);
  void *p;
  if (!lib) return 0;
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) return 0; \
  memcpy(&cu.f, &p, sizeof p);
  HOST_FUNCS(RESOLVE)
#undef RESOLVE
  return 1;
}

enum { MAXHANDLES = 64 };
static struct after {
  cugraph_graph *g;
  int check;            /* launch and read after lua_close */
  CUdeviceptr addr;
  size_t n;
  int f32;
  double value;
} handles[MAXHANDLES];
static int nhandles, failures;

static void fail(const char *what, const char *detail) {
  printf("FAIL %s: %s\n", what, detail);
  failures++;
}

static struct after *handle_at(lua_State *L, int idx) {
  struct after *a = lua_touserdata(L, idx);
  luaL_argcheck(L, a >= handles && a < handles + nhandles && a->g, idx,
                "not a live C graph handle");
  return a;
}

static int l_tograph(lua_State *L) {
  if (nhandles == MAXHANDLES) return luaL_error(L, "too many handles");
  cugraph_graph *g = cugraph_tograph(L, 1);
  handles[nhandles].g = g;
  lua_pushlightuserdata(L, &handles[nhandles++]);
  return 1;
}

static const char *errname(CUresult r) {
  const char *s = NULL;
  return cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "CUresult";
}

static int l_launch(lua_State *L) {
  CUresult r = cugraph_graph_launch(handle_at(L, 1)->g, NULL);
  if (r == CUDA_SUCCESS) r = cu.cuCtxSynchronize();
  if (r == CUDA_SUCCESS) return 0;
  lua_pushstring(L, errname(r));
  return 1;
}

/* capi.start(h, s): launches h on the Stream s, waiting for nothing */
static int l_start(lua_State *L) {
  CUresult r = cugraph_graph_launch(handle_at(L, 1)->g,
                                    cugraph_checkstream(L, 2));
  if (r == CUDA_SUCCESS) return 0;
  lua_pushstring(L, errname(r));
  return 1;
}

static int l_release(lua_State *L) {
  struct after *a = handle_at(L, 1);
  cugraph_graph_release(a->g);
  a->g = NULL;
  return 0;
}

static int l_settle(lua_State *L) {
  lua_pushboolean(L, cugraph_settle(luaL_checknumber(L, 1)));
  return 1;
}

static int l_after(lua_State *L) {
  struct after *a = handle_at(L, 1);
  a->addr = (CUdeviceptr)luaL_checkinteger(L, 2);
  a->n = (size_t)luaL_checkinteger(L, 3);
  a->f32 = !strcmp(luaL_checkstring(L, 4), "f32");
  a->value = luaL_checknumber(L, 5);
  a->check = 1;
  return 0;
}

/* After lua_close: each handle the script named is launched and its
   memory read back. */
static void check_after(struct after *a) {
  char msg[128];
  CUresult r = cugraph_graph_launch(a->g, NULL);
  if (r == CUDA_SUCCESS) r = cu.cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    snprintf(msg, sizeof msg, "launch after lua_close: %s", errname(r));
    fail("after", msg);
    return;
  }
  unsigned char *host = malloc(a->n * 4);
  if (!host || cu.cuMemcpyDtoH(host, a->addr, a->n * 4)) {
    fail("after", "reading the memory back");
    free(host);
    return;
  }
  for (size_t i = 0; i < a->n; i++) {
    double v;
    if (a->f32) { float f; memcpy(&f, host + 4 * i, 4); v = f; }
    else { int32_t k; memcpy(&k, host + 4 * i, 4); v = k; }
    if (v != a->value) {
      snprintf(msg, sizeof msg, "element %zu is %g, expected %g", i, v,
               a->value);
      fail("after", msg);
      break;
    }
  }
  free(host);
}

/* -- DLPack --------------------------------------------------------------- */

enum { MAXTENSORS = 128, MAXDIMS = 8 };

/* Tensors the host makes over its own device memory, as a producer would:
   the deleter frees the memory and counts its calls. */
static struct ext {
  DLManagedTensor m;
  DLManagedTensorVersioned v;
  int versioned;
  atomic_int deleted;   /* a thread of the runtime may run the deleter */
  CUdeviceptr mem;
  int64_t shape[MAXDIMS], strides[MAXDIMS];
} exts[MAXTENSORS];
static int nexts;

static void ext_deleted(struct ext *e) {
  if (e->deleted++ == 0 && e->mem) cu.cuMemFree(e->mem);
}
static void ext_delete0(DLManagedTensor *t) { ext_deleted(t->manager_ctx); }
static void ext_delete1(DLManagedTensorVersioned *t) {
  ext_deleted(t->manager_ctx);
}

static lua_Integer optfield(lua_State *L, const char *key, lua_Integer dflt) {
  lua_getfield(L, 1, key);
  lua_Integer v = lua_isnil(L, -1) ? dflt : luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Reads the integer list opts[key] into out; its length, or -1 if absent. */
static int optlist(lua_State *L, const char *key, int64_t *out) {
  int n = -1;
  if (lua_getfield(L, 1, key) == LUA_TTABLE) {
    n = (int)lua_rawlen(L, -1);
    luaL_argcheck(L, n <= MAXDIMS, 1, "too many dimensions");
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      out[i] = luaL_checkinteger(L, -1);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return n;
}

static struct ext *ext_at(lua_State *L, int idx) {
  struct ext *e = lua_touserdata(L, idx);
  luaL_argcheck(L, e >= exts && e < exts + nexts, idx, "not a host tensor");
  return e;
}

static int l_tensor(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (nexts == MAXTENSORS) return luaL_error(L, "too many tensors");
  struct ext *e = &exts[nexts];
  memset(e, 0, sizeof *e);
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.dtype.code = (uint8_t)optfield(L, "code", kDLFloat);
  t.dtype.bits = (uint8_t)optfield(L, "bits", 32);
  t.dtype.lanes = (uint16_t)optfield(L, "lanes", 1);
  t.device.device_type = (DLDeviceType)optfield(L, "device", kDLCUDA);
  t.device.device_id = (int32_t)optfield(L, "device_id", 0);
  t.byte_offset = (uint64_t)optfield(L, "offset", 0);
  int ndim = optlist(L, "shape", e->shape);
  if (ndim < 0) e->shape[0] = 4, ndim = 1;
  t.ndim = (int32_t)optfield(L, "ndim", ndim);
  t.shape = e->shape;
  if (optlist(L, "strides", e->strides) >= 0) t.strides = e->strides;
  size_t count = 1;
  for (int i = 0; i < ndim; i++) count *= e->shape[i] > 0 ? (size_t)e->shape[i] : 1;
  size_t bytes = (count * t.dtype.bits * t.dtype.lanes / 8 + t.byte_offset + 3) & ~(size_t)3;
  if (t.strides) bytes *= 4; /* room for strided layouts */
  if (bytes < 4 || bytes > (64u << 20) || count > (1u << 24))
    bytes = 256; /* for a tensor to be refused */
  if (cu.cuMemAlloc(&e->mem, bytes)) return luaL_error(L, "cuMemAlloc");
  lua_getfield(L, 1, "value");
  if (!lua_isnil(L, -1)) {
    uint32_t bits;
    if (lua_isinteger(L, -1)) {
      int32_t k = (int32_t)lua_tointeger(L, -1);
      memcpy(&bits, &k, 4);
    } else {
      float f = (float)luaL_checknumber(L, -1);
      memcpy(&bits, &f, 4);
    }
    if (cu.cuMemsetD32(e->mem, bits, bytes / 4) || cu.cuCtxSynchronize())
      return luaL_error(L, "cuMemsetD32");
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "null");
  t.data = lua_toboolean(L, -1) ? NULL : (void *)(uintptr_t)e->mem;
  lua_pop(L, 1);
  lua_getfield(L, 1, "versioned");
  e->versioned = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (e->versioned) {
    e->v.dl_tensor = t;
    e->v.version.major = (uint32_t)optfield(L, "major", 1);
    e->v.version.minor = 0;
    e->v.flags = (uint64_t)optfield(L, "flags", 0);
    e->v.manager_ctx = e;
    e->v.deleter = ext_delete1;
  } else {
    e->m.dl_tensor = t;
    e->m.manager_ctx = e;
    e->m.deleter = ext_delete0;
  }
  nexts++;
  lua_pushlightuserdata(L, e);
  return 1;
}

static int l_push(lua_State *L) {
  struct ext *e = ext_at(L, 1);
  if (e->versioned) cugraph_pushdlpack_versioned(L, &e->v);
  else cugraph_pushdlpack(L, &e->m);
  return 1;
}

static int l_deleted(lua_State *L) {
  lua_pushinteger(L, ext_at(L, 1)->deleted);
  return 1;
}

static int l_delete(lua_State *L) {
  struct ext *e = ext_at(L, 1);
  if (e->versioned) e->v.deleter(&e->v);
  else e->m.deleter(&e->m);
  return 0;
}

/* Tensors taken from the script, as a consumer holds them. */
static struct slot {
  DLManagedTensor *m;
  DLManagedTensorVersioned *v;
  int given, keep;
  size_t n;
  double value;
} slots[MAXTENSORS];
static int nslots;

static const DLTensor *slot_tensor(const struct slot *s) {
  return s->m ? &s->m->dl_tensor : &s->v->dl_tensor;
}

static struct slot *slot_at(lua_State *L, int idx) {
  struct slot *s = lua_touserdata(L, idx);
  luaL_argcheck(L, s >= slots && s < slots + nslots && !s->given, idx,
                "not a slot the host holds");
  return s;
}

static void setint(lua_State *L, const char *key, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, key);
}

static void pushlist(lua_State *L, const char *key, const int64_t *v, int n) {
  if (!v) return;
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, key);
}

static int l_take(lua_State *L) {
  if (nslots == MAXTENSORS) return luaL_error(L, "too many slots");
  struct slot *s = &slots[nslots];
  memset(s, 0, sizeof *s);
  if (lua_toboolean(L, 2)) s->v = cugraph_todlpack_versioned(L, 1);
  else s->m = cugraph_todlpack(L, 1);
  nslots++;
  const DLTensor *t = slot_tensor(s);
  lua_pushlightuserdata(L, s);
  lua_createtable(L, 0, 12);
  setint(L, "ndim", t->ndim);
  pushlist(L, "shape", t->shape, t->ndim);
  pushlist(L, "strides", t->strides, t->ndim);
  setint(L, "code", t->dtype.code);
  setint(L, "bits", t->dtype.bits);
  setint(L, "lanes", t->dtype.lanes);
  setint(L, "device", t->device.device_type);
  setint(L, "device_id", t->device.device_id);
  setint(L, "offset", (lua_Integer)t->byte_offset);
  setint(L, "address", (lua_Integer)(uintptr_t)t->data);
  if (s->v) {
    setint(L, "major", s->v->version.major);
    setint(L, "minor", s->v->version.minor);
    setint(L, "flags", (lua_Integer)s->v->flags);
  }
  return 2;
}

static void give(struct slot *s) {
  s->given = 1;
  if (s->m) s->m->deleter(s->m);
  else s->v->deleter(s->v);
}

static int l_give(lua_State *L) {
  give(slot_at(L, 1));
  return 0;
}

/* The first n elements of the slot's tensor, as numbers; 0 when the
   memory cannot be read. */
static int read_slot(const struct slot *s, size_t n, double *out) {
  const DLTensor *t = slot_tensor(s);
  unsigned char *host = malloc(n * 4);
  int ok = host && !cu.cuCtxSynchronize() &&
           !cu.cuMemcpyDtoH(host, (CUdeviceptr)(uintptr_t)t->data + t->byte_offset, n * 4);
  for (size_t i = 0; ok && i < n; i++) {
    if (t->dtype.code == kDLFloat) { float f; memcpy(&f, host + 4 * i, 4); out[i] = f; }
    else { int32_t k; memcpy(&k, host + 4 * i, 4); out[i] = k; }
  }
  free(host);
  return ok;
}

static int l_pushslot(lua_State *L) {
  struct slot *s = slot_at(L, 1);
  if (s->m) cugraph_pushdlpack(L, s->m);
  else cugraph_pushdlpack_versioned(L, s->v);
  s->given = 1; /* the state's now */
  return 1;
}

static int l_read(lua_State *L) {
  struct slot *s = slot_at(L, 1);
  size_t n = (size_t)luaL_checkinteger(L, 2);
  double *v = malloc((n ? n : 1) * sizeof *v);
  if (!v || !read_slot(s, n, v)) {
    free(v);
    return luaL_error(L, "capi.read: cannot read the tensor's memory");
  }
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  free(v);
  return 1;
}

static int l_keep(lua_State *L) {
  struct slot *s = slot_at(L, 1);
  s->n = (size_t)luaL_checkinteger(L, 2);
  s->value = luaL_checknumber(L, 3);
  s->keep = 1;
  return 0;
}

/* After lua_close: the kept slots' memory still holds their values; every
   slot is let go; every host tensor was deleted exactly once. */
static void check_tensors(void) {
  char msg[128];
  for (int i = 0; i < nslots; i++) {
    struct slot *s = &slots[i];
    if (s->given) continue;
    if (s->keep) {
      double *v = malloc((s->n ? s->n : 1) * sizeof *v);
      if (!v || !read_slot(s, s->n, v)) fail("keep", "reading a tensor after lua_close");
      for (size_t j = 0; v && j < s->n; j++)
        if (v[j] != s->value) {
          snprintf(msg, sizeof msg, "slot %d, element %zu is %g after lua_close, "
                   "expected %g", i, j, v[j], s->value);
          fail("keep", msg);
          break;
        }
      free(v);
    }
    give(s);
  }
  /* a tensor whose free a timed-out wait held back is deleted by a thread
     once the work ends: wait for the device, then up to 10 s for it */
  cu.cuCtxSynchronize();
  for (int i = 0, tries = 0; i < nexts; i++)
    while (exts[i].deleted == 0 && tries++ < 1000) {
      struct timespec ms = { 0, 10000000 };
      nanosleep(&ms, NULL);
    }
  for (int i = 0; i < nexts; i++)
    if (exts[i].deleted != 1) {
      snprintf(msg, sizeof msg, "host tensor %d: its deleter ran %d times", i,
               exts[i].deleted);
      fail("deleter", msg);
    }
}

static size_t used0; /* device memory in use at the start, or at baseline() */
static CUdevice device;

static int l_baseline(lua_State *L) {
  int ok = 1;
  cu.cuCtxSynchronize();
  used0 = devmem_used(cu.cuMemGetInfo, device, &ok);
  if (!ok) return luaL_error(L, "cuMemGetInfo");
  return 0;
}

enum { MAXARRAYS = 8 };
static CUarray arrays[MAXARRAYS];
static int narrays;

static int l_array(lua_State *L) {
  if (narrays == MAXARRAYS) return luaL_error(L, "too many arrays");
  CUDA_ARRAY3D_DESCRIPTOR d = {
    .Width = (size_t)luaL_checkinteger(L, 1),
    .Height = (size_t)luaL_checkinteger(L, 2), .Format = CU_AD_FORMAT_FLOAT,
    .NumChannels = (unsigned)luaL_checkinteger(L, 3),
  };
  CUresult r = cu.cuArray3DCreate(&arrays[narrays], &d);
  if (r) return luaL_error(L, "cuArray3DCreate: %d", (int)r);
  cugraph_pusharray(L, arrays[narrays++]);
  return 1;
}

static int l_same(lua_State *L) {
  CUarray a = cugraph_checkarray(L, 1);
  int found = 0;
  for (int i = 0; i < narrays; i++) found |= arrays[i] == a;
  lua_pushboolean(L, found);
  return 1;
}

enum { MAXEXT = 8, MAXSCALARS = 16 };
static CUexternalMemory extmems[MAXEXT];
static CUexternalSemaphore extsems[MAXEXT];
static cugraph_scalar *cscalars[MAXSCALARS];
static int nextmems, nextsems, ncscalars;

static int l_extmem(lua_State *L) {
  if (nextmems == MAXEXT) return luaL_error(L, "too many imports");
  CUDA_EXTERNAL_MEMORY_HANDLE_DESC d;
  memset(&d, 0, sizeof d);
  d.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = (int)luaL_checkinteger(L, 1);
  d.size = (unsigned long long)luaL_checkinteger(L, 2);
  CUresult r = cu.cuImportExternalMemory(&extmems[nextmems], &d);
  if (r) return luaL_error(L, "cuImportExternalMemory: %s", errname(r));
  cugraph_pushexternalmemory(L, extmems[nextmems++], (size_t)d.size);
  return 1;
}

static int l_extsem(lua_State *L) {
  if (nextsems == MAXEXT) return luaL_error(L, "too many imports");
  int timeline = lua_toboolean(L, 2);
  CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d;
  memset(&d, 0, sizeof d);
  d.type = timeline ? CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
                    : CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = (int)luaL_checkinteger(L, 1);
  CUresult r = cu.cuImportExternalSemaphore(&extsems[nextsems], &d);
  if (r) return luaL_error(L, "cuImportExternalSemaphore: %s", errname(r));
  cugraph_pushexternalsemaphore(L, extsems[nextsems++], timeline);
  return 1;
}

static int l_scalar(lua_State *L) {
  if (ncscalars == MAXSCALARS) return luaL_error(L, "too many scalars");
  cscalars[ncscalars] = cugraph_toscalar(L, 1);
  lua_pushlightuserdata(L, &cscalars[ncscalars++]);
  return 1;
}

static int l_set(lua_State *L) {
  cugraph_scalar **s = lua_touserdata(L, 1);
  luaL_argcheck(L, s >= cscalars && s < cscalars + ncscalars, 1,
                "not a C scalar");
  uint64_t v = (uint64_t)luaL_checkinteger(L, 2);
  cugraph_scalar_set(*s, &v);
  return 0;
}

enum { MAXHOSTS = 8 };
static void *hosts[MAXHOSTS + 1]; /* the last: pageable, for a refusal */
static int nhosts;

static int l_hostmem(lua_State *L) {
  const char *type = luaL_checkstring(L, 1);
  size_t n = (size_t)luaL_checkinteger(L, 2);
  int pageable = lua_toboolean(L, 3);
  if (nhosts == MAXHOSTS) return luaL_error(L, "too many host blocks");
  void *p = NULL;
  if (pageable) {
    free(hosts[MAXHOSTS]);
    p = hosts[MAXHOSTS] = calloc(n, 8);
  } else if (cu.cuMemHostAlloc(&p, n * 8, CU_MEMHOSTALLOC_DEVICEMAP) ==
             CUDA_SUCCESS) {
    memset(p, 0, n * 8);
    hosts[nhosts++] = p;
  }
  if (!p) return luaL_error(L, "no host memory");
  cugraph_pushhostbuffer(L, p, type, n);
  return 1;
}

static uint64_t *element(lua_State *L) {
  const char *type;
  size_t n;
  uint64_t *p = cugraph_checkhostbuffer(L, 1, &type, &n);
  size_t i = (size_t)luaL_checkinteger(L, 2);
  luaL_argcheck(L, !strcmp(type, "u64") && i < n, 2, "not a u64 element");
  return p + i;
}

static int l_store(lua_State *L) {
  uint64_t v = (uint64_t)luaL_checkinteger(L, 3);
  __atomic_store_n(element(L), v, __ATOMIC_RELEASE);
  return 0;
}

static int l_load(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)__atomic_load_n(element(L),
                                                  __ATOMIC_ACQUIRE));
  return 1;
}

static struct hook {
  atomic_int calls;
  int probe;
  atomic_int inside;    /* what the CUDA call inside returned, + 1 */
} hooks[2];

static void CUDA_CB hook(void *data) {
  struct hook *h = data ? data : &hooks[0]; /* s:host(fn): no data */
  atomic_fetch_add(&h->calls, 1);
  if (h->probe) {
    size_t fr, total;
    atomic_store(&h->inside, (int)cu.cuMemGetInfo(&fr, &total) + 1);
  }
}

static int l_hostfn(lua_State *L) {
  struct hook *h = &hooks[lua_toboolean(L, 1)];
  h->probe = h == &hooks[1];
  cugraph_pushhostfn(L, hook);
  lua_pushlightuserdata(L, h);
  return 2;
}

static int l_hooked(lua_State *L) {
  int calls = 0, inside = 0;
  for (int i = 0; i < 2; i++) {
    calls += atomic_load(&hooks[i].calls);
    if (atomic_load(&hooks[i].inside)) inside = atomic_load(&hooks[i].inside);
  }
  lua_pushinteger(L, calls);
  if (inside) lua_pushstring(L, errname((CUresult)(inside - 1)));
  else lua_pushnil(L);
  return 2;
}

static int script(const char *lua_dir, const char *path) {
  CUdevice dev;
  CUcontext ctx;
  int ok = 1;
  if (!load_driver() || cu.cuInit(0) || cu.cuDeviceGet(&dev, 0) ||
      cu.cuDevicePrimaryCtxRetain(&ctx, dev) || cu.cuCtxSetCurrent(ctx) ||
      (device = dev, used0 = devmem_used(cu.cuMemGetInfo, dev, &ok), !ok)) {
    printf("FAIL no driver\n");
    return 1;
  }
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  static const luaL_Reg funcs[] = {
    {"tograph", l_tograph}, {"launch", l_launch}, {"start", l_start},
    {"release", l_release}, {"settle", l_settle},
    {"after", l_after}, {"baseline", l_baseline}, {"tensor", l_tensor},
    {"push", l_push}, {"deleted", l_deleted}, {"delete", l_delete},
    {"take", l_take}, {"give", l_give}, {"read", l_read}, {"keep", l_keep},
    {"pushslot", l_pushslot}, {"array", l_array}, {"same", l_same},
    {"extmem", l_extmem}, {"extsem", l_extsem}, {"scalar", l_scalar},
    {"set", l_set}, {"hostmem", l_hostmem}, {"store", l_store},
    {"load", l_load}, {"hostfn", l_hostfn}, {"hooked", l_hooked},
    {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  lua_setglobal(L, "capi");
  if (luaL_dofile(L, path) != LUA_OK)
    fail("script", luaL_tolstring(L, -1, NULL));
  lua_close(L);
  cu.cuCtxSetCurrent(ctx);
  for (int i = 0; i < nhandles; i++)
    if (handles[i].g && handles[i].check) check_after(&handles[i]);
  for (int i = 0; i < nhandles; i++) cugraph_graph_release(handles[i].g);
  for (int i = 0; i < ncscalars; i++) cugraph_scalar_release(cscalars[i]);
  for (int i = 0; i < nextmems; i++)
    if (cu.cuDestroyExternalMemory(extmems[i]))
      fail("external", "the host could not destroy its external memory");
  for (int i = 0; i < nextsems; i++)
    if (cu.cuDestroyExternalSemaphore(extsems[i]))
      fail("external", "the host could not destroy its semaphore");
  /* what the releases left to the runtime's threads is done before the
     tensors' deleters and device memory are counted (and before the
     sanitizer's leak check at exit) */
  if (!cugraph_settle(60))
    fail("release", "cugraph_settle: frees still pending after 60 s");
  check_tensors();
  for (int i = 0; i < nhosts; i++)
    if (cu.cuMemFreeHost(hosts[i]))
      fail("host memory", "the host could not free its page-locked memory");
  free(hosts[MAXHOSTS]);
  for (int i = 0; i < narrays; i++)
    if (cu.cuArrayDestroy(arrays[i]))
      fail("arrays", "the host could not destroy its array");
  /* a GPU's driver keeps some of its own; with the script's trace on,
     CUPTI's activity buffers on the device too (14 MiB seen on an H100),
     until the process ends */
  const char *trace = getenv("CUGRAPH_LUA_PROFILE");
  size_t slack = getenv("CUGRAPH_LUA_LIBCUDA") ? 0
                 : trace && *trace ? 32 << 20 : 4 << 20;
  cu.cuCtxSynchronize();
  size_t used1 = devmem_settled(cu.cuMemGetInfo, dev, used0 + slack, &ok);
  if (!ok || used1 > used0 + slack) {
    char msg[96];
    snprintf(msg, sizeof msg, "%zu bytes of device memory still in use",
             used1 - used0);
    fail("release", ok ? msg : "cannot read the device's memory");
  }
  cu.cuDevicePrimaryCtxRelease(dev);
  printf("capi: %s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 2) return checks(argv[1]);
  if (argc == 3) return script(argv[1], argv[2]);
  return 2;
}
