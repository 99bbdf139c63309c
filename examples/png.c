/* png: a Lua module that writes 8-bit RGBA PNG files through libpng.

     local png = require "png"
     png.write(path, width, height, rgba)  --> true

   rgba holds width * height * 4 bytes, rows top to bottom. Any failure
   (the file, libpng, the disk) raises a Lua error that names the path.
   Built by examples/examples.mk as
   build/examples/png.so. */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>

int luaopen_png(lua_State *L);

enum { MSG = 200 };

/* libpng's error callback: keeps the message in the error pointer's buffer
   (which lives outside the setjmp frame) and unwinds to png_jmpbuf. */
static void on_error(png_structp png, png_const_charp msg) {
  char *buf = png_get_error_ptr(png);
  snprintf(buf, MSG, "%s", msg);
  png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

/* Writes the image; returns NULL or the reason it failed (in msg). Every
   object touched after setjmp is volatile or unchanged since. */
static const char *write_png(FILE *f, png_uint_32 w, png_uint_32 h,
                             const unsigned char *px, char *msg) {
  png_structp volatile png = png_create_write_struct(PNG_LIBPNG_VER_STRING,
                                                     msg, on_error, on_warning);
  png_infop volatile info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    png_structp p = png;
    png_infop i = info;
    png_destroy_write_struct(p ? &p : NULL, i ? &i : NULL);
    return "out of memory";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_structp p = png;
    png_infop i = info;
    png_destroy_write_struct(&p, &i);
    return msg;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB_ALPHA,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (png_uint_32 y = 0; y < h; y++)
    png_write_row(png, px + (size_t)y * w * 4);
  png_write_end(png, NULL);
  png_structp p = png;
  png_infop i = info;
  png_destroy_write_struct(&p, &i);
  return NULL;
}

/* png.write(path, width, height, rgba) -> true */
static int l_write(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer w = luaL_checkinteger(L, 2), h = luaL_checkinteger(L, 3);
  size_t len;
  const char *px = luaL_checklstring(L, 4, &len);
  luaL_argcheck(L, w > 0 && w <= 1000000, 2, "width must be in 1..1000000");
  luaL_argcheck(L, h > 0 && h <= 1000000, 3, "height must be in 1..1000000");
  if ((lua_Integer)len != w * h * 4)
    return luaL_error(L, "png.write: %s: %I bytes of pixels; %I x %I RGBA "
                      "needs %I", path, (LUAI_UACINT)len, (LUAI_UACINT)w,
                      (LUAI_UACINT)h, (LUAI_UACINT)(w * h * 4));
  char *msg = lua_newuserdatauv(L, MSG, 0); /* on_error's buffer */
  msg[0] = '\0';
  FILE *f = fopen(path, "wb");
  if (!f) return luaL_error(L, "png.write: %s: %s", path, strerror(errno));
  const char *why = write_png(f, (png_uint_32)w, (png_uint_32)h,
                              (const unsigned char *)px, msg);
  if (fclose(f) != 0 && !why) why = strerror(errno);
  if (why) return luaL_error(L, "png.write: %s: %s", path, why);
  lua_pushboolean(L, 1);
  return 1;
}

int luaopen_png(lua_State *L) {
  static const luaL_Reg funcs[] = { {"write", l_write}, {NULL, NULL} };
  luaL_newlib(L, funcs);
  return 1;
}
