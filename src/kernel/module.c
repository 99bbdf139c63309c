/* cugraph.Module: PTX, cubin or fatbin loaded into the device's context,
   with the signatures of its PTX entries; m:kernel makes its kernels
   (kernel.c). Also core.entries and core.readfile, and the module's half
   of m:reload (the graph layer switches graphs in between). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kernel/kernel.h"

/* -- signatures as text --------------------------------------------------- */

void cg_pushparam(lua_State *L, const cg_param *p) {
  switch (p->type) {
  case CG_P_INT: lua_pushfstring(L, "b%d", (int)p->size * 8); break;
  case CG_P_PTR_OR_INT: lua_pushliteral(L, "u64|ptr"); break;
  case CG_P_PTR:
    lua_pushfstring(L, "%s%s*", p->is_const ? "const " : "",
                    p->elem == CG_P_ANY ? "void" : cg_type_names[p->elem]);
    break;
  case CG_P_BYTES: lua_pushfstring(L, "b8[%d]", (int)p->size); break;
  default: lua_pushstring(L, cg_type_names[p->type]);
  }
}

void cg_pushsignature(lua_State *L, const char *name, const cg_param *ps,
                      int n) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, name);
  luaL_addchar(&b, '(');
  for (int i = 0; i < n; i++) {
    if (i) luaL_addstring(&b, ", ");
    cg_pushparam(L, &ps[i]);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
}

void cg_pushpdl(lua_State *L, const ptx_pdl *p) {
  lua_createtable(L, 0, 4);
  lua_pushboolean(L, p->consumer);
  lua_setfield(L, -2, "consumer");
  lua_pushboolean(L, p->producer);
  lua_setfield(L, -2, "producer");
  if (!p->consumer) {
    lua_pushstring(L, p->consumer_why);
    lua_setfield(L, -2, "consumer_why");
  }
  if (!p->producer) {
    lua_pushstring(L, p->producer_why);
    lua_setfield(L, -2, "producer_why");
  }
}

/* cuda.entries(ptx) -> { {name=, base=, typed=, params={...},
   programmatic={...}}, ... } */
static int entries(lua_State *L) {
  size_t len;
  const char *src = luaL_checklstring(L, 1, &len);
  char err[200];
  int n;
  ptx_entry *e = ptx_parse(src, len, &n, err, sizeof err);
  if (!e) return luaL_error(L, "%s", err);
  ptx_pdl_scan(src, len, e, n);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_createtable(L, 0, 5);
    lua_pushstring(L, e[i].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, e[i].base);
    lua_setfield(L, -2, "base");
    lua_pushboolean(L, e[i].typed);
    lua_setfield(L, -2, "typed");
    lua_createtable(L, e[i].nparams, 0);
    for (int j = 0; j < e[i].nparams; j++) {
      cg_pushparam(L, &e[i].params[j]);
      lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -2, "params");
    cg_pushpdl(L, &e[i].pdl);
    lua_setfield(L, -2, "programmatic");
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
  cg_param ps[CG_MAX_PARAMS];
  char base[sizeof e->base];
  for (int i = 0; i < n; i++) { /* "=<entry>": its C++ name */
    lua_pushfstring(L, "=%s", e[i].name);
    if (lua_gettable(L, idx) == LUA_TSTRING)
      snprintf(e[i].cxx, sizeof e[i].cxx, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  for (int i = 0; i < n; i++) {
    if (e[i].typed) continue;
    if (lua_getfield(L, idx, e[i].name) != LUA_TSTRING) {
      lua_pop(L, 1);
      continue;
    }
    int k = ptx_demangle(lua_tostring(L, -1), base, sizeof base, ps,
                         CG_MAX_PARAMS);
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
int cg_module_new(lua_State *L) {
  size_t len;
  const char *img = luaL_checklstring(L, 1, &len);
  const char *name = cg_optname(L, 2, "module", NULL);
  char err[256];
  ptx_entry *e = NULL;
  ptx_global *g = NULL;
  int n = 0, ng = 0;
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
    ptx_pdl_scan(text, len, parsed, n);
    ptx_global *gs = ptx_globals(text, len, &ng, err, sizeof err);
    if (!gs) {
      free(parsed);
      return luaL_error(L, "%s: %s", name, err);
    }
    size_t al = _Alignof(ptx_global); /* the globals follow the entries */
    size_t eb = ((size_t)(n ? n : 1) * sizeof *e + al - 1) / al * al;
    e = lua_newuserdatauv(L, eb + (size_t)ng * sizeof *gs, 0);
    memcpy(e, parsed, (size_t)n * sizeof *e);
    g = (ptx_global *)(void *)((char *)e + eb);
    memcpy(g, gs, (size_t)ng * sizeof *gs);
    free(parsed);
    free(gs);
    if (lua_istable(L, 4)) {
      settypes(L, 4, e, n);
      for (int i = 0; i < ng; i++) { /* "@name": the C element type */
        lua_pushfstring(L, "@%s", g[i].name);
        if (lua_gettable(L, 4) == LUA_TSTRING)
          for (int t = 0; t < CG_NTYPES; t++)
            if (!strcmp(lua_tostring(L, -1), cg_type_names[t])) g[i].type = t;
        lua_pop(L, 1);
      }
    }
  } else {
    lua_pushnil(L);
  }
  int box = lua_gettop(L);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot load a module", "load modules before capture");
  cg_module *m = cg_newobj(L, ctx, sizeof *m, CG_MODULE);
  m->entries = e;
  m->nentries = n;
  m->globals = g;
  m->nglobals = ng;
  snprintf(m->name, sizeof m->name, "%s", name);
  lua_newtable(L); /* kernels by name */
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, box); /* the signatures live as long as the module */
  lua_setiuservalue(L, -2, 2);
  char log[4096] = "";
  CUjit_option opt[2] = { CU_JIT_ERROR_LOG_BUFFER,
                          CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
  void *val[2] = { log, (void *)(uintptr_t)sizeof log };
  CUresult r = cg_drv.cuModuleLoadDataEx(&m->h.drv.module, img, 2, opt, val);
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

/* Refused while a buffer over one of its globals is open. */
static int module_free(lua_State *L) {
  cg_module *m = cg_toobj(L, 1, CG_MODULE);
  if (m->h.open && m->h.views)
    luaL_error(L, "cannot free %s '%s': %d open buffer%s over its globals "
               "(m:global); free them first", cg_kind_names[CG_MODULE],
               m->name, (int)m->h.views, m->h.views > 1 ? "s" : "");
  return cg_close(L, CG_MODULE, 0);
}
static int module_gc(lua_State *L) { return cg_close(L, CG_MODULE, 1); }

/* What an entry goes by: its C++ name, else its base name. */
static const char *label(const ptx_entry *e) {
  return e->cxx[0] ? e->cxx : e->base;
}

/* The entry named name: exact or its C++ name (opts.names), else the one
   whose demangled name it is. */
static const ptx_entry *find(lua_State *L, cg_module *m, const char *name) {
  const ptx_entry *hit = NULL;
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].name, name) || !strcmp(m->entries[i].cxx, name))
      return &m->entries[i];
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].base, name)) {
      if (hit)
        luaL_error(L, "kernel '%s' is overloaded (%s, %s): use the entry "
                   "name, or name each in cuda.compile's opts.names", name,
                   hit->name, m->entries[i].name);
      hit = &m->entries[i];
    }
  if (!hit) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < m->nentries; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, label(&m->entries[i]));
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
                     const cg_param *ps, int n) {
  if (n != e->nparams)
    luaL_error(L, "%s: the signature has %d parameter%s, the PTX entry %d",
               name, n, plural(n), e->nparams);
  for (int i = 0; i < n; i++)
    if (ps[i].size != e->params[i].size)
      luaL_error(L, "%s: the signature gives parameter %d %d bytes, the PTX "
                 "entry %d", name, i + 1, (int)ps[i].size,
                 (int)e->params[i].size);
}

/* m:kernel(name [, signature]) */
static int module_kernel(lua_State *L) {
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  const char *name = cg_checkname(L, 2, NULL);
  if (!lua_isnoneornil(L, 3)) {
    cg_param ps[CG_MAX_PARAMS];
    char err[200];
    int n = cg_signature(cg_checkname(L, 3, NULL), ps, CG_MAX_PARAMS, err,
                          sizeof err);
    if (n < 0) return luaL_argerror(L, 3, err);
    const char *entry = name;
    const ptx_pdl *pdl = NULL;
    if (m->entries) {
      const ptx_entry *e = find(L, m, name);
      ptxcheck(L, name, e, ps, n);
      entry = e->name;
      pdl = &e->pdl;
    }
    cg_kernel_new(L, m, entry, name, ps, n, pdl);
    return 1;
  }
  if (!m->entries)
    return luaL_error(L, "kernel '%s': a cubin or fatbin module has no "
                      "signatures; use m:kernel(name, signature)", name);
  lua_settop(L, 2);
  lua_getiuservalue(L, 1, 1); /* 3: kernels by name and by entry name, */
  if (lua_getfield(L, 3, name) != LUA_TNIL && /* until k:free() */
      ((cg_obj *)lua_touserdata(L, -1))->open)
    return 1;
  const ptx_entry *e = find(L, m, name);
  if (lua_getfield(L, 3, e->name) == LUA_TNIL ||
      !((cg_obj *)lua_touserdata(L, -1))->open) {
    cg_kernel_new(L, m, e->name, label(e), e->params, e->nparams, &e->pdl);
    lua_pushvalue(L, -1);
    lua_setfield(L, 3, e->name);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, 3, name);
  return 1;
}

/* m:global(name [, type]) -> a Buffer over the module's __device__ or
   __constant__ variable name (cuModuleGetGlobal), of the type its PTX
   declaration gives, else of type. */
static int module_global(lua_State *L) {
  cg_module *m = cg_checkself(L, CG_MODULE);
  const char *name = cg_checkname(L, 2, NULL);
  int t = lua_isnoneornil(L, 3) ? -1 : (int)cg_checktype(L, 3);
  if (!cg_drv.cuModuleGetGlobal)
    return luaL_error(L, "m:global: this CUDA driver has no module globals "
                      "(the test double's modules have none; the simulator's "
                      "do)");
  const ptx_global *g = NULL;
  for (int i = 0; i < m->nglobals && !g; i++)
    if (!strcmp(m->globals[i].name, name)) g = &m->globals[i];
  if (!g && m->entries) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < m->nglobals; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, m->globals[i].name);
    }
    if (!m->nglobals) luaL_addstring(&b, "none");
    luaL_pushresult(&b);
    return luaL_error(L, "module '%s' has no global '%s' (it has: %s)",
                      m->name, name, lua_tostring(L, -1));
  }
  if (t < 0 && g) t = g->type;
  if (t < 0)
    return luaL_error(L, "m:global: the type of '%s' is not known (%s); "
                      "give it: m:global(\"%s\", \"f32\")", name,
                      g ? "PTX declares it as bits or bytes"
                        : "a cubin or fatbin module", name);
  lua_settop(L, 3);
  cg_buffer *b = cg_newobj(L, m->h.ctx, sizeof *b, CG_BUFFER); /* 4 */
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, 4, 1);
  cg_check_open(L, &m->h); /* the allocations may have run a finalizer */
  size_t bytes = 0;
  CU(L, m->h.ctx, cuModuleGetGlobal, &b->h.drv.mem, &bytes, m->h.drv.module,
     name);
  if (bytes % cg_type_size[t] || !bytes)
    return luaL_error(L, "m:global: '%s' is %I bytes, not a whole number of "
                      "%s", name, (LUAI_UACINT)bytes, cg_type_names[t]);
  b->type = (cg_type)t;
  b->n = bytes / cg_type_size[t];
  b->h.parent = &m->h;
  b->h.owned = 0;
  m->h.views++;
  b->h.open = 1;
  return 1;
}

/* m:kernels() -> names of the entries */
static int module_kernels(lua_State *L) {
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  lua_createtable(L, m->nentries, 0);
  for (int i = 0; i < m->nentries; i++) {
    lua_pushstring(L, label(&m->entries[i]));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* m.name is m:kernel(name), or nil when a PTX module has no such entry
   (m:kernel raises) */
static int module_index(lua_State *L) {
  if (cg_method(L)) return 1;
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  const char *name = cg_checkname(L, 2, NULL);
  int i = 0;
  while (m->entries && i < m->nentries && strcmp(m->entries[i].name, name) &&
         strcmp(m->entries[i].base, name) && strcmp(m->entries[i].cxx, name))
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

/* The entry of module m named name, exact or demangled; NULL if none. */
static const ptx_entry *lookup(const cg_module *m, const char *name) {
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].name, name)) return &m->entries[i];
  for (int i = 0; i < m->nentries; i++)
    if (!strcmp(m->entries[i].base, name)) return &m->entries[i];
  return NULL;
}

/* Whether a kernel of parameters a[na] can launch the new code b[nb]: the
   same sizes, and types that agree where both are known. The new code's
   PTX may know less than the old C types (a module compiled with its C
   signature, reloaded from PTX alone): the kernel keeps its own. */
static int same_class(const cg_param *a, const cg_param *b) {
  if (a->size != b->size) return 0;
  if (a->type == b->type) return a->type != CG_P_PTR || b->elem == CG_P_ANY
                                 || a->elem == b->elem;
  switch (b->type) { /* b knows less than a, or they disagree */
  case CG_P_INT: return a->type >= CG_I8 && a->type < CG_NTYPES;
  case CG_P_PTR_OR_INT:
    return a->type == CG_P_PTR || a->type == CG_I64 || a->type == CG_U64;
  default: return 0;
  }
}

static int same_params(const cg_param *a, int na, const cg_param *b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; i++)
    if (!same_class(&a[i], &b[i])) return 0;
  return 1;
}

/* The plan of a reload: the kernels that switch, their swaps, and what
   the new code allows of programmatic edges (NULL: no PTX). */
typedef struct plan {
  int n;
  cg_swap *sw;
  cg_kernel **ks;
  const ptx_pdl **pdl;
} plan;

/* Refuses new code (judged p) for kernel k when it breaks a programmatic
   edge that k takes (k:config) or that a graph captured with it has had
   (whether that graph is still live is not tracked). */
static void keep_edges(lua_State *L, const char *name, const cg_kernel *k,
                       const ptx_pdl *p) {
  ptx_pdl none;
  if (!p) cg_pdl_none(&none), p = &none;
  const char *why = NULL, *what = NULL;
  if ((k->programmatic || (k->pdl_graphs & CG_PDL_CONSUMER)) && !p->consumer)
    why = p->consumer_why, what = k->programmatic ? "has k:config{"
          "programmatic = true}" : "had a programmatic edge into it in a graph";
  else if ((k->pdl_graphs & CG_PDL_PRODUCER) && !p->producer)
    why = p->producer_why,
    what = "had a programmatic edge out of it in a graph";
  if (why)
    luaL_error(L, "%s: reload: kernel %s %s, and the new code %s: %s; the old "
               "code stays", name, k->name, what,
               p == &none ? "has no PTX to check" : "would make it unsafe",
               why);
}

int cg_reload_plan(lua_State *L, int midx, int iidx, int nidx, cg_swap **sw) {
  cg_module *m = cg_checkobj(L, midx, CG_MODULE);
  cg_ctx *ctx = m->h.ctx;
  if (m->h.views)
    luaL_error(L, "reload: %d open buffer%s over the globals of module '%s' "
               "(m:global) would outlive its code; free them first",
               (int)m->h.views, m->h.views > 1 ? "s" : "", m->name);
  const char *name = lua_tostring(L, nidx);
  lua_pushcfunction(L, cg_module_new);
  lua_pushvalue(L, iidx);
  lua_pushvalue(L, nidx);
  lua_call(L, 2, 1); /* the new code; on error collected, so unloaded */
  cg_module *nm = lua_touserdata(L, -1);
  int kidx = lua_gettop(L) + 1;
  lua_getiuservalue(L, midx, 1); /* the kernels */
  int n = 0, nparams = 0;
  lua_pushnil(L);
  while (lua_next(L, kidx)) {
    lua_pop(L, 1);
    cg_kernel *k = cg_testobj(L, -1, CG_KERNEL);
    if (k) n++, nparams += k->nparams;
  }
  plan *p = lua_newuserdatauv(L, sizeof *p + (size_t)n * (sizeof *p->sw +
                              sizeof *p->ks + sizeof *p->pdl) +
                              (size_t)nparams * sizeof(unsigned), 0);
  p->sw = (cg_swap *)(p + 1);
  p->ks = (cg_kernel **)(p->sw + n);
  p->pdl = (const ptx_pdl **)(p->ks + n);
  unsigned *size = (unsigned *)(p->pdl + n);
  p->n = 0;
  lua_pushnil(L);
  while (lua_next(L, kidx)) {
    lua_pop(L, 1);
    cg_kernel *k = cg_testobj(L, -1, CG_KERNEL);
    if (!k || p->n == n) continue;
    const char *entry = k->name;
    const ptx_pdl *pdl = NULL;
    if (nm->entries) {
      const ptx_entry *e = lookup(nm, k->name);
      if (!e)
        luaL_error(L, "%s: reload: the new code has no kernel '%s'; the old "
                   "code stays", name, k->name);
      if (!same_params(k->params, k->nparams, e->params, e->nparams)) {
        cg_pushsignature(L, k->name, k->params, k->nparams);
        cg_pushsignature(L, e->base, e->params, e->nparams);
        luaL_error(L, "%s: reload: kernel %s became %s; the old code stays "
                   "(load a new module and capture again)", name,
                   lua_tostring(L, -2), lua_tostring(L, -1));
      }
      entry = e->name;
      pdl = &e->pdl;
    }
    keep_edges(L, name, k, pdl);
    cg_swap *s = &p->sw[p->n];
    CU(L, ctx, cuModuleGetFunction, &s->to, nm->h.drv.module, entry);
    if ((int)k->shared > ctx->max_shared)
      CU(L, ctx, cuFuncSetAttribute, s->to,
         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)k->shared);
    s->from = k->f;
    s->nparams = k->nparams;
    s->size = size;
    for (int j = 0; j < k->nparams; j++) *size++ = k->params[j].size;
    p->pdl[p->n] = pdl;
    p->ks[p->n++] = k;
  }
  lua_remove(L, kidx); /* the plan stays, above the new module */
  cg_check_open(L, &m->h); /* a finalizer may have freed it meanwhile */
  *sw = p->sw;
  return p->n;
}

void cg_reload_commit(lua_State *L, int midx, int nmidx, int planidx) {
  cg_module *m = lua_touserdata(L, midx), *nm = lua_touserdata(L, nmidx);
  plan *p = lua_touserdata(L, planidx);
  for (int j = 0; j < p->n; j++) {
    p->ks[j]->f = p->sw[j].to;
    if (p->pdl[j]) p->ks[j]->pdl = *p->pdl[j];
    else cg_pdl_none(&p->ks[j]->pdl);
  }
  m->h.ctx->root->stream_clock++; /* a stream's last kernel: other code */
  CUmodule old = m->h.drv.module;
  ptx_entry *entries = m->entries;
  int nentries = m->nentries;
  m->h.drv.module = nm->h.drv.module;
  m->entries = nm->entries;
  m->nentries = nm->nentries;
  nm->h.drv.module = old;
  nm->entries = entries;
  nm->nentries = nentries;
  lua_getiuservalue(L, nmidx, 2); /* the signatures go with their code */
  lua_getiuservalue(L, midx, 2);
  lua_setiuservalue(L, nmidx, 2);
  lua_setiuservalue(L, midx, 2);
}

void module_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"kernel", module_kernel}, {"kernels", module_kernels},
    {"global", module_global}, {"free", module_free}, {"close", module_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", module_gc}, {"__close", module_free}, {"__index", module_index},
    {"__tostring", module_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_MODULE, methods, meta, NULL);
  lua_pushcfunction(L, cg_module_new);
  lua_setfield(L, -2, "module");
  lua_pushcfunction(L, entries);
  lua_setfield(L, -2, "entries");
  lua_pushcfunction(L, readfile);
  lua_setfield(L, -2, "readfile");
}
