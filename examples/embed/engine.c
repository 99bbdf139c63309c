/* engine: a C program standing in for a game engine that embeds cugraph-lua.

   It shows that an engine keeps ownership of its GPU resources while a Lua
   script drives CUDA graphs on them:

   - the engine runs its own lua_State and opens the module with
     cugraph_openlibs (src/cugraph.h);
   - it uses the device's PRIMARY context (cuDevicePrimaryCtxRetain +
     cuCtxSetCurrent), the one cugraph-lua and the CUDA runtime use, so
     pointers and streams pass freely between them;
   - it allocates its own device memory and stream and hands them to the
     script as borrowed objects (cugraph_pushbuffer, cugraph_pushstream);
   - the script (frame.lua) compiles a kernel, captures it into a graph on
     the engine's stream at the first frame and then sets a DeviceScalar and
     launches the graph each frame;
   - the engine checks the result on its side with cuMemcpyDtoH;
   - the script's buf:free() only detaches its Lua object, and lua_close
     frees nothing of the engine's: after both, the engine's memory and
     stream still work (cuMemsetD32, cuStreamSynchronize), and only then
     does the engine free them.

   libcuda is opened with dlopen, as the binding does (CUGRAPH_LUA_LIBCUDA
   names another library), so nothing links against the driver.

     engine [frame.lua [lua_dir]]

   Defaults come from -DENGINE_SCRIPT and -DCUGRAPH_LUA_DIR. Exits 0 when
   every check passes. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

#ifndef CUGRAPH_LUA_DIR
#define CUGRAPH_LUA_DIR "lua"
#endif
#ifndef ENGINE_SCRIPT
#define ENGINE_SCRIPT "examples/embed/frame.lua"
#endif

enum { N = 1 << 20, FRAMES = 300 };

/* The driver calls the engine makes, under the versioned names cuda.h maps
   them to (cuMemAlloc is cuMemAlloc_v2). */
#define ENGINE_FUNCS(X) \
  X(cuInit) X(cuGetErrorName) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemsetD32) X(cuMemcpyDtoH) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)

#define FIELD(f) __typeof__(f) *f;
static struct { ENGINE_FUNCS(FIELD) } cu;
#undef FIELD

#define STR(x) #x
#define XSTR(x) STR(x)

static int load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  if (!name || !*name) name = "libcuda.so.1";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "engine: no CUDA driver (%s): %s\n", name, dlerror());
    return 0;
  }
  void *p;
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) { \
    fprintf(stderr, "engine: %s lacks %s\n", name, XSTR(f)); \
    return 0; \
  } \
  memcpy(&cu.f, &p, sizeof p);
  ENGINE_FUNCS(RESOLVE)
#undef RESOLVE
  return 1;
}

/* Reports a failed driver call; returns whether it succeeded. */
static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return 1;
  const char *name = NULL;
  if (cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "?";
  fprintf(stderr, "engine: %s: %s (%d)\n", what, name, (int)r);
  return 0;
}
#define CHECK(call) check((call), #call)

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg) luaL_traceback(L, L, msg, 1);
  else if (!luaL_callmeta(L, 1, "__tostring")) lua_pushliteral(L, "(error object)");
  return 1;
}

/* Calls the function below its nargs arguments with a traceback; prints the
   error. Returns whether it succeeded. */
static int pcall(lua_State *L, int nargs, const char *what) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int ok = lua_pcall(L, nargs, 0, base) == LUA_OK;
  if (!ok) {
    fprintf(stderr, "engine: %s: %s\n", what, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_remove(L, base);
  return ok;
}

/* Under pcall: the engine's buffer and stream become the globals buf and
   stream (pushing raises on a bad driver, so it is protected too). */
static int publish(lua_State *L) {
  CUdeviceptr *mem = lua_touserdata(L, 1);
  CUstream *stream = lua_touserdata(L, 2);
  cugraph_pushbuffer(L, *mem, "f32", N);
  lua_setglobal(L, "buf");
  cugraph_pushstream(L, *stream);
  lua_setglobal(L, "stream");
  return 0;
}

/* Under pcall: the legacy stream, which the API must refuse (it cannot be
   captured). */
static int push_legacy(lua_State *L) {
  cugraph_pushstream(L, NULL);
  return 1;
}

/* Runs the script and its frames; returns whether all of it succeeded. The
   lua_State is closed here, before the engine frees anything. */
static int run_script(CUdeviceptr mem, CUstream stream, const char *script,
                      const char *lua_dir) {
  lua_State *L = luaL_newstate();
  if (!L) return 0;
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  lua_pushcfunction(L, publish);
  lua_pushlightuserdata(L, &mem);
  lua_pushlightuserdata(L, &stream);
  int ok = pcall(L, 2, "publishing the engine's buffer and stream");
  lua_pushcfunction(L, push_legacy);
  if (lua_pcall(L, 0, 1, 0) == LUA_OK ||
      !strstr(lua_tostring(L, -1), "the legacy stream cannot be used")) {
    fprintf(stderr, "engine: the legacy stream was not refused\n");
    ok = 0;
  }
  lua_pop(L, 1);
  if (ok && luaL_loadfile(L, script) != LUA_OK) {
    fprintf(stderr, "engine: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    ok = 0;
  }
  ok = ok && pcall(L, 0, script);
  for (int i = 1; ok && i <= FRAMES; i++) {
    lua_getglobal(L, "frame");
    lua_pushinteger(L, i);
    ok = pcall(L, 1, "frame()");
  }
  /* The engine reads its own memory after the frames, on its own stream. */
  float *host = ok ? malloc(N * sizeof *host) : NULL;
  ok = ok && host && CHECK(cu.cuStreamSynchronize(stream)) &&
       CHECK(cu.cuMemcpyDtoH(host, mem, N * sizeof *host));
  /* Frame i adds i + (j % 8) to x[j]: integers, exact in f32. */
  for (int j = 0; ok && j < N; j++) {
    float want = (float)FRAMES * (FRAMES + 1) / 2 + (float)FRAMES * (j % 8);
    if (host[j] != want) {
      fprintf(stderr, "engine: x[%d] = %g, expected %g\n", j, host[j], want);
      ok = 0;
    }
  }
  free(host);
  if (ok) printf("engine: %d frames, every x[j] = %d + %d * (j %% 8)\n",
                 FRAMES, FRAMES * (FRAMES + 1) / 2, FRAMES);
  if (ok) {
    lua_getglobal(L, "shutdown");
    ok = pcall(L, 0, "shutdown()");
  }
  lua_close(L);
  return ok;
}

int main(int argc, char **argv) {
  const char *script = argc > 1 ? argv[1] : ENGINE_SCRIPT;
  const char *lua_dir = argc > 2 ? argv[2] : CUGRAPH_LUA_DIR;
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr mem = 0;
  CUstream stream = NULL;
  if (!load_driver() || !CHECK(cu.cuInit(0)) || !CHECK(cu.cuDeviceGet(&dev, 0)) ||
      !CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, dev)))
    return 1;
  int ok = CHECK(cu.cuCtxSetCurrent(ctx)) &&
           CHECK(cu.cuMemAlloc(&mem, N * sizeof(float))) &&
           CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) &&
           CHECK(cu.cuMemsetD32(mem, 0, N)) &&
           /* a memset of device memory may return before it is done */
           CHECK(cu.cuCtxSynchronize());
  ok = ok && run_script(mem, stream, script, lua_dir);
  /* lua_close is done: the memory and the stream are still the engine's. */
  float one = 0;
  if (ok) {
    ok = CHECK(cu.cuMemsetD32(mem, 0x3f800000u, N)) && /* 1.0f */
         CHECK(cu.cuMemcpyDtoH(&one, mem + (N - 1) * sizeof(float),
                               sizeof one)) &&
         CHECK(cu.cuStreamSynchronize(stream));
    if (ok && one != 1.0f) {
      fprintf(stderr, "engine: memset after lua_close read back %g\n", one);
      ok = 0;
    }
    if (ok) printf("engine: after lua_close its buffer and stream still work\n");
  }
  if (stream) ok = CHECK(cu.cuStreamDestroy(stream)) && ok;
  if (mem) ok = CHECK(cu.cuMemFree(mem)) && ok;
  ok = CHECK(cu.cuDevicePrimaryCtxRelease(dev)) && ok;
  puts(ok ? "engine: ok" : "engine: FAILED");
  return ok ? 0 : 1;
}
