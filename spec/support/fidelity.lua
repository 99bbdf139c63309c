-- The fidelity cases: every form of every value instruction the PTX ISA
-- gives (per operation, type, modifier and rounding), as the simulator's
-- decoder takes them, run on edge values. Shared by
-- spec/72-fidelity_spec.lua (the simulator against host references, and
-- the simulator against the GPU) and spec/support/fidelity_run.lua (the
-- runner each side of the comparison starts in its own process).
--
-- F.candidates() lists the forms written from the ISA's syntax; which of
-- them the simulator runs is its decoder's answer (F.probe loads each one
-- alone: a refused form fails to load, naming the instruction), so the
-- cases follow ptx_forms.c and the decoder rather than a copy of them.
-- Forms of one operand signature share an .entry: each thread loads one
-- input vector and writes every form's result, in 64-bit slots.
local F = {}

local M64 = -1

-- Bits and sign of w-bit values held in Lua integers (two's complement).
local function mask(w) return w >= 64 and M64 or (1 << w) - 1 end
local function sext(x, w)
  x = x & mask(w)
  if w < 64 and x >> (w - 1) & 1 == 1 then return x - (1 << w) end
  return x
end
F.mask, F.sext = mask, sext

local WIDTH = {
  b16 = 16, b32 = 32, b64 = 64, u16 = 16, u32 = 32, u64 = 64, s16 = 16, s32 = 32,
  s64 = 64, f16 = 16, bf16 = 16, f32 = 32, f64 = 64, f16x2 = 32, bf16x2 = 32,
  u8 = 16, s8 = 16, b8 = 16, pred = 1, sh = 32, lut = 32,
}
F.WIDTH = WIDTH

-- f32 and f64 bits to Lua numbers and back.
local function f32v(b) return (string.unpack("<f", string.pack("<I4", b & 0xffffffff))) end
local function f32b(v) return (string.unpack("<I4", string.pack("<f", v))) end
local function f64v(b) return (string.unpack("<d", string.pack("<i8", b))) end
local function f64b(v) return (string.unpack("<i8", string.pack("<d", v))) end
F.f32v, F.f32b, F.f64v, F.f64b = f32v, f32b, f64v, f64b

-- Edge values of each operand class, as bits.
local U16 = { 0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 0x7f, 0x80, 0xff, 0x100, 0x7fff,
              0x8000, 0x8001, 0xfffe, 0xffff, 0x1234, 0xbeef }
local U32 = { 0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 0x7f, 0x80, 0xff,
              0x100, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff, 0x80000000,
              0x80000001, 0xfffffffe, 0xffffffff, 0x12345678, 0xdeadbeef,
              0x55555555, 0xfffffff0 }
local U64 = { 0, 1, 2, 3, 31, 32, 63, 64, 65, 127, 0xff, 0xffff, 0x7fffffff,
              0x80000000, 0xffffffff, 0x100000000, 0x7fffffffffffffff,
              math.mininteger, math.mininteger + 1, -2, -1, 0x0123456789abcdef,
              -0x0123456789abcdf0, 0xdeadbeef, 0x8000000000, -0x100000000 }
local SH = { 0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 0x80000000,
             0xffffffff }
local F32 = { 0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x3f000000,
              0x3fc00000, 0x40000000, 0x40400000, 0x3eaaaaab, 0x3f7fffff,
              0x3f800001, 0x4b000000, 0x4b7fffff, 0x3f400000, 0x40200000,
              0x40600000, 0xbfc00000, 0x7f7fffff, 0xff7fffff, 0x00800000,
              0x80800000, 0x007fffff, 0x00000001, 0x80000001, 0x7f800000,
              0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0x42c80000,
              0xc2f6e979, 0x4f000000, 0x4f800000, 0xcf000000, 0x5f000000,
              0x3f000001, 0x40490fdb, 0xc7800000, 0x477fe000, 0x33800000,
              0x3dcccccd, 0xc0a00000, 0x41200000, 0x42b40000, 0xc2b40000, 0x3a83126f }
local F64 = { 0, math.mininteger, 0x3ff0000000000000, -0x4010000000000000,
              0x3fe0000000000000, 0x3ff8000000000000, 0x4000000000000000,
              0x3fd5555555555555, 0x3fefffffffffffff, 0x3ff0000000000001,
              0x4330000000000000, 0x4004000000000000, 0x400c000000000000,
              -0x4008000000000000, 0x7fefffffffffffff, -0x0010000000000001,
              0x0010000000000000, 0x000fffffffffffff, 1, math.mininteger + 1,
              0x7ff0000000000000, -0x0010000000000000, 0x7ff8000000000000,
              -0x0007ffffffffffff, 0x7ff0000000000001, 0x4059000000000000,
              0x41e0000000000000, 0x41f0000000000000, -0x3e20000000000000,
              0x43e0000000000000, 0x400921fb54442d18, 0x47efffffe0000000,
              0x36a0000000000000, 0x3810000000000000, 0x380fffffffffffff,
              0x3fe0000000000001 }
local F16 = { 0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x3e00, 0x4000, 0x3555,
              0x3bff, 0x3c01, 0x7bff, 0xfbff, 0x0400, 0x8400, 0x03ff, 0x0001,
              0x8001, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0x5640, 0x4248 }
local BF16 = { 0x0000, 0x8000, 0x3f80, 0xbf80, 0x3f00, 0x3fc0, 0x4000, 0x3eab,
               0x3f7f, 0x3f81, 0x7f7f, 0xff7f, 0x0080, 0x8080, 0x007f, 0x0001,
               0x8001, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x42c8, 0x4049 }
local function pairs_of(t)
  local r = {}
  for i, x in ipairs(t) do r[#r + 1] = x << 16 | t[(i * 7) % #t + 1] end
  return r
end
local VALUES = {
  u16 = U16, s16 = U16, b16 = U16, u32 = U32, s32 = U32, b32 = U32, u64 = U64,
  s64 = U64, b64 = U64, sh = SH, f32 = F32, f64 = F64, f16 = F16, bf16 = BF16,
  f16x2 = pairs_of(F16), bf16x2 = pairs_of(BF16), pred = { 0, 1 },
  u8 = U16, s8 = U16, b8 = U16,
}
F.VALUES = VALUES

-- Float bits of class t that are NaN.
local function is_nan(t, b)
  if t == "f32" then return b & 0x7fffffff > 0x7f800000 end
  if t == "f64" then return b & 0x7fffffffffffffff > 0x7ff0000000000000 end
  if t == "f16" then return b & 0x7fff > 0x7c00 end
  if t == "bf16" then return b & 0x7fff > 0x7f80 end
  return false
end
F.is_nan = is_nan

-- The forms -------------------------------------------------------------------

-- A form: name (the instruction's opcode word), op (its operation), sig
-- (class of each operand: D the result, A, B, C, E the sources, Q a second
-- result), body (PTX with %D %A %B %C %E %Q for the registers), and where
-- known ref (exact result bits from the source bits: a function of a, b,
-- c, e returning D and Q, nil where PTX leaves it undefined) or approx
-- (an error bound checked against the true value).
local forms = {}
local function form(t)
  t.body = t.body or (t.name .. " %D, %A" .. (t.sig.B and ", %B" or "")
                      .. (t.sig.C and ", %C" or "") .. (t.sig.E and ", %E" or "") .. ";")
  forms[#forms + 1] = t
  return t
end
local function each(list, fn) for _, v in ipairs(list) do fn(v) end end
local function opt(w) return { "", "." .. w } end
local function join(...)
  local s = ""
  for _, p in ipairs({ ... }) do s = s .. p end
  return s
end

local INT = { "u16", "u32", "u64", "s16", "s32", "s64" }
local BITS = { "b16", "b32", "b64" }
local RND = { "", ".rn", ".rz", ".rm", ".rp" }
local FRND = { ".rn", ".rz", ".rm", ".rp" }
local IRND = { ".rni", ".rzi", ".rmi", ".rpi" }
local HALVES = { "f16", "bf16", "f16x2", "bf16x2" }

local function w_of(t) return WIDTH[t] end
local function signed(t) return t:sub(1, 1) == "s" end

-- Integer references (a, b, c: bits of w-bit values).
local function iref(t, fn)
  local w, s = w_of(t), signed(t)
  return function(a, b, c)
    local x, y, z = a & mask(w), b and b & mask(w), c and c & mask(w)
    if s then x, y, z = sext(x, w), y and sext(y, w), z and sext(z, w) end
    local r = fn(x, y, z, w, s)
    return r and r & mask(w)
  end
end
local function sat_s32(v)
  return v > 0x7fffffff and 0x7fffffff or v < -0x80000000 and -0x80000000 or v
end
local function umulhi(x, y, w)
  if w < 64 then return (x * y) >> w end
  local xl, xh, yl, yh = x & 0xffffffff, x >> 32, y & 0xffffffff, y >> 32
  local ll = xl * yl
  local m1 = xh * yl + (ll >> 32)
  local m2 = xl * yh + (m1 & 0xffffffff)
  return xh * yh + (m1 >> 32) + (m2 >> 32)
end
local function mulhi(x, y, w, s)
  if w < 64 then return (x * y) >> w end
  local h = umulhi(x, y, w)
  if s then
    if x < 0 then h = h - y end
    if y < 0 then h = h - x end
  end
  return h
end
local function ult(x, y) return math.ult(x, y) end
local function idiv(x, y, w, s)
  if y == 0 then return nil end
  if s then
    if x == -(1 << (w - 1)) and y == -1 then return nil end
    local q = x // y
    if q < 0 and q * y ~= x then q = q + 1 end
    return q
  end
  return x // y
end
local function udiv64(x, y)
  if y == 0 then return nil end
  if y < 0 then return ult(x, y) and 0 or 1 end
  local q = ((x >> 1) // y) << 1
  local r = x - q * y
  if not ult(r, y) then q = q + 1 end
  return q
end
local function irem(x, y, w, s)
  if y == 0 then return nil end
  if s then
    if x == -(1 << (w - 1)) and y == -1 then return nil end
    return x - y * (idiv(x, y, w, s))
  end
  if w == 64 then return x - y * udiv64(x, y) end
  return x % y
end

-- Integer arithmetic.
each(INT, function(t)
  form { name = "add." .. t, op = "add", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y) return x + y end) }
  form { name = "sub." .. t, op = "sub", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y) return x - y end) }
  form { name = "mul.lo." .. t, op = "mul", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y) return x * y end) }
  form { name = "mul.hi." .. t, op = "mul", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y, _, w, s) return mulhi(x, y, w, s) end) }
  form { name = "mad.lo." .. t, op = "mad", sig = { D = t, A = t, B = t, C = t },
         ref = iref(t, function(x, y, z) return x * y + z end) }
  form { name = "mad.hi." .. t, op = "mad", sig = { D = t, A = t, B = t, C = t },
         ref = iref(t, function(x, y, z, w, s) return mulhi(x, y, w, s) + z end) }
  if w_of(t) < 64 then
    local wt = t:sub(1, 1) .. 2 * w_of(t)
    local w = w_of(t)
    local function wide(x, y) return x * y end
    form { name = "mul.wide." .. t, op = "mul", sig = { D = wt, A = t, B = t },
           ref = function(a, b)
             local x, y = a & mask(w), b & mask(w)
             if signed(t) then x, y = sext(x, w), sext(y, w) end
             return wide(x, y) & mask(2 * w)
           end }
    form { name = "mad.wide." .. t, op = "mad", sig = { D = wt, A = t, B = t, C = wt },
           ref = function(a, b, c)
             local x, y = a & mask(w), b & mask(w)
             if signed(t) then x, y = sext(x, w), sext(y, w) end
             return (wide(x, y) + c) & mask(2 * w)
           end }
  end
  form { name = "div." .. t, op = "div", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y, _, w, s)
           if w == 64 and not s then return udiv64(x, y) end
           return idiv(x, y, w, s)
         end) }
  form { name = "rem." .. t, op = "rem", sig = { D = t, A = t, B = t }, ref = iref(t, function(x, y, _, w, s) return irem(x, y, w, s) end) }
  form { name = "min." .. t, op = "min", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y, _, w, s)
           if s or w < 64 then return math.min(x, y) end
           return ult(x, y) and x or y
         end) }
  form { name = "max." .. t, op = "max", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y, _, w, s)
           if s or w < 64 then return math.max(x, y) end
           return ult(x, y) and y or x
         end) }
  form { name = "sad." .. t, op = "sad", sig = { D = t, A = t, B = t, C = t },
         ref = iref(t, function(x, y, z, w, s)
           if s then return (x < y and y - x or x - y) + z end
           if w < 64 then return math.abs(x - y) + z end
           return (ult(x, y) and y - x or x - y) + z
         end) }
  if signed(t) then
    form { name = "abs." .. t, op = "abs", sig = { D = t, A = t },
           ref = iref(t, function(x) return x < 0 and -x or x end) }
    form { name = "neg." .. t, op = "neg", sig = { D = t, A = t },
           ref = iref(t, function(x) return -x end) }
  end
end)
form { name = "add.sat.s32", op = "add", sig = { D = "s32", A = "s32", B = "s32" },
       ref = iref("s32", function(x, y) return sat_s32(x + y) end) }
form { name = "sub.sat.s32", op = "sub", sig = { D = "s32", A = "s32", B = "s32" },
       ref = iref("s32", function(x, y) return sat_s32(x - y) end) }
form { name = "mad.hi.sat.s32", op = "mad", sig = { D = "s32", A = "s32", B = "s32", C = "s32" },
       ref = iref("s32", function(x, y, z) return sat_s32(x * y // (1 << 32) + z) end) }
each({ "u32", "s32" }, function(t)
  form { name = "mul24.lo." .. t, op = "mul24", sig = { D = t, A = t, B = t },
         ref = iref(t, function(x, y)
           if signed(t) then return sext(x, 24) * sext(y, 24) end
           return (x & 0xffffff) * (y & 0xffffff)
         end) }
  form { name = "mul24.hi." .. t, op = "mul24", sig = { D = t, A = t, B = t } }
  form { name = "mad24.lo." .. t, op = "mad24", sig = { D = t, A = t, B = t, C = t } }
  form { name = "mad24.hi." .. t, op = "mad24", sig = { D = t, A = t, B = t, C = t } }
end)

-- Extended precision: a chain sets the carry (.cc) and another reads it.
each({ "u32", "s32", "u64", "s64" }, function(t)
  local w = w_of(t)
  local function carry_add(x, y, cin)
    local s = (x + y + cin) & mask(w)
    local c = (ult(s, x & mask(w)) or (cin == 1 and s == x & mask(w))) and 1 or 0
    if w == 32 then c = ((x & mask(w)) + (y & mask(w)) + cin) >> 32 end
    return s, c
  end
  local function carry_sub(x, y, bin) -- x - y - borrow; borrow out
    local d = (x - y - bin) & mask(w)
    local xm, ym = x & mask(w), y & mask(w)
    local b = (ult(xm, ym) or (bin == 1 and xm == ym)) and 1 or 0
    return d, b
  end
  form { name = "add.cc." .. t, op = "add.cc", sig = { D = t, A = t, B = t, C = t, Q = t },
         body = ("add.cc.%s %%D, %%A, %%B; addc.%s %%Q, %%C, %%C;"):format(t, t),
         ref = function(a, b, c)
           local s, cy = carry_add(a, b, 0)
           return s, (carry_add(c, c, cy))
         end }
  form { name = "addc.cc." .. t, op = "addc.cc", sig = { D = t, A = t, B = t, C = t, Q = t },
         body = ("add.cc.%s %%Q, %%A, %%A; addc.cc.%s %%D, %%B, %%C; addc.%s %%Q, %%A, %%C;")
                :format(t, t, t),
         ref = function(a, b, c)
           local _, c1 = carry_add(a, a, 0)
           local s, c2 = carry_add(b, c, c1)
           return s, (carry_add(a, c, c2))
         end }
  form { name = "sub.cc." .. t, op = "sub.cc", sig = { D = t, A = t, B = t, C = t, Q = t },
         body = ("sub.cc.%s %%D, %%A, %%B; subc.%s %%Q, %%C, %%A;"):format(t, t),
         ref = function(a, b, c)
           local d, bw = carry_sub(a, b, 0)
           return d, (carry_sub(c, a, bw))
         end }
  form { name = "subc.cc." .. t, op = "subc.cc", sig = { D = t, A = t, B = t, C = t, Q = t },
         body = ("sub.cc.%s %%Q, %%A, %%B; subc.cc.%s %%D, %%B, %%C; subc.%s %%Q, %%C, %%A;")
                :format(t, t, t),
         ref = function(a, b, c)
           local _, b1 = carry_sub(a, b, 0)
           local d, b2 = carry_sub(b, c, b1)
           return d, (carry_sub(c, a, b2))
         end }
  each({ "lo", "hi" }, function(h)
    local function prod(x, y)
      local xs, ys = x & mask(w), y & mask(w)
      if signed(t) then xs, ys = sext(xs, w), sext(ys, w) end
      return h == "lo" and xs * ys or mulhi(xs, ys, w, signed(t))
    end
    form { name = ("mad.%s.cc.%s"):format(h, t), op = "mad.cc",
           sig = { D = t, A = t, B = t, C = t, Q = t },
           body = ("mad.%s.cc.%s %%D, %%A, %%B, %%C; addc.%s %%Q, %%C, %%C;"):format(h, t, t),
           ref = function(a, b, c)
             local s, cy = carry_add(prod(a, b), c, 0)
             return s, (carry_add(c, c, cy))
           end }
    form { name = ("madc.%s.cc.%s"):format(h, t), op = "madc.cc",
           sig = { D = t, A = t, B = t, C = t, Q = t },
           body = ("add.cc.%s %%Q, %%A, %%A; madc.%s.cc.%s %%D, %%A, %%B, %%C; addc.%s %%Q, %%C, %%B;")
                  :format(t, h, t, t),
           ref = function(a, b, c)
             local _, c1 = carry_add(a, a, 0)
             local s, c2 = carry_add(prod(a, b), c, c1)
             return s, (carry_add(c, b, c2))
           end }
  end)
end)

-- Bits.
each(BITS, function(t)
  local w = w_of(t)
  form { name = "and." .. t, op = "and", sig = { D = t, A = t, B = t },
         ref = function(a, b) return a & b & mask(w) end }
  form { name = "or." .. t, op = "or", sig = { D = t, A = t, B = t },
         ref = function(a, b) return (a | b) & mask(w) end }
  form { name = "xor." .. t, op = "xor", sig = { D = t, A = t, B = t },
         ref = function(a, b) return (a ~ b) & mask(w) end }
  form { name = "not." .. t, op = "not", sig = { D = t, A = t },
         ref = function(a) return ~a & mask(w) end }
  form { name = "cnot." .. t, op = "cnot", sig = { D = t, A = t },
         ref = function(a) return a & mask(w) == 0 and 1 or 0 end }
  form { name = "shl." .. t, op = "shl", sig = { D = t, A = t, B = "sh" },
         ref = function(a, b) b = b & 0xffffffff; return b >= w and 0 or (a << b) & mask(w) end }
  form { name = "mov." .. t, op = "mov", sig = { D = t, A = t },
         ref = function(a) return a & mask(w) end }
end)
each({ "b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64" }, function(t)
  local w = w_of(t)
  form { name = "shr." .. t, op = "shr", sig = { D = t, A = t, B = "sh" },
         ref = function(a, b)
           b = b & 0xffffffff
           if signed(t) then
             local x = sext(a, w)
             return (b >= w and (x < 0 and -1 or 0) or x >> b | (x < 0 and ~(M64 >> b) or 0))
                    & mask(w)
           end
           return b >= w and 0 or (a & mask(w)) >> b
         end }
end)
each({ "pred" }, function(t)
  form { name = "and." .. t, op = "and", sig = { D = t, A = t, B = t },
         ref = function(a, b) return a & b end }
  form { name = "or." .. t, op = "or", sig = { D = t, A = t, B = t },
         ref = function(a, b) return a | b end }
  form { name = "xor." .. t, op = "xor", sig = { D = t, A = t, B = t },
         ref = function(a, b) return a ~ b end }
  form { name = "not." .. t, op = "not", sig = { D = t, A = t },
         ref = function(a) return 1 - a end }
end)
each({ "b32", "b64" }, function(t)
  local w = w_of(t)
  form { name = "popc." .. t, op = "popc", sig = { D = "u32", A = t },
         ref = function(a)
           local n = 0
           for i = 0, w - 1 do n = n + (a >> i & 1) end
           return n
         end }
  form { name = "clz." .. t, op = "clz", sig = { D = "u32", A = t },
         ref = function(a)
           for i = w - 1, 0, -1 do if a >> i & 1 == 1 then return w - 1 - i end end
           return w
         end }
  form { name = "brev." .. t, op = "brev", sig = { D = t, A = t },
         ref = function(a)
           local r = 0
           for i = 0, w - 1 do r = r | (a >> i & 1) << (w - 1 - i) end
           return r
         end }
  form { name = "bfi." .. t, op = "bfi", sig = { D = t, A = t, B = t, C = "sh", E = "sh" },
         ref = function(a, b, c, e)
           local fm = w == 64 and 0xffffffff or 0xff -- the 64-bit forms: all 32 bits
           local pos, len = c & fm, e & fm
           local r = b & mask(w)
           for i = 0, len - 1 do
             if pos + i >= w then break end
             r = (r & ~(1 << (pos + i))) | (a >> i & 1) << (pos + i)
           end
           return r & mask(w)
         end }
end)
each({ "u32", "u64", "s32", "s64" }, function(t)
  local w = w_of(t)
  form { name = "bfe." .. t, op = "bfe", sig = { D = t, A = t, B = "sh", C = "sh" },
         ref = function(a, b, c)
           local fm = w == 64 and 0xffffffff or 0xff -- as an H200 reads them
           local pos, len = b & fm, c & fm
           local sbit
           if not signed(t) or len == 0 then sbit = 0
           else sbit = a >> math.min(pos + len - 1, w - 1) & 1 end
           local r = 0
           for i = 0, w - 1 do
             local bit = (i < len and pos + i < w) and (a >> (pos + i) & 1) or sbit
             r = r | bit << i
           end
           return r & mask(w)
         end }
  each({ "", ".shiftamt" }, function(m)
    form { name = "bfind" .. m .. "." .. t, op = "bfind", sig = { D = "u32", A = t },
           ref = function(a)
             local x = a & mask(w)
             if signed(t) and sext(x, w) < 0 then x = ~x & mask(w) end
             for i = w - 1, 0, -1 do
               if x >> i & 1 == 1 then return m == "" and i or w - 1 - i end
             end
             return 0xffffffff
           end }
  end)
end)
each({ "l", "r" }, function(dir)
  each({ "wrap", "clamp" }, function(mode)
    form { name = ("shf.%s.%s.b32"):format(dir, mode), op = "shf",
           sig = { D = "b32", A = "b32", B = "b32", C = "sh" },
           ref = function(a, b, c)
             local n = mode == "wrap" and c & 31 or math.min(c & 0xffffffff, 32)
             local v = (b & 0xffffffff) << 32 | (a & 0xffffffff)
             if dir == "l" then return (v << n) >> 32 & 0xffffffff end
             return (v >> n) & 0xffffffff
           end }
  end)
  each({ "wrap", "clamp" }, function(_) end)
end)
each({ "wrap", "clamp" }, function(mode)
  form { name = "bmsk." .. mode .. ".b32", op = "bmsk", sig = { D = "b32", A = "sh", B = "sh" },
         ref = function(a, b)
           local pos, len = a & 0xffffffff, b & 0xffffffff
           if mode == "wrap" then pos, len = pos & 31, len & 31
           else pos, len = math.min(pos, 32), math.min(len, 32) end
           if pos >= 32 then return 0 end
           return (mask(math.min(len, 32 - pos)) << pos) & 0xffffffff
         end }
  each({ "u32", "s32" }, function(t)
    form { name = ("szext.%s.%s"):format(mode, t), op = "szext", sig = { D = t, A = t, B = "sh" },
           ref = function(a, b)
             local n = b & 0xffffffff
             if mode == "wrap" then n = n & 31 else n = math.min(n, 32) end
             if n == 32 then return a & 0xffffffff end
             local x = a & mask(n)
             if signed(t) and n > 0 then x = sext(x, n) end
             return x & 0xffffffff
           end }
  end)
end)
form { name = "prmt.b32", op = "prmt", sig = { D = "b32", A = "b32", B = "b32", C = "b32" },
       ref = function(a, b, c)
         local v = (b & 0xffffffff) << 32 | (a & 0xffffffff)
         local r = 0
         for i = 0, 3 do
           local sel = c >> (4 * i) & 0xf
           local byte = v >> (8 * (sel & 7)) & 0xff
           if sel & 8 ~= 0 then byte = (byte >> 7 & 1) * 0xff end
           r = r | byte << (8 * i)
         end
         return r
       end }
do
  local luts = { 0x00, 0xff, 0x96, 0xe8, 0x80, 0xfe, 0x1e, 0x3c, 0xca, 0xf0, 0xcc, 0xaa,
                 0x01, 0x7f, 0x6a, 0x2b }
  local body = {}
  for i, l in ipairs(luts) do
    body[i] = ("lop3.b32 %%T, %%A, %%B, %%C, 0x%02x; xor.b32 %%D, %%D, %%T; shf.l.wrap.b32 %%D, %%D, %%D, 5;")
              :format(l)
  end
  form { name = "lop3.b32", op = "lop3", sig = { D = "b32", A = "b32", B = "b32", C = "b32" },
         body = "mov.b32 %D, 0; " .. table.concat(body, " "),
         ref = function(a, b, c)
           local d = 0
           for _, l in ipairs(luts) do
             local t = 0
             for i = 0, 31 do
               local idx = (a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1)
               t = t | (l >> idx & 1) << i
             end
             d = (d ~ t) & 0xffffffff
             d = (d << 5 | d >> 27) & 0xffffffff
           end
           return d
         end }
end

-- Floating point references: exact where f64 arithmetic gives the
-- correctly rounded result (f64 .rn itself; f32 .rn of +, -, *, /, sqrt
-- through f64, whose 53 bits round once more without error since 53 >=
-- 2 * 24 + 2).
local FMIN32 = 2.0 ^ -126
local function ftz32(v) if v ~= 0 and math.abs(v) < FMIN32 then return v < 0 and -0.0 or 0.0 end return v end
local function f32_op(fn, ftz, sat)
  return function(a, b, c)
    local x, y, z = f32v(a), b and f32v(b), c and f32v(c)
    if ftz then x, y, z = ftz32(x), y and ftz32(y), z and ftz32(z) end
    local e = fn(x, y, z)
    local r = f32v(f32b(e))
    -- .ftz flushes what is tiny before rounding; .sat takes -0 to +0
    if ftz then r = ftz32(r); if e ~= 0 and math.abs(e) < FMIN32 then r = e < 0 and -0.0 or 0.0 end end
    if sat then r = r ~= r and 0.0 or r <= 0 and 0.0 or r > 1 and 1.0 or r end
    return f32b(r)
  end
end
local function f64_op(fn)
  return function(a, b, c)
    return f64b(fn(f64v(a), b and f64v(b), c and f64v(c)))
  end
end

each({ "add", "sub", "mul" }, function(op)
  local fn = op == "add" and function(x, y) return x + y end
          or op == "sub" and function(x, y) return x - y end
          or function(x, y) return x * y end
  each(RND, function(r)
    each(opt("ftz"), function(z)
      each(opt("sat"), function(s)
        form { name = join(op, r, z, s, ".f32"), op = op, sig = { D = "f32", A = "f32", B = "f32" },
               ref = (r == "" or r == ".rn") and f32_op(fn, z ~= "", s ~= "") or nil }
      end)
    end)
    form { name = join(op, r, ".f64"), op = op, sig = { D = "f64", A = "f64", B = "f64" },
           ref = (r == "" or r == ".rn") and f64_op(fn) or nil }
  end)
  each(HALVES, function(t)
    local f16 = t == "f16" or t == "f16x2"
    each({ "", ".rn" }, function(r)
      each(f16 and opt("ftz") or { "" }, function(z)
        each(f16 and opt("sat") or { "" }, function(s)
          form { name = join(op, r, z, s, ".", t), op = op, sig = { D = t, A = t, B = t } }
        end)
      end)
    end)
  end)
end)
each(RND, function(r)
  each(opt("ftz"), function(z)
    each(opt("sat"), function(s)
      form { name = join("mad", r, z, s, ".f32"), op = "mad",
             sig = { D = "f32", A = "f32", B = "f32", C = "f32" } }
    end)
  end)
  form { name = join("mad", r, ".f64"), op = "mad", sig = { D = "f64", A = "f64", B = "f64", C = "f64" } }
end)
each(FRND, function(r)
  each(opt("ftz"), function(z)
    each(opt("sat"), function(s)
      form { name = join("fma", r, z, s, ".f32"), op = "fma",
             sig = { D = "f32", A = "f32", B = "f32", C = "f32" } }
    end)
  end)
  form { name = join("fma", r, ".f64"), op = "fma", sig = { D = "f64", A = "f64", B = "f64", C = "f64" } }
end)
each(HALVES, function(t)
  local f16 = t == "f16" or t == "f16x2"
  each(f16 and opt("ftz") or { "" }, function(z)
    each(f16 and { "", ".sat", ".relu" } or { "", ".relu" }, function(s)
      form { name = join("fma.rn", z, s, ".", t), op = "fma", sig = { D = t, A = t, B = t, C = t } }
    end)
  end)
  each(f16 and opt("ftz") or { "" }, function(z)
    form { name = join("neg", z, ".", t), op = "neg", sig = { D = t, A = t } }
    form { name = join("abs", z, ".", t), op = "abs", sig = { D = t, A = t } }
    each({ "min", "max" }, function(op)
      each({ "", ".NaN", ".xorsign.abs", ".NaN.xorsign.abs" }, function(m)
        form { name = join(op, z, m, ".", t), op = op, sig = { D = t, A = t, B = t } }
      end)
    end)
  end)
end)

-- Division, reciprocals, roots and approximate math. The bounds are the
-- PTX ISA's, for the instruction's result against the exact value:
-- rel: relative error; ulp: units in the last place of f32; abs: absolute.
local APPROX = {
  ["div.approx"] = { ulp = 2, note = "2 ulp for |b| in [2^-126, 2^126]", range = "div" },
  ["div.full"] = { ulp = 2, note = "2 ulp over the full range" },
  ["rcp.approx"] = { ulp = 1, note = "1 ulp over the full range" },
  ["rcp.approx.f64"] = { rel = 2.0 ^ -20,
                         note = "relative 2^-20 (assumed: the ISA gives no figure here)" },
  ["sqrt.approx"] = { rel = 2.0 ^ -23, note = "relative 2^-23" },
  ["rsqrt.approx"] = { rel = 2.0 ^ -22.9, note = "relative 2^-22.9" },
  ["rsqrt.approx.f64"] = { rel = 2.0 ^ -20,
                           note = "relative 2^-20 (assumed: the ISA gives no figure here)" },
  ["ex2.approx"] = { rel = 2.0 ^ -22.5, note = "relative 2^-22.5 (2 ulp with .ftz)" },
  ["lg2.approx"] = { abs = 2.0 ^ -22.6, note = "absolute 2^-22.6 on the mantissa" },
  -- the ISA's 2^-20.5; measured on an H200, the reduction of the argument
  -- in f32 adds up to |x| 2^-22 away from [-pi, pi]
  ["sin.approx"] = { abs = 2.0 ^ -20.5, per_x = 2.0 ^ -22, limit = 100 * math.pi,
                     note = "absolute 2^-20.5 + |x| 2^-22 in [-100 pi, 100 pi]" },
  ["cos.approx"] = { abs = 2.0 ^ -20.5, per_x = 2.0 ^ -22, limit = 100 * math.pi,
                     note = "absolute 2^-20.5 + |x| 2^-22 in [-100 pi, 100 pi]" },
  ["tanh.approx"] = { rel = 2.0 ^ -10.987, note = "relative 2^-10.987" },
}
F.APPROX = APPROX

local TRUE = {
  ex2 = function(x) return 2.0 ^ x end,
  lg2 = function(x) return x < 0 and 0 / 0 or x == 0 and -math.huge or math.log(x, 2) end,
  sin = math.sin, cos = math.cos,
  tanh = function(x)
    if x > 20 then return 1.0 elseif x < -20 then return -1.0 end
    local e = math.exp(2 * x)
    return x == 0 and x or (e - 1) / (e + 1)
  end,
  rcp = function(x) return 1 / x end,
  sqrt = function(x) return x < 0 and 0 / 0 or math.sqrt(x) end,
  rsqrt = function(x) return x < 0 and 0 / 0 or 1 / math.sqrt(x) end,
  div = function(x, y) return x / y end,
}
F.TRUE = TRUE

each({ "", ".ftz" }, function(z)
  each({ ".approx", ".full" }, function(m)
    form { name = join("div", m, z, ".f32"), op = "div", sig = { D = "f32", A = "f32", B = "f32" },
           approx = APPROX["div" .. m], truth = TRUE.div, ftz = z ~= "" }
  end)
  each(FRND, function(r)
    form { name = join("div", r, z, ".f32"), op = "div", sig = { D = "f32", A = "f32", B = "f32" },
           ref = r == ".rn" and f32_op(function(x, y) return x / y end, z ~= "") or nil }
    form { name = join("rcp", r, z, ".f32"), op = "rcp", sig = { D = "f32", A = "f32" },
           ref = r == ".rn" and f32_op(function(x) return 1 / x end, z ~= "") or nil }
    form { name = join("sqrt", r, z, ".f32"), op = "sqrt", sig = { D = "f32", A = "f32" },
           ref = r == ".rn" and f32_op(TRUE.sqrt, z ~= "") or nil }
  end)
  each({ "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh" }, function(op)
    form { name = join(op, ".approx", z, ".f32"), op = op, sig = { D = "f32", A = "f32" },
           approx = APPROX[op .. ".approx"], truth = TRUE[op], ftz = z ~= "" }
  end)
end)
each(FRND, function(r)
  form { name = join("div", r, ".f64"), op = "div", sig = { D = "f64", A = "f64", B = "f64" },
         ref = r == ".rn" and f64_op(function(x, y) return x / y end) or nil }
  form { name = join("rcp", r, ".f64"), op = "rcp", sig = { D = "f64", A = "f64" },
         ref = r == ".rn" and f64_op(function(x) return 1 / x end) or nil }
  form { name = join("sqrt", r, ".f64"), op = "sqrt", sig = { D = "f64", A = "f64" },
         ref = r == ".rn" and f64_op(TRUE.sqrt) or nil }
end)
form { name = "rcp.approx.ftz.f64", op = "rcp", sig = { D = "f64", A = "f64" },
       approx = APPROX["rcp.approx.f64"], truth = TRUE.rcp, ftz = true, hi = true }
each({ "", ".ftz" }, function(z)
  form { name = join("rsqrt.approx", z, ".f64"), op = "rsqrt", sig = { D = "f64", A = "f64" },
         approx = APPROX["rsqrt.approx.f64"], truth = TRUE.rsqrt, ftz = z ~= "", hi = z ~= "" }
end)

-- abs, neg, min, max, copysign, testp of f32 and f64.
local function fminmax(op, nan_mode, xorsign, w)
  local to, from = w == 32 and f32v or f64v, w == 32 and f32b or f64b
  local canon = w == 32 and 0x7fffffff or 0x7fffffffffffffff
  local signbit = 1 << (w - 1)
  return function(a, b)
    local x, y = to(a), to(b)
    local r
    if x ~= x and y ~= y then return nan_mode and canon or canon end
    if x ~= x or y ~= y then
      if nan_mode then return canon end
      r = x ~= x and b or a
    elseif x == y and x == 0 then -- -0 < +0
      local neg = (a & signbit ~= 0)
      if op == "min" then r = (neg or (b & signbit ~= 0)) and from(-0.0) or from(0.0)
      else r = (neg and (b & signbit ~= 0)) and from(-0.0) or from(0.0) end
    else
      r = (op == "min") == (x < y) and a or b
    end
    r = r & mask(w)
    if xorsign then
      r = (r & ~signbit | ((a ~ b) & signbit)) & mask(w)
    end
    return r
  end
end
each({ "f32", "f64" }, function(t)
  local w = w_of(t)
  local zs = t == "f32" and opt("ftz") or { "" }
  each(zs, function(z)
    form { name = join("abs", z, ".", t), op = "abs", sig = { D = t, A = t },
           ref = z == "" and function(a) return a & mask(w) & ~(1 << (w - 1)) end or nil }
    form { name = join("neg", z, ".", t), op = "neg", sig = { D = t, A = t },
           ref = z == "" and function(a) return (a ~ (1 << (w - 1))) & mask(w) end or nil }
    each({ "min", "max" }, function(op)
      local mods = t == "f32" and { "", ".NaN", ".xorsign.abs", ".NaN.xorsign.abs" } or { "" }
      each(mods, function(m)
        form { name = join(op, z, m, ".", t), op = op, sig = { D = t, A = t, B = t },
               ref = z == "" and m ~= ".xorsign.abs" and m ~= ".NaN.xorsign.abs"
                     and fminmax(op, m == ".NaN", false, w) or nil }
      end)
    end)
  end)
  form { name = "copysign." .. t, op = "copysign", sig = { D = t, A = t, B = t },
         ref = function(a, b)
           local sb = 1 << (w - 1)
           return ((b & ~sb) | (a & sb)) & mask(w)
         end }
  each({ "finite", "infinite", "number", "notanumber", "normal", "subnormal" }, function(m)
    form { name = ("testp.%s.%s"):format(m, t), op = "testp", sig = { D = "pred", A = t },
           ref = function(a)
             local e = w == 32 and a >> 23 & 0xff or a >> 52 & 0x7ff
             local emax = w == 32 and 0xff or 0x7ff
             local frac = a & (w == 32 and 0x7fffff or 0xfffffffffffff)
             local r = ({ finite = e ~= emax, infinite = e == emax and frac == 0,
                          number = not (e == emax and frac ~= 0),
                          notanumber = e == emax and frac ~= 0,
                          normal = e ~= emax and not (e == 0 and frac ~= 0), -- zeros too
                          subnormal = e == 0 and frac ~= 0 })[m]
             return r and 1 or 0
           end }
  end)
end)

-- Comparisons: setp (p|q), set, slct.
local ICMP = { "eq", "ne", "lt", "le", "gt", "ge" }
local UCMP = { "eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs" }
local FCMP = { "eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu",
               "geu", "num", "nan" }
local function cmp_of(t, c)
  local w = w_of(t)
  local float = t:sub(1, 1) == "f" or t:sub(1, 2) == "bf"
  if float and (t == "f32" or t == "f64") then
    local to = t == "f32" and f32v or f64v
    return function(a, b)
      local x, y = to(a), to(b)
      local un = x ~= x or y ~= y
      local base = c:gsub("u$", "")
      if c == "num" then return not un elseif c == "nan" then return un end
      if un then return c:sub(-1) == "u" and #c == 3 end
      return ({ eq = x == y, ne = x ~= y, lt = x < y, le = x <= y, gt = x > y,
                ge = x >= y })[base]
    end
  end
  if float then return nil end
  return function(a, b)
    local x, y = a & mask(w), b & mask(w)
    local s = signed(t)
    if s then x, y = sext(x, w), sext(y, w) end
    local lt = (s or w < 64) and x < y or (not s and w == 64 and ult(x, y))
    local eq = x == y
    return ({ eq = eq, ne = not eq, lt = lt, le = lt or eq, gt = not lt and not eq,
              ge = not lt, lo = lt, ls = lt or eq, hi = not lt and not eq, hs = not lt })[c]
  end
end
local SETP_TYPES = { "b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64",
                     "f32", "f64", "f16", "bf16", "f16x2", "bf16x2" }
each(SETP_TYPES, function(t)
  local cmps = (t:sub(1, 1) == "f" or t:sub(1, 2) == "bf") and FCMP
               or t:sub(1, 1) == "u" and UCMP or t:sub(1, 1) == "s" and ICMP or { "eq", "ne" }
  local zs = (t == "f32" or t == "f16" or t == "f16x2") and opt("ftz") or { "" }
  local pair = t == "f16x2" or t == "bf16x2"
  local half = t == "f16" or t == "bf16"
  local dq = half and "%%D" or "%%D|%%Q"
  local qsig = not half and "pred" or nil
  each(cmps, function(c)
    each(zs, function(z)
      local cf = z == "" and cmp_of(t, c)
      form { name = ("setp.%s%s.%s"):format(c, z, t), op = "setp",
             sig = { D = "pred", Q = qsig, A = t, B = t },
             body = ("setp.%s%s.%s " .. dq .. ", %%A, %%B;"):format(c, z, t),
             ref = cf and function(a, b)
               local r = cf(a, b)
               return r and 1 or 0, r and 0 or 1
             end or nil }
      each({ "and", "or", "xor" }, function(bop)
        form { name = ("setp.%s.%s%s.%s"):format(c, bop, z, t), op = "setp",
               sig = { D = "pred", Q = qsig, A = t, B = t, C = "pred" },
               body = ("setp.%s.%s%s.%s " .. dq .. ", %%A, %%B, %%C;"):format(c, bop, z, t),
               ref = cf and function(a, b, p)
                 local r = cf(a, b) and 1 or 0
                 local function comb(x, y)
                   return bop == "and" and x & y or bop == "or" and x | y or x ~ y
                 end
                 return comb(r, p), comb(1 - r, p)
               end or nil }
      end)
      if not pair then
        each({ "u32", "s32", "f32" }, function(dt)
          form { name = ("set.%s%s.%s.%s"):format(c, z, dt, t), op = "set",
                 sig = { D = dt, A = t, B = t },
                 ref = cf and function(a, b)
                   local r = cf(a, b)
                   if dt == "f32" then return r and 0x3f800000 or 0 end
                   return r and 0xffffffff or 0
                 end or nil }
        end)
        form { name = ("set.%s.and%s.u32.%s"):format(c, z, t), op = "set",
               sig = { D = "u32", A = t, B = t, C = "pred" },
               ref = cf and function(a, b, p)
                 return (cf(a, b) and p == 1) and 0xffffffff or 0
               end or nil }
      end
    end)
  end)
end)
each({ "b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64", "f32", "f64" }, function(t)
  local w = w_of(t)
  form { name = "slct." .. t .. ".s32", op = "slct", sig = { D = t, A = t, B = t, C = "s32" },
         ref = function(a, b, c) return (sext(c, 32) >= 0 and a or b) & mask(w) end }
  each(opt("ftz"), function(z)
    form { name = ("slct%s.%s.f32"):format(z, t), op = "slct", sig = { D = t, A = t, B = t, C = "f32" },
           ref = z == "" and function(a, b, c)
             local v = f32v(c)
             return (v >= 0 and a or b) & mask(w)
           end or nil }
  end)
end)
each({ "f32", "f64", "u16", "u32", "u64", "s16", "s32", "s64", "b16", "b32", "b64" }, function(t)
  form { name = "selp." .. t, op = "selp", sig = { D = t, A = t, B = t, C = "pred" },
         ref = function(a, b, c) return (c == 1 and a or b) & mask(w_of(t)) end }
end)

-- cvt: between integers (.sat), floats to integers (an integer rounding
-- required), integers to floats and floats to narrower floats (a float
-- rounding), floats to wider (none), a float to its own type (an integer
-- rounding).
local CINT = { "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64" }
local CFLT = { "f16", "bf16", "f32", "f64" }
local function bits_of(t) return ({ u8 = 8, s8 = 8 })[t] or w_of(t) end
local function int_range(t)
  local b = bits_of(t)
  if signed(t) then return -(1 << (b - 1)), (1 << (b - 1)) - 1 end
  return 0, b == 64 and M64 or (1 << b) - 1
end
each(CINT, function(dt)
  each(CINT, function(st)
    each(opt("sat"), function(s)
      -- an 8-bit result: the reference checks its 8 bits (the rest of the
      -- 16-bit register only the GPU's results pin down)
      form { name = ("cvt%s.%s.%s"):format(s, dt, st), op = "cvt", sig = { D = dt, A = st },
             dmask = bits_of(dt) == 8 and 0xff or nil,
             ref = function(a)
               local sb, db = bits_of(st), bits_of(dt)
               local x = a & mask(sb)
               if signed(st) then x = sext(x, sb) end
               if s ~= "" then -- clamped to the result's range
                 local lo, hi = int_range(dt)
                 if signed(st) then
                   if x < lo then x = lo end
                   if dt ~= "u64" and x > hi then x = hi end
                 elseif dt ~= "u64" and ult(hi, x) then
                   x = hi
                 end
               end
               -- an 8-bit result in its 16-bit register: as its type extends it
               local r = x & mask(db)
               if db == 8 then r = (signed(dt) and sext(r, 8) or r) & 0xffff end
               return r & mask(w_of(dt))
             end }
    end)
  end)
  each(CFLT, function(ft)
    each(IRND, function(r)
      each(ft == "f32" and opt("ftz") or { "" }, function(z)
        each(opt("sat"), function(s)
          form { name = ("cvt%s%s%s.%s.%s"):format(r, z, s, dt, ft), op = "cvt", sig = { D = dt, A = ft } }
        end)
      end)
    end)
    each(FRND, function(r)
      each(ft == "f32" and opt("ftz") or { "" }, function(z)
        each(opt("sat"), function(s)
          form { name = ("cvt%s%s%s.%s.%s"):format(r, z, s, ft, dt), op = "cvt", sig = { D = ft, A = dt },
                 ref = (r == ".rn" and ft == "f64" and s == "" and bits_of(dt) < 64)
                       and function(a)
                         local x = a & mask(bits_of(dt))
                         if signed(dt) then x = sext(x, bits_of(dt)) end
                         return f64b(x + 0.0)
                       end or nil }
        end)
      end)
    end)
  end)
end)
each(CFLT, function(dt)
  each(CFLT, function(st)
    local narrow = w_of(dt) < w_of(st) or (dt == "f16" and st == "bf16") or (dt == "bf16" and st == "f16")
    local rnds = dt == st and IRND or narrow and FRND or { "" }
    each(rnds, function(r)
      each((dt == "f32" or st == "f32") and opt("ftz") or { "" }, function(z)
        each(opt("sat"), function(s)
          form { name = ("cvt%s%s%s.%s.%s"):format(r, z, s, dt, st), op = "cvt", sig = { D = dt, A = st },
                 ref = (dt == "f32" and st == "f64" and r == ".rn" and z == "" and s == "")
                       and function(a) return f32b(f64v(a)) end
                       or (dt == "f64" and st == "f32" and z == "" and s == "")
                       and function(a) return f64b(f32v(a)) end or nil }
        end)
      end)
    end)
  end)
  if dt == "f16" or dt == "bf16" then
    each({ ".rn", ".rz" }, function(r)
      each({ ".relu", ".satfinite", ".relu.satfinite" }, function(m)
        form { name = ("cvt%s%s.%s.f32"):format(r, m, dt), op = "cvt", sig = { D = dt, A = "f32" } }
      end)
      each({ "", ".relu", ".satfinite", ".relu.satfinite" }, function(m)
        form { name = ("cvt%s%s.%sx2.f32"):format(r, m, dt), op = "cvt",
               sig = { D = dt .. "x2", A = "f32", B = "f32" } }
      end)
    end)
  end
end)

-- Warp instructions: lanes of a warp run the instruction together under a
-- member mask, some lanes away (they skip it); %E is the warp's mask of
-- the lanes that run it.
local function lanes_of(m) local t = {} for l = 0, 31 do if m >> l & 1 == 1 then t[#t + 1] = l end end return t end
F.lanes_of = lanes_of
each({ "up", "down", "bfly", "idx" }, function(mode)
  form { name = ("shfl.sync.%s.b32"):format(mode), op = "shfl", warp = true,
         sig = { D = "b32", Q = "pred", A = "b32", B = "sh", C = "b32", E = "b32" },
         body = ("shfl.sync.%s.b32 %%D|%%Q, %%A, %%B, %%C, %%E;"):format(mode),
         -- lane: this lane; vals: every lane's a (nil for lanes away)
         wref = function(lane, _, b, c, mk, vals)
           local cl, seg = c & 31, c >> 8 & 31
           local minl = lane & seg
           local maxl = (lane & seg) | (cl & ~seg)
           local j, pval
           b = b & 31
           if mode == "up" then j = lane - b; pval = j >= maxl
           elseif mode == "down" then j = lane + b; pval = j <= maxl
           elseif mode == "bfly" then j = lane ~ b; pval = j <= maxl
           else j = minl | (b & ~seg); pval = j <= maxl end
           if not pval then j = lane end
           if mk >> j & 1 == 0 or vals[j] == nil then return nil end
           return vals[j], pval and 1 or 0
         end }
end)
each({ "all", "any", "uni" }, function(mode)
  form { name = ("vote.sync.%s.pred"):format(mode), op = "vote", warp = true,
         sig = { D = "pred", A = "pred", E = "b32" },
         wref = function(_, _, _, _, mk, vals)
           local all, any = 1, 0
           for _, l in ipairs(lanes_of(mk)) do
             all, any = all & vals[l], any | vals[l]
           end
           return mode == "all" and all or mode == "any" and any or (all == any and 1 or 0)
         end }
end)
form { name = "vote.sync.ballot.b32", op = "vote", warp = true,
       sig = { D = "b32", A = "pred", E = "b32" },
       wref = function(_, _, _, _, mk, vals)
         local r = 0
         for _, l in ipairs(lanes_of(mk)) do r = r | vals[l] << l end
         return r
       end }
each({ { "add", "u32" }, { "add", "s32" }, { "min", "u32" }, { "min", "s32" }, { "max", "u32" },
       { "max", "s32" }, { "and", "b32" }, { "or", "b32" }, { "xor", "b32" } }, function(p)
  local op, t = p[1], p[2]
  form { name = ("redux.sync.%s.%s"):format(op, t), op = "redux", warp = true,
         sig = { D = t, A = t, E = "b32" },
         wref = function(_, _, _, _, mk, vals)
           local r
           for _, l in ipairs(lanes_of(mk)) do
             local v = vals[l] & 0xffffffff
             if t == "s32" then v = sext(v, 32) end
             if not r then r = v
             elseif op == "add" then r = r + v
             elseif op == "min" then r = math.min(r, v)
             elseif op == "max" then r = math.max(r, v)
             elseif op == "and" then r = r & v
             elseif op == "or" then r = r | v
             else r = r ~ v end
           end
           return r & 0xffffffff
         end }
end)
each({ "b32", "b64" }, function(t)
  form { name = "match.any.sync." .. t, op = "match", warp = true,
         sig = { D = "b32", A = t, E = "b32" },
         wref = function(lane, _, _, _, mk, vals)
           local r = 0
           for _, l in ipairs(lanes_of(mk)) do
             if vals[l] == vals[lane] then r = r | 1 << l end
           end
           return r
         end }
  form { name = "match.all.sync." .. t, op = "match", warp = true,
         sig = { D = "b32", Q = "pred", A = t, E = "b32" },
         body = ("match.all.sync.%s %%D|%%Q, %%A, %%E;"):format(t),
         wref = function(lane, _, _, _, mk, vals)
           for _, l in ipairs(lanes_of(mk)) do
             if vals[l] ~= vals[lane] then return 0, 0 end
           end
           return mk, 1
         end }
end)
form { name = "activemask.b32", op = "activemask", warp = true, sig = { D = "b32", E = "b32" },
       body = "bar.warp.sync %E; activemask.b32 %D;",
       wref = function(_, _, _, _, mk) return mk end }

F.forms = forms

-- Opcodes of the decoder's table (sim/ptx/ptx_ins.c) that have no value
-- forms here, and why.
F.EXCLUDED = {
  ld = "memory: spec/70 and spec/71 run loads and stores of every space",
  ldu = "memory: as ld", st = "memory: as ld",
  atom = "memory: spec/70's atomics kernel and spec/71 compare them",
  tex = "textures: need a texture object; spec/15 samples them on every driver",
  suld = "surfaces: as tex", sust = "surfaces: as tex",
  red = "memory: as atom",
  cvta = "addresses: the simulator's generic addresses are its own",
  isspacep = "addresses: as cvta",
  bar = "control: barriers (spec/70)", barrier = "control: as bar",
  membar = "no value: a fence", fence = "no value: a fence",
  bra = "control", call = "control", ret = "control", exit = "control", trap = "control",
  griddepcontrol = "control: programmatic launches (spec/75)",
  nanosleep = "no value", prefetch = "no value", prefetchu = "no value", pmevent = "no value",
  subc = "extended precision: in the sub.cc and subc.cc chains",
  addc = "extended precision: in the add.cc and addc.cc chains",
  madc = "extended precision: in the madc chains",
}

-- Opcodes the forms cover (the word before the first dot).
function F.opcodes()
  local t = {}
  for _, f in ipairs(forms) do
    for word in f.body:gmatch("([%a%d_]+)[%.%s][^;]*;") do t[word] = true end
  end
  return t
end

-- The decoder's opcode table, read from sim/ptx/ptx_ins.c.
function F.decoder_opcodes(root)
  local src = assert(io.open((root or ".") .. "/sim/ptx/ptx_ins.c")):read("a")
  local tbl = assert(src:match("static int op_of.-ops%[%] = (%b{})"))
  local t = {}
  for name in tbl:gmatch('{"([%w_]+)", OP_') do t[#t + 1] = name end
  return t
end

-- The PTX of a group ------------------------------------------------------------

local REG = { [16] = "%h", [32] = "%r", [64] = "%l" }
local ROLE = { D = 0, A = 1, B = 2, C = 3, E = 4, Q = 5, T = 6 }
local ROLES = { "A", "B", "C", "E" }
local OUTS = { "D", "Q" }
F.ROLES, F.OUTS = ROLES, OUTS

local function reg(cls, role)
  if cls == "pred" then return "%p" .. ROLE[role] end
  return REG[WIDTH[cls]] .. ROLE[role]
end

-- The key of a form's operand signature: forms with one key share an entry.
local function sig_key(f)
  local parts = {}
  for _, r in ipairs({ "D", "Q", "A", "B", "C", "E" }) do
    parts[#parts + 1] = r .. "=" .. (f.sig[r] or "-")
  end
  return f.op:gsub("%.", "_") .. (f.warp and "_w" or "") .. "__" .. table.concat(parts, "_")
end

-- Groups of forms: { key, entry (its name), sig, forms = { ... } }, in a
-- fixed order.
function F.groups(list)
  local by, order = {}, {}
  for _, f in ipairs(list) do
    local k = sig_key(f)
    if not by[k] then
      by[k] = { key = k, sig = f.sig, warp = f.warp, forms = {} }
      order[#order + 1] = by[k]
    end
    table.insert(by[k].forms, f)
  end
  for i, g in ipairs(order) do g.entry = ("g%03d_%s"):format(i, g.forms[1].op:gsub("%.", "_")) end
  return order
end

local HEADER = ".version 8.3\n.target sm_90\n.address_size 64\n"

-- PTX of one entry running the given forms of a group.
function F.entry_ptx(g, list)
  local sig = g.sig
  local L = {}
  local function add(s) L[#L + 1] = s end
  add((".visible .entry %s(.param .u64 pin, .param .u64 pout, .param .u32 n)\n{"):format(g.entry))
  add(".reg .pred %p<8>; .reg .b16 %h<8>; .reg .b32 %r<12>; .reg .b64 %l<8>; .reg .b64 %x<6>;")
  add("mov.u32 %r8, %tid.x; mov.u32 %r9, %ctaid.x; mov.u32 %r10, %ntid.x;")
  add("mad.lo.u32 %r8, %r9, %r10, %r8; ld.param.u32 %r9, [n];")
  add("setp.ge.u32 %p7, %r8, %r9; @%p7 bra DONE;")
  add("ld.param.u64 %x0, [pin]; ld.param.u64 %x1, [pout]; cvta.to.global.u64 %x0, %x0;")
  add("cvta.to.global.u64 %x1, %x1; mul.wide.u32 %x2, %r8, 8; add.u64 %x0, %x0, %x2;")
  add("add.u64 %x1, %x1, %x2; mul.wide.u32 %x3, %r9, 8;")
  -- slot 0 of the inputs: 1 for a lane that runs the forms
  local slot = 0
  local function load(cls, role)
    local off = "%x0"
    if cls == "pred" then
      add(("ld.global.b32 %%r11, [%s]; setp.ne.b32 %s, %%r11, 0;"):format(off, reg(cls, role)))
    else
      add(("ld.global.b%d %s, [%s];"):format(WIDTH[cls], reg(cls, role), off))
    end
  end
  local function step_in() add("add.u64 %x0, %x0, %x3;") slot = slot + 1 end
  add("ld.global.b32 %r11, [%x0]; setp.eq.b32 %p6, %r11, 0;")
  for _, r in ipairs(ROLES) do
    step_in()
    if sig[r] then load(sig[r], r) end
  end
  if g.warp then add("@%p6 bra DONE;") end
  local tcls = sig.D ~= "pred" and sig.D or "b32"
  for _, f in ipairs(list) do
    local body = f.body:gsub("%%([DABCEQT])", function(r)
      if r == "T" then return reg(tcls, "T") end
      return reg(sig[r], r)
    end)
    add(body)
    for _, r in ipairs(OUTS) do
      if sig[r] then
        if sig[r] == "pred" then
          add(("selp.b32 %%r11, 1, 0, %s; st.global.b32 [%%x1], %%r11;"):format(reg("pred", r)))
        else
          add(("st.global.b%d [%%x1], %s;"):format(WIDTH[sig[r]], reg(sig[r], r)))
        end
      end
      add("add.u64 %x1, %x1, %x3;")
    end
  end
  add("DONE:\nret;\n}")
  return table.concat(L, "\n")
end

function F.module_ptx(g, list) return HEADER .. F.entry_ptx(g, list) .. "\n" end

-- Inputs of a group: n vectors of the sources' classes (and for warps a
-- lane pattern). Returns n and the input slots (1 + #ROLES rows of n).
local WARP_MASKS = { 0xffffffff, 0x55555555, 0x0000ffff, 0x00000001, 0x80000001, 0xf0f0f00f,
                     0x7fffffff, 0xfffffffe }
local input_cache = {}
function F.inputs(g)
  local key = sig_key({ op = "", sig = g.sig, warp = g.warp })
  local hit = input_cache[key]
  if hit then return hit[1], hit[2] end
  local n, rows = F.make_inputs(g)
  input_cache[key] = { n, rows }
  return n, rows
end

function F.make_inputs(g)
  local sig, srcs = g.sig, {}
  for _, r in ipairs(ROLES) do
    if sig[r] then srcs[#srcs + 1] = { role = r, vals = VALUES[sig[r]] } end
  end
  local rows = { run = {} }
  for _, r in ipairs(ROLES) do rows[r] = {} end
  local n = 0
  if g.warp then
    local seed = 7
    local function rnd(m) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % m end
    for w, mk in ipairs(WARP_MASKS) do
      for lane = 0, 31 do
        n = n + 1
        rows.run[n] = mk >> lane & 1
        for _, s in ipairs(srcs) do
          local v
          if s.role == "E" then v = mk
          elseif s.role == "B" then v = ({ 0, 1, 3, 16, 31, 5, 33, 8 })[w]
          elseif s.role == "C" then v = ({ 0x1f, 0x1f, 0x0f, 0, 0x1c1f, 0x181f, 0x1f, 0x101f })[w]
          elseif sig[s.role] == "pred" then v = w == 2 and 1 or rnd(2)
          else v = s.vals[rnd(#s.vals) + 1] & (({ [5] = 3, [6] = 0 })[w] or M64) end
          rows[s.role][n] = v
        end
      end
    end
    return n, rows
  end
  -- every combination of the first k edge values, then pseudo-random ones
  local k = #srcs <= 2 and 64 or #srcs == 3 and 12 or 7
  local idx = {}
  for i = 1, #srcs do idx[i] = 1 end
  local function limit(i) return math.min(k, #srcs[i].vals) end
  while #srcs > 0 do
    n = n + 1
    rows.run[n] = 1
    for i, s in ipairs(srcs) do rows[s.role][n] = s.vals[idx[i]] end
    local i = 1
    while i <= #srcs do
      idx[i] = idx[i] + 1
      if idx[i] <= limit(i) then break end
      idx[i] = 1
      i = i + 1
    end
    if i > #srcs then break end
  end
  if #srcs == 0 then n = 32; for i = 1, n do rows.run[i] = 1 end end
  local seed = 99
  local function rnd(m) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % m end
  if #srcs >= 3 then
    for _ = 1, 256 do
      n = n + 1
      rows.run[n] = 1
      for _, s in ipairs(srcs) do rows[s.role][n] = s.vals[rnd(#s.vals) + 1] end
    end
  end
  return n, rows
end

-- The input buffer's bytes: slot r of vector i at (r * n + i) * 8.
function F.input_bytes(n, rows)
  local parts = {}
  for _, r in ipairs({ "run", "A", "B", "C", "E" }) do
    for i = 1, n do parts[#parts + 1] = string.pack("<i8", rows[r][i] or 0) end
  end
  return table.concat(parts)
end

-- Probing and running -----------------------------------------------------------

-- Which forms the driver's PTX loader takes, each in an entry of its own:
-- accepted and refused lists (refused: { form, message }).
function F.probe(cuda, list)
  local ok, refused = {}, {}
  for _, f in ipairs(list or forms) do
    local g = F.groups({ f })[1]
    local good, m = pcall(cuda.module, F.module_ptx(g, { f }))
    if good then
      ok[#ok + 1] = f
      m:free()
    else
      refused[#refused + 1] = { form = f, message = tostring(m):match("PTX line %d+: (.*)") or tostring(m) }
    end
  end
  return ok, refused
end

local by_name
function F.by_name()
  if not by_name then
    by_name = {}
    for _, f in ipairs(forms) do by_name[f.name] = f end
  end
  return by_name
end

-- Runs the groups of the named forms on the current driver. Returns per
-- group { entry, key, forms = names, n, out = bytes } or { ..., error }.
-- A group the driver refuses as a whole is run form by form so that each
-- refusal is named.
function F.run(cuda, names)
  local byname, list = F.by_name(), {}
  for _, name in ipairs(names) do list[#list + 1] = assert(byname[name], name) end
  local s = cuda.stream()
  local results = {}
  local function launch(g, fl)
    local n, rows = F.inputs(g)
    local ok, m = pcall(cuda.module, F.module_ptx(g, fl))
    local names_of = {}
    for i, f in ipairs(fl) do names_of[i] = f.name end
    if not ok then return { entry = g.entry, forms = names_of, error = tostring(m) } end
    local input = cuda.buffer("u64", 5 * n)
    input:upload(F.input_bytes(n, rows))
    local out = cuda.buffer("u64", 2 * #fl * n):fill(0)
    local block = g.warp and 32 or 128
    m[g.entry]:launch(s, (n + block - 1) // block, block, input, out, n)
    s:synchronize()
    local r = { entry = g.entry, forms = names_of, n = n, out = out:download("string") }
    input:free()
    out:free()
    m:free()
    return r
  end
  for _, g in ipairs(F.groups(list)) do
    local r = launch(g, g.forms)
    if r.error and #g.forms > 1 then
      for _, f in ipairs(g.forms) do results[#results + 1] = launch(g, { f }) end
    else
      results[#results + 1] = r
    end
  end
  return results
end

-- Result files: a Lua chunk returning the results.
function F.write(path, results, extra)
  local f = assert(io.open(path, "w"))
  f:write("return {\n")
  for _, r in ipairs(results) do
    f:write(("{entry=%q, n=%s, forms={"):format(r.entry, r.n or "nil"))
    for _, name in ipairs(r.forms) do f:write(("%q,"):format(name)) end
    f:write("}")
    if r.out then f:write((", out=%q"):format(r.out)) end
    if r.error then f:write((", error=%q"):format(r.error)) end
    f:write("},\n")
  end
  if extra then f:write(("extra=%q,\n"):format(extra)) end
  f:write("}\n")
  f:close()
end

-- The bits form number k of a result wrote for vector i: D and Q.
function F.value(r, k, i)
  local base = ((k - 1) * 2 * r.n + (i - 1)) * 8 + 1
  return string.unpack("<i8", r.out, base), (string.unpack("<i8", r.out, base + r.n * 8))
end

-- Each result of a group: calls fn(form, i, D, Q, inputs) for form number
-- k and vector i (D, Q: the bits written; inputs: a, b, c, e, run).
function F.each_result(r, fn)
  local byname = F.by_name()
  local g = F.groups({ byname[r.forms[1]] })[1]
  local n, rows = F.inputs(g)
  assert(n == r.n, r.entry .. ": not the same inputs")
  for k, name in ipairs(r.forms) do
    local f = byname[name]
    for i = 1, n do
      local base = ((k - 1) * 2 * n + (i - 1)) * 8 + 1
      local d = string.unpack("<i8", r.out, base)
      local q = string.unpack("<i8", r.out, base + n * 8)
      fn(f, i, d, q, rows)
    end
  end
end

-- The warp reference: every lane's result of a warp form, from the inputs.
local function warp_ref(f, rows, i)
  local w0 = (i - 1) // 32 * 32
  local vals = {}
  for l = 0, 31 do
    if rows.run[w0 + l + 1] == 1 then vals[l] = rows.A[w0 + l + 1] end
  end
  local lane = (i - 1) % 32
  return f.wref(lane, rows.A[i], rows.B[i], rows.C[i], rows.E[i], vals)
end

-- Size of an f32 ulp at x.
local function ulp32(x)
  local e = f32b(math.abs(x)) >> 23 & 0xff
  return e == 0 and 2.0 ^ -149 or 2.0 ^ (e - 150)
end

-- Whether an approximate result r (bits) is within f's bound of the true
-- value at the inputs. Special values (NaN, infinities, zeros of the exact
-- result) are checked as classes.
function F.within(f, rbits, a, b)
  if f.hi then a = a & ~0xffffffff end -- .ftz.f64 reads the upper half (an H200 does)
  local f64 = f.sig.D == "f64"
  local to = f64 and f64v or f32v
  local x, y = to(a), b and to(b)
  if f.ftz then
    local lim = f64 and 2.0 ^ -1022 or FMIN32
    if x ~= 0 and math.abs(x) < lim then x = x < 0 and -0.0 or 0.0 end
    if y and y ~= 0 and math.abs(y) < lim then y = y < 0 and -0.0 or 0.0 end
  end
  local r = to(rbits)
  local bound = f.approx
  if bound.limit and math.abs(x) > bound.limit then return true end
  if bound.range == "div" and (math.abs(y) < 2.0 ^ -126 or math.abs(y) > 2.0 ^ 126) then
    return true
  end
  local t = f.truth(x, y)
  if t ~= t then return r ~= r end
  if r ~= r then return false end
  local tf = f64 and t or f32v(f32b(t))
  if math.abs(tf) == math.huge then -- overflows: infinity or the largest finite value
    return r == tf or (not f64 and math.abs(r) == f32v(0x7f7fffff) and (r > 0) == (tf > 0))
  end
  if math.abs(t) == math.huge then return r == t end
  local err = math.abs(r - t)
  -- the result is a float: its own rounding (an ulp of it) comes on top of
  -- the bounds on the value, and .ftz flushes results below the smallest
  -- normal
  local tiny = f64 and 2.0 ^ -1022 or FMIN32
  local ulp = f64 and math.abs(t) * 2.0 ^ -52 or ulp32(t)
  if bound.ulp then return err <= bound.ulp * ulp + (f.ftz and tiny or 0) end
  if bound.abs then
    return err <= bound.abs + (bound.per_x or 0) * math.abs(x) + ulp + (f.ftz and tiny or 0)
  end
  return err <= bound.rel * math.abs(t) + ulp + tiny
end

-- Checks a result against the host references: counts and differences.
-- Only the lanes that ran are checked; undefined results (nil) are not.
function F.check(results)
  local counts, bad = { exact = 0, bounded = 0, recorded = 0, undefined = 0 }, {}
  for _, r in ipairs(results) do
    if r.out then
      F.each_result(r, function(f, i, d, q, rows)
        if rows.run[i] ~= 1 then return end
        local a, b, c, e = rows.A[i], rows.B[i], rows.C[i], rows.E[i]
        local rd, rq
        if f.wref then rd, rq = warp_ref(f, rows, i)
        elseif f.ref then rd, rq = f.ref(a, b, c, e)
        elseif f.approx then
          counts.bounded = counts.bounded + 1
          if not F.within(f, d, a, b) and #bad < 50 then
            bad[#bad + 1] = ("%s(%x, %s): %x outside the bound (%s)"):format(
              f.name, a, b and ("%x"):format(b) or "-", d, f.approx.note)
          end
          return
        else
          counts.recorded = counts.recorded + 1
          return
        end
        if rd == nil then counts.undefined = counts.undefined + 1 return end
        if f.dmask then d, rd = d & f.dmask, rd & f.dmask end
        local ok = d == rd and (rq == nil or q == rq)
        local cls = f.sig.D
        if not ok and is_nan(cls, d) and is_nan(cls, rd) and (rq == nil or q == rq) then ok = true end
        counts.exact = counts.exact + 1
        if not ok and #bad < 5000 then
          bad[#bad + 1] = ("%s(%x, %s, %s): %x%s, expected %x%s"):format(
            f.name, a or 0, b and ("%x"):format(b) or "-", c and ("%x"):format(c) or "-", d,
            rq and "|" .. q or "", rd, rq and "|" .. rq or "")
        end
      end)
    end
  end
  return counts, bad
end

-- Undefined results, where PTX leaves them so: a warp form's lanes whose
-- source is away, an integer division by zero.
local function undefined(f, rows, i)
  if f.wref then return (warp_ref(f, rows, i)) == nil end
  if f.ref and (f.op == "div" or f.op == "rem") and f.sig.D:match("^[us]") then
    return f.ref(rows.A[i], rows.B[i], rows.C[i], rows.E[i]) == nil
  end
  return false
end

-- The GPU's results against the simulator's: per operation the values
-- compared bit for bit and within bounds; differences as lines; forms one
-- side refused.
function F.compare(gpu, sim)
  local per_op, bad, skipped = {}, {}, {}
  local byname = F.by_name()
  local on_gpu = {} -- form name -> its result and place there
  for _, r in ipairs(gpu) do
    for k, name in ipairs(r.forms) do on_gpu[name] = { r = r, k = k } end
  end
  local function count(op)
    per_op[op] = per_op[op] or { forms = 0, exact = 0, bounded = 0, undefined = 0, differ = 0 }
    return per_op[op]
  end
  for _, s in ipairs(sim) do
    for k, name in ipairs(s.forms) do
      local f, g = byname[name], on_gpu[name]
      if not g then
        bad[#bad + 1] = name .. ": not run on the GPU"
      elseif g.r.error or s.error then
        skipped[#skipped + 1] = ("%s: %s"):format(name, g.r.error
          and "the GPU refused it: " .. g.r.error or "the simulator refused it: " .. s.error)
      elseif g.r.n ~= s.n then
        bad[#bad + 1] = name .. ": not the same inputs"
      else
        local c = count(f.op)
        c.forms = c.forms + 1
        local n, rows = F.inputs(F.groups({ f })[1])
        assert(n == s.n, name .. ": not the same inputs")
        for i = 1, n do
          if rows.run[i] == 1 then
            local d, q = F.value(s, k, i)
            local gd, gq = F.value(g.r, g.k, i)
            local ok
            if undefined(f, rows, i) then
              c.undefined = c.undefined + 1
              ok = true
            elseif f.approx then -- the same bits, or both within the bounds
              ok = (gd == d and gq == q)
                or (F.within(f, gd, rows.A[i], rows.B[i]) and F.within(f, d, rows.A[i], rows.B[i]))
              if ok then c.bounded = c.bounded + 1 end
            else
              ok = gd == d and gq == q
              if ok then c.exact = c.exact + 1 end
            end
            if not ok then
              c.differ = c.differ + 1
              if #bad < 300 then
                bad[#bad + 1] = ("%s(%x, %s, %s): GPU %x|%x, simulator %x|%x"):format(
                  name, rows.A[i] or 0, rows.B[i] and ("%x"):format(rows.B[i]) or "-",
                  rows.C[i] and ("%x"):format(rows.C[i]) or "-", gd, gq, d, q)
              end
            end
          end
        end
      end
    end
  end
  return per_op, bad, skipped
end

-- A report of a comparison (or of a simulator run alone), as text.
function F.report(title, per_op, bad, skipped, refused)
  local L = { title, "" }
  local ops = {}
  for op in pairs(per_op) do ops[#ops + 1] = op end
  table.sort(ops)
  L[#L + 1] = ("%-12s %6s %9s %9s %9s %7s"):format("operation", "forms", "exact", "bounded",
                                                    "undefined", "differ")
  for _, op in ipairs(ops) do
    local c = per_op[op]
    L[#L + 1] = ("%-12s %6d %9d %9d %9d %7d"):format(op, c.forms, c.exact, c.bounded, c.undefined,
                                                      c.differ)
  end
  if refused and #refused > 0 then
    L[#L + 1] = ""
    L[#L + 1] = ("%d forms of the ISA the simulator refuses (not run on either side):"):format(#refused)
    for _, r in ipairs(refused) do L[#L + 1] = "  " .. r.form.name end
  end
  if #skipped > 0 then
    L[#L + 1] = ""
    L[#L + 1] = "skipped:"
    for _, s in ipairs(skipped) do L[#L + 1] = "  " .. s end
  end
  if #bad > 0 then
    L[#L + 1] = ""
    L[#L + 1] = "differences:"
    for _, b in ipairs(bad) do L[#L + 1] = "  " .. b end
  end
  return table.concat(L, "\n") .. "\n"
end

return F
