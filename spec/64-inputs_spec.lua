-- The number and string classes of RELIABILITY.md, each walked over what
-- the runtime lists itself: sizes, pitches and offsets checked for
-- overflow; one conversion of a Lua number per element type, the same in
-- generated kernels as in k:launch; numbers written into generated CUDA C
-- read back exactly; names and paths refuse NUL bytes; a string that
-- reads as a number is never taken as raw bytes; environment variables
-- checked and named.
local H = require "support.helper"
local cuda = H.cuda
local RUN = H.gpu or H.sim

-- The valid keys an option table of fn takes, as its error for an unknown
-- key lists them (the runtime's own list).
local function option_keys(fn, ...)
  local args = table.pack(...)
  args[args.n + 1] = { ["not an option"] = true }
  local err = tostring(H.error_of(fn, table.unpack(args, 1, args.n + 1)))
  local list = assert(err:match("%(valid: ([^)]*)%)"), err)
  local keys = {}
  for k in list:gmatch("[%w_]+") do keys[#keys + 1] = k end
  return keys
end

describe("sizes, pitches and offsets", function()
  local huge = { 1 << 62, (1 << 62) + 1, (1 << 61) + 1, math.maxinteger, 1 << 32 }

  it("of every copy2d and copy3d option overflow into an error, never a wrapped copy", function()
    local b, src = cuda.buffer("f32", 64):fill(1), cuda.buffer("f32", 64):fill(2)
    local h = cuda.host_buffer("f32", 64)
    for _, three in ipairs { false, true } do
      local name = three and "copy3d" or "copy2d"
      local copy = b[name]
      local function box(dst, from, opts)
        if three then return copy(dst, from, 1, 1, 2, opts) end
        return copy(dst, from, 1, 1, opts)
      end
      local keys = three and option_keys(copy, b, src, 1, 1, 1) or option_keys(copy, b, src, 1, 1)
      assert.is_true(#keys >= 10)
      for _, key in ipairs(keys) do
        -- (a rectangle has one slice: z and the slice height are copy3d's)
        local slices = key:find("_z$") or key:find("_height$")
        if key ~= "stream" and (three or not slices) then
          for _, pair in ipairs { { b, src }, { b, h }, { h, src } } do
            for _, v in ipairs(huge) do
              local ok, err = pcall(box, pair[1], pair[2], { [key] = v })
              assert.is_false(ok, ("%s {%s = %d} ran"):format(name, key, v))
              assert.matches(name .. ": ", tostring(err))
            end
          end
        end
      end
    end
    assert.same({ 1, 1 }, b:download("table", 0, 2))
  end)

  it("of an array mapped from external memory overflow into an error before the driver", function()
    local p, why = H.peer()
    if not p then pending(why) end
    local m = p.memory(4096)
    local e = cuda.external_memory(m:fd(), m:size())
    -- 2^30 x 2^30 x 2^4 texels of 16 bytes: 2^68 bytes, 0 once wrapped
    assert.error_matches(function() e:array("f32x4", 1 << 30, 1 << 30, 1 << 4) end,
      "mem:array: 1073741824 x 1073741824 x 16 texels of 16 bytes overflow a size")
    e:free()
  end)
end)

-- Whether a and b are the same value: NaN is NaN, -0.0 is not 0.0, a
-- float is not an integer.
local function same(a, b)
  if a ~= a then return b ~= b end
  return a == b and math.type(a) == math.type(b) and (a ~= 0 or 1 / a == 1 / b)
end

-- The value a Scalar of type t holds for v, or nil and why it cannot.
local function scalar_value(t, v)
  local ok, sc = pcall(cuda.scalar, t, v)
  if not ok then return nil, tostring(sc) end
  local got = sc:get()
  sc:free()
  return got
end

-- The position this file gives to errors raised at its own lines.
local HERE = debug.getinfo(1, "S").short_src

describe("one conversion of a number per element type", function()
  -- the edges of every type: signs, zeros, integer limits, fractions, the
  -- largest floats and past them, NaN
  local probes = {
    0, -0.0, 1, -1, 1.5, -1.5, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65504, 65505,
    65520, 2147483647, 2147483648, -2147483649, 4294967295, 4294967296, 2.0 ^ 53, (1 << 53) + 1,
    2.0 ^ 63, math.maxinteger, math.mininteger, 3.4028234663852886e38, 3.5e38, -1e39, 1e300,
    math.huge, -math.huge, 0 / 0,
  }
  local s
  setup(function() s = cuda.stream() end)

  it("is the same by value into generated kernels as for k:launch and Scalars, for every type", function()
    assert.is_true(#cuda.types >= 12)
    for _, t in ipairs(cuda.types) do
      local ew = cuda.elementwise(t .. " x -> " .. t .. " y", "y = x", { name = "conv_" .. t })
      local k, out, dummy = ew:kernel(), cuda.buffer(t, 1), cuda.buffer(t, 1)
      for _, v in ipairs(probes) do
        local want, why = scalar_value(t, v)
        local case = ("%s %s"):format(t, v)
        local ok, err = pcall(ew, v, out)
        local refused = not ok and tostring(err):find("argument 1 'x' (" .. t .. ")", 1, true) ~= nil
        assert.equals(want == nil, refused, case .. ": " .. tostring(err))
        if refused then -- the same reason
          local reason = why:match("%((.*)%)$")
          assert.is_truthy(tostring(err):find(reason, 1, true), case .. ": " .. tostring(err))
        end
        -- the launch of that kernel (pointer, value, output, masks, length)
        local lok, lerr = pcall(k.launch, k, s, 1, 32, dummy, v, out, 0, 0, 1)
        assert.equals(want == nil, not lok and tostring(lerr):find("argument 2 (", 1, true) ~= nil,
                      case .. ": " .. tostring(lerr))
        if RUN and want ~= nil then
          assert.is_true(ok, case .. ": " .. tostring(err))
          s:synchronize()
          assert.is_true(same(want, out:download()[1]), case)
        end
      end
    end
  end)

  it("is the same for a reduction's identity, written exactly into its source", function()
    local exact = { [-0.0] = true, [math.mininteger] = true, [65505] = true, [-1] = true }
    for _, t in ipairs(cuda.types) do
      local out = cuda.buffer(t, 1)
      for _, v in ipairs(probes) do
        local want = scalar_value(t, v)
        local function make()
          -- reduce keeps a: the result is the identity itself
          return cuda.reduction { input = t .. " x", reduce = "a", identity = v, name = "ident_" .. t }
        end
        if want == nil then
          assert.error_matches(make, "cuda.reduction: identity %(accumulate " .. t .. "%)")
        elseif exact[v] then
          local r = make()
          if RUN then
            r(cuda.buffer(t, 4), out)
            assert.is_true(same(want, out:download()[1]), ("%s %s: got %s"):format(t, v, out:download()[1]))
          end
        end
      end
    end
  end)

  it("refuses ranges the random kernels cannot draw in the buffer's type", function()
    local r = cuda.rng(1)
    local f, d = cuda.buffer("f32", 64), cuda.buffer("f64", 64)
    assert.error_matches(function() r:uniform(f, -3e38, 3e38) end,
      "r:uniform: hi %- lo of %-3e%+38 and 3e%+38 is past the largest f32")
    assert.error_matches(function() r:uniform(d, -1e308, 1e308) end, "is past the largest f64")
    assert.error_matches(function() r:uniform(f, 1, 1 + 1e-9) end,
      "r:uniform: lo must be below hi, got 1 and 1.000000001 %(both 1.0 as f32%)")
    assert.error_matches(function() r:normal(f, 0, 1e38) end,
      "r:normal: mean 0 and std 1e%+38: draws reach 6.77 std from the mean, past the largest f32")
    assert.error_matches(function() r:normal(d, -1.7e308, 1e307) end, "past the largest f64")
    if not RUN then return end
    for _, case in ipairs { { f, -1.7e38, 1.7e38 }, { d, -8e307, 8e307 } } do
      r:uniform(case[1], case[2], case[3])
      for _, v in ipairs(case[1]:download()) do
        assert.is_true(v >= case[2] and v <= case[3], tostring(v))
      end
    end
    r:normal(f, 0, 5e37)
    for _, v in ipairs(f:download()) do assert.is_true(v > -math.huge and v < math.huge, tostring(v)) end
  end)

  it("takes integral floats wherever an integer is taken", function()
    local x = cuda.buffer("f32", 8)
    local calls = {
      { "cuda.fft length", function(n) return cuda.fft(n, "c2c") end, 8 },
      { "cuda.fft lengths", function(n) return cuda.fft({ n, n }, "c2c") end, 4 },
      { "cuda.fft batch", function(n) return cuda.fft(8, "c2c", { batch = n }) end, 2 },
      { "cuda.rng seed", function(n) return cuda.rng(n) end, 7 },
      { "r:seed", function(n) return cuda.rng(1):seed(n, n) end, 3 },
      { "r:set_offset", function(n) return cuda.rng(1):set_offset(n) end, 5 },
      { "cuda.elementwise block", function(n)
          return cuda.elementwise("f32 a -> f32 b", "b = a", { block = n })
        end, 64 },
      { "k:config cluster", function(n)
          local k = H.kernels().inc_i32
          k:config { cluster = n }
          k:config {}
        end, 2 },
      { "k:launch grid", function(n) return H.kernels().inc_i32:launch(s, { n, 1.0 }, n, x, 8.0) end, 1 },
      { "cuda.pitched", function(n) return cuda.pitched("f32", n, n) end, 4 },
      { "b:copy2d offsets", function(n) return x:copy2d(x, 1, 1, { dst_pitch = 4, dst_x = n, src_y = n }) end, 1 },
    }
    if cuda.blas_available == nil or cuda.blas_available() then
      local h = cuda.blas()
      local a, b, c = cuda.buffer("f32", 4), cuda.buffer("f32", 4), cuda.buffer("f32", 4)
      calls[#calls + 1] = { "blas:gemm m, n, k", function(n) return h:gemm(a, b, c, { m = n, n = n, k = n }) end, 2 }
      calls[#calls + 1] = { "cuda.blas workspace", function(n) return cuda.blas { workspace = n } end, 1024 }
    end
    for _, call in ipairs(calls) do
      local name, fn, n = call[1], call[2], call[3]
      local ok, err = pcall(fn, n)
      assert.is_true(ok, name .. " with an integer: " .. tostring(err))
      ok, err = pcall(fn, n + 0.0)
      assert.is_true(ok, name .. " with " .. (n + 0.0) .. ": " .. tostring(err))
      assert.is_false(pcall(fn, n + 0.5), name .. " took " .. (n + 0.5))
    end
  end)
end)

describe("errors of the generated kernels", function()
  -- each raised where the caller wrote the call
  local function raised_here(fn, ...)
    local err = tostring(H.error_of(fn, ...))
    assert.equals(HERE, err:match("^(.-):%d+: "), err)
    return err
  end

  it("name a freed argument at the caller's line, for every generated entry point", function()
    local ew = cuda.elementwise("f32 x, f32 a -> f32 y", "y = a * x", { name = "freed_ew" })
    local red = cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0, name = "freed_red" }
    local r = cuda.rng(1)
    local function freed(t) local b = cuda.buffer(t or "f32", 8); b:free(); return b end
    local function scalar() local sc = cuda.scalar("f32", 1); sc:free(); return sc end
    local x, y = cuda.buffer("f32", 8), cuda.buffer("f32", 8)
    local res = cuda.buffer("f32", 1)
    for _, case in ipairs {
      { function() ew(freed(), 2, y) end, "freed_ew: argument 1 'x' %(f32%)" },
      { function() ew(x, scalar(), y) end, "freed_ew: argument 2 'a' %(f32%)" },
      { function() ew(x, 2, freed()) end, "freed_ew: argument 3 'y' %(f32 output%)" },
      { function() red(freed(), res) end, "freed_red: argument 1 'x' %(f32%)" },
      { function() red(x, freed()) end, "freed_red: argument 2 'result' %(f32 output%)" },
      { function() r:uniform(freed()) end, "r:uniform: argument 1" },
      { function() r:normal(freed()) end, "r:normal: argument 1" },
      { function() r:bits(freed("u32")) end, "r:bits: argument 1" },
    } do
      local err = raised_here(case[1])
      assert.matches(case[2] .. ": attempt to use a freed cugraph%.", err)
    end
  end)
end)

describe("launch dimensions", function()
  it("are an integer or {x [, y [, z]]}: a fourth entry, a hole or a key is refused", function()
    local k, x, s = H.kernels().inc_i32, cuda.buffer("i32", 8), cuda.stream()
    for _, dims in ipairs { { 1, 1, 1, 1 }, { 1, nil, 1 }, { 1, x = 2 }, { [2] = 1 }, {} } do
      assert.error_matches(function() k:launch(s, dims, 8, x, 8) end,
        "inc_i32: grid must be an integer or {x %[, y %[, z%]%]}, got a table with other entries")
      assert.error_matches(function() k:launch(s, 1, dims, x, 8) end,
        "inc_i32: block must be an integer or {x %[, y %[, z%]%]}, got a table with other entries")
      assert.error_matches(function() k:config { cluster = dims } end, "opts%.cluster must be an integer or {x, y, z}")
    end
    k:launch(s, { 1, 1, 1 }, { 8, 1.0 }, x, 8)
  end)
end)

describe("names and paths", function()
  it("holding a NUL byte are refused at every door, never read up to the NUL", function()
    local m = H.kernels()
    local s = cuda.stream()
    local x = cuda.buffer("i32", 8)
    local g = s:capture(function() s:label("lbl", function() m.inc_i32:launch(s, 1, 8, x, 8) end) end)
    local dir = os.tmpname()
    local a = cuda.array("f32", 4, 4)
    local doors = {
      -- name, a call given the clean name (it must not be refused for
      -- a NUL byte), the NUL one
      { "cuda.buffer type", function(n) return cuda.buffer(n, 4) end, "f32" },
      { "cuda.host_buffer type", function(n) return cuda.host_buffer(n, 4) end, "f32" },
      { "cuda.scalar type", function(n) return cuda.scalar(n, 1) end, "f32" },
      { "cuda.pitched type", function(n) return cuda.pitched(n, 4, 4) end, "f32" },
      { "b:view type", function(n) return x:view(0, 8, n) end, "u32" },
      { "cuda.array format", function(n) return cuda.array(n, 4) end, "f32x4" },
      { "a:texture filter", function(n) return a:texture { filter = n } end, "linear" },
      { "cuda.fft kind", function(n) return cuda.fft(8, n) end, "c2c" },
      { "cuda.fft type", function(n) return cuda.fft(8, "c2c", { type = n }) end, "f64" },
      { "an option key", function(n) return cuda.fft(8, "c2c", { [n] = 2 }) end, "batch" },
      { "b:download format", function(n) return x:download(n) end, "string" },
      { "cuda.stream priority", function(n) return cuda.stream { priority = n } end, "lowest" },
      { "s:capture mode", function(n)
          return s:capture(function() m.inc_i32:launch(s, 1, 8, x, 8) end, { mode = n })
        end, "relaxed" },
      { "m:kernel name", function(n) return m:kernel(n) end, "inc_i32" },
      { "m[name]", function(n) return m[n] end, "inc_i32" },
      { "m:kernel signature", function(n) return m:kernel("inc_i32", n) end, "i32*, i32" },
      { "cuda.module name", function(n) return cuda.module(".version 7.0\n.target sm_50\n.address_size 64\n", n) end,
        "mine" },
      { "g:node label", function(n) return g:node(n) end, "lbl" },
      { "g:nodes detail", function(n) return g:nodes(n) end, "detail" },
      { "s:label name", function(n)
          return s:capture(function() s:label(n, function() m.inc_i32:launch(s, 1, 8, x, 8) end) end)
        end, "l" },
      { "g:dot path", function(n) return g:dot(n) end, dir },
      { "cuda.watch path", function(n) return cuda.watch(n, function() end) end, dir },
      { "cuda.load_module path", function(n) return cuda.load_module(n) end, H.build .. "/kernels.ptx" },
    }
    if cuda.managed then
      local mb = cuda.managed("f32", 4)
      doors[#doors + 1] = { "b:prefetch where", function(n) return mb:prefetch(n) end, "device" }
    end
    for _, door in ipairs(doors) do
      local name, fn, clean = door[1], door[2], door[3]
      local ok, err = pcall(fn, clean)
      assert.is_falsy(not ok and tostring(err):find("NUL", 1, true), name .. ": " .. tostring(err))
      err = tostring(H.error_of(fn, clean .. "\0junk"))
      assert.is_truthy(err:find("NUL byte", 1, true), name .. ": " .. err)
    end
    os.remove(dir)
  end)
end)

describe("strings of raw bytes", function()
  -- the constructors docs/api.md lists as taking a count, a table or a string
  local function byte_doors()
    local f = assert(io.open("docs/api.md", "rb"))
    local doors = {}
    for name in f:read("a"):gmatch("\n### cuda%.([%w_]+)%(type, n | table | string%)") do
      doors[#doors + 1] = name
    end
    f:close()
    return doors
  end

  it("are never a string that reads as a number, at every door that also takes a count", function()
    local doors = byte_doors()
    assert.is_true(#doors >= 3, "doors: " .. table.concat(doors, ", "))
    for _, name in ipairs(doors) do
      local make = assert(cuda[name], name)
      for _, text in ipairs { "1000", "4", " 0x10 ", "1e3", "8.0", "-4", "\t12\n" } do
        local err = tostring(H.error_of(make, "f32", text))
        assert.matches("bad argument #2 to '[%w.]-" .. name .. "' %(the string \".-\" reads as a number", err)
        assert.matches("tonumber", err)
      end
      assert.equals(1000, #make("f32", 1000))
      assert.equals(4, #make("u8", "abcd")) -- bytes that read as no number
      assert.equals(2, #make("u16", "\0\1\0\2"))
    end
  end)
end)

describe("environment variables", function()
  -- The variables `cugraph-lua --help` lists, each either text (a name, a
  -- path, Lua code) or a number with a script that makes the runtime read
  -- it, the extra variables that script needs and a value that is good.
  local text = {
    LUA_INIT_5_4 = true, LUA_INIT = true, LUA_PATH = true, LUA_CPATH = true, CUGRAPH_LUA_LIBCUDA = true,
    CUGRAPH_LUA_PROFILE = true, CUGRAPH_RDZV = true, CUGRAPH_LUA_LIBNVRTC = true,
    CUGRAPH_LUA_LIBNCCL = true, CUGRAPH_LUA_CACHE_DIR = true,
  }
  local loads = "require('cugraph'); print('read')"
  local numbers = {
    CUGRAPH_LUA_DEVICE = { script = loads, good = "0", bad = { "1.5", "2147483648" } },
    CUGRAPH_LUA_TIMEOUT = { script = loads, good = "0.5", bad = { "inf" } },
    CUGRAPH_LUA_CACHE_SIZE = { script = loads, good = "64M", bad = { "1.5", "99999999999999999999", "5T" } },
    CUGRAPH_RDZV_TIMEOUT = {
      script = "print(select(2, pcall(require('cugraph').comm_world)))",
      env = "CUGRAPH_RANK=1 CUGRAPH_WORLD_SIZE=2 CUGRAPH_RDZV=127.0.0.1:1", good = "0.01", bad = { "0", "2e9" },
    },
  }

  local function listed()
    local code, out = H.run("--help", nil, { plain = true })
    assert.equals(0, code, out)
    local vars = {}
    for line in (out:match("Environment variables:\n(.-)\n%S") or ""):gmatch("[^\n]+") do
      -- "  NAME[, NAME]   what it does"
      for name in (line:match("^  ([%u%d_, ]-)%s%s+%S") or ""):gmatch("[%u%d_]+") do
        vars[#vars + 1] = name
      end
    end
    return vars
  end

  it("read as numbers are checked and named in their errors, for every one --help lists", function()
    local vars = listed()
    assert.is_true(#vars >= 10, table.concat(vars, " "))
    for _, name in ipairs(vars) do
      assert.is_truthy(text[name] or numbers[name], name .. ": a variable --help lists that this spec does not know")
    end
    for name, how in pairs(numbers) do
      local env = (how.env or "") .. " " .. name .. "="
      -- a good value is taken (the rendezvous then fails in that time)
      local code, out = H.script(how.script, env .. how.good)
      assert.equals(0, code, out)
      assert.is_falsy(out:find(name .. " is '", 1, true), name .. "=" .. how.good .. ": " .. out)
      local bads = { "abc", "12abc", "-1", "nan", "1e999", "1 2", table.unpack(how.bad) }
      for _, bad in ipairs(bads) do
        local _, bad_out = H.script(how.script, env .. H.quote(bad))
        out = bad_out
        local said = out:find(name .. " is '" .. bad .. "', not a", 1, true)
        assert.is_truthy(said, ("%s=%s: %s"):format(name, bad, out))
      end
    end
  end)
end)

describe("argument errors", function()
  -- A fresh object of each type, for every method to be called on.
  local function makers()
    local s = cuda.stream()
    local function module() return cuda.load_module(H.build .. "/kernels.ptx") end
    local inc = H.kernels().inc_i32
    local function graph()
      local x = cuda.buffer("i32", 8)
      return s:capture(function() inc:launch(s, 1, 8, x, 8) end)
    end
    return {
      Stream = cuda.stream, Event = cuda.event,
      Buffer = function() return cuda.buffer("f32", 4):fill(0) end,
      HostBuffer = function() return cuda.host_buffer("f32", 4) end,
      Scalar = function() return cuda.scalar("f32", 1) end,
      Module = module, Kernel = function() return module().inc_i32 end,
      Graph = graph, Node = function() return graph():node(1) end,
      Condition = cuda.condition,
      Array = function() return cuda.array("f32", 4, 4) end,
      Texture = function() return cuda.array("f32", 4, 4):texture() end,
      Surface = function() return cuda.array("f32", 4, 4, { surface = true }):surface() end,
      FFT = function() return cuda.fft(8, "c2c") end,
      Rng = function() return cuda.rng(1) end,
      Elementwise = function() return cuda.elementwise("f32 x -> f32 y", "y = x") end,
      Reduction = function() return cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 } end,
    }
  end

  -- An error of a call given no arguments names what was missing as "no
  -- value", never nil nor a value the call itself pushed.
  local function says_no_value(call, err)
    err = tostring(err)
    for what in err:gmatch("got (%a[%w. ]*)") do
      assert.equals("no value", what:sub(1, 8), call .. ": " .. err)
    end
  end

  it("of every method and function called with no arguments say 'no value'", function()
    local count = 0
    for name, make in pairs(makers()) do
      local methods = assert(debug.getmetatable(make()).methods, name)
      for method in pairs(methods) do
        local obj = make()
        local ok, err = pcall(obj[method], obj)
        count = count + 1
        if not ok then says_no_value(name .. ":" .. method .. "()", err) end
      end
    end
    -- (these three wait for other processes)
    local waits = { comm_world = true, nccl_rendezvous = true, nccl_rendezvous_tcp = true }
    for name, fn in pairs(cuda) do
      if type(fn) == "function" and not waits[name] then
        local ok, err = pcall(fn)
        count = count + 1
        if not ok then says_no_value("cuda." .. name .. "()", err) end
      end
    end
    assert.is_true(count > 150, tostring(count))
  end)
end)

describe("numbers written into compiled sources", function()
  it("read back as the same value: compile defines", function()
    -- each define checked by the compiler itself
    local src = [[
static_assert(MIN < 0 && MIN + 1 == -9223372036854775807LL, "MIN");
static_assert(MAX == 9223372036854775807LL, "MAX");
static_assert(HALF == 0.5 && NEG == -2.5 && BIG == 1e300, "floats");
static_assert(sizeof(TWO) == sizeof(double) && TWO == 2.0, "2.0 stays a double");
extern "C" __global__ void k() {}
]]
    local ptx = cuda.ptx(src, { arch = "sm_90", defines = {
      MIN = math.mininteger, MAX = math.maxinteger, HALF = 0.5, NEG = -2.5, BIG = 1e300, TWO = 2.0,
    } })
    assert.matches("%.entry k", ptx)
  end)
end)
