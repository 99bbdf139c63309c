-- The embedding API (src/cugraph.h) checks what C hands it like the Lua API.
local H = require "support.helper"

describe("embedding API", function()
  it("refuses buffer sizes whose byte size overflows, and bad types and pointers", function()
    local p = assert(io.popen(H.sanitized(H.quote(H.build .. "/capi")) .. " "
                              .. H.quote(H.build .. "/../lua") .. " 2>&1"))
    local out = p:read("a")
    assert.is_true(p:close(), out)
    assert.matches("f64 of 2%^61%+1: cugraph_pushbuffer: the size in bytes of the f64 buffer overflows", out)
    assert.matches("u8 of SIZE_MAX: cugraph_pushbuffer: the size in bytes of the u8 buffer overflows", out)
    assert.matches("f32 of 2%^62: cugraph_pushbuffer: the size in bytes of the f32 buffer overflows", out)
    assert.matches("null pointer: cugraph_pushbuffer: null pointer or size 0", out)
    assert.matches("unknown type: cugraph_pushbuffer: unknown element type 'float4'", out)
    assert.matches("f32 of 4: ok", out)
  end)

  it("lends an engine's CUDA array to scripts, which copy through it and never destroy it", function()
    H.capi_passes([[
      local cuda = require "cugraph"
      local a = capi.array(8, 4, 2)
      assert(tostring(a):find("f32x2[8x4]", 1, true), tostring(a))
      assert(capi.same(a))
      local w, h = a:shape()
      assert(w == 8 and h == 4 and select(3, a:format()) == 2)
      local t = {}
      for i = 1, 64 do t[i] = i end
      local src, back = cuda.buffer("f32", t), cuda.buffer("f32", 64):fill(0)
      local s = cuda.stream()
      local g = s:capture(function()
        a:copy2d(src, 8, 4, { stream = s }); back:copy2d(a, 8, 4, { stream = s })
      end)
      g:launch(s); s:synchronize()
      assert(back:download()[64] == 64)
      local ok, err = pcall(a.free, a)
      assert(not ok and tostring(err):find("used by live cugraph.Graph"), tostring(err))
      g:free()
      a:free()          -- detaches the Lua object; the host destroys the array
      assert(tostring(a):find("freed"))
      local b = capi.array(4, 4, 4)
      collectgarbage(); collectgarbage() -- b stays the host's too
      print("script done", b ~= nil)
    ]])
  end)

  -- The checkout's line of docs/embedding.md's link recipes, as printed,
  -- in a folder with src/ and build/ linked in; the program, static, runs
  -- from another folder on the simulator, which the library finds where it
  -- was built (the program's own folder has none).
  it("builds as docs/embedding.md prints, and finds the simulator from any folder", function()
    if os.getenv("CUGRAPH_LUA_PRELOAD") then
      pending("the recipe links no sanitizer runtime: make test runs it")
      return
    end
    local doc = assert(io.open("docs/embedding.md")):read("a")
    local block = doc:match("<!%-%- link recipes:[^\n]*\n```sh\n(.-)\n```")
    assert.is_string(block, "docs/embedding.md has no marked link recipes")
    local cmd
    for line in (block:gsub("\\\n", "") .. "\n"):gmatch("([^\n]*)\n") do
      if line:match("#%s*checkout$") then cmd = line:gsub("%s*#.*$", "") end
    end
    assert.is_string(cmd, "no checkout recipe in docs/embedding.md")
    local here = io.popen("pwd"):read("l")
    local build = H.build:sub(1, 1) == "/" and H.build or here .. "/" .. H.build
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p %s && ln -s %s %s/src && ln -s %s %s/build && cp %s %s/engine.c")
                      :format(H.quote(dir), H.quote(here .. "/src"), H.quote(dir), H.quote(build),
                              H.quote(dir), H.quote(here .. "/examples/embed/hello.c"), H.quote(dir))))
    local p = assert(io.popen("cd " .. H.quote(dir) .. " && " .. cmd .. " 2>&1"))
    local out = p:read("a")
    assert.is_true(p:close(), cmd .. "\n" .. out)
    p = assert(io.popen("cd / && env -u CUGRAPH_LUA_LIBNCCL CUGRAPH_LUA_LIBCUDA=sim "
                        .. H.quote(dir .. "/engine") .. " " .. H.quote(here .. "/lua") .. " 2>&1"))
    out = p:read("a")
    local ok = p:close()
    os.execute("rm -rf " .. H.quote(dir))
    assert.is_true(ok, out)
    assert.matches("hello: cugraph%-lua PTX simulator, x%[1%] = 10", out)
  end)
end)
