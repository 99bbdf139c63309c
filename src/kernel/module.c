/* cugraph.Module and cugraph.Kernel. A module keeps the signatures of its
   PTX entries; a kernel checks every launch against its signature and the
   device's limits before cuLaunchKernel, and marshals the arguments into
   storage it owns, so a steady launch loop allocates nothing. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/core.h"
#include "kernel/image.h"
#include "kernel/ptx.h"

typedef struct cg_module {
  cg_obj h;
  CUmodule m;
  ptx_entry *entries;   /* user value 2; NULL for cubin and fatbin */
  int nentries;
} cg_module;

typedef struct cg_kernel {
  cg_obj h;
  cg_module *mod;       /* pinned through the kernel's user value */
  CUfunction f;
  unsigned shared;      /* dynamic shared memory per launch */
  int nparams;
  char name[64];        /* for messages */
  unsigned epoch;       /* cg_epoch when the seen entries were made */
  const void *seen_stream; /* stream and arguments checked by an earlier */
  cg_obj **seen;        /* launch: the same userdata needs no new check */
  ptx_param *params;    /* the rest of the userdata: params, then argp, */
  void **argp;          /* then seen, then one 8-aligned slot per argument */
} cg_kernel;

/* -- signatures as text --------------------------------------------------- */

static const char *const ptx_names[] = {
  "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16",
  "bf16"
};

static void pushparam(lua_State *L, const ptx_param *p) {
  switch (p->type) {
  case PTX_INT: lua_pushfstring(L, "b%d", (int)p->size * 8); break;
  case PTX_PTR_OR_INT: lua_pushliteral(L, "u64|ptr"); break;
  case PTX_PTR:
    lua_pushfstring(L, "%s%s*", p->is_const ? "const " : "",
                    p->elem == PTX_ANY ? "void" : ptx_names[p->elem]);
    break;
  case PTX_BYTES: lua_pushfstring(L, "b8[%d]", (int)p->size); break;
  default: lua_pushstring(L, ptx_names[p->type]);
  }
}

static void pushsignature(lua_State *L, const char *name, const ptx_param *ps,
                          int n) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, name);
  luaL_addchar(&b, '(');
  for (int i = 0; i < n; i++) {
    if (i) luaL_addstring(&b, ", ");
    pushparam(L, &ps[i]);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
}

/* cuda.entries(ptx) -> { {name=, base=, typed=, params={...}}, ... } */
static int entries(lua_State *L) {
  size_t len;
  const char *src = luaL_checklstring(L, 1, &len);
  char err[200];
  int n;
  ptx_entry *e = ptx_parse(src, len, &n, err, sizeof err);
  if (!e) return luaL_error(L, "%s", err);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_createtable(L, 0, 4);
    lua_pushstring(L, e[i].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, e[i].base);
    lua_setfield(L, -2, "base");
    lua_pushboolean(L, e[i].typed);
    lua_setfield(L, -2, "typed");
    lua_createtable(L, e[i].nparams, 0);
    for (int j = 0; j < e[i].nparams; j++) {
      pushparam(L, &e[i].params[j]);
      lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -2, "params");
    lua_rawseti(L, -2, i + 1);
  }
  free(e);
  return 1;
}

/* -- files ---------------------------------------------------------------- */

static int fileerror(lua_State *L, const char *path, const char *msg) {
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", path, msg);
  return 2;
}

static const char *file_kind(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO"
       : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
       : S_ISSOCK(m) ? "a socket" : "a special file";
}

/* readfd(fd, path, limit) -> contents | nil, message. Runs under lua_pcall,
   so that readfile closes the descriptor whatever this raises. */
static int readfd(lua_State *L) {
  int fd = (int)lua_tointeger(L, 1);
  const char *path = lua_tostring(L, 2);
  lua_Integer limit = lua_tointeger(L, 3), total = 0;
  struct stat st;
  luaL_Buffer b;
  if (fstat(fd, &st)) return luaL_fileresult(L, 0, path);
  if (!S_ISREG(st.st_mode))
    return fileerror(L, path, lua_pushfstring(L, "%s, not a regular file",
                                              file_kind(st.st_mode)));
  if (st.st_size > limit)
    return fileerror(L, path, lua_pushfstring(L, "%I bytes, more than the "
                     "limit of %I", (LUAI_UACINT)st.st_size,
                     (LUAI_UACINT)limit));
  luaL_buffinit(L, &b);
  for (;;) { /* up to limit + 1 bytes: one more means it grew past it */
    lua_Integer room = limit - total;
    size_t want = room < 65536 ? (size_t)room + 1 : 65536;
    ssize_t r = read(fd, luaL_prepbuffsize(&b, want), want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return luaL_fileresult(L, 0, path);
    if (r == 0) break;
    luaL_addsize(&b, (size_t)r);
    if ((total += r) > limit)
      return fileerror(L, path, lua_pushfstring(L, "more than the limit of "
                       "%I bytes", (LUAI_UACINT)limit));
  }
  luaL_pushresult(&b);
  return 1;
}

/* core.readfile(path, limit) -> contents | nil, message: a regular file of
   at most limit bytes. Opened without blocking (a FIFO with no writer would
   block) and checked with fstat before any read, so a directory, FIFO or
   device is refused unread. */
static int readfile(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  lua_Integer limit = luaL_checkinteger(L, 2);
  if (strlen(path) != len)
    return fileerror(L, path, "the path contains a NUL byte");
  luaL_argcheck(L, limit >= 0, 2, "negative limit");
  lua_settop(L, 2);
  luaL_checkstack(L, 4, NULL); /* nothing below raises until the pcall */
  lua_pushcfunction(L, readfd);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return luaL_fileresult(L, 0, path);
  lua_pushinteger(L, fd);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, limit);
  int status = lua_pcall(L, 3, 2, 0);
  close(fd);
  return status == LUA_OK ? 2 : lua_error(L);
}

/* -- modules -------------------------------------------------------------- */

/* Gives entries the C types of the table at idx (entry name -> a mangled
   function name spelling its parameters, from the compiler) where they
   agree with the PTX in count and sizes. */
static void settypes(lua_State *L, int idx, ptx_entry *e, int n) {
  ptx_param ps[PTX_MAX_PARAMS];
  char base[sizeof e->base];
  for (int i = 0; i < n; i++) {
    if (e[i].typed) continue;
    if (lua_getfield(L, idx, e[i].name) != LUA_TSTRING) {
      lua_pop(L, 1);
      continue;
    }
    int k = ptx_demangle(lua_tostring(L, -1), base, sizeof base, ps,
                         PTX_MAX_PARAMS);
    lua_pop(L, 1);
    for (int j = 0; k == e[i].nparams && j < k; j++)
      if (ps[j].size != e[i].params[j].size) k = -1;
    if (k != e[i].nparams) continue;
    memcpy(e[i].params, ps, (size_t)k * sizeof *ps);
    e[i].typed = 1;
  }
}

/* core.module(image [, name [, ptx [, types]]]): PTX text, cubin or
   fatbin. A cubin or fatbin is bounds-checked whole first: the driver
   takes it without a length. ptx, the same program's PTX, gives a cubin
   its entries; types (entry -> mangled name) their C types. */
static int module_new(lua_State *L) {
  size_t len;
  const char *img = luaL_checklstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, "module");
  char err[256];
  ptx_entry *e = NULL;
  int n = 0;
  int kind = image_check(img, len, err, sizeof err);
  if (kind < 0) return luaL_error(L, "%s: %s", name, err);
  const char *text = img;
  if (kind != IMAGE_TEXT) text = lua_tolstring(L, 3, &len);
  if (text) {
    if (strlen(text) != len)
      return luaL_error(L, "%s: not PTX, cubin or fatbin (NUL byte in text)",
                        name);
    ptx_entry *parsed = ptx_parse(text, len, &n, err, sizeof err);
    if (!parsed) return luaL_error(L, "%s: %s", name, err);
    e = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *e, 0);
    memcpy(e, parsed, (size_t)n * sizeof *e);
    free(parsed);
    if (lua_istable(L, 4)) settypes(L, 4, e, n);
  } else {
    lua_pushnil(L);
  }
  int box = lua_gettop(L);
  cg_ctx *ctx = cg_context(L);
  cg_guard(L, ctx, "cannot load a module", "load modules before capture");
  cg_module *m = cg_newobj(L, ctx, sizeof *m, CG_MODULE);
  m->entries = e;
  m->nentries = n;
  lua_newtable(L); /* kernels by name */
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, box); /* the signatures live as long as the module */
  lua_setiuservalue(L, -2, 2);
  char log[4096] = "";
  CUjit_option opt[2] = { CU_JIT_ERROR_LOG_BUFFER,
                          CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
  void *val[2] = { log, (void *)(uintptr_t)sizeof log };
  CUresult r = cg_drv.cuModuleLoadDataEx(&m->m, img, 2, opt, val);
  if (r != CUDA_SUCCESS) {
    cg_poison(ctx, "cuModuleLoadDataEx", r);
    cg_driver_pusherror(L, "cuModuleLoadDataEx", r);
    lua_pushstring(L, log);
    lua_setfield(L, -2, "log");
    if (*log) { /* the JIT's reason makes the message */
      lua_pushfstring(L, "%s: %s", name, log);
      lua_setfield(L, -2, "message");
    }
    return lua_error(L);
  }
  m->h.open = 1;
  return 1;
}

static void module_release(lua_State *L, cg_obj *o) {
  cg_module *m = (cg_module *)o;
  cg_release(L, o->ctx, CG_FREE_MODULE, m->m);
  m->m = NULL;
}

static int module_free(lua_State *L) { return cg_close(L, CG_MODULE, 0); }
static int module_gc(lua_State *L) { return cg_close(L, CG_MODULE, 1); }

/* The entry named name: exact, else the one whose demangled name it is. */
static const ptx_entry *find(lua_State *L, cg_module *m, const char *name) {
  const ptx_entry *hit = NULL;
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].name, name)) return &m->entries[i];
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].base, name)) {
      if (hit)
        luaL_error(L, "kernel '%s' is overloaded (%s, %s): use the entry "
                   "name", name, hit->name, m->entries[i].name);
      hit = &m->entries[i];
    }
  if (!hit) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < m->nentries; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, m->entries[i].base);
    }
    luaL_pushresult(&b);
    luaL_error(L, "module has no kernel '%s' (it has: %s)", name,
               lua_tostring(L, -1));
  }
  return hit;
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* A given signature against the PTX entry's parameters: same count and
   sizes (the signature may name what PTX leaves open, such as pointers). */
static void ptxcheck(lua_State *L, const char *name, const ptx_entry *e,
                     const ptx_param *ps, int n) {
  if (n != e->nparams)
    luaL_error(L, "%s: the signature has %d parameter%s, the PTX entry %d",
               name, n, plural(n), e->nparams);
  for (int i = 0; i < n; i++)
    if (ps[i].size != e->params[i].size)
      luaL_error(L, "%s: the signature gives parameter %d %d bytes, the PTX "
                 "entry %d", name, i + 1, (int)ps[i].size,
                 (int)e->params[i].size);
}

/* Parameter i's size from the driver: 1, or 0 past the last parameter, or
   -1 when the driver cannot tell. Its other failures raise. */
static int paraminfo(lua_State *L, cg_kernel *k, int i, size_t *size) {
  size_t off;
  CUresult r = cg_drv.cuFuncGetParamInfo(k->f, (size_t)i, &off, size);
  if (r == CUDA_SUCCESS) return 1;
  if (r == CUDA_ERROR_INVALID_VALUE) return 0;
  if (r == CUDA_ERROR_NOT_SUPPORTED && i == 0) return -1;
  cg_check(L, k->h.ctx, "cuFuncGetParamInfo", r);
  return -1;
}

/* Checks the signature against the sizes the driver reports, where it can
   (drivers from 12.4); without that a cubin's signature is trusted. */
static void crosscheck(lua_State *L, cg_kernel *k) {
  if (!cg_drv.cuFuncGetParamInfo) return;
  size_t size;
  for (int i = 0; i < k->nparams; i++) {
    int got = paraminfo(L, k, i, &size);
    if (got < 0) return;
    if (!got)
      luaL_error(L, "%s: the signature has %d parameter%s, the kernel %d",
                 k->name, k->nparams, plural(k->nparams), i);
    if (size != k->params[i].size)
      luaL_error(L, "%s: the signature gives parameter %d %d bytes, the "
                 "kernel %d", k->name, i + 1, (int)k->params[i].size,
                 (int)size);
  }
  if (paraminfo(L, k, k->nparams, &size) > 0)
    luaL_error(L, "%s: the signature has %d parameter%s, the kernel more",
               k->name, k->nparams, plural(k->nparams));
}

/* Makes a kernel object for entry `entry` with parameters ps[n]; the module
   is at index 1. */
static cg_kernel *newkernel(lua_State *L, cg_module *m, const char *entry,
                            const char *label, const ptx_param *ps, int n) {
  size_t slots = 0;
  for (int i = 0; i < n; i++) slots += (ps[i].size + 7) / 8;
  size_t size = sizeof(cg_kernel) + (size_t)n * sizeof(ptx_param);
  size = (size + 7) & ~(size_t)7;
  cg_kernel *k = cg_newobj(L, m->h.ctx, size + 2 * (size_t)n * sizeof(void *)
                           + slots * 8, CG_KERNEL);
  k->mod = m;
  k->nparams = n;
  snprintf(k->name, sizeof k->name, "%s", label);
  k->params = (ptx_param *)(k + 1);
  memcpy(k->params, ps, (size_t)n * sizeof *ps);
  k->argp = (void **)((char *)k + size);
  k->seen = (cg_obj **)(k->argp + n);
  uint64_t *slot = (uint64_t *)(k->seen + n);
  for (int i = 0; i < n; i++) {
    k->argp[i] = slot;
    slot += (ps[i].size + 7) / 8;
  }
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the kernel keeps its module alive */
  lua_getiuservalue(L, 1, 1);  /* ... and the module knows its kernels, */
  lua_pushvalue(L, -2);        /* for reload */
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  cg_isopen(L, &m->h);         /* a finalizer may have freed it */
  CU(L, m->h.ctx, cuModuleGetFunction, &k->f, m->m, entry);
  k->h.open = 1;
  crosscheck(L, k);
  return k;
}

/* m:kernel(name [, signature]) */
static int module_kernel(lua_State *L) {
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  const char *name = luaL_checkstring(L, 2);
  if (!lua_isnoneornil(L, 3)) {
    ptx_param ps[PTX_MAX_PARAMS];
    char err[200];
    int n = ptx_signature(luaL_checkstring(L, 3), ps, PTX_MAX_PARAMS, err,
                          sizeof err);
    if (n < 0) return luaL_argerror(L, 3, err);
    const char *entry = name;
    if (m->entries) {
      const ptx_entry *e = find(L, m, name);
      ptxcheck(L, name, e, ps, n);
      entry = e->name;
    }
    newkernel(L, m, entry, name, ps, n);
    return 1;
  }
  if (!m->entries)
    return luaL_error(L, "kernel '%s': a cubin or fatbin module has no "
                      "signatures; use m:kernel(name, signature)", name);
  lua_settop(L, 2);
  lua_getiuservalue(L, 1, 1); /* 3: kernels by name and by entry name */
  if (lua_getfield(L, 3, name) != LUA_TNIL) return 1;
  const ptx_entry *e = find(L, m, name);
  if (lua_getfield(L, 3, e->name) == LUA_TNIL) {
    newkernel(L, m, e->name, e->base, e->params, e->nparams);
    lua_pushvalue(L, -1);
    lua_setfield(L, 3, e->name);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, 3, name);
  return 1;
}

/* m:kernels() -> names of the entries */
static int module_kernels(lua_State *L) {
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  lua_createtable(L, m->nentries, 0);
  for (int i = 0; i < m->nentries; i++) {
    lua_pushstring(L, m->entries[i].base);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* m.name is m:kernel(name), or nil when a PTX module has no such entry
   (m:kernel raises) */
static int module_index(lua_State *L) {
  if (cg_method(L)) return 1;
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  const char *name = luaL_checkstring(L, 2);
  int i = 0;
  while (m->entries && i < m->nentries && strcmp(m->entries[i].name, name) &&
         strcmp(m->entries[i].base, name))
    i++;
  if (m->entries && i == m->nentries) return 0;
  lua_settop(L, 2);
  return module_kernel(L);
}

static int module_tostring(lua_State *L) {
  cg_module *m = cg_toobj(L, 1, CG_MODULE);
  return cg_tostring(L, &m->h, " (%d kernel%s)", m->nentries,
                     m->nentries == 1 ? "" : "s");
}

CUmodule cg_module_handle(const cg_obj *o) { return ((const cg_module *)o)->m; }

/* The entry of module m named name, exact or demangled; NULL if none. */
static const ptx_entry *lookup(const cg_module *m, const char *name) {
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].name, name)) return &m->entries[i];
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].base, name)) return &m->entries[i];
  return NULL;
}

static int same_params(const ptx_param *a, int na, const ptx_param *b,
                       int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; i++)
    if (a[i].size != b[i].size || a[i].type != b[i].type) return 0;
  return 1;
}

/* m:reload(image [, name]): the module's kernels, and every live graph of
   Lua or C that launches them, switch to the code of image (PTX, cubin or
   fatbin); every kernel made from the module must be in it with the same
   signature. On any error the old code stays and the error is raised.
   Waits for the device's work before it unloads the old code. */
static int module_reload(lua_State *L) {
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  cg_ctx *ctx = m->h.ctx;
  cg_guard(L, ctx, "module:reload()", "reload outside the capture");
  luaL_checkstring(L, 2);
  const char *name = luaL_optstring(L, 3, "module");
  lua_settop(L, 3);
  lua_pushcfunction(L, module_new);
  lua_pushvalue(L, 2);
  lua_pushstring(L, name);
  lua_call(L, 2, 1); /* 4: the new code; on error collected, so unloaded */
  cg_module *nm = lua_touserdata(L, 4);
  lua_getiuservalue(L, 1, 1); /* 5: the kernels */
  int n = 0, nparams = 0;
  lua_pushnil(L);
  while (lua_next(L, 5)) {
    lua_pop(L, 1);
    cg_kernel *k = cg_testobj(L, -1, CG_KERNEL);
    if (k) n++, nparams += k->nparams;
  }
  cg_swap *sw = lua_newuserdatauv(L, (size_t)n * (sizeof *sw +
                                  sizeof(cg_kernel *)) + 1, 0); /* 6 */
  cg_kernel **ks = (cg_kernel **)(sw + n);
  unsigned *size = lua_newuserdatauv(L, (size_t)nparams * sizeof *size + 1,
                                     0); /* 7 */
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, 5)) {
    lua_pop(L, 1);
    cg_kernel *k = cg_testobj(L, -1, CG_KERNEL);
    if (!k || i == n) continue;
    const char *entry = k->name;
    if (nm->entries) {
      const ptx_entry *e = lookup(nm, k->name);
      if (!e)
        return luaL_error(L, "%s: reload: the new code has no kernel '%s'; "
                          "the old code stays", name, k->name);
      if (!same_params(e->params, e->nparams, k->params, k->nparams)) {
        pushsignature(L, k->name, k->params, k->nparams);
        pushsignature(L, e->base, e->params, e->nparams);
        return luaL_error(L, "%s: reload: kernel %s became %s; the old code "
                          "stays (load a new module and capture again)",
                          name, lua_tostring(L, -2), lua_tostring(L, -1));
      }
      entry = e->name;
    }
    CU(L, ctx, cuModuleGetFunction, &sw[i].to, nm->m, entry);
    if ((int)k->shared > ctx->max_shared)
      CU(L, ctx, cuFuncSetAttribute, sw[i].to,
         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)k->shared);
    sw[i].from = k->f;
    sw[i].nparams = k->nparams;
    sw[i].size = size;
    for (int j = 0; j < k->nparams; j++) *size++ = k->params[j].size;
    ks[i++] = k;
  }
  cg_isopen(L, &m->h); /* a finalizer may have freed it meanwhile */
  cg_reload_graphs(L, ctx, 1, sw, i, nm->m, m->m);
  for (int j = 0; j < i; j++) ks[j]->f = sw[j].to;
  CUmodule old = m->m;
  ptx_entry *entries = m->entries;
  int nentries = m->nentries;
  m->m = nm->m;
  m->entries = nm->entries;
  m->nentries = nm->nentries;
  nm->m = old;
  nm->entries = entries;
  nm->nentries = nentries;
  lua_getiuservalue(L, 4, 2); /* the signatures go with their code */
  lua_getiuservalue(L, 1, 2);
  lua_setiuservalue(L, 4, 2);
  lua_setiuservalue(L, 1, 2);
  cg_sync(L, ctx); /* no launch of the old code is in flight */
  lua_settop(L, 4);
  lua_replace(L, 1);
  cg_close(L, CG_MODULE, 0); /* unloads the old code, now nm's */
  return 0;
}

/* -- kernels -------------------------------------------------------------- */

static int kernel_free(lua_State *L) {
  ((cg_obj *)cg_toobj(L, 1, CG_KERNEL))->open = 0;
  cg_collected(); /* k:launch knows kernels by address */
  return 0;
}

/* Raises "saxpy: argument 3 (f32): msg". */
static int argerror(lua_State *L, cg_kernel *k, int arg, const char *msg) {
  pushparam(L, &k->params[arg - 1]);
  return luaL_error(L, "%s: argument %d (%s): %s", k->name, arg,
                    lua_tostring(L, -1), msg);
}

static int typeerror(lua_State *L, cg_kernel *k, int arg, int idx,
                     const char *expected) {
  const char *got = luaL_typename(L, idx);
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING)
    got = lua_tostring(L, -1);
  cg_buffer *b = cg_testobj(L, idx, CG_BUFFER);
  if (b) got = lua_pushfstring(L, "%s of %s", got, cg_type_names[b->type]);
  cg_scalar *s = cg_testobj(L, idx, CG_SCALAR);
  if (s) got = lua_pushfstring(L, "%s of %s", got, cg_type_names[s->type]);
  return argerror(L, k, arg,
                  lua_pushfstring(L, "expected %s, got %s", expected, got));
}

/* A device pointer from a Buffer or Scalar at idx (whose element type must
   be elem unless elem is PTX_ANY); 0 if the value is neither. */
static inline CUdeviceptr pointer(lua_State *L, cg_kernel *k, int arg, int idx,
                           int elem, CUstream st) {
  cg_ctx *ctx = k->h.ctx;
  cg_obj *o = lua_touserdata(L, idx);
  int scalar;
  if (o && o == k->seen[arg - 1] && lua_type(L, idx) == LUA_TUSERDATA) {
    scalar = o->kind == CG_SCALAR; /* its type passed before */
  } else {
    if (!lua_getmetatable(L, idx)) return 0; /* left pushed: kernel_launch */
    const void *mt = lua_topointer(L, -1);
    scalar = mt == ctx->mt[CG_SCALAR];
    if (!scalar && mt != ctx->mt[CG_BUFFER]) return 0;
    int type = scalar ? (int)((cg_scalar *)o)->type
                      : (int)((cg_buffer *)o)->type;
    if (elem != PTX_ANY && elem != type)
      typeerror(L, k, arg, idx, lua_pushfstring(L, "%s of %s",
                "cugraph.Buffer or cugraph.Scalar", ptx_names[elem]));
    if (o->ctx != ctx) cg_reach(L, ctx, o->ctx, k->name);
    k->seen[arg - 1] = o;
  }
  if (!o->open)
    argerror(L, k, arg, lua_pushfstring(L, "attempt to use a freed %s",
                                        cg_kind_names[o->kind]));
  cg_pinobj(L, ctx, o, idx); /* in a capture: before the address is read */
  if (!scalar) return ((cg_buffer *)o)->ptr;
  if (!ctx->capture) cg_scalar_flush(L, (cg_scalar *)o, st);
  return ((cg_scalar *)o)->ptr;
}

/* An integer argument that is not a Lua integer: a float of integral
   value, or an error. */
static lua_Integer intslow(lua_State *L, cg_kernel *k, int arg, int idx) {
  int ok;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok || lua_type(L, idx) != LUA_TNUMBER) {
    if (lua_type(L, idx) == LUA_TNUMBER)
      argerror(L, k, arg, lua_pushfstring(L, "expected an integer, got %f",
                                          lua_tonumber(L, idx)));
    typeerror(L, k, arg, idx, "integer");
  }
  return v;
}

/* An integer argument of `size` bytes; signedness unknown when !typed. */
static inline void intarg(lua_State *L, cg_kernel *k, int arg, int idx,
                   unsigned size, void *slot) {
  lua_Integer v = lua_isinteger(L, idx) ? lua_tointeger(L, idx)
                                        : intslow(L, k, arg, idx);
  if (size < 8) {
    lua_Integer lo = -((lua_Integer)1 << (size * 8 - 1));
    lua_Integer hi = ((lua_Integer)1 << (size * 8)) - 1;
    if (v < lo || v > hi)
      argerror(L, k, arg, lua_pushfstring(L, "%I is out of range",
                                          (LUAI_UACINT)v));
  }
  switch (size) { /* little-endian: the low bytes; sizes known, no call */
  case 1: memcpy(slot, &v, 1); break;
  case 2: memcpy(slot, &v, 2); break;
  case 4: memcpy(slot, &v, 4); break;
  default: memcpy(slot, &v, 8);
  }
}

static inline void setarg(lua_State *L, cg_kernel *k, int arg, int idx,
                   CUstream st) {
  const ptx_param *p = &k->params[arg - 1];
  void *slot = k->argp[arg - 1];
  CUdeviceptr ptr;
  switch (p->type) {
  case PTX_PTR:
    if (!(ptr = pointer(L, k, arg, idx, p->elem, st)))
      typeerror(L, k, arg, idx, p->elem == PTX_ANY
                ? "cugraph.Buffer or cugraph.Scalar"
                : lua_pushfstring(L, "cugraph.Buffer or cugraph.Scalar of %s",
                                  ptx_names[p->elem]));
    memcpy(slot, &ptr, 8);
    break;
  case PTX_PTR_OR_INT:
    if (lua_type(L, idx) == LUA_TNUMBER) intarg(L, k, arg, idx, 8, slot);
    else if ((ptr = pointer(L, k, arg, idx, PTX_ANY, st))) memcpy(slot, &ptr, 8);
    else if (!cg_condition_arg(L, k->h.ctx, idx, slot))
      typeerror(L, k, arg, idx, "cugraph.Buffer, cugraph.Scalar, "
                "cugraph.Condition or integer");
    break;
  case PTX_INT:
    intarg(L, k, arg, idx, p->size, slot);
    break;
  case PTX_BYTES: {
    size_t len;
    if (lua_type(L, idx) != LUA_TSTRING) typeerror(L, k, arg, idx, "string");
    const char *s = lua_tolstring(L, idx, &len);
    if (len != p->size)
      argerror(L, k, arg, lua_pushfstring(L, "expected %d bytes, got %d",
                                          (int)p->size, (int)len));
    memcpy(slot, s, len);
    break;
  }
  default: {
    if (lua_type(L, idx) != LUA_TNUMBER) {
      if (p->type == PTX_U64 && cg_condition_arg(L, k->h.ctx, idx, slot))
        break; /* a cudaGraphConditionalHandle */
      typeerror(L, k, arg, idx, "number");
    }
    const char *msg = cg_bits(L, idx, (cg_type)p->type, slot);
    if (msg) argerror(L, k, arg, msg);
  }
  }
}

/* Launch dimensions: an integer or {x [, y [, z]]}, each 1..limit. */
static void dims(lua_State *L, cg_kernel *k, int idx, const char *what,
                 const int lim[3], unsigned out[3]) {
  static const char xyz[] = "xyz";
  int t = lua_type(L, idx), isnum;
  if (t != LUA_TNUMBER && t != LUA_TTABLE)
    luaL_error(L, "%s: %s must be an integer or {x, y, z}, got %s", k->name,
               what, luaL_typename(L, idx));
  for (int i = 0; i < 3; i++) {
    lua_Integer v = 1;
    isnum = 1;
    if (t == LUA_TNUMBER && i == 0) {
      v = lua_tointegerx(L, idx, &isnum);
    } else if (t == LUA_TTABLE) { /* x is required, y and z default to 1 */
      int vt = lua_rawgeti(L, idx, i + 1);
      if (vt != LUA_TNIL || i == 0) v = lua_tointegerx(L, -1, &isnum);
      if ((vt != LUA_TNIL || i == 0) && vt != LUA_TNUMBER) isnum = 0;
      lua_pop(L, 1);
    }
    if (!isnum || v < 1 || v > lim[i])
      luaL_error(L, "%s: %s.%c must be an integer in 1..%d (the device's "
                 "limit)", k->name, what, xyz[i], lim[i]);
    out[i] = (unsigned)v;
  }
}

/* The common launch dimension: an integer x in 1..lim, into out. */
static inline int dim(lua_State *L, int idx, int lim, unsigned out[3]) {
  if (!lua_isinteger(L, idx)) return 0;
  lua_Integer v = lua_tointeger(L, idx);
  if (v < 1 || v > lim) return 0;
  out[0] = (unsigned)v;
  out[1] = out[2] = 1;
  return 1;
}

/* The kernel this thread's last k:launch checked, and cg_epoch then:
   while the count stands still, the same full userdata at argument 1 is
   that kernel, with no metatable to compare. */
static _Thread_local const void *self_seen;
static _Thread_local unsigned self_epoch;

/* k:launch(stream, grid, block, args...) */
/* The checks leave the metatables they read on the stack (no pops on the
   hot path): the arguments are counted first and read by absolute index. */
static int kernel_launch(lua_State *L) {
  int nargs = lua_gettop(L) - 4;
  if (nargs > LUA_MINSTACK - 4) luaL_checkstack(L, nargs + 4, NULL);
  cg_kernel *k = lua_touserdata(L, 1);
  unsigned epoch = cg_epoch_now();
  if (k && k == self_seen && epoch == self_epoch &&
      lua_type(L, 1) == LUA_TUSERDATA) {
    cg_ready(L, &k->h);
  } else {
    k = cg_checkself_keep(L, CG_KERNEL);
    self_seen = k;
    self_epoch = epoch;
  }
  if (!k->mod->h.open)
    return luaL_error(L, "attempt to use a kernel of a freed cugraph.Module");
  cg_ctx *ctx = k->h.ctx;
  if (k->epoch != epoch) { /* a finalizer ran: addresses may be reused */
    k->epoch = epoch;
    k->seen_stream = NULL;
    memset(k->seen, 0, (size_t)k->nparams * sizeof *k->seen);
  }
  cg_stream *s = lua_touserdata(L, 2);
  if (s != k->seen_stream || lua_type(L, 2) != LUA_TUSERDATA) {
    if (!s || !lua_getmetatable(L, 2) ||
        lua_topointer(L, -1) != ctx->mt[CG_STREAM])
      return luaL_typeerror(L, 2, "cugraph.Stream");
    if (s->h.ctx != ctx) cg_mixed(L, ctx, s->h.ctx, k->name);
    k->seen_stream = s;
  }
  if (!s->h.open) return luaL_error(L, "attempt to use a freed cugraph.Stream");
  unsigned grid[3], block[3];
  if (!dim(L, 3, ctx->max_grid[0], grid))
    dims(L, k, 3, "grid", ctx->max_grid, grid);
  if (!dim(L, 4, ctx->max_block[0], block))
    dims(L, k, 4, "block", ctx->max_block, block);
  if ((uint64_t)block[0] * block[1] * block[2] > (uint64_t)ctx->max_threads)
    return luaL_error(L, "%s: block of %d threads, above the device's limit "
                      "of %d", k->name, (int)(block[0] * block[1] * block[2]),
                      ctx->max_threads);
  if (nargs != k->nparams)
    return luaL_error(L, "%s: expected %d argument%s, got %d", k->name,
                      k->nparams, k->nparams == 1 ? "" : "s", nargs < 0 ? 0 : nargs);
  if (ctx->capture) { /* pins allocate: handles are read after them */
    if (!cg_capturing_on(L, ctx, s->s))
      return luaL_error(L, "%s: launch inside a graph capture on a stream "
                        "that is not part of it; make the stream wait on the "
                        "capture stream first", k->name);
    cg_pinobj(L, ctx, &s->h, 2);
    cg_pinobj(L, ctx, &k->h, 1);
  }
  for (int i = 0; i < nargs; i++) {
    const ptx_param *p = &k->params[i];
    int idx = i + 5;
    if (p->type == PTX_PTR || p->type == PTX_PTR_OR_INT) {
      /* the buffer this slot passed its checks with, outside a capture
         or pinned by this one already */
      cg_buffer *b = lua_touserdata(L, idx);
      if (b && &b->h == k->seen[i] && b->h.kind == CG_BUFFER && b->h.open &&
          (!ctx->capture || b->h.pinned == ctx->capture->serial) &&
          lua_type(L, idx) == LUA_TUSERDATA) {
        memcpy(k->argp[i], &b->ptr, 8);
        continue;
      }
    } else if (p->type == PTX_INT && p->size == 4 && lua_isinteger(L, idx)) {
      lua_Integer v = lua_tointeger(L, idx);
      if (v >= INT32_MIN && v <= (lua_Integer)UINT32_MAX) {
        memcpy(k->argp[i], &v, 4); /* little-endian: the low bytes */
        continue;
      }
    }
    setarg(L, k, i + 1, idx, s->s); /* every other case, and the errors */
  }
  CU(L, ctx, cuLaunchKernel, k->f, grid[0], grid[1], grid[2], block[0],
     block[1], block[2], k->shared, s->s, k->argp, NULL);
  if (ctx->capture)
    cg_note_kernel(L, ctx, s->s, &k->h, 1, grid, block, k->shared);
  return 0;
}

void cg_kernel_info(const cg_obj *o, cg_kinfo *out) {
  const cg_kernel *k = (const cg_kernel *)o;
  out->f = k->f;
  out->name = k->name;
  out->module = &k->mod->h;
  out->nparams = k->nparams;
  out->params = k->params;
  out->argp = k->argp;
  out->seen = k->seen;
}

void cg_kernel_args(lua_State *L, int kidx, int idx, int nargs) {
  cg_kernel *k = lua_touserdata(L, kidx);
  if (nargs != k->nparams)
    luaL_error(L, "%s: expected %d argument%s, got %d", k->name, k->nparams,
               plural(k->nparams), nargs);
  luaL_checkstack(L, nargs + 4, NULL);
  for (int i = 1; i <= nargs; i++, idx++) {
    const ptx_param *p = &k->params[i - 1];
    cg_obj *o = cg_testobj(L, idx, CG_BUFFER);
    if (!o) o = cg_testobj(L, idx, CG_SCALAR);
    if (!o || (p->type != PTX_PTR && p->type != PTX_PTR_OR_INT)) {
      setarg(L, k, i, idx, NULL); /* raises for an object in another slot */
      continue;
    }
    int type = o->kind == CG_SCALAR ? (int)((cg_scalar *)o)->type
                                    : (int)((cg_buffer *)o)->type;
    if (p->type == PTX_PTR && p->elem != PTX_ANY && p->elem != type)
      typeerror(L, k, i, idx, lua_pushfstring(L, "%s of %s",
                "cugraph.Buffer or cugraph.Scalar", ptx_names[p->elem]));
    if (!o->open)
      argerror(L, k, i, lua_pushfstring(L, "attempt to use a freed %s",
                                        cg_kind_names[o->kind]));
    if (o->ctx != k->h.ctx) cg_reach(L, k->h.ctx, o->ctx, k->name);
    CUdeviceptr ptr = o->kind == CG_SCALAR ? ((cg_scalar *)o)->ptr
                                           : ((cg_buffer *)o)->ptr;
    memcpy(k->argp[i - 1], &ptr, 8);
  }
}

/* Like every type but Module, a kernel's interface is methods alone, so
   that its __index is a plain table and k:launch costs one table lookup. */

static int kernel_name(lua_State *L) {
  lua_pushstring(L, ((cg_kernel *)cg_checkself(L, CG_KERNEL))->name);
  return 1;
}

/* k:signature() -> "axpy(f32, const f32*, f32*, i32)" */
static int kernel_signature(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  pushsignature(L, k->name, k->params, k->nparams);
  return 1;
}

static int kernel_params(lua_State *L) {
  lua_pushinteger(L, ((cg_kernel *)cg_checkself(L, CG_KERNEL))->nparams);
  return 1;
}

/* k:shared([bytes]): dynamic shared memory of later launches; without an
   argument, the current amount */
static int kernel_shared(lua_State *L) {
  cg_kernel *k = cg_checkself(L, CG_KERNEL);
  if (lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, k->shared);
    return 1;
  }
  lua_Integer v = luaL_checkinteger(L, 2);
  cg_ctx *ctx = k->h.ctx;
  if (!k->mod->h.open)
    return luaL_error(L, "attempt to use a kernel of a freed cugraph.Module");
  if (v < 0 || v > ctx->max_shared_optin)
    return luaL_error(L, "%s: shared memory of %I bytes; the device allows "
                      "0..%d", k->name, (LUAI_UACINT)v, ctx->max_shared_optin);
  if (v > ctx->max_shared)
    CU(L, ctx, cuFuncSetAttribute, k->f,
       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)v);
  k->shared = (unsigned)v;
  lua_settop(L, 1);
  return 1;
}

static int kernel_tostring(lua_State *L) {
  cg_kernel *k = cg_toobj(L, 1, CG_KERNEL);
  if (!k->h.open) return cg_tostring(L, &k->h, "");
  pushsignature(L, k->name, k->params, k->nparams);
  return cg_tostring(L, &k->h, " %s", lua_tostring(L, -1));
}

void module_open(lua_State *L) {
  static const luaL_Reg mmethods[] = {
    {"kernel", module_kernel}, {"kernels", module_kernels},
    {"reload", module_reload}, {"free", module_free}, {"close", module_free}, {NULL, NULL}
  };
  static const luaL_Reg mmeta[] = {
    {"__gc", module_gc}, {"__close", module_free}, {"__index", module_index},
    {"__tostring", module_tostring}, {NULL, NULL}
  };
  static const luaL_Reg kmethods[] = {
    {"launch", kernel_launch}, {"name", kernel_name},
    {"signature", kernel_signature}, {"params", kernel_params},
    {"shared", kernel_shared}, {NULL, NULL}
  };
  static const luaL_Reg kmeta[] = {
    {"__gc", kernel_free}, {"__tostring", kernel_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_MODULE, mmethods, mmeta, module_release);
  cg_newtype(L, CG_KERNEL, kmethods, kmeta, NULL);
  lua_pushcfunction(L, module_new);
  lua_setfield(L, -2, "module");
  lua_pushcfunction(L, entries);
  lua_setfield(L, -2, "entries");
  lua_pushcfunction(L, readfile);
  lua_setfield(L, -2, "readfile");
}
