/* cugraph-lua: the embedding API, for engines that run their own lua_State.

   Link the engine with build/libcugraph.a (or the installed libcugraph.a,
   pkg-config cugraph-lua) and Lua 5.4. Then:

     lua_State *L = luaL_newstate();
     luaL_openlibs(L);
     cugraph_openlibs(L, "path/to/lua");  // require "cugraph" works
     ...
     cugraph_pushbuffer(L, ptr, "f32", n);   // engine memory, as a Buffer
     lua_setglobal(L, "positions");

   The engine's memory and streams must belong to the device's primary
   context, the one the CUDA runtime uses. Objects pushed here are borrowed:
   the script can use them anywhere a Buffer or Stream goes (launches,
   captures) but never frees them; their :free() only detaches the Lua
   object. The engine keeps the memory alive while a graph that captured it
   lives. Functions that push raise Lua errors like any Lua API function.

   Threads. A process may run any number of lua_States with the module,
   each used by one thread at a time (Lua's own rule: the host orders the
   hand-over, by a join or a lock) and on any thread, a different one from
   call to call if it likes; lua_close and collection too. Process-wide and
   safe from any thread: libcuda and NVRTC are loaded once, whichever
   states ask first and at once; the NVRTC disk cache may be written and
   read by many threads and processes at once, and a reader sees a whole
   entry or none. Every state of one device shares its primary context:
   before a driver call, the core makes that context current on the calling
   thread when it is not the one the core last made current there (a
   thread-local compare; cuCtxSetCurrent only on a change). A host that
   makes another context current on a thread (cuCtxSetCurrent,
   cuCtxPushCurrent) must make the primary context current again before it
   calls into a state on that thread. As CUDA forbids, a capture in one
   state fails if another thread meanwhile synchronizes the whole context
   (cuda.synchronize, a download, scalar:get, work given no stream) or, in
   global capture mode, allocates or frees: such threads take turns. */
#ifndef CUGRAPH_H
#define CUGRAPH_H

#include <stddef.h>
#include <cuda.h>
#include <lua.h>

#ifndef CUGRAPH_VERSION /* the build defines it from the file VERSION */
#define CUGRAPH_VERSION "0.1.0"
#endif

/* The module's C part, as require "cugraph.core" opens it. */
int luaopen_cugraph_core(lua_State *L);

/* Registers cugraph.core in package.preload and, when dir is not NULL, puts
   dir/?.lua and dir/?/init.lua (the folder holding cugraph/init.lua) at the
   front of package.path, so that require "cugraph" works. */
void cugraph_openlibs(lua_State *L, const char *dir);

/* Pushes a borrowed Buffer of n elements of type ("f32", "u32", ...) at
   device address ptr. */
void cugraph_pushbuffer(lua_State *L, CUdeviceptr ptr, const char *type,
                        size_t n);

/* Pushes a borrowed Stream. The legacy stream (NULL) is refused: it cannot
   be captured. */
void cugraph_pushstream(lua_State *L, CUstream stream);

#endif
