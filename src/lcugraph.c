/* luaopen_cugraph_core: makes the sentinel, then registers every type,
   layer by layer (a layer adds methods to the types below it); and the
   embedding API. */
#include <stdint.h>
#include <string.h>
#include "base/env.h"
#include "inspect/inspect.h"
#include "embed/embed.h"
#include "cugraph.h"

void devices_open(lua_State *L);

/* core.element_value(type, v) -> v as an element of type holds it, or nil
   and why it cannot be one: the conversion of buffers, scalars and kernel
   arguments, for the front end's generated kernels (internal). */
static int element_value(lua_State *L) {
  cg_type t = cg_checktype(L, 1);
  uint64_t bits;
  luaL_checkany(L, 2);
  const char *why = cg_bits(L, 2, t, &bits);
  if (why) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  cg_pushbits(L, t, &bits);
  return 1;
}

/* core.env_number(name, lo, hi, unit) -> the number in environment
   variable name, from lo to hi, or nil when it is unset or empty; any
   other value raises, naming the variable (internal: the front end's
   variables are read as the core's are). */
static int env_number(lua_State *L) {
  const char *name = cg_checkname(L, 1, NULL);
  double lo = luaL_checknumber(L, 2), hi = luaL_checknumber(L, 3), v = 0;
  char err[256];
  int got = cg_env_number(name, lo, hi, luaL_checkstring(L, 4), &v, err,
                          sizeof err);
  if (got < 0) return luaL_error(L, "%s", err);
  if (got) lua_pushnumber(L, v);
  else lua_pushnil(L);
  return 1;
}

int luaopen_cugraph_core(lua_State *L) {
  cg_sentinel_new(L); /* first of all objects: it is finalized last */
  lua_newtable(L);
  cg_driver_open(L);
  capture_open(L);
  stream_open(L);
  event_open(L);
  buffer_open(L);
  managed_open(L);
  hostbuf_open(L);
  array_open(L);
  texture_open(L);
  surface_open(L);
  extmem_open(L);
  extsem_open(L);
  pitched_open(L);
  scalar_open(L);
  graphmem_open(L);
  interop_open(L);
  comm_open(L);
  blas_open(L);
  fft_open(L);
  rendezvous_open(L);
  dlpack_open(L);
  module_open(L);
  kernel_open(L);
  nvrtc_open(L);
  condition_open(L); /* its setters load through module */
  graph_open(L);
  cond_open(L);
  node_open(L);
  rebind_open(L);
  registry_open(L);
  graphed_open(L);
  dot_open(L);
  profile_open(L);
  memory_open(L);
  reload_open(L);
  devices_open(L);
  lua_pushliteral(L, CUGRAPH_VERSION);
  lua_setfield(L, -2, "version");
  lua_createtable(L, CG_NTYPES, 0);
  for (int t = 0; t < CG_NTYPES; t++) {
    lua_pushstring(L, cg_type_names[t]);
    lua_rawseti(L, -2, t + 1);
  }
  lua_setfield(L, -2, "types");
  lua_pushcfunction(L, element_value);
  lua_setfield(L, -2, "element_value");
  lua_pushcfunction(L, env_number);
  lua_setfield(L, -2, "env_number");
  return 1;
}

void cugraph_interrupt(void) { cg_interrupt(); }

void cugraph_openlibs(lua_State *L, const char *dir) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_cugraph_core);
  lua_setfield(L, -2, "cugraph.core");
  lua_pop(L, 1);
  if (!dir) return;
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir,
                  lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}

/* The sentinel of this state; opens the module if the script has not. */
static cg_ctx *context(lua_State *L) {
  if (!cg_sentinel(L)) {
    luaL_requiref(L, "cugraph.core", luaopen_cugraph_core, 0);
    lua_pop(L, 1);
  }
  return cg_context(L);
}

/* The element type named type, or an error naming the C function. */
static cg_type type_of(lua_State *L, const char *type, const char *what) {
  int t = 0;
  while (cg_type_names[t] && strcmp(cg_type_names[t], type ? type : "")) t++;
  if (!cg_type_names[t])
    luaL_error(L, "%s: unknown element type '%s'", what,
               type ? type : "(null)");
  return (cg_type)t;
}

void cugraph_pushbuffer(lua_State *L, CUdeviceptr ptr, const char *type,
                        size_t n) {
  cg_ctx *ctx = context(L);
  int t = type_of(L, type, "cugraph_pushbuffer");
  if (!ptr || !n) luaL_error(L, "cugraph_pushbuffer: null pointer or size 0");
  if (n > SIZE_MAX / cg_type_size[t] || n > (size_t)INT64_MAX / 8)
    luaL_error(L, "cugraph_pushbuffer: the size in bytes of the %s buffer "
               "overflows", type);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  b->h.drv.mem = ptr;
  b->n = n;
  b->type = (cg_type)t;
  b->h.owned = 0;
  b->h.open = 1;
}

void cugraph_pushstream(lua_State *L, CUstream stream) {
  cg_ctx *ctx = context(L);
  if (!stream)
    luaL_error(L, "cugraph_pushstream: the legacy stream cannot be used");
  cg_stream *s = cg_newobj(L, ctx, sizeof *s, CG_STREAM);
  s->h.drv.stream = stream;
  s->h.owned = 0;
  s->h.open = 1;
}

void cugraph_pushevent(lua_State *L, CUevent event) {
  cg_ctx *ctx = context(L);
  if (!event) luaL_error(L, "cugraph_pushevent: null event");
  cg_event *e = cg_newobj(L, ctx, sizeof *e, CG_EVENT);
  e->h.drv.event = event;
  e->timing = 1; /* the engine knows; elapsed() reports the driver's word */
  e->h.owned = 0;
  e->h.open = 1;
}

CUdeviceptr cugraph_checkbuffer(lua_State *L, int idx, const char **type,
                                size_t *n) {
  cg_buffer *b = cg_checkobj(L, idx, CG_BUFFER);
  if (type) *type = cg_type_names[b->type];
  if (n) *n = b->n;
  return b->h.drv.mem;
}

void cugraph_pusharray(lua_State *L, CUarray array) {
  cg_push_array(L, context(L), array);
}

void cugraph_pushexternalmemory(lua_State *L, CUexternalMemory mem,
                                size_t size) {
  cg_push_extmem(L, context(L), mem, size);
}

void cugraph_pushexternalsemaphore(lua_State *L, CUexternalSemaphore sem,
                                   int timeline) {
  cg_push_extsem(L, context(L), sem, timeline);
}

void cugraph_pushhostbuffer(lua_State *L, void *ptr, const char *type,
                            size_t n) {
  cg_ctx *ctx = context(L);
  cg_push_hostbuf(L, ctx, ptr, type_of(L, type, "cugraph_pushhostbuffer"), n);
}

void *cugraph_checkhostbuffer(lua_State *L, int idx, const char **type,
                              size_t *n) {
  cg_hostbuf *h = cg_checkobj(L, idx, CG_HOSTBUF);
  if (type) *type = cg_type_names[h->type];
  if (n) *n = h->n;
  return h->h.drv.host;
}

void cugraph_pushhostfn(lua_State *L, CUhostFn fn) {
  context(L);
  cg_push_hostfn(L, fn);
}

CUarray cugraph_checkarray(lua_State *L, int idx) {
  return ((cg_array *)cg_checkobj(L, idx, CG_ARRAY))->h.drv.array;
}

CUstream cugraph_checkstream(lua_State *L, int idx) {
  cg_stream *s = cg_checkobj(L, idx, CG_STREAM);
  s->lent = 1; /* C may send work to it unseen */
  return s->h.drv.stream;
}
