/* Lua values and element bits: the conversions that buffers, scalars,
   host buffers and kernel arguments share, checked for range; counts of
   elements checked for overflow. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "base/base.h"

const char *cg_checkname(lua_State *L, int idx, const char *what) {
  size_t len;
  const char *s = luaL_checklstring(L, idx, &len), *nul = memchr(s, 0, len);
  if (!nul) return s;
  const char *msg = lua_pushfstring(L, "the string contains a NUL byte (at "
                                    "byte %d): a name or path ends there "
                                    "in C", (int)(nul - s) + 1);
  if (!what) luaL_argerror(L, idx, msg);
  luaL_error(L, "%s: %s", what, msg);
  return NULL;
}

const char *cg_optname(lua_State *L, int idx, const char *def,
                       const char *what) {
  return lua_isnoneornil(L, idx) ? def : cg_checkname(L, idx, what);
}

/* An option: one of list (def when absent); an error lists them. */
int cg_checkoption(lua_State *L, int idx, const char *def,
                   const char *const list[]) {
  const char *name = def ? cg_optname(L, idx, def, NULL)
                         : cg_checkname(L, idx, NULL);
  int i = 0, n = 0;
  for (; list[i]; i++)
    if (!strcmp(list[i], name)) return i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (; list[n]; n++) {
    if (n) luaL_addstring(&b, list[n + 1] ? ", " : " or ");
    luaL_addstring(&b, list[n]);
  }
  luaL_pushresult(&b);
  return luaL_argerror(L, idx, lua_pushfstring(L, "invalid option '%s' "
                       "(expected %s)", name, lua_tostring(L, -1)));
}

/* An element type: a short name ("f32") or a C name for one ("float",
   "unsigned int", "uint8_t"); an error lists them. */
cg_type cg_checktype(lua_State *L, int idx) {
  const char *s = cg_checkname(L, idx, NULL);
  cg_param p;
  for (int t = 0; t < CG_NTYPES; t++)
    if (!strcmp(s, cg_type_names[t])) return (cg_type)t;
  if (cg_signature(s, &p, 1, NULL, 0) == 1 && p.type < CG_NTYPES &&
      !strpbrk(s, ",*"))
    return (cg_type)p.type;
  return (cg_type)luaL_argerror(L, idx, lua_pushfstring(L,
      "unknown element type '%s'; expected f32 f64 i8 u8 i16 u16 i32 u32 "
      "i64 u64 f16 bf16, or a C name such as float, double, int, unsigned, "
      "long long, uint8_t, __half, __nv_bfloat16", s));
}

/* 16-bit floats: 1 sign bit, e exponent bits (bias emax), m fraction bits:
   binary16 (e 5, m 10, emax 15) and bfloat16 (e 8, m 7, emax 127). */
#define HALF_M(t) ((t) == CG_F16 ? 10 : 7)
#define HALF_EMAX(t) ((t) == CG_F16 ? 15 : 127)

/* v rounded to nearest, ties to even, straight from the double (no double
   rounding through float); -1 when a finite v rounds past the largest
   finite value. NaN keeps its sign and becomes the quiet NaN. */
static int32_t tohalf(double v, int m, int emax) {
  uint32_t sign = signbit(v) ? 0x8000u : 0, inf = 0x7fffu >> m << m;
  if (isnan(v)) return (int32_t)(sign | inf | 1u << (m - 1));
  double a = fabs(v);
  if (isinf(a)) return (int32_t)(sign | inf);
  if (a == 0) return (int32_t)sign;
  int e;
  frexp(a, &e);
  e = e - 1 < 1 - emax ? 1 - emax : e - 1; /* a in [2^e, 2^(e+1)), or less
                                              when subnormal */
  double r = nearbyint(ldexp(a, m - e)); /* whole units of the last place */
  if (r == ldexp(1, m + 1)) { /* rounded up to the next binade */
    r /= 2;
    e++;
  }
  if (e > emax) return -1;
  if (r < ldexp(1, m)) return (int32_t)(sign | (uint32_t)r); /* subnormal */
  return (int32_t)(sign | (uint32_t)(e + emax) << m |
                   ((uint32_t)r - (1u << m)));
}

static double fromhalf(uint16_t h, int m, int emax) {
  unsigned ef = (h & 0x7fffu) >> m, f = h & ((1u << m) - 1);
  double v = ef == 2u * (unsigned)emax + 1 ? (f ? NAN : INFINITY)
           : ef == 0 ? ldexp(f, 1 - emax - m)
           : ldexp(f + (1u << m), (int)ef - emax - m);
  return h & 0x8000u ? -v : v;
}
/* Converts the number at idx to element type t into out. Integers must be
   exact and in range; u64 takes a Lua integer as its 64-bit pattern, as
   Lua's own hex literals do (0xffffffffffffffff is -1). Returns NULL, or
   the reason it cannot (pushed on the stack). */
const char *cg_bits(lua_State *L, int idx, cg_type t, void *out) {
  if (lua_type(L, idx) != LUA_TNUMBER)
    return lua_pushfstring(L, "expected number, got %s", luaL_typename(L, idx));
  if (t == CG_F32 || t == CG_F64) {
    lua_Number v = lua_tonumber(L, idx);
    if (t == CG_F64) {
      memcpy(out, &v, 8);
      return NULL;
    }
    if (isfinite(v) && fabs(v) > FLT_MAX)
      return lua_pushfstring(L, "%f is out of range for f32", v);
    float f = (float)v;
    memcpy(out, &f, 4);
    return NULL;
  }
  if (t >= CG_F16) {
    lua_Number v = lua_tonumber(L, idx);
    int32_t h = tohalf(v, HALF_M(t), HALF_EMAX(t));
    if (h < 0)
      return lua_pushfstring(L, "%f is out of range for %s", v,
                             cg_type_names[t]);
    uint16_t b = (uint16_t)h;
    memcpy(out, &b, 2);
    return NULL;
  }
  static const lua_Integer lo[] = { 0, 0, INT8_MIN, 0, INT16_MIN, 0,
                                    INT32_MIN, 0, INT64_MIN, INT64_MIN };
  static const lua_Integer hi[] = { 0, 0, INT8_MAX, UINT8_MAX, INT16_MAX,
                                    UINT16_MAX, INT32_MAX, UINT32_MAX,
                                    INT64_MAX, INT64_MAX };
  int ok;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok)
    return lua_pushfstring(L, "expected an integer, got %f",
                           lua_tonumber(L, idx));
  if (v < lo[t] || v > hi[t])
    return lua_pushfstring(L, "%I is out of range for %s", (LUAI_UACINT)v,
                           cg_type_names[t]);
  switch (cg_type_size[t]) {
  case 1: { uint8_t b = (uint8_t)v; memcpy(out, &b, 1); break; }
  case 2: { uint16_t b = (uint16_t)v; memcpy(out, &b, 2); break; }
  case 4: { uint32_t b = (uint32_t)v; memcpy(out, &b, 4); break; }
  default: memcpy(out, &v, 8);
  }
  return NULL;
}

int cg_tointeger(lua_State *L, int idx, lua_Integer *out) {
  int ok = 0;
  if (lua_type(L, idx) == LUA_TNUMBER) *out = lua_tointegerx(L, idx, &ok);
  return ok;
}

int cg_xyz_size(lua_State *L, int idx) {
  lua_Integer n = 0, last = 0;
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    lua_Integer k = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    if (k < 1 || k > 3) {
      lua_pop(L, 1);
      return 0;
    }
    n++;
    if (k > last) last = k;
  }
  return n == last ? (int)n : 0;
}

void cg_tobits(lua_State *L, int idx, cg_type t, void *out, const char *what) {
  const char *msg = cg_bits(L, idx, t, out);
  if (!msg) return;
  if (!what) luaL_argerror(L, idx, msg);
  luaL_error(L, "%s: %s", what, msg);
}

void cg_pushbits(lua_State *L, cg_type t, const void *p) {
  switch (t) {
  case CG_F32: { float f; memcpy(&f, p, 4); lua_pushnumber(L, f); break; }
  case CG_F64: { double d; memcpy(&d, p, 8); lua_pushnumber(L, d); break; }
  case CG_I8: lua_pushinteger(L, *(const int8_t *)p); break;
  case CG_U8: lua_pushinteger(L, *(const uint8_t *)p); break;
  case CG_I16: { int16_t v; memcpy(&v, p, 2); lua_pushinteger(L, v); break; }
  case CG_U16: { uint16_t v; memcpy(&v, p, 2); lua_pushinteger(L, v); break; }
  case CG_I32: { int32_t v; memcpy(&v, p, 4); lua_pushinteger(L, v); break; }
  case CG_U32: { uint32_t v; memcpy(&v, p, 4); lua_pushinteger(L, v); break; }
  case CG_F16: case CG_BF16: {
    uint16_t h;
    memcpy(&h, p, 2);
    lua_pushnumber(L, fromhalf(h, HALF_M(t), HALF_EMAX(t)));
    break;
  }
  default: { lua_Integer v; memcpy(&v, p, 8); lua_pushinteger(L, v); }
  }
}

size_t cg_checkcount(lua_State *L, int idx, cg_type t) {
  lua_Integer n = luaL_checkinteger(L, idx);
  luaL_argcheck(L, n > 0, idx, "size must be positive");
  luaL_argcheck(L, (uint64_t)n <= SIZE_MAX / cg_type_size[t] &&
                (uint64_t)n <= (uint64_t)INT64_MAX / 8, idx,
                "size in bytes overflows");
  return (size_t)n;
}

/* The elements of a new buffer at idx: a count, or a table or string of
   initial values (*init set), not empty; msg names the empty case. A
   string is raw bytes: one that reads as a number (a count read from arg
   or a file) is refused, never taken as its bytes. */
size_t cg_checkinit(lua_State *L, int idx, cg_type t, int *init,
                    const char *msg) {
  if (lua_type(L, idx) == LUA_TSTRING && lua_isnumber(L, idx))
    luaL_argerror(L, idx, lua_pushfstring(L, "the string \"%s\" reads as a "
                  "number, but a string here is the elements' raw bytes: "
                  "pass a count as a number (tonumber(s)), or make it by "
                  "count and write the bytes (b:upload, h:set)",
                  lua_tostring(L, idx)));
  *init = lua_type(L, idx) == LUA_TTABLE || lua_type(L, idx) == LUA_TSTRING;
  if (!*init) return cg_checkcount(L, idx, t);
  size_t n = lua_istable(L, idx) ? lua_rawlen(L, idx)
                                 : lua_rawlen(L, idx) / cg_type_size[t];
  luaL_argcheck(L, n > 0, idx, msg);
  return n;
}

