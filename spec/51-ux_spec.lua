-- What a Lua user meets first: errors at the script's line, typed extern "C"
-- kernels, cubin compiles and their cache, life without a GPU, the command
-- line, one API rule everywhere, annotations, release files, .npy files.
local H = require "support.helper"
local cuda = H.cuda
local core = require "cugraph.core"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function ls(dir)
  local t = {}
  for f in io.popen("ls " .. H.quote(dir) .. " 2>/dev/null"):lines() do t[f] = true end
  return t
end

local here = debug.getinfo(1, "S").short_src

local saxpy = [[
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
]]

describe("errors", function()
  it("carry the line of the script that made the call, and say they are errors", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() cuda.buffer("u8", 1 << 50) end)
    assert.is_false(ok)
    assert.is_true(cuda.is_error(err))
    assert.equals(here .. ":" .. line, err.where)
    assert.equals(here .. ":" .. line .. ": cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: " .. err.message,
                  tostring(err))
    assert.is_false(cuda.is_error("cuMemAlloc"))
    assert.is_false(cuda.is_error(setmetatable({}, {})))
  end)

  it("print with a traceback from cugraph-lua, error objects too", function()
    local code, out = H.script("local cuda = require 'cugraph'\n\nlocal b = cuda.buffer('u8', 1 << 50)\n")
    assert.equals(1, code)
    assert.matches("cugraph%-lua: [^\n]*:3: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY", out)
    assert.matches("stack traceback:", out)
    assert.matches(":3: in main chunk", out)
  end)

  it("from the front end name the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() cuda.compile("x", { fastmath = true }) end)
    assert.is_false(ok)
    assert.equals(here .. ":" .. line .. ": compile: unknown option 'fastmath' (valid: arch, cache, defines, "
                  .. "fast_math, include, lineinfo, name, names, options, std)", err)
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() cuda.load_module(H.build) end)
    assert.is_false(ok)
    assert.matches("^" .. here:gsub("%p", "%%%0") .. ":" .. line .. ": load_module: ", err)
  end)

  it("of NVRTC give the whole log, its lines in the Lua file", function()
    local line = debug.getinfo(1, "l").currentline + 2
    local ok, err = pcall(function() cuda.ptx([[
      extern "C" __global__ void k(float *x) {
        x[0] = undefined_a;
        x[1] = undefined_b;
      }]], { arch = "sm_90", cache = false }) end)
    assert.is_false(ok)
    assert.equals("NVRTC_ERROR_COMPILATION", err.name)
    local file = here:gsub("%p", "%%%0")
    assert.matches(file .. "%(" .. line + 1 .. "%): error: identifier \"undefined_a\"", err.message)
    assert.matches(file .. "%(" .. line + 2 .. "%): error: identifier \"undefined_b\"", err.message)
    assert.matches("2 errors detected", err.message)
    assert.equals(here .. ":" .. line - 1, err.where)
  end)
end)

describe("extern \"C\" kernels compiled from source", function()
  it("get C types from the compiler and check pointer element types", function()
    local m = cuda.compile(saxpy)
    assert.equals("saxpy(f32, const f32*, f32*, i32)", m.saxpy:signature())
    local s = cuda.stream()
    local x = cuda.buffer("f32", { 1, 2, 3, 4 })
    local y = cuda.buffer("f32", { 10, 20, 30, 40 })
    assert.error_matches(function() m.saxpy:launch(s, 1, 32, 2, cuda.buffer("i32", 4), y, 4) end,
                         "saxpy: argument 2 %(const f32%*%): expected cugraph.Buffer or cugraph.Scalar of f32, got cugraph.Buffer of i32")
    m.saxpy:launch(s, 1, 32, 2, x, y, 4)
    s:synchronize()
    assert.same({ 12, 24, 36, 48 }, y:download())
  end)

  it("sit beside C++ kernels, whose mangled names type them, in one module", function()
    local m = cuda.compile(saxpy .. "__global__ void axpy(float a, const float *x, float *y, int n) {}\n")
    collectgarbage("collect") -- the signatures live as long as the module
    assert.equals("axpy(f32, const f32*, f32*, i32)", m.axpy:signature())
    assert.equals("saxpy(f32, const f32*, f32*, i32)", m.saxpy:signature())
  end)

  it("keep PTX types where the compiler cannot spell them (a struct by value)", function()
    local src = "struct P { int a, b; };\n" ..
                "extern \"C\" __global__ void pair(P p, int *out) { *out = p.a + p.b; }\n"
    local ptx = cuda.ptx(src, { arch = "sm_90", cache = false })
    local e = cuda.entries(ptx)[1]
    assert.is_false(e.typed)
    assert.equals("b8[8]", e.params[1])
  end)
end)

describe("compiles", function()
  it("make a cubin for a real architecture and PTX for a virtual one", function()
    local ptx, _, cubin = core.compile(saxpy, { arch = "sm_90", cache = false })
    assert.matches("%.target sm_90", ptx)
    assert.equals("\127ELF", cubin:sub(1, 4))
    local vptx, _, none = core.compile(saxpy, { arch = "compute_90", cache = false })
    assert.matches("%.entry saxpy", vptx)
    assert.equals("", none)
  end)

  it("load the device's cubin, typed", function()
    local m = cuda.compile(saxpy .. "// cubin " .. os.time() .. "\n")
    assert.same({ "saxpy" }, m:kernels())
    assert.equals("saxpy(f32, const f32*, f32*, i32)", m.saxpy:signature())
  end)

  it("are cached in CUGRAPH_LUA_CACHE_DIR under a size cap, least recently used out", function()
    local dir = os.tmpname()
    os.remove(dir)
    local function run(cap, prog)
      local code, out = H.script("local cuda = require 'cugraph'\n" .. prog,
                                 "CUGRAPH_LUA_CACHE_DIR=" .. H.quote(dir) .. " CUGRAPH_LUA_CACHE_SIZE=" .. cap)
      assert.equals(0, code, out)
      return out
    end
    local src = "extern \"C\" __global__ void k%d(int *o) { *o = %d; }\n"
    local function compile(i) return ("cuda.ptx(%q, {arch = 'sm_90'})\n"):format(src:format(i, i)) end
    local out = run("64M", "print((select(1, cuda.compile_cache_dir())))\n")
    assert.equals(dir, out:match("[^\n]+"))
    local before = ls(dir)
    run("64M", compile(1))
    local a
    for f in pairs(ls(dir)) do if not before[f] then a = f end end
    before = ls(dir)
    run("64M", compile(2))
    local b
    for f in pairs(ls(dir)) do if not before[f] then b = f end end
    assert.is_string(a)
    assert.is_string(b)
    run("64M", compile(1)) -- a hit: a is now the most recently used
    local size = #read(dir .. "/" .. a) + #read(dir .. "/" .. b)
    run(tostring(size + #read(dir .. "/" .. a) // 2), compile(3))
    local now = ls(dir)
    assert.is_true(now[a], "the entry used last stays")
    assert.is_nil(now[b], "the least recently used entry goes")
    os.execute("rm -rf " .. H.quote(dir))
  end)
end)

describe("without a GPU", function()
  local env = "CUGRAPH_LUA_LIBCUDA=/nonexistent/libcuda.so"

  it("answers available, device_count and --info, and ptx says to pass an arch", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local ok, why = cuda.available()
      print(ok, why)
      print(cuda.device_count())
      print(select(2, pcall(cuda.ptx, "__global__ void k() {}")))
      print(#cuda.ptx("__global__ void k() {}", {arch = "sm_90"}) > 0)
      print(select(2, pcall(cuda.compile, "__global__ void k() {}")))
    ]], env)
    assert.equals(0, code, out)
    assert.matches("false\tno CUDA driver found %(/nonexistent/libcuda.so%)", out)
    assert.matches("\n0\n", out)
    assert.matches("compile: no GPU to take the architecture from %(no CUDA driver found.*%); " ..
                   "pass one, e.g. {arch = \"sm_90\"}", out)
    assert.matches("\ntrue\n", out)
    -- a module needs a driver: an arch would not help, the simulator does
    assert.matches("\n[^\n]*compile: no CUDA driver found %(/nonexistent/libcuda.so%)[^\n]*; without a GPU, " ..
                   "run on the PTX simulator: cugraph%-lua %-%-sim script%.lua %(or CUGRAPH_LUA_LIBCUDA=sim%)\n", out)
    code, out = H.run("--info", env)
    assert.equals(0, code, out)
    assert.matches("driver%s+none: no CUDA driver found", out)
    assert.matches("devices%s+0", out)
    assert.matches("NVRTC%s+%d+%.%d+", out)
    assert.matches("cache%s+", out)
  end)

  it("on the simulator, the examples' speed-ups and profiles say they are not a GPU's timings", function()
    local code, out = H.run("examples/solver.lua 16 1e-8 profile", "CUGRAPH_LUA_LIBCUDA=sim", { plain = true })
    assert.equals(0, code, out)
    assert.matches("host%-driven [^\n]*: [%d.]+x %(the PTX simulator's clock, not a GPU's%)\n", out)
    assert.matches("\nprofile %(stamps%): [^\n]*\n  on the PTX simulator: its own clock, not a GPU's timings", out)
  end)

  it("names --sim when there is no driver, and --sim runs on the simulator beside the module", function()
    local code, out = H.script("require 'cugraph'.buffer('f32', 1)", env)
    assert.not_equals(0, code)
    assert.matches("cugraph%-lua %-%-sim script%.lua", out)
    local src = [[
      local cuda = require "cugraph"
      local m = cuda.compile("extern \"C\" __global__ void k(float *a) { a[threadIdx.x] = threadIdx.x * 2.0f; }")
      local a = cuda.buffer("f32", 4)
      local s = cuda.stream()
      m.k:launch(s, 1, 4, a)
      s:synchronize()
      print(table.concat(a:download("table"), " "), cuda.info().simulator ~= nil)
    ]]
    local path = os.tmpname()
    local f = assert(io.open(path, "w")); f:write(src); f:close()
    code, out = H.run("--sim " .. path, env)
    assert.equals(0, code, out)
    assert.matches("^0%.0 2%.0 4%.0 6%.0\ttrue\n$", out)
    code, out = H.run(path, "CUGRAPH_LUA_LIBCUDA=sim")
    os.remove(path)
    assert.equals(0, code, out)
    assert.matches("^0%.0 2%.0 4%.0 6%.0\ttrue\n$", out)
    code, out = H.run("--info", "CUGRAPH_LUA_LIBCUDA=sim")
    assert.equals(0, code, out)
    assert.matches("simulator%s+/%S*libcuda%-sim%.so", out)
    assert.matches("driver%s+PTX simulator %(/%S*libcuda%-sim%.so%), no GPU: CUDA %d", out)
  end)
end)

describe("the command line", function()
  it("takes -h, --help and --version", function()
    for _, opt in ipairs { "-h", "--help" } do
      local code, out = H.run(opt)
      assert.equals(0, code)
      assert.matches("^usage: [^ ]*cugraph%-lua ", out)   -- the name it was run as
      assert.matches("%-%-info", out)
    end
    local code, out = H.run("--version")
    assert.equals(0, code)
    assert.matches("^cugraph%-lua " .. cuda.version:gsub("%p", "%%%0") .. " %(Lua 5%.4[%.%d]*%)\n$", out)
  end)

  it("suggests the long option meant, and --info names a software driver", function()
    local code, out = H.run("--simm")
    assert.equals(1, code)
    assert.matches("unrecognized option '%-%-simm' %(did you mean '%-%-sim'%?%)\nusage: ", out)
    code, out = H.run("--inof")
    assert.equals(1, code)
    assert.matches("unrecognized option '%-%-inof' %(did you mean '%-%-info'%?%)", out)
    code, out = H.run("--sim --info")
    assert.equals(0, code, out)
    assert.matches("\ndriver +PTX simulator %([^)]*libcuda%-sim%.so%), no GPU: CUDA %d+%.%d+\n", out)
    if H.double and not H.sim then -- the double, as make test runs it
      code, out = H.run("--info")
      assert.equals(0, code, out)
      assert.matches("\ndriver +test double %([^)]*libcuda%-double%.so%), no GPU", out)
    end
  end)

  it("prints the paths stock lua5.4 needs (--paths), which let it require cugraph", function()
    local code, out = H.run("--paths")
    assert.equals(0, code, out)
    assert.matches("^export LUA_PATH='/[^']*/%?%.lua;[^']*/%?/init%.lua;;'\nexport LUA_CPATH='/[^']*/%?%.so;;'\n$", out)
    if os.execute("command -v lua5.4 >/dev/null 2>&1") then
      local preload = os.getenv("CUGRAPH_LUA_PRELOAD") -- a sanitizer's runtime
      local p = assert(io.popen("eval \"$(" .. H.build .. "/cugraph-lua --paths)\"; " ..
                                (preload and "LD_PRELOAD=" .. H.quote(preload) .. " " or "") ..
                                H.plain("lua5.4 -e 'print(require(\"cugraph\")._VERSION)'") .. " 2>&1"))
      local v = p:read("a")
      p:close()
      assert.equals(cuda._VERSION .. "\n", v)
    end
  end)

  it("binds cuda in the REPL and prints tables in full", function()
    local p = assert(io.popen(H.sanitized(H.build .. "/cugraph-lua -i") .. " 2>&1 <<'EOF'\n" ..
                              "cuda.version\n{1, 2, name = 'x', t = {a = true}}\n" ..
                              "cuda.buffer('f32', 2)\nEOF"))
    local out = p:read("a")
    p:close()
    assert.matches("> cuda.version\n" .. cuda.version:gsub("%p", "%%%0") .. "\n", out)
    assert.matches('{ 1, 2, name = "x", t = { a = true } }', out, 1, true)
    assert.matches("cugraph.Buffer f32%[2%]", out)
  end)

  -- Runs the REPL on the lines of input (timeout 60: a print that never
  -- ends fails the spec instead of hanging it).
  local function repl(input)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(input)
    f:close()
    local t0 = os.time()
    local p = assert(io.popen("timeout 60 " .. H.sanitized(H.build .. "/cugraph-lua -i") .. " 2>&1 < " ..
                              H.quote(path)))
    local out = p:read("a")
    local _, _, code = p:close()
    os.remove(path)
    return code, out, os.time() - t0
  end

  it("prints any table in the REPL at once: its raw contents, at most 100 entries each", function()
    local code, out, took = repl("setmetatable({1, 2}, {__len = function() return 1e8 end, " ..
                                 "__index = function() error('no') end})\n" ..
                                 "t = {} for i = 1, 1e6 do t[i] = i end t.x = 1\nt\n" ..
                                 "{ a = { b = { c = { d = { e = { f = 1 } } } } } }\n")
    assert.equals(0, code, out)
    assert.is_true(took < 30, out)
    assert.matches("\n{ 1, 2 }\n", out)
    assert.matches("\n  99,\n  100,\n  ...\n}\n", out)
    assert.matches("{ a = { b = { c = { d = { e = {...} } } } } }", out, 1, true)
  end)

  it("stops a print that never ends in the REPL on ^C, and goes on", function()
    -- lua5.4 -i dies of the ^C (its print runs without its handler)
    local code, out = repl("pid = io.open('/proc/self/stat'):read('n'); mark = os.tmpname(); " ..
                           "os.remove(mark); killer = io.popen(('while [ ! -e %s ]; do sleep 0.05; " ..
                           "done; sleep 0.3; kill -INT %d; rm -f %s'):format(mark, pid, mark))\n" ..
                           "setmetatable({}, {__tostring = function() io.open(mark, 'w'):close() " ..
                           "while true do end end})\n1 + 1\n")
    assert.equals(0, code, out)
    assert.matches("interrupted!\n> 1 %+ 1\n2\n", out)
  end)
end)

describe("one API", function()
  it("takes C type names wherever element types go, and lists them when wrong", function()
    assert.equals("f32", cuda.buffer("float", 2):type())
    assert.equals("u32", cuda.scalar("unsigned int", 1):type())
    assert.equals("i64", cuda.buffer("long long", 1):type())
    assert.equals("u8", cuda.buffer("uint8_t", 1):type())
    assert.error_matches(function() cuda.buffer("flaot", 1) end,
                         "unknown element type 'flaot'; expected f32 f64 i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16, or a C name")
    assert.error_matches(function() cuda.buffer("float*", 1) end, "unknown element type")
  end)

  it("returns the object from methods that change it", function()
    local s, e, b = cuda.stream(), cuda.event(), cuda.buffer("f32", 4)
    assert.equals(b, b:upload({ 1 }))
    assert.equals(b, b:fill(0))
    assert.equals(b, b:copy(cuda.buffer("f32", 4)))
    assert.equals(s, s:wait(e))
    assert.equals(e, e:record(s))
    local k = H.kernels().saxpy
    assert.equals(k, k:shared(0))
    local g = s:capture(function() b:fill(1, s) end)
    assert.equals(g, g:update(function() b:fill(2, s) end))
    assert.matches("%(1 node, 0 launches%)$", tostring(g))
  end)

  it("gives a kernel again from its module after k:free()", function()
    local m = cuda.load_module(H.build .. "/kernels.ptx")
    local k = m.saxpy
    k:free()
    assert.matches("%(freed%)$", tostring(k))
    local again = m.saxpy
    assert.is_not.equal(k, again)
    assert.equals(again, m:kernel("saxpy"))
    assert.equals("saxpy", (again:name()))
  end)

  it("gives nil for m.missing and raises for m:kernel('missing')", function()
    local m = H.kernels()
    assert.is_nil(m.missing)
    assert.error_matches(function() m:kernel("missing") end, "module has no kernel 'missing'")
  end)

  it("loads modules from images with cuda.module, from files with cuda.load_module", function()
    local path = H.build .. "/kernels.ptx"
    local one_line = read(path):gsub("//[^\n]*", ""):gsub("%s+", " ")
    assert.is_true(#cuda.module(one_line):kernels() > 0) -- one-line PTX is an image
    assert.is_true(#cuda.load_module(path):kernels() > 0)
    local code, out = H.run("-W -e " .. H.quote("require('cugraph').module(" .. ("%q"):format(path) .. ")"))
    assert.equals(0, code, out)
    assert.matches("cuda.module%(path%) reads a file; use cuda.load_module%(path%)", out)
  end)
end)

-- "name" of every "function cuda.name(" / "function Type:name(" in a text.
local function declared(text)
  local funcs, methods = {}, {}
  for name in text:gmatch("function cuda%.([%w_]+)%(") do funcs[name] = true end
  for t, name in text:gmatch("function (%u%a+):([%w_]+)%(") do
    methods[t] = methods[t] or {}
    methods[t][name] = true
  end
  return funcs, methods
end

-- The sections of docs/api.md ("## Title" up to the next "## "): title ->
-- the "### " headings in it, and the lines of each section.
local function sections(text)
  local heads, lines, cur = {}, {}, nil
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    local title = l:match("^## (.-)%s*$")
    if title then
      cur = title
      heads[cur], lines[cur] = heads[cur] or {}, lines[cur] or {}
    elseif cur then
      local h = l:match("^### (.-)%s*$")
      if h then table.insert(heads[cur], h) end
      table.insert(lines[cur], l)
    end
  end
  return heads, lines
end

-- Each type of the runtime: its section of docs/api.md and the names its
-- objects go by there (s:wait, dst:copy, ...).
local api_types = {
  Stream = { section = "Streams", as = { "s" } },
  Event = { section = "Events", as = { "e", "start", "stop" } },
  Buffer = { section = "Buffers", as = { "b", "dst", "v" } },
  HostBuffer = { section = "Pinned host memory", as = { "h" } },
  Array = { section = "Arrays", as = { "a" } },
  Texture = { section = "Textures", as = { "tex" } },
  Surface = { section = "Surfaces", as = { "surf" } },
  ExternalMemory = { section = "External memory", as = { "mem" } },
  ExternalSemaphore = { section = "External semaphores", as = { "sem" } },
  Scalar = { section = "Scalars", as = { "sc" } },
  Module = { section = "Modules and compilation", as = { "m" } },
  Kernel = { section = "Kernels", as = { "k" } },
  Graph = { section = "Graphs", as = { "g" } },
  Node = { section = "Nodes", as = { "node" } },
  Condition = { section = "Conditional nodes and child graphs", as = { "c", "cond" } },
  Comm = { section = "Collectives (NCCL)", as = { "c", "comm" } },
  GLResource = { section = "OpenGL interop", as = { "r" } },
  DLTensor = { section = "DLPack tensors", as = { "t" } },
  Rng = { section = "Random numbers", as = { "r" } },
  Elementwise = { section = "Elementwise kernels", as = { "ew" } },
  Reduction = { section = "Reductions", as = { "red" } },
  Blas = { section = "Matrix products (cuBLAS)", as = { "blas" } },
  FFT = { section = "Fourier transforms (cuFFT)", as = { "p" } },
  Graphed = { section = "Graphed functions", as = { "f" } },
}

-- Every type the runtime registers, and the front end's: an unknown field
-- or index raises, naming the type, with the spelling it has here.
describe("unknown fields", function()
  local reg = debug.getregistry()

  it("of every type raise, naming the type (m.name of a module is its kernel or nil)", function()
    local seen = 0
    for name, mt in pairs(reg) do
      if type(name) == "string" and name:find("^cugraph%.") and type(mt) == "table"
         and type(rawget(mt, "methods")) == "table" then
        seen = seen + 1
        local methods = rawget(mt, "methods")
        local ok, err = pcall(function() return methods.no_such_field end)
        assert.is_false(ok, name)
        assert.matches(name:gsub("%p", "%%%0") .. " has no field 'no_such_field'$", err)
        ok, err = pcall(function() return methods[0] end)
        assert.is_false(ok, name)
        assert.matches(name:gsub("%p", "%%%0") .. " cannot be indexed with 0", err)
        -- the objects look their methods up there (or through a function of their own)
        local index = rawget(mt, "__index")
        assert.is_true(index == methods or type(index) == "function", name)
      end
    end
    assert.is_true(seen >= 20, "the runtime registers " .. seen .. " types")
    local h = cuda.host_buffer("f32", 2)
    assert.matches("cugraph.HostBuffer has no field 'size': its element count is #h",
                   tostring(H.error_of(function() return h.size end)), 1, true)
    local m = H.kernels()
    assert.is_nil(m.missing) -- a module's fields are its kernels
    local objects = { cuda.rng(1), cuda.elementwise("f32 x -> f32 y", "y = x"),
                      cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 } }
    for _, o in ipairs(objects) do
      local name = getmetatable(o)
      assert.matches(name:gsub("%p", "%%%0") .. " has no field 'no_such_field'",
                     tostring(H.error_of(function() return o.no_such_field end)))
    end
  end)

  it("give the spelling a NumPy or CuPy habit wants, at the caller's line", function()
    local b = cuda.buffer("f32", 4)
    local function err(f) return tostring(H.error_of(f)) end
    assert.matches("^" .. here:gsub("%p", "%%%0") .. ":%d+: cugraph.Buffer cannot be indexed with 0: its "
                   .. "elements are in device memory; read them with b:download%(%)", err(function() return b[0] end))
    assert.matches("cugraph.Buffer has no field 'size': its element count is #b", err(function() return b.size end),
                   1, true)
    assert.matches("cugraph.Buffer has no field 'size': its element count is #b", err(function() return b:size() end),
                   1, true)
    assert.matches("cugraph.Buffer has no field 'dtype': its element type is b:type()",
                   err(function() return b.dtype end), 1, true)
    assert.matches("cugraph.Buffer has no field 'downlaod' (did you mean b:download?)",
                   err(function() return b:downlaod() end), 1, true)
    local s = cuda.stream()
    assert.matches("cugraph.Stream has no field 'synchronise' (did you mean s:synchronize?)",
                   err(function() s:synchronise() end), 1, true)
    assert.matches("cugraph.Stream has no field 'zzz'$", err(function() return s.zzz end))
    assert.matches("cugraph.Scalar has no field 'value': read it with sc:get()",
                   err(function() return cuda.scalar("f32").value end), 1, true)
  end)
end)

describe("annotations and docs", function()
  local s = cuda.stream()
  local m = H.kernels()
  local b = cuda.buffer("f32", 4)
  local g = s:capture(function() b:fill(0, s) end)
  local objects = { Stream = s, Event = cuda.event(), Buffer = b, Scalar = cuda.scalar("u32"),
                    Module = m, Kernel = m.saxpy, Graph = g, Node = g:node(1),
                    Condition = cuda.condition(1), HostBuffer = cuda.host_buffer("f32", 4),
                    Array = cuda.array("f32", 4), Texture = cuda.array("f32", 4):texture(),
                    Surface = cuda.array("f32", 4, { surface = true }):surface(),
                    Comm = cuda.comm_world(), DLTensor = b:dlpack(), Rng = cuda.rng(1),
                    Elementwise = cuda.elementwise("f32 x -> f32 y", "y = x"),
                    Reduction = cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 },
                    Blas = cuda.blas(), FFT = cuda.fft(4, "c2c") }
  local api = read("docs/api.md")
  -- the methods of each type, from its metatable (a GL resource needs a GL
  -- context to exist: its metatable is the registry's)
  local function methods_of(t)
    local mt = objects[t] and debug.getmetatable(objects[t]) or debug.getregistry()["cugraph." .. t]
    return assert(mt and mt.methods, "no methods table for cugraph." .. t)
  end

  it("load as Lua (lua-language-server reads them as code), their functions the runtime's", function()
    local stubs = assert(loadfile("types/cugraph.lua"))()
    for name, f in pairs(stubs) do
      if type(f) == "function" then
        assert.is_function(cuda[name], "a stub without a function: cuda." .. name)
      end
    end
    for name, v in pairs(cuda) do
      if type(v) == "function" then assert.is_function(stubs[name], "no stub: cuda." .. name) end
    end
  end)

  it("annotate every function and method of the runtime, and nothing it lacks", function()
    local funcs, methods = declared(read("types/cugraph.lua"))
    for name, v in pairs(cuda) do
      if type(v) == "function" then
        assert.is_true(funcs[name], "types/cugraph.lua lacks cuda." .. name)
      end
    end
    for name in pairs(funcs) do
      assert.is_function(cuda[name], "annotated but absent: cuda." .. name)
    end
    for t in pairs(api_types) do
      local have = methods_of(t)
      for name in pairs(have) do
        assert.is_true((methods[t] or {})[name], "types/cugraph.lua lacks " .. t .. ":" .. name)
      end
      for name in pairs(methods[t] or {}) do
        assert.is_function(rawget(have, name), "annotated but absent: " .. t .. ":" .. name)
      end
    end
  end)

  it("document each type's methods in its own section of docs/api.md, and only those it has", function()
    local heads = sections(api)
    local by_name = {}  -- "c" -> {"Condition", "Comm"}
    for t, d in pairs(api_types) do
      for _, n in ipairs(d.as) do
        by_name[n] = by_name[n] or {}
        table.insert(by_name[n], t)
      end
    end
    local documented = {}  -- type -> method -> true, from its own section
    for t in pairs(api_types) do documented[t] = {} end
    for title, list in pairs(heads) do
      local own  -- the type whose section this is
      for t, d in pairs(api_types) do if d.section == title then own = t end end
      for _, h in ipairs(list) do
        for recv, name in h:gmatch("([%a_][%w_]*):([%a_][%w_]*)%(") do
          local types = by_name[recv]
          assert.is_table(types, ("docs/api.md, ## %s: heading '%s': whose method is %s:%s?")
                                 :format(title, h, recv, name))
          local found = false
          for _, t in ipairs(types) do
            if t == own then documented[t][name] = true end
            if rawget(methods_of(t), name) then found = true end
          end
          assert.is_true(found, ("docs/api.md, ## %s: documented but absent: %s:%s (%s)")
                                :format(title, recv, name, table.concat(types, " or ")))
          if own and not rawget(methods_of(own), name) then
            local elsewhere = false
            for _, t in ipairs(types) do if t ~= own and rawget(methods_of(t), name) then elsewhere = true end end
            assert.is_true(elsewhere, ("docs/api.md, ## %s: cugraph.%s has no method %s")
                                      :format(title, own, name))
          end
        end
      end
    end
    for t, d in pairs(api_types) do
      assert.is_table(heads[d.section], "docs/api.md has no section ## " .. d.section .. " for cugraph." .. t)
      for name in pairs(methods_of(t)) do
        assert.is_true(documented[t][name], ("docs/api.md lacks %s:%s under ## %s (cugraph.%s)")
                                            :format(d.as[1], name, d.section, t))
      end
    end
  end)

  it("document every field of the module table in docs/api.md, and only those it has", function()
    local heads, lines = sections(api)
    local headed, listed = {}, {}
    for title, list in pairs(heads) do
      for _, h in ipairs(list) do
        for name in h:gmatch("cuda%.([%a_][%w_]*)") do
          assert.is_not_nil(cuda[name], ("docs/api.md, ## %s: documented but absent: cuda.%s"):format(title, name))
          if type(cuda[name]) == "function" then
            assert.truthy(h:find("cuda." .. name .. "(", 1, true),
                          ("docs/api.md, ## %s: cuda.%s is a function: write cuda.%s(...)"):format(title, name, name))
          end
          headed[name] = true
        end
      end
    end
    for _, l in ipairs(assert(lines["The module table"], "docs/api.md has no ## The module table")) do
      local name, kind = l:match("^| `([%a_][%w_]*)` | (%a+) |")
      if name then
        assert.is_not_nil(cuda[name], "docs/api.md, ## The module table: listed but absent: " .. name)
        assert.equals(type(cuda[name]), kind, "docs/api.md, ## The module table: the kind of " .. name)
        listed[name] = true
      end
    end
    for name in pairs(cuda) do
      assert.is_true(headed[name], "docs/api.md has no ### heading for cuda." .. name)
      assert.is_true(listed[name], "docs/api.md, ## The module table, lacks " .. name)
    end
  end)
end)

describe("release files", function()
  it("make help lists every target, a line each", function()
    local p = assert(io.popen("env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s help 2>&1"))
    local out = p:read("a")
    assert.is_true(p:close(), out)
    local listed = {}
    for t, what in out:gmatch("\n  ([%w-]+) +([^\n]+)") do
      assert.is_nil(listed[t], "listed twice: " .. t)
      listed[t] = what
    end
    local phony = {}
    for _, f in ipairs { "Makefile", "bench/bench.mk", "examples/examples.mk" } do
      for list in read(f):gsub("\\\n", " "):gmatch("\n%.PHONY:([^\n]*)") do
        for t in list:gmatch("%S+") do phony[t] = true end
      end
    end
    phony.FORCE = nil -- the stamp's, no target to run
    for t in pairs(phony) do assert.is_string(listed[t], "make help does not list " .. t) end
    for t in pairs(listed) do assert.is_true(phony[t], "make help lists " .. t .. ", not a target") end
  end)

  it("keep the README to ten minutes of reading: under 400 lines", function()
    local _, lines = read("README.md"):gsub("\n", "")
    assert.is_true(lines < 400, ("README.md has %d lines: move detail to docs/"):format(lines))
  end)

  it("take the version from VERSION", function()
    local v = read("VERSION"):match("^(%d+%.%d+%.%d+)\n$")
    assert.is_string(v)
    assert.equals(v, cuda.version)
    assert.equals("cugraph-lua " .. v, cuda._VERSION)
    local spec = read("cugraph-lua-" .. v .. "-1.rockspec")
    assert.matches('version = "' .. v:gsub("%p", "%%%0") .. '%-1"', spec)
    assert.matches('license = "MIT"', spec)
    assert.matches('#define CUGRAPH_VERSION "' .. v:gsub("%p", "%%%0") .. '"', read("src/cugraph.h"))
    assert.matches("Version: @VERSION@", read("cugraph-lua.pc.in"))
    assert.matches("## " .. v:gsub("%p", "%%%0"), read("CHANGELOG.md"))
    assert.matches("^MIT License", read("LICENSE"))
    assert.matches("Version " .. v:gsub("%p", "%%%0"), read("docs/api.md"))
  end)
end)

describe(".npy files", function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. H.quote(dir))

  it("round-trip every element type NumPy has, with a shape", function()
    for _, t in ipairs(cuda.types) do
      if t == "bf16" then
        assert.error_matches(function() cuda.buffer(t, 1):save(dir .. "/b.npy") end,
                             "NumPy has no dtype for bf16")
        goto next
      end
      local b = cuda.buffer(t, { 1, 2, 3, 4, 5, 6 })
      local path = dir .. "/" .. t .. ".npy"
      assert.equals(b, b:save(path, { 2, 3 }))
      local raw = read(path)
      assert.equals("\147NUMPY\1\0", raw:sub(1, 8))
      assert.equals(0, (10 + string.unpack("<I2", raw, 9)) % 64)
      assert.matches("'shape': %(2, 3%)", raw)
      local c, shape = cuda.load(path)
      assert.equals(t, c:type())
      assert.same({ 2, 3 }, shape)
      assert.same(b:download(), c:download())
      ::next::
    end
    local b = cuda.buffer("f32", { 1.5, 2.5 })
    b:save(dir .. "/v.npy")
    assert.matches("'descr': '<f4', 'fortran_order': False, 'shape': %(2,%)", read(dir .. "/v.npy"))
  end)

  local function npy(descr, shape, data, fortran, dict)
    local text = dict or ("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"):format(descr, fortran or "False", shape)
    local pad = (64 - (10 + #text + 1) % 64) % 64
    local path = dir .. "/x.npy"
    local f = assert(io.open(path, "wb"))
    f:write("\147NUMPY\1\0", string.pack("<I2", #text + pad + 1), text, (" "):rep(pad), "\n", data)
    f:close()
    return path
  end

  it("check dtype, byte order, order and size, with clear errors", function()
    assert.error_matches(function() cuda.load(npy(">f4", "(2,)", ("\0"):rep(8))) end,
                         "dtype '>f4' is big%-endian; only little%-endian data is supported")
    assert.error_matches(function() cuda.load(npy("<c8", "(2,)", ("\0"):rep(16))) end,
                         "dtype '<c8' is not supported %(supported: float16, float32, float64")
    assert.error_matches(function() cuda.load(npy("<f4", "(2, 2)", ("\0"):rep(16), "True")) end,
                         "Fortran order")
    assert.error_matches(function() cuda.load(npy("<f4", "(3,)", ("\0"):rep(8))) end,
                         "shape %(3%) of <f4 needs 12 bytes of data, the file has 8")
    assert.error_matches(function() cuda.load(npy("<f4", "(0,)", "")) end, "the array is empty")
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() cuda.load(H.build .. "/kernels.ptx") end)
    assert.is_false(ok)
    assert.matches(":" .. line .. ": load: .*: not a %.npy file", err)
    assert.error_matches(function() cuda.buffer("f32", 4):save(dir .. "/y.npy", { 3 }) end,
                         "save: shape {3} holds 3 elements, the buffer 4")
  end)

  it("read headers strictly: digits only, each key once, products checked", function()
    local function refused(shape, what, rest) -- rest: the dictionary after descr
      local dict = rest and "{'descr': '<f4', 'fortran_order': False, " .. rest
      local path = npy("<f4", shape, ("\0"):rep(8), nil, dict)
      assert.error_matches(function() cuda.load(path) end, what)
    end
    refused("(-2,)", "shape entry 1 is not a non%-negative decimal integer")
    refused("(+2,)", "shape entry 1 is not a non%-negative decimal integer")
    refused("(2.0,)", "not separated by ','")
    refused("(2)", "a shape of one entry needs a trailing ','")
    refused("(0x2,)", "not separated by ','")
    refused("(4294967296, 4294967296, 4294967296,)", "element count overflows at entry 2")
    refused("(99999999999999999999,)", "too large")
    refused("(2147483648, 2147483648,)", "needs more than 2%^63 bytes")
    refused("(2,)", "key 'shape' appears twice", "'shape': (2,), 'shape': (2,), }")
    refused("(2,)", "unknown key 'order'", "'shape': (2,), 'order': 1, }")
    refused("(2,)", "key 'shape' is missing", "}")
    refused("(2,)", "does not end with a newline", "'shape': (2,), } x")
    assert.error_matches(function() cuda.load(dir .. "/x\0.npy") end, "contains a NUL byte")
    assert.error_matches(function() cuda.buffer("f32", 4):save(dir .. "/y\0.npy") end,
                         "contains a NUL byte")
    assert.error_matches(function()
      cuda.buffer("f32", 4):save(dir .. "/y.npy", { 1 << 62, 1 << 62, 4 })
    end, "element count overflows at entry 2")
    -- what b:save writes, numpy's own layout, reads back
    local b = cuda.buffer("i16", { 1, 2, 3, 4, 5, 6 }):save(dir .. "/z.npy", { 3, 1, 2 })
    local c, shape = cuda.load(dir .. "/z.npy")
    assert.same({ 3, 1, 2 }, shape)
    assert.same(b:download(), c:download())
    os.execute("rm -rf " .. H.quote(dir))
  end)
end)

describe("messages name what was wrong", function()

  it("cuda.buffer names itself and the element, and allocates nothing first", function()
    local before = collectgarbage("count")
    local err = H.error_of(cuda.buffer, "f32", { 1, 2, "x" })
    assert.matches("^cugraph.buffer: element 3: expected number, got string", tostring(err))
    assert.matches("^cugraph.buffer: element 2: 300 is out of range for u8",
                   tostring(H.error_of(cuda.buffer, "u8", { 1, 300 })))
    assert.matches("^cugraph.buffer: element 2 is nil",
                   tostring(H.error_of(cuda.buffer, "f32", { 1, nil, 3 })))
    assert.is_true(collectgarbage("count") - before < 64)
    -- b:upload keeps its own name
    local b = cuda.buffer("f32", 2)
    assert.matches("^upload: element 2: expected number",
                   tostring(H.error_of(b.upload, b, { 1, {} })))
  end)

  it("a launch dimension out of range gives the value", function()
    local m = H.kernels()
    local s, b = cuda.stream(), cuda.buffer("i32", 4)
    local e = tostring(H.error_of(m.inc_i32.launch, m.inc_i32, s, 0, 32, b, 4))
    assert.matches("grid.x must be an integer in 1..%d+ %(the device's limit%), got 0", e)
    e = tostring(H.error_of(m.inc_i32.launch, m.inc_i32, s, { 1, 70000 }, 32, b, 4))
    assert.matches("grid.y must be an integer in 1..65535 %(the device's limit%), got 70000", e)
    e = tostring(H.error_of(m.inc_i32.launch, m.inc_i32, s, 1, { 32, 1.5 }, b, 4))
    assert.matches("block.y must be an integer .*, got 1.5", e)
  end)

  it("a kernel the test double cannot run names the double and what runs it", function()
    local m = cuda.compile [[extern "C" __global__ void mine(float *x) { x[threadIdx.x] = 2; }]]
    local s, b = cuda.stream(), cuda.buffer("f32", 4):fill(0)
    if H.double and not H.sim then
      local e = H.error_of(m.mine.launch, m.mine, s, 1, 4, b)
      assert.equals("CUDA_ERROR_NOT_SUPPORTED", e.name)
      assert.matches("the test double runs only the specs' kernels %(mine is not one%); "
                     .. "use CUGRAPH_LUA_LIBCUDA=sim", tostring(e))
    else
      m.mine:launch(s, 1, 4, b)
      s:synchronize()
      assert.same({ 2, 2, 2, 2 }, b:download())
    end
  end)

  it("the front end, loaded by a Lua other than 5.4, says which it needs", function()
    -- the check runs first, before any 5.4 syntax: the file holds none
    local src = read("lua/cugraph/init.lua")
    local code = src:gsub("%-%-[^\n]*", ""):gsub('"[^"\n]*"', '""')
    for _, op in ipairs { "//", "<<", ">>", "&", "|", "<const>", "<close>", "goto", "::" } do
      assert.is_nil(code:find(op, 1, true), "lua/cugraph/init.lua uses " .. op .. ", which Lua 5.1 cannot parse")
    end
    assert.is_nil(code:find("~[^=]"), "lua/cugraph/init.lua uses ~, which Lua 5.1 cannot parse")
    local env = setmetatable({ _VERSION = "Lua 5.1" }, { __index = _G })
    local ok, err = pcall(assert(loadfile("lua/cugraph/init.lua", "t", env)))
    assert.is_false(ok)
    assert.matches("^cugraph needs Lua 5.4, and this is Lua 5.1: run the script with cugraph%-lua or lua5.4", err)
    -- a Lua 5.1 of the machine's own, where there is one
    local lua51 = io.popen("command -v lua5.1 luajit 2>/dev/null"):read("l")
    if lua51 then
      local p = io.popen("LUA_PATH='lua/?.lua;lua/?/init.lua' " .. H.quote(lua51)
                         .. " -e 'require \"cugraph\"' 2>&1")
      assert.matches("cugraph needs Lua 5.4, and this is Lua 5.1", p:read("a"))
      p:close()
    end
  end)

  it("c:set_when lists its operators", function()
    local s, b, c = cuda.stream(), cuda.buffer("f32", 1):fill(0), cuda.condition(1)
    local e = H.error_of(s.capture, s, function(st) c:set_when(st, b, "=<", 1) end)
    assert.matches("invalid option '=<' (expected <, <=, >, >=, ==, ~= or !=)", tostring(e), 1, true)
    local b2 = cuda.buffer("f32", 1)
    assert.matches("invalid option 'json' (expected table or string)",
                   tostring(H.error_of(b2.download, b2, "json")), 1, true)
  end)

  it("a front-end error's traceback starts at the script's line", function()
    local code, out = H.script([[
local cuda = require "cugraph"
cuda.load("/nonexistent/k.ptx")
]])
    assert.equals(1, code, out)
    assert.matches("stack traceback:\n\t[^\n]*:2: in main chunk", out)
    assert.is_nil(out:find("cugraph/[%w_]+%.lua"), out)
  end)

  it("warns at capture when a condition without a default is read before anything set it", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write([[
local cuda = require "cugraph"
local s, b = cuda.stream(), cuda.buffer("f32", 1):fill(0)
local c, d = cuda.condition(), cuda.condition()
s:capture(function(st)
  st:loop_while(c, function(t) b:fill(1, t); c:set(t, 0) end)
end)
s:capture(function(st)
  d:set(st, 1)
  st:loop_while(d, function(t) b:fill(1, t); d:set(t, 0) end)
end)
print("done")
]])
    f:close()
    local code, out = H.run("-W " .. H.quote(path))
    os.remove(path)
    assert.equals(0, code, out)
    local _, n = out:gsub("has no default and nothing in this capture set it", "")
    assert.equals(1, n, out)
    assert.matches(":5: s:loop_while%(%): the condition has no default", out)
    assert.matches("done", out)
  end)
end)
