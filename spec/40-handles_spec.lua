-- Graphs owned by C (spec/hosts/handles.c): replayed from a second thread
-- while the script runs and reloads the kernel, then after lua_close; the
-- pins live until the last release. And kernel reload and cuda.watch from
-- Lua.
local H = require "support.helper"
local cuda = H.cuda

describe("C handles", function()
  it("replay from other threads beside the script and after lua_close", function()
    local cmd = ("%s %s %s 2>&1"):format(H.sanitized(H.quote(H.build .. "/handles")),
      H.quote(H.build .. "/../lua"), H.quote(H.build .. "/kernels.ptx"))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    assert.is_true(p:close(), out)
    assert.matches("ok %(a%)", out)
    assert.matches("ok %(b%)", out)
    assert.matches("ok %(c%)", out)
  end)

  it("share a scalar's device value with the script, each side writing the value it set last", function()
    H.capi_passes([[
      local cuda = require "cugraph"
      package.path = os.getenv("CUGRAPH_LUA_SPEC") .. "/?.lua;" .. package.path
      local H = require "support.helper"
      local mark = H.kernels().mark_u32 -- out[pos] = pos + 1
      local s = cuda.stream()
      local pos = cuda.scalar("u32", 7) -- set, and not yet written
      local out = cuda.buffer("u32", 16):fill(0)
      local g = s:capture(function() mark:launch(s, 1, 1, out, pos, 16) end)
      local h = capi.tograph(g)
      local cs = capi.scalar(pos)
      assert(capi.launch(h) == nil)
      assert(out:download()[8] == 8, "C's first launch reads the script's 7")
      capi.set(cs, 3)
      assert(capi.launch(h) == nil)
      assert(out:download()[4] == 4, "C's launch reads C's 3")
      assert(pos:get() == 3, "the script reads C's 3, got " .. pos:get())
      pos:set(5)
      g:launch(s)
      s:synchronize()
      assert(out:download()[6] == 6 and pos:get() == 5, "the script's 5")
      capi.release(h)
      print("script done")
    ]])
  end)
end)

describe("kernel reload", function()
  local function source()
    local f = assert(io.open(H.build .. "/kernels.ptx"))
    local src = f:read("a")
    f:close()
    return src
  end

  it("switches live graphs and kernels to the new code", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local s = cuda.stream()
    local y = cuda.buffer("f32", 256):fill(0)
    local k = cuda.scalar("f32", 1)
    local g = s:capture(function() m.add_scalar_f32:launch(s, 1, 256, y, k, 256) end)
    g:launch(); s:synchronize()
    m:reload(source())
    g:launch()
    m.add_scalar_f32:launch(s, 1, 256, y, k, 256)
    s:synchronize()
    assert.equals(3, y:download()[256])
    g:free(); m:free()
  end)

  it("switches only the live graphs that launch the module's kernels", function()
    local m, other = cuda.module(H.build .. "/kernels.ptx"), cuda.module(H.build .. "/kernels.ptx")
    local s = cuda.stream()
    local k = cuda.scalar("f32", 1)
    local y1, y2, y3 = cuda.buffer("f32", 256):fill(0), cuda.buffer("f32", 256):fill(0),
                       cuda.buffer("f32", 256):fill(5)
    local function graph(mod, y)
      return s:capture(function() mod.add_scalar_f32:launch(s, 1, 256, y, k, 256) end)
    end
    local g1, g2 = graph(m, y1), graph(other, y2)
    graph(m, y3):free()  -- freed: never touched again
    graph(m, y3)         -- garbage
    collectgarbage(); collectgarbage()
    g1:launch(); g2:launch()
    -- the new add_scalar_f32 subtracts: y = s - y
    local src = source()
    local at = src:find(".entry add_scalar_f32", 1, true)
    local new = src:sub(1, at - 1) .. src:sub(at):gsub("add%.f32", "sub.f32", 1)
    assert.are_not.equal(src, new)
    m:reload(new, "sub.ptx")
    g1:launch(); g2:launch()
    m.add_scalar_f32:launch(s, 1, 256, y3, k, 256)
    s:synchronize()
    assert.equals(2, y2:download()[256]) -- another module's graph: old code
    if H.gpu or H.sim then -- the code runs (the double has host twins by name)
      assert.equals(0, y1:download()[256])
      assert.equals(-4, y3:download()[256])
    end
    g1:free(); g2:free(); m:free(); other:free()
  end)

  -- the PTX of kernels.cu with add_scalar_f32 subtracting: y = s - y
  local function subtracting()
    local src = source()
    local at = src:find(".entry add_scalar_f32", 1, true)
    return src:sub(1, at - 1) .. src:sub(at):gsub("add%.f32", "sub.f32", 1)
  end

  it("switches kernel nodes in conditional bodies and child graphs", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local s = cuda.stream()
    local k = cuda.scalar("f32", 1)
    local y1, y2 = cuda.buffer("f32", 256):fill(0), cuda.buffer("f32", 256):fill(0)
    local c = cuda.condition(1)
    local g = s:capture(function()
      s:loop_while(c, function()
        m.add_scalar_f32:launch(s, 1, 256, y1, k, 256)
        c:count_down(s, 1)
      end)
    end)
    local inner = s:capture(function() m.add_scalar_f32:launch(s, 1, 256, y2, k, 256) end)
    local outer = s:capture(function() inner:launch(s) end)
    g:launch(); outer:launch() -- y1 = y2 = 1
    m:reload(subtracting(), "sub.ptx")
    g:launch(); outer:launch() -- y = 1 - y = 0
    s:synchronize()
    if H.gpu or H.sim then -- the code runs (the double has host twins by name)
      assert.equals(0, y1:download()[256])
      assert.equals(0, y2:download()[256])
    end
    g:free(); outer:free(); inner:free(); m:free()
  end)

  it("is refused while a C graph launches the module inside conditional nodes", function()
    -- the driver gives no way to reach the bodies of a C graph's copy: the
    -- reload must be refused and the old code kept, until its release
    local okp, out = H.capi([[
      local cuda = require "cugraph"
      capi.baseline()
      local path = os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx"
      local f = assert(io.open(path))
      local src = f:read("a")
      f:close()
      local m = cuda.module(path)
      local s = cuda.stream()
      local x = cuda.buffer("i32", 8):fill(0)
      local c = cuda.condition(1)
      local g = s:capture(function()
        s:loop_while(c, function()
          m.inc_i32:launch(s, 1, 8, x, 8)
          c:count_down(s, 3)
        end)
      end)
      local h = capi.tograph(g)
      g:free()
      local ok, err = pcall(m.reload, m, src)
      print("refused", not ok, tostring(err))
      print("launch", capi.launch(h) == nil)
      s:synchronize()
      print("x", x:download()[1])
      capi.release(h)
      m:reload(src) -- nothing holds the old code in a body now
      print("reloaded")
      m:free(); x:free(); c:free()
    ]])
    assert.is_true(okp, out)
    assert.matches("refused\ttrue\t[^\n]*module:reload: a C graph %(cugraph_tograph%) launches "
                   .. "this module's code inside conditional nodes", out)
    assert.matches("launch\ttrue", out)
    assert.matches("x\t3\n", out)
    assert.matches("reloaded", out)
    assert.matches("capi: all passed", out)
  end)

  it("takes m:reload(cuda.ptx(src)) for a module that cuda.compile made", function()
    local src = [[
      extern "C" __global__ void add_scalar_f32(float *y, const float *s, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] += *s;
      }]]
    local opts = { arch = "sm_90" }
    local m = cuda.compile(src, opts)
    assert.equals("add_scalar_f32(f32*, const f32*, i32)", m.add_scalar_f32:signature())
    local s = cuda.stream()
    local y = cuda.buffer("f32", 256):fill(0)
    local k = cuda.scalar("f32", 1)
    local g = s:capture(function() m.add_scalar_f32:launch(s, 1, 256, y, k, 256) end)
    g:launch()
    m:reload(cuda.ptx(src:gsub("%+=", "-="), opts))
    g:launch()
    s:synchronize()
    if H.gpu or H.sim then assert.equals(0, y:download()[1]) end
    -- the kernel keeps its C types; messages keep the module's name
    assert.equals("add_scalar_f32(f32*, const f32*, i32)", m.add_scalar_f32:signature())
    local err = H.error_of(m.reload, m, (cuda.ptx(src:gsub("add_scalar_f32", "renamed"), opts)))
    assert.matches("^kernel%.cu: reload: the new code has no kernel 'add_scalar_f32'", err)
    g:free(); m:free()
  end)

  it("keeps the old code on a compile error or a changed signature", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local s = cuda.stream()
    local y = cuda.buffer("f32", 256):fill(0)
    local k = cuda.scalar("f32", 2)
    local kern = m.add_scalar_f32
    local g = s:capture(function() kern:launch(s, 1, 256, y, k, 256) end)
    local err = H.error_of(m.reload, m, "not ptx at all\n", "bad.ptx")
    assert.matches("bad.ptx", tostring(err))
    local renamed = source():gsub("add_scalar_f32", "add_scalar_g32")
    err = H.error_of(m.reload, m, renamed, "renamed.ptx")
    assert.matches("renamed.ptx: reload: the new code has no kernel 'add_scalar_f32'; "
                   .. "the old code stays", err)
    local retyped = source():gsub("(add_scalar_f32%(%s*%.param %.u64 [%w_]+,%s*%.param %.u64 [%w_]+,%s*%.param )%.u32", "%1.u64")
    if retyped ~= source() then
      err = H.error_of(m.reload, m, retyped, "retyped.ptx")
      assert.matches("became", err)
    end
    g:launch(); s:synchronize()
    assert.equals(2, y:download()[1])
    g:free()
  end)

  it("refuses inside a capture", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local s = cuda.stream()
    local y = cuda.buffer("f32", 256)
    local err = H.error_of(s.capture, s, function()
      y:fill(0, s)
      m:reload(source())
    end)
    assert.matches("module:reload%(%) inside a graph capture", err)
  end)

  it("cuda.watch polls a file and runs the reload when it changes", function()
    local path = os.tmpname()
    local calls = 0
    local poll = cuda.watch(path, function(p)
      calls = calls + 1
      if calls == 2 then error("compile failed: " .. p) end
    end)
    assert.is_nil(poll())
    local f = assert(io.open(path, "w")); f:write("a"); f:close()
    assert.is_true(poll())
    assert.is_nil(poll())
    f = assert(io.open(path, "w")); f:write("bb"); f:close()
    local ok, err = poll()
    assert.is_false(ok)
    assert.matches("compile failed", err)
    assert.equals(0, H.garbage(function() poll() end, 1000))
    os.remove(path)
  end)
end)

describe("OpenGL interop", function()
  -- The software driver stands in for GL (CUDA_DOUBLE_GL_BYTES of memory
  -- per buffer object, reachable only while mapped); on the GPU the real
  -- path is examples/embed/particles, with an EGL context.
  if H.gpu then
    it("runs on the software driver's stand-in", function()
      pending("needs a GL context: make examples runs examples/embed/particles")
    end)
    return
  end
  local m = H.kernels()

  it("maps a buffer object for a scope, and kernels write what the next map reads", function()
    local r = cuda.gl_buffer(5, "i32")
    local s = cuda.stream()
    assert.matches("^cugraph%.GLResource of i32", tostring(r))
    r:map(s, function(b)
      assert.equals(1024, #b) -- 4096 bytes
      assert.matches("borrowed", tostring(b))
      b:fill(41)
      m.inc_i32:launch(s, 4, 256, b, #b)
    end)
    local seen
    r:map(s, function(b) seen = b:download() end)
    assert.same({ 42, 42 }, { seen[1], seen[1024] })
    r:free()
    assert.matches("%(freed%)$", tostring(r))
  end)

  it("detaches the buffer at the end of the scope, on return and on error", function()
    local r <close> = cuda.gl_buffer(6, "f32")
    local s, kept = cuda.stream(), nil
    r:map(s, function(b) kept = b end)
    assert.error_matches(function() kept:download() end, "freed")
    assert.error_matches(function() r:map(s, function(b) kept = b; error("stop") end) end, "stop")
    assert.error_matches(function() kept:fill(0) end, "freed")
    r:map(s, function() end) -- unmapped after the error: maps again
    local v, vv
    r:map(s, function(b) v = b:view(4, 8, "i32"); vv = v:view(1, 2) end)
    local why = "attempt to use a view of a GLResource's mapped buffer after its map scope"
    for _, call in ipairs { function() v:download() end, function() vv:fill(1) end,
                            function() m.inc_i32:launch(s, 1, 8, v, 8) end,
                            function() v:view(0, 1) end } do
      assert.error_matches(call, why, 1, true)
    end
    vv:free(); v:free()
  end)

  it("refuses nesting, freeing inside the scope and capture of the map", function()
    local r <close> = cuda.gl_buffer(8, "u32")
    local s = cuda.stream()
    r:map(s, function()
      assert.error_matches(function() r:map(s, function() end) end, "already mapped")
      assert.error_matches(function() r:free() end, "inside its own map scope")
    end)
    assert.error_matches(function()
      s:capture(function() r:map(s, function() end) end)
    end, "GLResource:map%(%) .*capture")
    assert.error_matches(function() cuda.gl_buffer(0, "f32") end, "not a GL buffer name")
    assert.error_matches(function() cuda.gl_buffer(1, "f32", "write") end, "invalid option 'write'")
  end)

  it("lets a graph captured inside the scope run there; after it, the graph refuses to launch", function()
    local r <close> = cuda.gl_buffer(9, "i32")
    local s = cuda.stream()
    r:map(s, function(b)
      b:fill(0)
      local g <close> = s:capture(function() m.inc_i32:launch(s, 4, 256, b, #b) end)
      g:launch(); g:replay(2)
      assert.equals(3, b:download()[1])
    end)
    local g
    assert.error_matches(function()
      r:map(s, function(b) g = s:capture(function() m.inc_i32:launch(s, 4, 256, b, #b) end) end)
    end, "a live graph captured the mapped buffer; free it inside the map scope")
    for _, call in ipairs { function() g:launch() end, function() g:replay(1) end,
                            function() s:capture(function() g:launch(s) end) end } do
      assert.error_matches(call, "cugraph%.Graph #" .. g:id() .. " captured a buffer of a "
                           .. "GLResource's map scope, which has ended")
    end
    g:free()
    local seen
    r:map(s, function(b) seen = b:download()[1] end)
    assert.equals(3, seen) -- the refused launches ran nothing
  end)

  it("maps a texture as an Array for a scope, which copies and surfaces reach", function()
    local r <close> = cuda.gl_image(11, "2d", { surface = true, access = "read_write" })
    local s = cuda.stream()
    assert.matches("^cugraph%.GLResource of an image", tostring(r))
    local texels = {}
    for i = 1, 64 * 64 * 4 do texels[i] = i % 251 end
    local kept, surf
    local one = cuda.buffer("u8", 4):fill(0)
    r:map(s, function(a)
      assert.same({ 64, 64 }, { a:shape() }) -- CUDA_DOUBLE_GL_IMAGE's default
      assert.same({ "u8x4", "u8", 4 }, { a:format() })
      assert.matches("surface", tostring(a))
      a:copy2d(cuda.buffer("u8", texels), 64, 64)
      kept, surf = a, a:surface()
      local g <close> = s:capture(function() one:copy2d(a, 1, 1, { stream = s }) end)
      g:launch(s) -- a graph made and freed in the scope runs there
      s:synchronize()
      assert.same({ 1, 2, 3, 4 }, one:download())
    end)
    assert.error_matches(function() kept:shape() end, "freed")
    assert.error_matches(function() surf:handle() end, "after its map scope")
    local back = cuda.buffer("u8", 64 * 64 * 4):fill(0)
    r:map(s, function(a) back:copy2d(a, 64, 64) end) -- the texture kept them
    assert.same(texels, back:download())
    local g
    assert.error_matches(function()
      r:map(s, function(a) g = s:capture(function() back:copy2d(a, 64, 64, { stream = s }) end) end)
    end, "a live graph captured the mapped array; free it inside the map scope")
    assert.error_matches(function() g:launch() end, "captured a buffer of a GLResource's map scope")
    g:free()
    surf:free()
    assert.error_matches(function() cuda.gl_image(0, "2d") end, "not a GL texture name")
    assert.error_matches(function() cuda.gl_image(1, "cube") end, "invalid option 'cube'")
    assert.error_matches(function() cuda.gl_image(1, "2d", { surfce = true }) end, "unknown option 'surfce'")
    assert.error_matches(function() cuda.gl_image(1, "2d", { access = "write" }) end, "invalid option 'write'")
  end)
end)
