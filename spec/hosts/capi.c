/* The embedding API's checks, each through lua_pcall: prints one line per
   case, "name: message" for a refusal or "name: ok". Exits 0 when it could
   run every case.

     capi LUA_DIR */
#include <stdint.h>
#include <stdio.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

typedef struct { const char *type; CUdeviceptr ptr; size_t n; } bufcase;

static int pushbuffer(lua_State *L) {
  const bufcase *c = lua_touserdata(L, 1);
  cugraph_pushbuffer(L, c->ptr, c->type, c->n);
  return 1;
}

int main(int argc, char **argv) {
  static struct { const char *name; bufcase c; } cases[] = {
    {"f64 of 2^61+1", {"f64", 0x1000, ((size_t)1 << 61) + 1}},
    {"u8 of SIZE_MAX", {"u8", 0x1000, SIZE_MAX}},
    {"f32 of 2^62", {"f32", 0x1000, (size_t)1 << 62}},
    {"null pointer", {"f32", 0, 4}},
    {"unknown type", {"float4", 0x1000, 4}},
    {"f32 of 4", {"f32", 0x1000, 4}},
  };
  if (argc != 2) return 2;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cugraph_openlibs(L, argv[1]);
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
