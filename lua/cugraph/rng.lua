-- cuda.rng: counter-based random numbers (Philox4x32-10, Salmon et al.,
-- "Parallel random numbers: as easy as 1, 2, 3", SC 2011), filled by
-- kernels the front end compiles once per device of a state. A
-- generator's key (seed), subsequence and counter (offset) live in a small
-- device buffer it owns: each fill draws from the offset there and a
-- second one-thread kernel advances it on the device, so every replay of
-- a captured fill draws new numbers, in the order the fills run.
local G = require "cugraph.gen"

local SOURCE = [[
// Philox4x32-10: 10 rounds of the Random123 round function, key bumped
// before rounds 2..10.
__device__ __forceinline__ uint4 cg_philox(unsigned c0, unsigned c1, unsigned c2,
                                          unsigned c3, unsigned k0, unsigned k1) {
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    unsigned lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
    unsigned lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  return make_uint4(c0, c1, c2, c3);
}

// Block j of a fill: counter (offset + j, subsequence), key the seed.
// st: {seed, subsequence, offset} as 64-bit words.
__device__ __forceinline__ uint4 cg_draw(const long long *st, unsigned long long j) {
  unsigned long long key = st[0], sub = st[1], ctr = (unsigned long long)st[2] + j;
  return cg_philox((unsigned)ctr, (unsigned)(ctr >> 32), (unsigned)sub,
                   (unsigned)(sub >> 32), (unsigned)key, (unsigned)(key >> 32));
}

#define CG_FIRST(per) \
  unsigned long long j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; \
  unsigned long long at = j * (per); \
  if (at >= n) return; \
  uint4 r = cg_draw(st, j);
#define CG_PUT(k, v) if (at + (k) < n) out[at + (k)] = (v);

extern "C" __global__ void cg_rng_bits(unsigned *out, const long long *st,
                                       unsigned long long n) {
  CG_FIRST(4)
  CG_PUT(0, r.x) CG_PUT(1, r.y) CG_PUT(2, r.z) CG_PUT(3, r.w)
}

// [0, 1): the top 24 bits times 2^-24, then lo + (hi - lo) u by one fma.
__device__ __forceinline__ float cg_u24(unsigned x) { return (float)(x >> 8) * 0x1p-24f; }
extern "C" __global__ void cg_rng_uniform_f32(float *out, const long long *st,
                                              unsigned long long n, float lo, float hi) {
  CG_FIRST(4)
  float d = hi - lo;
  CG_PUT(0, fmaf(cg_u24(r.x), d, lo)) CG_PUT(1, fmaf(cg_u24(r.y), d, lo))
  CG_PUT(2, fmaf(cg_u24(r.z), d, lo)) CG_PUT(3, fmaf(cg_u24(r.w), d, lo))
}

// [0, 1): the top 53 bits of (lo word | hi word << 32) times 2^-53.
__device__ __forceinline__ double cg_u53(unsigned a, unsigned b) {
  return (double)((((unsigned long long)b << 32) | a) >> 11) * 0x1p-53;
}
extern "C" __global__ void cg_rng_uniform_f64(double *out, const long long *st,
                                              unsigned long long n, double lo, double hi) {
  CG_FIRST(2)
  double d = hi - lo;
  CG_PUT(0, fma(cg_u53(r.x, r.y), d, lo)) CG_PUT(1, fma(cg_u53(r.z, r.w), d, lo))
}

// Box-Muller: u1 in (0, 1], u2 in [0, 1); r = sqrt(-2 ln u1),
// z0 = r cos(2 pi u2), z1 = r sin(2 pi u2).
extern "C" __global__ void cg_rng_normal_f32(float *out, const long long *st,
                                             unsigned long long n, float mean, float sd) {
  CG_FIRST(4)
  float s0, c0, s1, c1;
  float r0 = sqrtf(-2.0f * logf(fmaf((float)r.x, 0x1p-32f, 0x1p-33f)));
  float r1 = sqrtf(-2.0f * logf(fmaf((float)r.z, 0x1p-32f, 0x1p-33f)));
  sincospif(2.0f * cg_u24(r.y), &s0, &c0);
  sincospif(2.0f * cg_u24(r.w), &s1, &c1);
  CG_PUT(0, fmaf(sd, r0 * c0, mean)) CG_PUT(1, fmaf(sd, r0 * s0, mean))
  CG_PUT(2, fmaf(sd, r1 * c1, mean)) CG_PUT(3, fmaf(sd, r1 * s1, mean))
}

extern "C" __global__ void cg_rng_normal_f64(double *out, const long long *st,
                                             unsigned long long n, double mean, double sd) {
  CG_FIRST(2)
  double s, c;
  double r0 = sqrt(-2.0 * log(cg_u53(r.x, r.y) + 0x1p-54));
  sincospi(2.0 * cg_u53(r.z, r.w), &s, &c);
  CG_PUT(0, fma(sd, r0 * c, mean)) CG_PUT(1, fma(sd, r0 * s, mean))
}

// After a fill of `blocks` Philox blocks, on the fill's stream.
extern "C" __global__ void cg_rng_advance(long long *st, unsigned long long blocks) {
  ((unsigned long long *)st)[2] += blocks;
}
]]

local BLOCK = 256

return function(cuda)
  local Rng = {}
  local mt = {
    __name = "cugraph.Rng", __index = Rng, methods = Rng, __metatable = "cugraph.Rng",
  }
  G.guard_methods(Rng, "cugraph.Rng", "r")

  local function state_of(r)
    local st = rawget(r, "state")
    if not st then error("attempt to use a freed cugraph.Rng", 3) end
    return st
  end

  -- v as an integer (an integral float too), else an error at level;
  -- given: what the caller gave (G.got), when v is an argument.
  local function check_integer(v, what, fname, level, given)
    local i = type(v) == "number" and math.tointeger(v)
    if not i then
      local got = type(v) == "number" and tostring(v) or given or type(v)
      error(("%s: %s must be an integer (its 64 bits are used), got %s"):format(fname, what, got), level + 1)
    end
    return i
  end

  --- cuda.rng(seed [, opts]) -> Rng: a generator on the current device.
  function cuda.rng(...)
    local seed, opts = ...
    seed = check_integer(seed, "the seed", "cuda.rng", 2, G.got(select("#", ...), 1, seed))
    local sub = 0
    if opts ~= nil then
      if type(opts) ~= "table" then
        error("cuda.rng: opts must be a table, got " .. type(opts), 2)
      end
      for k in pairs(opts) do
        if k ~= "subsequence" then
          error(("cuda.rng: unknown option '%s' (valid: subsequence)"):format(tostring(k)), 2)
        end
      end
      if opts.subsequence ~= nil then
        sub = check_integer(opts.subsequence, "opts.subsequence", "cuda.rng", 2)
      end
    end
    local m, dev = G.call(2, G.module, SOURCE, "cugraph_rng")
    local st = G.call(2, cuda.buffer, "i64", { seed, sub, 0 })
    local r = {
      state = st, seed_value = seed, sub = sub, dev = dev,
      k_bits = m.cg_rng_bits, k_adv = m.cg_rng_advance,
      k_uniform = { f32 = m.cg_rng_uniform_f32, f64 = m.cg_rng_uniform_f64 },
      k_normal = { f32 = m.cg_rng_normal_f32, f64 = m.cg_rng_normal_f64 },
    }
    return setmetatable(r, mt)
  end

  -- Launches kernel k over buf (n elements, per of them a Philox block)
  -- with a and b, then the advance, on stream s (or, without one, after
  -- all device work on the front end's stream, complete on return).
  local function fill(r, what, k, per, buf, a, b, s)
    local st = state_of(r)
    local n = #buf
    local blocks = (n + per - 1) // per
    local own = s == nil
    if own then
      G.begin_unstreamed(what, 2)
      s = G.stream(r.dev)
    elseif getmetatable(s) ~= "cugraph.Stream" then
      error(("%s: the stream must be a cugraph.Stream, got %s"):format(what, G.what(s)), 2)
    end
    local grid = (blocks + BLOCK - 1) // BLOCK
    local ok, err
    if a then
      ok, err = pcall(k.launch, k, s, grid, BLOCK, buf, st, n, a, b)
    else
      ok, err = pcall(k.launch, k, s, grid, BLOCK, buf, st, n)
    end
    if ok then ok, err = pcall(r.k_adv.launch, r.k_adv, s, 1, 1, st, blocks) end
    if ok and own then ok, err = pcall(s.synchronize, s) end
    if not ok then G.raise(err, 2) end
    return r
  end

  -- n: the arguments the caller gave after r.
  local function check_buffer(n, buf, what, ok1, ok2)
    if getmetatable(buf) ~= "cugraph.Buffer" then
      error(("%s: argument 1 must be a cugraph.Buffer of %s, got %s")
            :format(what, ok2 and ok1 .. " or " .. ok2 or ok1, n < 1 and "no value" or G.what(buf)), 3)
    end
    local ok, t = pcall(buf.type, buf) -- a freed one: at the user's line
    if not ok then error(("%s: argument 1: %s"):format(what, G.strip(tostring(t))), 3) end
    if t ~= ok1 and t ~= ok2 then
      error(("%s: argument 1 must be a cugraph.Buffer of %s, got %s")
            :format(what, ok2 and ok1 .. " or " .. ok2 or ok1, G.what(buf)), 3)
    end
    return t
  end

  -- (buf [, a, b] [, stream]): a and b default; both numbers or neither.
  local function two(what, t, a, b, s, da, db, names)
    if type(a) ~= "number" then
      if a == nil and b == nil then return da, db, s end
      if b ~= nil or s ~= nil then
        error(("%s: expected (buffer [, %s] [, stream]), got %s where %s go")
              :format(what, names, G.what(a), names), 3)
      end
      return da, db, a
    end
    if type(b) ~= "number" then
      error(("%s: %s: both numbers or neither, got %s and %s"):format(what, names, a, G.what(b)), 3)
    end
    local bad = G.number_error(t, a) or G.number_error(t, b)
    if bad or a ~= a or b ~= b or a == math.huge or a == -math.huge or b == math.huge or b == -math.huge then
      error(("%s: %s must be finite %s values, got %s and %s"):format(what, names, t, a, b), 3)
    end
    return a, b, s
  end

  -- Whether x, a result the kernel computes in type t, is finite there.
  local function finite(t, x)
    return x == x and x ~= math.huge and x ~= -math.huge and G.number_error(t, x) == nil
  end

  --- r:uniform(buf [, lo, hi] [, stream]) -> r
  function Rng.uniform(r, ...)
    local buf, lo, hi, s = ...
    state_of(r)
    local t = check_buffer(select("#", ...), buf, "r:uniform", "f32", "f64")
    lo, hi, s = two("r:uniform", t, lo, hi, s, 0.0, 1.0, "lo, hi")
    local a, b = G.value(t, lo), G.value(t, hi) -- as the kernel gets them
    if a >= b then
      error(("r:uniform: lo must be below hi, got %s and %s%s"):format(lo, hi,
            lo < hi and (" (both %s as %s)"):format(a, t) or ""), 2)
    end
    if not finite(t, b - a) then -- the kernel scales by hi - lo
      error(("r:uniform: hi - lo of %s and %s is past the largest %s: the range cannot be drawn")
            :format(lo, hi, t), 2)
    end
    return fill(r, "r:uniform", r.k_uniform[t], t == "f32" and 4 or 2, buf, lo, hi, s)
  end

  -- The most standard deviations a draw lies from the mean: sqrt(-2 ln u)
  -- at the smallest u the kernels take (2^-33, 2^-54), rounded up.
  local Z_MAX = { f32 = 6.77, f64 = 8.66 }

  --- r:normal(buf [, mean, std] [, stream]) -> r
  function Rng.normal(r, ...)
    local buf, mean, sd, s = ...
    state_of(r)
    local t = check_buffer(select("#", ...), buf, "r:normal", "f32", "f64")
    mean, sd, s = two("r:normal", t, mean, sd, s, 0.0, 1.0, "mean, std")
    if sd < 0 then error(("r:normal: std must not be negative, got %s"):format(sd), 2) end
    if not finite(t, math.abs(G.value(t, mean)) + Z_MAX[t] * G.value(t, sd)) then
      error(("r:normal: mean %s and std %s: draws reach %s std from the mean, past the largest %s")
            :format(mean, sd, Z_MAX[t], t), 2)
    end
    return fill(r, "r:normal", r.k_normal[t], t == "f32" and 4 or 2, buf, mean, sd, s)
  end

  --- r:bits(buf [, stream]) -> r: the raw 32-bit words.
  function Rng.bits(r, ...)
    local buf, s = ...
    state_of(r)
    check_buffer(select("#", ...), buf, "r:bits", "u32")
    return fill(r, "r:bits", r.k_bits, 4, buf, nil, nil, s)
  end

  --- r:seed(seed [, subsequence]) -> r: a new key, the offset back to 0.
  function Rng.seed(r, ...)
    local seed, sub = ...
    local st = state_of(r)
    seed = check_integer(seed, "the seed", "r:seed", 2, G.got(select("#", ...), 1, seed))
    if sub ~= nil then sub = check_integer(sub, "the subsequence", "r:seed", 2) end
    sub = sub or r.sub
    G.call(2, st.upload, st, { seed, sub, 0 })
    r.seed_value, r.sub = seed, sub
    return r
  end

  --- r:offset() -> integer: the counter, in Philox blocks of 128 bits.
  function Rng.offset(r)
    local st = state_of(r)
    return G.call(2, st.download, st, "table", 2, 1)[1]
  end

  --- r:set_offset(n) -> r
  function Rng.set_offset(r, ...)
    local n = ...
    local st = state_of(r)
    n = check_integer(n, "the offset", "r:set_offset", 2, G.got(select("#", ...), 1, n))
    G.call(2, st.upload, st, { n }, 2)
    return r
  end

  --- r:free(), r:close(): frees the state (refused while a graph uses it).
  function Rng.free(r)
    local st = rawget(r, "state")
    if not st then return end
    local ok, err = pcall(st.free, st)
    if not ok then
      if type(err) == "string" then err = err:gsub("cugraph%.Buffer", "cugraph.Rng", 1) end
      G.raise(err, 2)
    end
    r.state = nil
  end
  Rng.close = Rng.free
  mt.__close = function(r) Rng.free(r) end

  mt.__tostring = function(r)
    if not rawget(r, "state") then return "cugraph.Rng (freed)" end
    return ("cugraph.Rng (Philox4x32-10, seed %d, subsequence %d)"):format(r.seed_value, r.sub)
  end
end
