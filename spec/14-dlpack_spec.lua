-- DLPack exchange: b:dlpack() lends a Buffer's memory as a cugraph.DLTensor,
-- cuda.from_dlpack(t) makes a Buffer that owns the tensor; the embedding
-- API's cugraph_pushdlpack and cugraph_todlpack (spec/hosts/capi.c makes
-- tensors of its own memory as a producer would, counts their deleters'
-- calls and holds tensors the state lends past lua_close).
local H = require "support.helper"
local cuda = H.cuda

describe("DLPack in Lua", function()
  it("round-trips every element type, sharing the memory and keeping a shape", function()
    for _, ty in ipairs(cuda.types) do
      local b = cuda.buffer(ty, { 1, 2, 3, 4, 5, 6 })
      local t = b:dlpack({ 2, 3 })
      assert.equals(ty, t:type())
      assert.same({ 2, 3 }, { t:shape() })
      assert.matches("^cugraph%.DLTensor " .. ty .. "%[2x3%] %(0x%x+, device 0%)$", tostring(t))
      local c = cuda.from_dlpack(t)
      assert.equals(ty, c:type(), ty)
      assert.equals(6, #c)
      assert.same({ 2, 3 }, { c:shape() })
      assert.equals(b:address(), c:address())
      assert.same(b:download(), c:download())
      assert.matches(", DLPack%)$", tostring(c))
      assert.matches(", consumed%)$", tostring(t))
      c:upload({ 9 }, 5)
      assert.equals(9, b:download()[6], ty)
      c:free()
      assert.matches("%(freed%)$", tostring(t))
    end
  end)

  it("keeps the memory a tensor lends after its Buffer is freed or collected", function()
    local b = cuda.buffer("i32", { 7, 8, 9 })
    local c = cuda.from_dlpack(b:dlpack())
    b:free()
    assert.same({ 7, 8, 9 }, c:download())
    local weak = setmetatable({ cuda.buffer("f32", 4):fill(1.5) }, { __mode = "v" })
    local t = weak[1]:dlpack()
    collectgarbage(); collectgarbage()
    assert.is_nil(weak[1])
    assert.same({ 1.5, 1.5, 1.5, 1.5 }, cuda.from_dlpack(t):download())
    assert.equals(0, cuda.status().finalizer_errors)
  end)

  it("takes a Buffer for from_dlpack, as b:dlpack() would lend it", function()
    local b = cuda.buffer("u16", { 1, 2 })
    local c = cuda.from_dlpack(b)
    assert.equals(b:address(), c:address())
    assert.same({ 2 }, { c:shape() })
  end)

  it("gives shapes: one dimension, the one asked for, a pitched buffer's rows, its own", function()
    local b = cuda.buffer("f32", 12):fill(0)
    assert.same({ 12 }, { b:dlpack():shape() })
    assert.same({ 2, 2, 3 }, { b:dlpack({ 2, 2, 3 }):shape() })
    local c = cuda.from_dlpack(b:dlpack({ 3, 4 }))
    assert.same({ 3, 4 }, { cuda.from_dlpack(c:dlpack()):shape() }) -- kept on re-export
    assert.same({ 4 }, { c:view(0, 4):dlpack():shape() })        -- a view is flat
    local p = cuda.pitched("f32", 5, 3)
    assert.same({ 3, 5 }, { p:dlpack():shape() })
    assert.same({ 2, 3, 5 }, { cuda.pitched("f32", 5, 3, 2):dlpack():shape() })
    assert.error_matches(function() cuda.from_dlpack(p:dlpack()) end,
      "cuda.from_dlpack: the tensor is not contiguous: dimension 0 %(of 3%) has stride %d+, row%-major order needs 5")
    assert.error_matches(function() p:dlpack({ 15 }) end, "b:dlpack: a pitched buffer has its own shape")
    assert.error_matches(function() b:dlpack({ 4, 4 }) end, "b:dlpack: the shape 4x4 holds 16 elements, the buffer 12")
    assert.error_matches(function() b:dlpack({ 1 << 40, 1 << 40 }) end,
      "b:dlpack: the shape 1099511627776x1099511627776 holds more than 2%^63 elements")
    assert.error_matches(function() b:dlpack({ 12, 0 }) end, "b:dlpack: shape%[2%] must be a positive integer")
    assert.error_matches(function() b:dlpack({ "x" }) end, "b:dlpack: shape%[1%] must be a positive integer")
    assert.error_matches(function() b:dlpack({}) end, "b:dlpack: a shape has 1 to 32 dimensions, got 0")
    assert.error_matches(function() b:dlpack(12) end, "table expected, got number")
  end)

  it("is consumed once, and freed three ways when not", function()
    local b = cuda.buffer("f32", 4):fill(0)
    local t = b:dlpack()
    local c = cuda.from_dlpack(t)
    assert.error_matches(function() cuda.from_dlpack(t) end,
      "cuda.from_dlpack: the cugraph.DLTensor was consumed by a Buffer %(cuda.from_dlpack%); a tensor is consumed once")
    assert.error_matches(function() t:free() end,
      "cannot free a cugraph.DLTensor that a Buffer was made from %(cuda.from_dlpack%); free the Buffer")
    assert.equals(t, c:parent())
    c:free()
    assert.error_matches(function() cuda.from_dlpack(t) end, "attempt to use a freed cugraph.DLTensor")
    assert.error_matches(function() t:shape() end, "attempt to use a freed cugraph.DLTensor")
    t = b:dlpack()
    t:free()
    assert.matches("%(freed%)$", tostring(t))
    t:free(); t:close()
    do local u <close> = b:dlpack() t = u end
    assert.matches("%(freed%)$", tostring(t))
    assert.error_matches(function() cuda.from_dlpack({}) end,
      "cuda.from_dlpack: expected a cugraph.DLTensor %(b:dlpack%(%)%), got table")
    b:free()
    assert.error_matches(function() b:dlpack() end, "attempt to use a freed cugraph.Buffer")
    assert.error_matches(function() cuda.from_dlpack(b) end, "attempt to use a freed cugraph.Buffer")
  end)

  it("lends managed memory as kDLCUDAManaged, and takes it back as managed", function()
    local m = cuda.managed("f32", { 1, 2 })
    local c = cuda.from_dlpack(m:dlpack())
    assert.is_true(c:managed())
    assert.is_false(cuda.from_dlpack(cuda.buffer("f32", 2)):managed())
  end)

  it("refuses to lend memory it cannot keep allocated", function()
    local s = cuda.stream()
    local ok, err = pcall(s.capture, s, function()
      local g = cuda.buffer("i32", 16, { stream = s })
      g:dlpack()
    end)
    assert.is_false(ok)
    assert.matches("b:dlpack: the buffer is memory a graph allocates", tostring(err))
    local m = cuda.module(H.build .. "/kernels.ptx")
    local glob = select(2, pcall(m.global, m, "table_f32", "f32"))
    if cuda.is_error(glob) or type(glob) == "string" then return end
    assert.error_matches(function() glob:dlpack() end, "b:dlpack: the buffer is a module global")
  end)

  it("a graph that captured an imported buffer keeps it; its free names the graph", function()
    local N = 1024
    local m = H.kernels()
    local s = cuda.stream()
    local y = cuda.buffer("i32", N):fill(0)
    local c = cuda.from_dlpack(y:dlpack())
    y:free()
    local g = s:capture(function() m.inc_i32:launch(s, 4, 256, c, N) end)
    assert.error_matches(function() c:free() end,
      "cannot free cugraph%.Buffer: it is used by live cugraph%.Graph #" .. g:id())
    local t = c:parent()
    assert.error_matches(function() t:free() end, "cannot free a cugraph.DLTensor that a Buffer was made from")
    local weak = setmetatable({ c, t }, { __mode = "v" })
    c, t = nil, nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    assert.is_not_nil(weak[1])
    g:launch(); g:launch(); s:synchronize()
    assert.equals(2, weak[1]:download()[N])
    g:free()
    collectgarbage(); collectgarbage()
    assert.is_nil(weak[1])
    assert.is_nil(weak[2])
    assert.equals(0, cuda.status().finalizer_errors)
  end)
end)

describe("DLPack through the embedding API", function()
  local script = [==[
    local cuda = require "cugraph"
    package.path = os.getenv("CUGRAPH_LUA_SPEC") .. "/?.lua;" .. package.path
    local H = require "support.helper"
    if os.getenv("DLPACK_GCSTRESS") then -- a whole cycle at every allocation
      collectgarbage("incremental", 1, 1000, 30)
      collectgarbage()
    end
    local N = 1024
    local function check(cond, msg) if not cond then error(msg, 2) end end

    -- refused before any driver call, naming what is wrong; the tensor
    -- stays the host's
    local function refused(opts, want)
      local t = capi.tensor(opts)
      local ok, err = pcall(capi.push, t)
      check(not ok and tostring(err):find(want, 1, true), "wanted '" .. want .. "', got " .. tostring(err))
      check(capi.deleted(t) == 0, want .. ": deleted")
      capi.delete(t)
    end
    local accept = "a Buffer takes CUDA device memory (kDLCUDA, kDLCUDAManaged)"
    refused({ device = 1 }, "cugraph_pushdlpack: the tensor is in CPU (kDLCPU) memory; " .. accept)
    refused({ device = 3 }, "the tensor is in pinned host memory (kDLCUDAHost) memory")
    refused({ device = 10 }, "ROCm (kDLROCM)")
    refused({ device = 99 }, "cugraph_pushdlpack: unknown DLPack device type 99; " .. accept)
    refused({ device_id = 3 }, "the tensor is on CUDA device 3, the current device is 0 (cuda.on(3, fn) takes it there)")
    refused({ lanes = 4 }, "the tensor's elements are vectors of 4 lanes of float32; a Buffer's have 1 lane")
    refused({ code = 5, bits = 64 },
      "the tensor's element type complex64 is none of a Buffer's (float16/32/64, bfloat16, int8..64, uint8..64)")
    refused({ code = 6, bits = 8 }, "element type bool8 is none")
    refused({ code = 2, bits = 8 }, "element type float8 is none")
    refused({ code = 4, bits = 32 }, "element type bfloat32 is none")
    refused({ code = 42 }, "element type code 42, 32 bits is none")
    refused({ shape = { 2, 3 }, strides = { 1, 2 } },
      "the tensor is not contiguous: dimension 1 (of 3) has stride 2, row-major order needs 1; make a contiguous copy first")
    refused({ shape = { 2, 3 }, strides = { 6, 1 } }, "dimension 0 (of 2) has stride 6, row-major order needs 3")
    refused({ shape = { 4, 0 } }, "the tensor has no elements (shape 4x0)")
    refused({ shape = { -1 } }, "dimension 0 of the tensor has size -1")
    refused({ shape = { 1 << 40, 1 << 40 } }, "the tensor's shape 1099511627776x1099511627776 overflows")
    refused({ ndim = -1 }, "the tensor has -1 dimensions")
    refused({ null = true }, "the tensor's data pointer is null")
    refused({ offset = 2 }, "(data + byte_offset 2), is not aligned for f32 (4 bytes)")
    refused({ versioned = true, major = 2 },
      "cugraph_pushdlpack_versioned: the tensor is of DLPack 2.0; this runtime reads major version 1")
    refused({ versioned = true, flags = 1 }, "the tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY)")
    refused({ versioned = true, device = 1 }, "cugraph_pushdlpack_versioned: the tensor is in CPU")

    -- accepted: every type; freed, closed or collected, its deleter runs once
    local kinds = { f32 = { 2, 32 }, f64 = { 2, 64 }, f16 = { 2, 16 }, bf16 = { 4, 16 },
      i8 = { 0, 8 }, i16 = { 0, 16 }, i32 = { 0, 32 }, i64 = { 0, 64 },
      u8 = { 1, 8 }, u16 = { 1, 16 }, u32 = { 1, 32 }, u64 = { 1, 64 } }
    for ty, k in pairs(kinds) do
      local t = capi.tensor { code = k[1], bits = k[2], shape = { 2, 4 } }
      local b = capi.push(t)
      check(b:type() == ty and #b == 8, ty)
      b:fill(1)
      check(b:download()[8] == 1, ty)
      do local c <close> = b end -- luacheck: ignore
      check(capi.deleted(t) == 1, ty .. ": not deleted on close")
      b:free()
      check(capi.deleted(t) == 1, ty .. ": deleted twice")
    end
    local t = capi.tensor { shape = { 2, 1, 3 }, strides = { 3, 99, 1 }, value = 1.5 }
    local b = capi.push(t)
    check(#b == 6 and select("#", b:shape()) == 3 and b:download()[6] == 1.5, "size-1 stride")
    b:free()
    check(capi.deleted(t) == 1, "free")
    t = capi.tensor { value = 2.5 }
    capi.push(t)
    collectgarbage(); collectgarbage()
    check(capi.deleted(t) == 1, "collected")
    t = capi.tensor { offset = 16, shape = { 4 }, value = 2.0 }
    b = capi.push(t)
    check(b:download()[4] == 2, "byte_offset")
    b:free()
    t = capi.tensor { shape = {}, value = 3.0 }
    b = capi.push(t)
    check(#b == 1 and select("#", b:shape()) == 0 and b:download()[1] == 3, "0-d")
    b:free()
    t = capi.tensor { device = 13, value = 4.0 }
    b = capi.push(t)
    check(b:managed() and b:download()[1] == 4, "managed")
    b:free()
    t = capi.tensor { versioned = true, shape = { 2, 2 }, value = 5.0 }
    b = capi.push(t)
    check(#b == 4 and b:download()[4] == 5, "versioned")
    b:free()
    check(capi.deleted(t) == 1, "versioned free")

    -- views keep it; its free waits for them
    t = capi.tensor { shape = { 8 } }
    b = capi.push(t)
    local v = b:view(2, 2)
    check(not pcall(b.free, b), "freed under a view")
    v:free(); b:free()
    check(capi.deleted(t) == 1, "after the view")

    -- a Lua graph that captured it keeps it: no deleter while it lives
    local s = cuda.stream()
    local m = H.kernels()
    t = capi.tensor { code = 0, bits = 32, shape = { N }, value = 0 }
    b = capi.push(t)
    local g = s:capture(function() m.inc_i32:launch(s, 4, 256, b, N) end)
    local ok, err = pcall(b.free, b)
    check(not ok and tostring(err):find("used by live cugraph.Graph #" .. g:id(), 1, true), tostring(err))
    b = nil -- luacheck: ignore
    collectgarbage(); collectgarbage()
    check(capi.deleted(t) == 0, "deleted under a live graph")
    g:launch(); g:launch(); s:synchronize()
    g:free()
    collectgarbage(); collectgarbage()
    check(capi.deleted(t) == 1, "not deleted after its graph")

    -- a C graph keeps it past its Lua objects and lua_close (the host
    -- launches it after and checks the deleter ran once at the release)
    local t2 = capi.tensor { code = 0, bits = 32, shape = { N }, value = 0 }
    b = capi.push(t2)
    g = s:capture(function() m.inc_i32:launch(s, 4, 256, b, N) end)
    local h = capi.tograph(g)
    local addr = b:address()
    g:free(); b:free()
    collectgarbage(); collectgarbage()
    check(capi.deleted(t2) == 0, "deleted under a C graph")
    check(capi.launch(h) == nil, "C launch")
    capi.after(h, addr, N, "i32", 2)

    -- lent: the tensor's fields, and the memory alive after the Buffer
    local x = cuda.buffer("f32", 6):fill(2.5)
    local slot, info = capi.take(x)
    check(info.ndim == 1 and info.shape[1] == 6 and info.strides[1] == 1, "shape")
    check(info.code == 2 and info.bits == 32 and info.lanes == 1, "dtype")
    check(info.device == 2 and info.device_id == 0 and info.offset == 0, "device")
    check(info.address == x:address() and info.major == nil, "address")
    x:free()
    collectgarbage()
    check(capi.read(slot, 6)[6] == 2.5, "read after free")
    capi.keep(slot, 6, 2.5) -- and after lua_close
    slot, info = capi.take(cuda.buffer("i32", 4):fill(-3), true)
    check(info.major == 1 and info.minor == 0 and info.flags == 0, "versioned")
    check(info.code == 0 and capi.read(slot, 4)[4] == -3, "versioned i32")
    capi.keep(slot, 4, -3)
    slot, info = capi.take(cuda.managed("f32", 2))
    check(info.device == 13, "managed")
    capi.give(slot)
    local p = cuda.pitched("f32", 5, 3)
    slot, info = capi.take(p)
    check(info.ndim == 2 and info.shape[1] == 3 and info.shape[2] == 5 and
          info.strides[1] == p:pitch() // 4 and info.strides[2] == 1, "pitched")
    capi.give(slot)
    x = cuda.buffer("f32", 4)
    local tl = x:dlpack({ 2, 2 })
    slot, info = capi.take(tl)
    check(info.ndim == 2 and info.shape[2] == 2 and tostring(tl) == "cugraph.DLTensor (taken by C)", "taken")
    ok, err = pcall(cuda.from_dlpack, tl)
    check(not ok and tostring(err):find("the cugraph.DLTensor was taken by C (cugraph_todlpack)", 1, true), tostring(err))
    ok, err = pcall(capi.take, tl)
    check(not ok and tostring(err):find("taken by C", 1, true), tostring(err))
    capi.give(slot)
    ok, err = pcall(capi.take, x:dlpack(), true)
    check(not ok and tostring(err):find("a cugraph.DLTensor holds an unversioned tensor", 1, true), tostring(err))
    x:free()
    ok, err = pcall(capi.take, x)
    check(not ok and tostring(err):find("attempt to use a freed cugraph.Buffer", 1, true), tostring(err))
    ok, err = pcall(capi.take, {})
    check(not ok and tostring(err):find("cugraph.Buffer expected", 1, true), tostring(err))

    -- the host's tensor, imported and lent back: its deleter waits for both
    t = capi.tensor { value = 7.0 }
    b = capi.push(t)
    slot = capi.take(b)
    b:free()
    check(capi.deleted(t) == 0 and capi.read(slot, 4)[4] == 7, "lent back")
    capi.give(slot)
    check(capi.deleted(t) == 1, "lent back, given")
    local t3 = capi.tensor { value = 9.0 }
    slot = capi.take(capi.push(t3))
    capi.keep(slot, 4, 9) -- read after lua_close, then deleted
    -- a lent tensor handed back to the state
    slot = capi.take(cuda.buffer("f32", 3):fill(6))
    local back = capi.pushslot(slot)
    check(back:download()[3] == 6, "handed back")
    back:free()
    -- left open at lua_close: deleted by it
    KEEP = capi.push(capi.tensor {})
    KEEP2 = cuda.buffer("f32", 2):dlpack()
    print("script done")
  ]==]

  local function run(env)
    H.capi_passes(script, env)
  end

  it("imports, refuses, lends and deletes exactly once, also after lua_close", function()
    run()
  end)

  it("does the same with a collection at every allocation", function()
    run("DLPACK_GCSTRESS=1")
  end)

  -- work that takes a while: a loop of 5000 turns on a GPU, and on the
  -- software drivers CUDA_DOUBLE_BUSY (the device busy 300 ms after it)
  it("deletes once, after lua_close, a tensor whose free a timed-out wait held back", function()
    local src = [[
      local cuda = require "cugraph"
      local function check(cond, msg) if not cond then error(msg, 2) end end
      local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local t = capi.tensor { code = 0, bits = 32, shape = { 8 }, value = 0 }
      local b = capi.push(t)
      local s, c = cuda.stream(), cuda.condition(1)
      local g = s:capture(function()
        s:loop_while(c, function()
          m.inc_i32:launch(s, 1, 8, b, 8)
          c:count_down(s, TURNS)
        end)
      end)
      g:launch()
      local ok, err = pcall(cuda.synchronize, 1e-6)
      check(not ok and err.name == "CUDA_ERROR_TIMEOUT", tostring(err))
      g:free(); b:free()
      collectgarbage(); collectgarbage()
      check(capi.deleted(t) == 0, "deleted while the work that reads it runs")
      print("script done")
    ]]
    H.capi_passes(src:gsub("TURNS", H.gpu and 5000 or 50), "CUDA_DOUBLE_BUSY=300")
  end)
end)
