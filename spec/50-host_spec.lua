-- The cugraph-lua command, and the module loaded from stock lua5.4.
local H = require "support.helper"

describe("cugraph-lua", function()
  it("runs a script with arguments, like lua", function()
    local code, out = H.script([[
      print(select("#", ...), arg[0] ~= nil, arg[-1] ~= nil)
    ]] .. "", nil)
    assert.equals(0, code)
    assert.matches("0\ttrue\ttrue", out)
    code, out = H.run("-e " .. H.quote("print(#arg, arg[1], arg[2])") .. " - a b < /dev/null")
    assert.equals(0, code)
    assert.matches("2\ta\tb", out)
  end)

  it("prints the message and traceback of an error and exits 1", function()
    local code, out = H.script("local function f() error('kaboom') end\nf()\n")
    assert.equals(1, code)
    assert.matches("cugraph%-lua: .*:1: kaboom", out)
    assert.matches("stack traceback:", out)
    code, out = H.run("-e " .. H.quote("error(setmetatable({}, {__tostring = function() return 'obj!' end}))"))
    assert.equals(1, code)
    assert.matches("obj!", out)
  end)

  it("prints a driver error object through its __tostring", function()
    local code, out = H.run("-e " .. H.quote('local c = require "cugraph"; c.buffer("u8", 1 << 50)'))
    assert.equals(1, code)
    assert.matches("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: ", out)
  end)

  it("handles -l, -v, os.exit and LUA_INIT", function()
    local code, out = H.run("-l cugraph -e " .. H.quote("print(type(cugraph.buffer))"))
    assert.equals(0, code)
    assert.matches("function", out)
    assert.equals(3, (H.run("-e " .. H.quote("os.exit(3)"))))
    code, out = H.run("-e " .. H.quote("print(X)"), "LUA_INIT='X=41+1'")
    assert.equals(0, code)
    assert.matches("42", out)
    code, out = H.run("--bogus")
    assert.equals(1, code)
    assert.matches("usage", out)
  end)

  it("runs the REPL on piped input and prints results", function()
    assert.equals(0, (H.run("-i < " .. H.quote(os.tmpname()))))
    local p = assert(io.popen(H.build .. "/cugraph-lua -i 2>&1 <<'EOF'\n1 + 1\nreturn 'a', 3\nEOF"))
    local out = p:read("a")
    p:close()
    assert.matches("2", out)
    assert.matches("a\t3", out)
  end)

  it("finds the module from any directory", function()
    local here = io.popen("pwd"):read("l")
    local code, out = H.run("-e " .. H.quote('print(require("cugraph").version)'),
                            "cd /tmp &&")
    assert.equals(0, code, out)
    assert.matches("^%d+%.%d+%.%d+", out)
    assert.is_string(here)
  end)
end)

describe("require 'cugraph' from stock lua5.4", function()
  it("loads the module from build/cugraph/core.so", function()
    local preload = os.getenv("CUGRAPH_LUA_PRELOAD") -- a sanitizer's runtime
    local env = (preload and "LD_PRELOAD=" .. H.quote(preload) .. " " or "") ..
                "LUA_CPATH=" .. H.quote(H.build .. "/?.so") ..
                " LUA_PATH=" .. H.quote("lua/?.lua;lua/?/init.lua")
    local prog = [[local c = require "cugraph"
      local b = c.buffer("i32", {1, 2, 3})
      print(c.version, table.concat(b:download(), ","))]]
    local p = assert(io.popen(env .. " lua5.4 -e " .. H.quote(prog) .. " 2>&1"))
    local out = p:read("a")
    local _, _, code = p:close()
    assert.equals(0, code, out)
    assert.matches("1,2,3", out)
  end)
end)

describe("the REPL on a terminal", function()
  local readline = select(2, H.run("--info")):match("readline%s+yes") ~= nil

  -- Types input into cugraph-lua on a pseudo-terminal (spec/support/pty.c)
  -- with its own history folder; returns the exit status and what the
  -- terminal showed, carriage returns removed.
  local function session(input, state)
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write(input)
    f:close()
    local p = assert(io.popen("cd " .. H.quote(H.build .. "/..") .. " && TERM=dumb XDG_STATE_HOME="
                              .. H.quote(state) .. " " .. H.quote(H.build .. "/pty") .. " "
                              .. H.quote(path) .. " " .. H.quote(H.build .. "/cugraph-lua") .. " 2>&1"))
    local out = p:read("a"):gsub("\r", "")
    local _, _, code = p:close()
    os.remove(path)
    return code, out
  end

  local state
  before_each(function()
    state = os.tmpname()
    os.remove(state)
  end)
  after_each(function() os.execute("rm -rf " .. H.quote(state)) end)

  it("names the device in its banner and shows a buffer's first and last elements", function()
    local code, out = session(table.concat({
      'b = cuda.buffer("f32", {1, 2, 3})', "b",
      'c = cuda.buffer("i32", 1000):fill(0)', "c:upload({5}, 999)", "c",
      "os.exit(0)", "",
    }, "\n"), state)
    assert.equals(0, code, out)
    local d = H.cuda.device()
    assert.matches("\ncuda: " .. d.name:gsub("%p", "%%%0") .. " %(sm_%d+, %d+ GiB%), device 0 of %d+\n", out)
    assert.matches("cugraph.Buffer f32%[3%] %(0x%x+%) {1.0, 2.0, 3.0}\n", out)
    assert.matches("cugraph.Buffer i32%[1000%] %(0x%x+%) {0, 0, 0, ..., 0, 0, 5}\n", out)
  end)

  it("completes a module's kernels, methods and fields with Tab", function()
    if not readline then pending("built without readline (make deps installs libreadline-dev)") return end
    local code, out = session(table.concat({
      'm = cuda.load_module("' .. H.build .. '/kernels.ptx")', "m.inc_i3\t", "type(m.glob\t)", "cuda.device_c\t()",
      "os.exi\t(0)", "",
    }, "\n"), state)
    assert.equals(0, code, out)
    assert.matches("> m.inc_i32\ncugraph.Kernel inc_i32%(", out)
    assert.matches("> type%(m.global%)\nfunction\n", out)
    assert.matches("> cuda.device_count%(%)\n%d+\n", out)
  end)

  it("keeps a history between sessions", function()
    if not readline then pending("built without readline (make deps installs libreadline-dev)") return end
    local code, out = session("x = 6 * 7\nos.exit(0)\n", state)
    assert.equals(0, code, out)
    local f = assert(io.open(state .. "/cugraph-lua/history"))
    assert.matches("x = 6 %* 7\nos.exit%(0%)", f:read("a"))
    f:close()
    -- Up twice recalls "x = 6 * 7"
    code, out = session("\027[A\027[A\nx\nos.exit(0)\n", state)
    assert.equals(0, code, out)
    assert.matches("\n42\n", out)
  end)
end)

describe("cugraph-lua behaves as lua5.4", function()
  local lua = io.popen("command -v lua5.4"):read("l")
  local cgl = H.build .. "/cugraph-lua"

  -- Runs a shell command line; returns its exit status and output (stdout
  -- and stderr together).
  local function sh(cmd)
    local p = assert(io.popen(cmd .. " 2>&1"))
    local out = p:read("a")
    local _, _, code = p:close()
    return code, out
  end

  -- The same command line with each interpreter in the place of %s; the
  -- outputs are compared line by line after the first n lines.
  local function both(fmt)
    local a = { sh(fmt:format(H.quote(cgl))) }
    if not lua then return a end
    local b = { sh(fmt:format(H.quote(lua))) }
    return a, b
  end

  it("leaves package.path as LUA_PATH and -E make it, and still finds its module", function()
    local a, b = both("env LUA_PATH='x/?.lua' %s -e 'print(package.path)'")
    assert.equals("x/?.lua\n", a[2])
    if b then assert.equals(b[2], a[2]) end
    local code, out = sh("env LUA_PATH='x/?.lua' " .. H.quote(cgl) .. " -E -e 'print(package.path == "
                         .. "\"x/?.lua\", require(\"cugraph\").version)'")
    assert.equals(0, code, out)
    assert.matches("^false\t%d+%.%d+%.%d+\n$", out)   -- -E: Lua's default path, not LUA_PATH
  end)

  it("starts its messages with the name it was run as", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. H.quote(dir)))
    local here = io.popen("pwd"):read("l")
    local target = cgl:sub(1, 1) == "/" and cgl or here .. "/" .. cgl
    os.execute("ln -s " .. H.quote(target) .. " " .. H.quote(dir .. "/other"))
    local code, out = sh(H.quote(dir .. "/other") .. " -e 'error(\"boom\")'")
    assert.equals(1, code)
    assert.matches("^" .. (dir .. "/other"):gsub("%p", "%%%0") .. ": %(command line%):1: boom\n", out)
    if lua then
      os.execute("ln -s " .. H.quote(lua) .. " " .. H.quote(dir .. "/other-lua"))
      local _, ref = sh(H.quote(dir .. "/other-lua") .. " -e 'error(\"boom\")'")
      assert.equals(ref:match("^[^\n]*"):gsub("other%-lua", "other"), out:match("^[^\n]*"))
    end
    os.execute("rm -rf " .. H.quote(dir))
  end)

  it("-i off a terminal echoes the lines it reads, and says when print fails", function()
    local a, b = both("printf '1 + 1\\nx = 3\\nx\\n' | %s -i")
    assert.equals(0, a[1])
    local body = a[2]:gsub("^[^\n]*\n", "")   -- the banner differs
    assert.equals("> 1 + 1\n2\n> x = 3\n> x\n3\n> \n", body)
    if b then assert.equals(b[2]:gsub("^[^\n]*\n", ""), body) end
    a, b = both("printf '1 + 1\\n' | %s -i -e 'print = nil'")
    assert.matches("error calling 'print' %(attempt to call a nil value%)", a[2])
    if b then assert.equals(b[2]:gsub("^[^\n]*\n", ""), a[2]:gsub("^[^\n]*\n", "")) end
  end)

  it("prints an error object through __tostring, with a traceback where lua gives none", function()
    local a, b = both("%s -e 'error(setmetatable({}, {__tostring = function() return \"obj!\" end}))'")
    assert.equals(1, a[1])
    assert.matches("^[^\n]*: obj!\nstack traceback:\n", a[2])
    if b then
      assert.equals(1, b[1])
      assert.equals(b[2]:match(": (obj!)\n"), a[2]:match(": (obj!)\n"))
    end
  end)
end)
