/* The only file that knows how libcuda is found. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lauxlib.h>
#include "base/driver.h"
#include "base/loader.h"

cg_driver cg_drv;

#define STR(x) #x
#define XSTR(x) STR(x)

static const char *start(char *msg, size_t n) {
  char buf[CG_ERRNAME];
  CUresult r = cg_drv.cuInit(0);
  if (r == CUDA_SUCCESS) return NULL;
  snprintf(msg, n, "cuInit: %s: %s", cg_driver_errname(r, buf),
           r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected"
                                      : "the CUDA driver failed to start");
  return msg;
}

#ifndef CG_SIM_DIR /* where make install puts the simulator */
#define CG_SIM_DIR "/usr/local/lib/cugraph-lua"
#endif
#ifndef CG_BUILD_DIR /* where make built it */
#define CG_BUILD_DIR "build"
#endif

/* Appends to paths the places beside the file at path (a library or a
   program) where the layouts put the simulator. */
static int beside(const char *path, char paths[][CG_PATHLEN], int n, int max) {
  static const char *const where[] = {
    "%s/libcuda-sim.so",                      /* build/cugraph-lua, build/lib* */
    "%s/../libcuda-sim.so",                   /* build/cugraph/core.so */
    "%s/cugraph-lua/libcuda-sim.so",          /* PREFIX/lib/libcugraph-lua.so */
    "%s/../lib/cugraph-lua/libcuda-sim.so",   /* PREFIX/bin/cugraph-lua */
    "%s/../../../cugraph-lua/libcuda-sim.so", /* PREFIX/lib/lua/5.4/cugraph */
    "%s/../cugraph-lua/libcuda-sim.so",       /* a rock's lib/lua/5.4/cugraph */
    "%s/../lib/lua/5.4/cugraph-lua/libcuda-sim.so", /* a rock's bin */
  };
  const char *slash = path ? strrchr(path, '/') : NULL;
  if (!slash || (size_t)(slash - path) >= CG_PATHLEN / 2) return n;
  for (size_t i = 0; i < sizeof where / sizeof *where && n < max; i++) {
    char dir[CG_PATHLEN / 2];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    snprintf(paths[n++], CG_PATHLEN, where[i], dir);
  }
  return n;
}

/* The places that hold the simulator, in turn: beside the library or
   program this core is in (dladdr), beside the running program (a host
   that linked the static library anywhere), where make install put it
   (the PREFIX of the last make or make install), and the build folder. */
int cg_simulator_paths(char paths[][CG_PATHLEN], int max) {
  char all[24][CG_PATHLEN], exe[CG_PATHLEN];
  Dl_info info;
  void *self;
  int n = 0, found = 0;
  memcpy(&self, &(void (*)(void)){ (void (*)(void))cg_simulator_paths },
         sizeof self);
  if (dladdr(self, &info)) n = beside(info.dli_fname, all, n, 22);
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    n = beside(exe, all, n, 22);
  }
  snprintf(all[n++], CG_PATHLEN, "%s/libcuda-sim.so", CG_SIM_DIR);
  snprintf(all[n++], CG_PATHLEN, "%s/libcuda-sim.so", CG_BUILD_DIR);
  for (int i = 0; i < n && found < max; i++)
    if (access(all[i], R_OK) == 0)
      memcpy(paths[found++], all[i], CG_PATHLEN);
  return found;
}

/* CUGRAPH_LUA_LIBCUDA names the library; "sim" names the PTX simulator
   wherever it is installed or built (when it is nowhere, the message names
   the installed place); unset, the system's libcuda. */
static cg_library libcuda;

static int candidates(char paths[][CG_PATHLEN], int max) {
  const char *env = getenv("CUGRAPH_LUA_LIBCUDA");
  if (env && !strcmp(env, "sim")) {
    libcuda.what = "PTX simulator";
    libcuda.hint = "; CUGRAPH_LUA_LIBCUDA=sim looks for libcuda-sim.so "
                   "beside the program and its library, in " CG_SIM_DIR
                   " (make install) and " CG_BUILD_DIR " (make): build or "
                   "install it there, or name it: CUGRAPH_LUA_LIBCUDA="
                   "<dir>/libcuda-sim.so";
    int n = cg_simulator_paths(paths, max);
    if (n == 0 && max > 0)
      snprintf(paths[n++], CG_PATHLEN, "%s/libcuda-sim.so", CG_SIM_DIR);
    return n;
  }
  snprintf(paths[0], CG_PATHLEN, "%s", env && *env ? env : "libcuda.so.1");
  return max > 0;
}

#define SYMBOL(f) { XSTR(f), &cg_drv.f, 0 },
#define OPTIONAL(f) { XSTR(f), &cg_drv.f, 1 },
static const cg_symbol symbols[] = {
  CG_DRIVER_FUNCS(SYMBOL) CG_DRIVER_OPTIONAL(OPTIONAL) { NULL, NULL, 0 }
};
#undef SYMBOL
#undef OPTIONAL

static cg_library libcuda = {
  NULL, "CUDA driver",
  "; without a GPU, run on the PTX simulator: cugraph-lua --sim script.lua "
  "(or CUGRAPH_LUA_LIBCUDA=sim)", candidates, symbols, start,
  CG_LIBRARY_STATE
};

const char *cg_driver_load(void) { return cg_library_load(&libcuda); }

void *cg_driver_handle(void) {
  return cg_driver_load() ? NULL : libcuda.handle;
}

void *cg_driver_symbol(const char *name) {
  void *h = cg_driver_handle();
  return h ? dlsym(h, name) : NULL;
}

int cg_driver_standin(const char *sym, char *out, size_t n) {
  const char *const *file = cg_driver_symbol(sym);
  char dir[CG_PATHLEN / 2];
  if (!file || !cg_library_dir(cg_driver_handle(), sym, dir, sizeof dir))
    return 0;
  snprintf(out, n, "%s/%.200s", dir, *file);
  return 1;
}

CUresult cg_memset_value(CUdeviceptr p, uint64_t bits, unsigned size,
                         CUstream s, const char **api) {
  uint32_t w[2];
  memcpy(w, &bits, 8);
  switch (size) {
  case 1:
    *api = "cuMemsetD8Async";
    return cg_drv.cuMemsetD8Async(p, (unsigned char)w[0], 1, s);
  case 2:
    *api = "cuMemsetD16Async";
    return cg_drv.cuMemsetD16Async(p, (unsigned short)w[0], 1, s);
  default: {
    *api = "cuMemsetD32Async";
    CUresult r = cg_drv.cuMemsetD32Async(p, w[0], 1, s);
    return r != CUDA_SUCCESS || size < 8 ? r
         : cg_drv.cuMemsetD32Async(p + 4, w[1], 1, s);
  }
  }
}

const char *cg_driver_errname(CUresult r, char buf[CG_ERRNAME]) {
  const char *s = NULL;
  if (cg_drv.cuGetErrorName && cg_drv.cuGetErrorName(r, &s) == CUDA_SUCCESS
      && s)
    return s;
  snprintf(buf, CG_ERRNAME, "CUDA_ERROR_%d", (int)r);
  return buf;
}

/* "where: api: name: message"; where (the caller's "chunk:line") only
   when known; then, for a capture error, "(first: the call that broke the
   capture)", the rule and the fix. */
static int error_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_getfield(L, 1, "where");
  lua_getfield(L, 1, "api");
  lua_getfield(L, 1, "name");
  lua_getfield(L, 1, "message");
  lua_pushfstring(L, "%s%s%s: %s: %s", luaL_optstring(L, 2, ""),
                  lua_isstring(L, 2) ? ": " : "", luaL_optstring(L, 3, "?"),
                  luaL_optstring(L, 4, "?"), luaL_optstring(L, 5, "?"));
  if (lua_getfield(L, 1, "unjoined") == LUA_TSTRING)
    lua_pushfstring(L, "%s (%s)", lua_tostring(L, 6), lua_tostring(L, 7)),
        lua_replace(L, 6);
  lua_settop(L, 6);
  if (lua_getfield(L, 1, "first") == LUA_TSTRING)
    lua_pushfstring(L, "%s (broken first by %s)", lua_tostring(L, 6),
                    lua_tostring(L, 7)), lua_replace(L, 6);
  lua_settop(L, 6);
  if (lua_getfield(L, 1, "rule") == LUA_TSTRING &&
      lua_getfield(L, 1, "fix") == LUA_TSTRING)
    lua_pushfstring(L, "%s: %s; %s", lua_tostring(L, 6), lua_tostring(L, 7),
                    lua_tostring(L, 8)), lua_replace(L, 6);
  lua_settop(L, 6);
  return 1;
}

void cg_pusherror(lua_State *L, const char *api, int code, const char *name,
                  const char *msg) {
  size_t len;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, api);
  lua_setfield(L, -2, "api");
  lua_pushinteger(L, code);
  lua_setfield(L, -2, "code");
  lua_pushstring(L, name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, msg);
  lua_setfield(L, -2, "message");
  luaL_where(L, 1); /* "chunk:line: " of the Lua code that made the call */
  lua_tolstring(L, -1, &len);
  if (len > 2) {
    lua_pushlstring(L, lua_tostring(L, -1), len - 2);
    lua_setfield(L, -3, "where");
  }
  lua_pop(L, 1);
  luaL_setmetatable(L, "cugraph.Error");
}

/* cuda.is_error(v) -> whether v is an error object of the runtime */
static int is_error(lua_State *L) {
  int yes = lua_getmetatable(L, 1);
  if (yes) {
    luaL_getmetatable(L, "cugraph.Error");
    yes = lua_rawequal(L, -1, -2);
  }
  lua_pushboolean(L, yes);
  return 1;
}

const char *cg_capture_rule(CUresult r, const char **fix) {
  static const char *const rules[][2] = {
    { "a call that waits for the device, or works outside stream order, "
      "is not allowed while a stream of the context captures "
      "(synchronizations, queries, memory calls without Async)",
      "make it after the capture ends, or use the stream-ordered form on "
      "the capture stream" },
    { "a capture fails at every call once one call has broken it",
      "look for the first call that failed in this capture" },
    { "one stream cannot join two captures", "wait only on streams and "
      "events of this capture" },
    { "a capture ends on the stream that began it", "end it there" },
    { "every stream that joined the capture (s2:wait(s), or an event "
      "recorded in it) must be joined back before it ends",
      "end the forked work with s:wait(s2) before the closure returns" },
    { "captured work cannot depend on work outside the capture (an event "
      "recorded outside it, a stream that is not capturing)",
      "record the event inside the capture, or wait before it begins" },
    { "the legacy default stream synchronizes with every stream, so it "
      "cannot be used while one captures", "use a stream of cuda.stream()" },
    { "an event recorded in a capture belongs to the graph: it cannot be "
      "queried, waited for on the host or by a stream outside the capture",
      "use it only inside the capture, or record another after it" },
    { "in global or thread-local capture mode, only the thread that began "
      "the capture may use its streams, and other threads may not make "
      "unsafe calls meanwhile", "capture with mode = \"relaxed\", or make "
      "the call from the capturing thread" },
  };
  if (r < CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ||
      r > CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    return NULL;
  *fix = rules[r - CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED][1];
  return rules[r - CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED][0];
}

static _Thread_local char handed[CG_REPORT];

void cg_driver_hand_report(const char *text) {
  snprintf(handed, sizeof handed, "%s", text);
}

void cg_driver_pusherror(lua_State *L, const char *api, CUresult r) {
  char buf[CG_ERRNAME], report[CG_REPORT];
  const char *s = NULL, *fix = NULL, *rule = cg_capture_rule(r, &fix);
  if (!cg_drv.cuGetErrorString || cg_drv.cuGetErrorString(r, &s) != CUDA_SUCCESS
      || !s)
    s = "unknown error";
  /* the simulator's report of the work behind the error: a race between
     streams, or a fault's kernel, source line, thread and Lua lines */
  int told = cg_drv.cuSimTakeReport &&
             cg_drv.cuSimTakeReport(report, sizeof report) == CUDA_SUCCESS;
  if (!told && handed[0]) {
    memcpy(report, handed, sizeof report);
    told = 1;
  }
  handed[0] = '\0';
  if (told) s = lua_pushfstring(L, "%s: %s", s, report);
  cg_pusherror(L, api, (int)r, cg_driver_errname(r, buf), s);
  if (told) lua_remove(L, -2);
  if (rule) {
    lua_pushstring(L, rule);
    lua_setfield(L, -2, "rule");
    lua_pushstring(L, fix);
    lua_setfield(L, -2, "fix");
  }
}

int cg_driver_error(lua_State *L, const char *api, CUresult r) {
  cg_driver_pusherror(L, api, r);
  return lua_error(L);
}

void cg_driver_open(lua_State *L) {
  luaL_newmetatable(L, "cugraph.Error");
  lua_pushcfunction(L, error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushcfunction(L, is_error);
  lua_setfield(L, -2, "is_error");
}
