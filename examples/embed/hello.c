/* hello: the smallest C program that embeds cugraph-lua, built by the link
   lines of docs/embedding.md ("Building a host"), then run as

     ./hello [lua_dir]

   lua_dir is the folder holding cugraph/init.lua (PREFIX/share/lua/5.4 for
   make install); without it, package.path must already find the module.
   The script captures a kernel into a graph, replays it with a device
   scalar and prints the result; CUGRAPH_LUA_LIBCUDA=sim runs it on the PTX
   simulator. Exits 0 when the result is right. */
#include <stdio.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

static const char script[] =
  "local cuda = require 'cugraph'\n"
  "local m = cuda.compile([[\n"
  "extern \"C\" __global__ void add(float *x, const float *a, int n) {\n"
  "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
  "  if (i < n) x[i] += *a;\n"
  "}]])\n"
  "local s = cuda.stream()\n"
  "local x, a = cuda.buffer('f32', 256):fill(0), cuda.scalar('f32', 0)\n"
  "local g = s:capture(function(st) m.add:launch(st, 1, 256, x, a, 256) end)\n"
  "for i = 1, 4 do a:set(i); g:launch() end\n"
  "local v = x:download()\n"
  "print(('hello: %s, x[1] = %g'):format(cuda.device().name, v[1]))\n"
  "return v[1] == 10 and v[256] == 10\n";

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, argc > 1 ? argv[1] : NULL);
  int ok = luaL_loadstring(L, script) == LUA_OK &&
           lua_pcall(L, 0, 1, 0) == LUA_OK;
  if (!ok) fprintf(stderr, "hello: %s\n", lua_tostring(L, -1));
  ok = ok && lua_toboolean(L, -1);
  lua_close(L);
  return ok ? 0 : 1;
}
