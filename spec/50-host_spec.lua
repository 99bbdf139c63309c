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
