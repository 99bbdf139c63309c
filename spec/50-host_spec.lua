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
    -- plain: the version needs no device
    local p = assert(io.popen("cd /tmp && " .. H.plain(H.build .. "/cugraph-lua -e "
                              .. H.quote('print(require("cugraph").version)')) .. " 2>&1"))
    local out = p:read("a")
    local _, _, code = p:close()
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
    local p = assert(io.popen(env .. " " .. H.sanitized("lua5.4 -e " .. H.quote(prog)) .. " 2>&1"))
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
                              .. H.quote(path) .. " " .. H.sanitized(H.quote(H.build .. "/cugraph-lua")) .. " 2>&1"))
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
      "os.exit(0, true)", "", -- closes the state: the buffers are freed
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

-- The stand-alone interpreter's behaviours Lua 5.4's own tests check, run
-- with cugraph-lua and with the system's lua5.4, outputs compared (the
-- interpreter's name replaced by LUA). Left out on purpose: the banner
-- (-v), -h (an option here) and the traceback after an error object.
describe("cugraph-lua against lua5.4, case by case", function()
  local lua = io.popen("command -v lua5.4"):read("l")
  local here = io.popen("pwd"):read("l")
  local cgl = here .. "/" .. H.build .. "/cugraph-lua"
  if H.build:sub(1, 1) == "/" then cgl = H.build .. "/cugraph-lua" end
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. H.quote(dir))
    local files = {
      ["p.lua"] = "print(package.path)\n",
      ["m1.lua"] = "print(1); a=2; return {x=15}\n",
      ["i.lua"] = "(6*2-6) -- ===\na =\n10\nprint(a)\na",
      ["j.lua"] = " --\na = 2\n",
      ["k.lua"] = "a = [[b\nc\nd\ne]]\n=a",
      ["e.lua"] = "error{}\n",
      ["w.lua"] = 'warn("@allow")\nwarn("@off", "XXX", "@off")\nwarn("@off")\nwarn("@on", "Y", "@on")\n' ..
                  'warn("@off")\nwarn("@on")\nwarn("", "@on")\nwarn("Z", "Z")\n',
      ["g.lua"] = 'u1 = setmetatable({}, {__gc = function () error("XYZ") end})\n' ..
                  'u2 = setmetatable({}, {__gc = function () error("ZYX") end})\n',
      ["f.lua"] = 'print("one")\nsetmetatable({}, {__gc = function () print(1) end})\n' ..
                  'setmetatable({}, {__gc = function ()\n  print(2)\n' ..
                  '  setmetatable({}, {__gc = function () print(3) end})\n' ..
                  '  print(collectgarbage())\n  os.exit(0, true)\nend})\n',
      ["c.lua"] = 'local x <close> = setmetatable({}, {__close = function (_, err) ' ..
                  'assert(err == nil) print("Ok") end})\n' ..
                  'local y <close> = setmetatable({}, {__close = function () print(120) end})\n' ..
                  'os.exit(true, true)\n',
      ["n.lua"] = "#comment\nprint(debug.getinfo(1).currentline)\n",
    }
    for name, text in pairs(files) do
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write(text)
      f:close()
    end
  end)
  teardown(function() os.execute("rm -rf " .. H.quote(dir)) end)

  local cases = {
    "echo 'print(arg[1])' | LUA - -h",
    "printf 'print(10)\\nprint(2)\\n' | LUA",
    "env LUA_INIT= LUA_PATH=x LUA p.lua",
    "env LUA_INIT= LUA_PATH_5_4=y LUA_PATH=x LUA p.lua",
    "env LUA_INIT= LUA_CPATH_5_4=yacc LUA_CPATH=x LUA -e 'print(package.cpath)'",
    "env LUA_INIT_5_4='X=10' LUA_INIT='X=3' LUA -e 'print(X)'",
    "env LUA_INIT=\"error('msg')\" LUA < /dev/null",
    "env LUA_INIT='error(10)' LUA_PATH=xxx LUA -E -e 'print(package.path == \"xxx\")'",
    "env LUA_PATH='a;;b' LUA p.lua",
    "env LUA_PATH='?.lua;;' LUA -l m1 -lstring -e 'print(a, m1.x)'",
    "LUA -l 'str=string' '-lm=math' -e 'print(m.sin(0), str.upper\"alo\")'",
    "echo '' | LUA -e 'arg = 1' -",
    "echo 'print(...)' | LUA -e 'arg[1] = 100' -",
    "printf 'io.stderr:write(1000)\\ncont\\n' | LUA -e \"require'debug'.debug()\"",
    "echo 'io.stderr:write(1); warn[[XXX]]' | LUA",
    "LUA -W w.lua", "LUA -W g.lua", "LUA -W f.lua", "LUA c.lua", "LUA n.lua", "LUA e.lua",
    "LUA \"-eprint(1)\" -ea=3 -e 'print(a)'",
    "LUA -e \"_PROMPT='' _PROMPT2=''\" -i < i.lua | tail -n +2",
    "LUA -e \"_PROMPT='' _PROMPT2=''\" -i < k.lua | tail -n +2",
    "LUA -e \"local C = 0; _PROMPT = setmetatable({}, {__tostring = function () C = C + 1; " ..
      "return C end})\" -i < j.lua | tail -n +2",
    "echo 10 | LUA -e 'print = nil' -i 2>&1 | tail -n +2",
    -- a bad option: the message, then a usage (longer here: its first line)
    "LUA --- 2>&1 | head -n 2", "LUA -Ex 2>&1 | head -n 2", "LUA -vv 2>&1 | head -n 2",
    "LUA -iv 2>&1 | head -n 2", "LUA -e 2>&1 | head -n 2", "LUA -l 2>&1 | head -n 2", "LUA -e a",
    "LUA -e 'os.exit(false, true)'", "LUA -e 'os.exit(1, true)'",
    -- require's message lists only the places Lua's own searchers looked
    "env LUA_PATH='x/?.lua' LUA_CPATH='x/?.so' LUA -e 'require \"nosuchmodule\"'",
  }
  for _, case in ipairs(cases) do
    it(case, function()
      if not lua then pending("no lua5.4 on this machine") return end
      local function run(interp)
        -- the whole line's stderr too: nothing reaches the terminal
        local cmd = "cd " .. H.quote(dir) .. " && { " .. case:gsub("LUA", (H.quote(interp):gsub("%%", "%%%%")))
                    .. "; } 2>&1"
        local p = assert(io.popen(cmd))
        local out = p:read("a")
        local _, _, code = p:close()
        return code, (out:gsub(interp:gsub("%p", "%%%0"), "LUA"))
      end
      local want_code, want = run(lua)
      local code, out = run(cgl)
      assert.equals(want, out)
      assert.equals(want_code, code)
    end)
  end
end)
