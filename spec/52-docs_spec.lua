-- Every ```lua block of README.md and docs/*.md runs, each in a fresh
-- cugraph-lua process in an empty folder (with build/ linked into it), and
-- must exit 0: what the docs show works as shown.
--
-- An HTML comment on the line just before a block's fence says more about
-- it; its items are separated by ";":
--   setup            every later block of the file runs after this one
--   alone            the block runs by itself, not after the setup block
--   continues        the block runs after the block before it (and what
--                    that one runs after): a continuation, not a whole
--   needs: sim       kernels must really run: skipped on the test double
--   needs: gpu       runs only on a real GPU (make test-gpu)
--   needs: 2 devices runs with two devices: CUDA_DOUBLE_DEVICES=2 on the
--                    double and the simulator, two GPUs on real hardware
-- A block that continues another has its needs too.
local H = require "support.helper"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function docs()
  local files = { "README.md" }
  local p = assert(io.popen("ls docs/*.md"))
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  return files
end

local known = { sim = true, gpu = true, ["2 devices"] = true, peer = true }

-- The ```lua blocks of a Markdown text: {line, code, chain, needs}, where
-- chain is the source the block runs (the blocks it follows, then its own).
local function blocks(path)
  local list, setup, prev = {}, nil, nil
  local lines = {}
  for l in (read(path) .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  local i = 1
  while i <= #lines do
    local l = lines[i]
    if l:match("^%s+```lua") then
      error(("%s:%d: a ```lua fence must start the line"):format(path, i))
    end
    if l:match("^```lua%s*$") then
      local start, code = i, {}
      i = i + 1
      while i <= #lines and not lines[i]:match("^```%s*$") do
        code[#code + 1] = lines[i]
        i = i + 1
      end
      assert(i <= #lines, ("%s:%d: unclosed ```lua block"):format(path, start))
      local b = { line = start, needs = {}, code = table.concat(code, "\n") .. "\n" }
      local marks = start > 1 and lines[start - 1]:match("^<!%-%-(.-)%-%->%s*$")
      local is_setup, continues, alone = false, false, false
      for item in (marks or ""):gmatch("[^;]+") do
        item = item:match("^%s*(.-)%s*$")
        local need = item:match("^needs:%s*(.-)$")
        if item == "setup" then is_setup = true
        elseif item == "continues" then continues = true
        elseif item == "alone" then alone = true
        elseif need and known[need] then b.needs[need] = true
        else error(("%s:%d: unknown mark '%s' (setup, alone, continues, needs: sim|gpu|2 devices|peer)")
                   :format(path, start, item)) end
      end
      local before = ""
      if continues then
        assert(prev, ("%s:%d: continues, but no block comes before it"):format(path, start))
        before = prev.chain
        for k in pairs(prev.needs) do b.needs[k] = true end
      elseif setup and not alone then
        before = setup.chain
        for k in pairs(setup.needs) do b.needs[k] = true end
      end
      b.chain = before .. ("-- %s:%d\n"):format(path, start) .. b.code
      list[#list + 1] = b
      if is_setup then setup = b end
      prev = b
    end
    i = i + 1
  end
  return list
end

-- Why a block does not run on this driver, or nil.
local function skip(b)
  if b.needs.gpu and not H.gpu then return "it needs a GPU (make test-gpu)" end
  if b.needs.sim and not H.gpu and not H.sim then
    return "its kernels run on the simulator or a GPU (make test-sim)"
  end
  if b.needs["2 devices"] and H.gpu and H.cuda.device_count() < 2 then
    return "it needs two GPUs"
  end
  if b.needs.peer then
    local p, why = H.peer()
    if not p then return "it needs the specs' peer: " .. why end
  end
end

local root = os.getenv("PWD")
local build = H.build:sub(1, 1) == "/" and H.build or root .. "/" .. H.build
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. H.quote(dir) .. " && ln -s " .. H.quote(build) .. " " .. H.quote(dir .. "/build")))

describe("the lua blocks of the docs", function()
  teardown(function() os.execute("rm -rf " .. H.quote(dir)) end)

  for _, file in ipairs(docs()) do
    for _, b in ipairs(blocks(file)) do
      local name = ("%s:%d runs"):format(file, b.line)
      local why = skip(b)
      if why then
        pending(name .. ": " .. why)
      else
        it(name, function()
          -- no leak check (make test-asan) either, for the same reason as
          -- below; and GCC 12's LeakSanitizer can crash in its own scan of
          -- dynamic TLS at exit (NVRTC's, seen for README's compile block;
          -- spec/02 meets it with NCCL)
          local env = "cd " .. H.quote(dir) ..
                      ' && ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"'
          if b.needs["2 devices"] and not H.gpu then env = env .. " CUDA_DOUBLE_DEVICES=2" end
          -- one name for every block: CUDA source in a chunk is compiled
          -- with a #line naming the chunk, so the compile cache then serves
          -- the blocks that compile the same source
          local f = assert(io.open(dir .. "/block.lua", "w"))
          f:write(b.chain)
          f:close()
          -- not under valgrind (make test-valgrind) or a compute-sanitizer
          -- (make sanitize-gpu): the blocks check what the docs say, the
          -- other specs check memory; the tools would take minutes over all
          -- of them
          local p = assert(io.popen(env .. " " .. H.plain(H.quote(build .. "/cugraph-lua"))
                                    .. " block.lua 2>&1"))
          local out = p:read("a")
          local _, _, code = p:close()
          assert.equals(0, code, ("%s:%d failed:\n%s\n--- the script:\n%s"):format(file, b.line, out, b.chain))
        end)
      end
    end
  end
end)

-- What every page says of the runtime, checked against it: the list of
-- element types, the methods called on a receiver named as the reference
-- names each type's objects (in the pages' prose and tables: a code block's
-- variables are its own), and the spec files named.
describe("every page of the docs agrees with the runtime", function()
  local cuda = H.cuda
  -- the receivers of docs/api.md's sections (spec/51 checks them there)
  local receivers = {
    s = { "Stream" }, e = { "Event" }, start = { "Event" }, stop = { "Event" },
    b = { "Buffer" }, dst = { "Buffer" }, v = { "Buffer" }, h = { "HostBuffer" },
    a = { "Array" }, tex = { "Texture" }, surf = { "Surface" }, mem = { "ExternalMemory" },
    sem = { "ExternalSemaphore" }, sc = { "Scalar" }, m = { "Module" }, k = { "Kernel" },
    g = { "Graph" }, node = { "Node" }, c = { "Condition", "Comm" }, cond = { "Condition" },
    comm = { "Comm" }, r = { "GLResource", "Rng" }, t = { "DLTensor" }, ew = { "Elementwise" },
    red = { "Reduction" }, blas = { "Blas" }, p = { "FFT" },
  }
  -- the front end's types have no registered metatable: an object each
  local objects = {
    Rng = function() return cuda.rng(1) end,
    Elementwise = function() return cuda.elementwise("f32 x -> f32 y", "y = x") end,
    Reduction = function() return cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 } end,
  }
  local methods = {}
  local function has(t, name)
    if not methods[t] then
      local mt = debug.getregistry()["cugraph." .. t]
      methods[t] = mt and rawget(mt, "methods") or debug.getmetatable(assert(objects[t], t)()).methods
    end
    return rawget(methods[t], name) ~= nil
  end

  for _, file in ipairs(docs()) do
    it(file, function()
      local text = read(file)
      local types = table.concat(cuda.types, " ")
      for list in text:gsub("%s+", " "):gmatch("f32 f64 i8 u8[%w ]*") do
        assert.equals(types, list:sub(1, #types), file .. ": a list of the element types")
      end
      local n, fenced = 0, false
      for line in (text .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        if line:match("^```") then fenced = not fenced end
        for span in (fenced and "" or line):gmatch("`([^`]+)`") do
          for dot, recv, name in span:gmatch("(%.?)%f[%w_]([%a_][%w_]*):([%a_][%w_]*)%(") do
            local kinds = receivers[recv]
            if kinds and dot == "" then
              local found = false
              for _, t in ipairs(kinds) do found = found or has(t, name) end
              assert.is_true(found, ("%s:%d: %s:%s(), but cugraph.%s has no method %s")
                                    :format(file, n, recv, name, table.concat(kinds, " or cugraph."), name))
            end
          end
        end
      end
    end)
  end

  it("name spec files that exist (the docs, the rockspec, the Makefile)", function()
    local files = docs()
    for f in io.popen("ls *.rockspec"):lines() do files[#files + 1] = f end
    files[#files + 1] = "Makefile"
    for _, file in ipairs(files) do
      for spec in read(file):gmatch("spec/%d%d%-[%w_]+_spec%.lua") do
        assert.is_not_nil(io.open(spec), file .. " names " .. spec .. ", which does not exist")
      end
    end
  end)
end)
