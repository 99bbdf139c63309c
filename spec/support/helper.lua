-- Shared by the specs: the module, the spec kernels, subprocesses, and a
-- meter of Lua allocation.
local cuda = require "cugraph"

local H = { cuda = cuda }
H.build = os.getenv("CUGRAPH_LUA_BUILD") or "build"
H.double = os.getenv("CUGRAPH_LUA_LIBCUDA")   -- nil on a real GPU
H.gpu = H.double == nil
--- The PTX simulator (build/libcuda-sim.so) runs the kernels themselves.
H.sim = H.double ~= nil and H.double:find("libcuda%-sim") ~= nil
--- Its strict mode (docs/simulator.md): work runs when something waits for
-- it, and missing synchronization is an error.
H.strict = H.sim and os.getenv("CUDA_SIM_STRICT") ~= "0"

local peer, peer_why
--- The other API of the external-memory specs (spec/support/peer.c): memfds
-- for a software driver, Vulkan's exports on a GPU. nil and why when it
-- cannot be had.
function H.peer()
  if peer == nil and peer_why == nil then
    local open = package.loadlib(H.build .. "/peer.so", "luaopen_peer")
    local ok, why
    if open then
      peer = open()
      ok, why = peer.open(H.double and "memfd" or "vulkan")
    else
      why = "no " .. H.build .. "/peer.so (make spec-needs)"
    end
    if not ok then peer, peer_why = false, why end
  end
  return peer or nil, peer_why
end

local hostfn
--- A C host function for s:host (spec/support/hostfn.c): fn, data, and
-- calls() counting its calls; nil and why where it cannot be loaded (a
-- Lua that does not export cugraph_pushhostfn).
function H.hostfn()
  if hostfn == nil then
    local open = package.loadlib(H.build .. "/hostfn.so", "luaopen_hostfn")
    hostfn = open and open() or false
  end
  if not hostfn then return nil, "no C host function here (" .. H.build .. "/hostfn.so)" end
  local fn, data = hostfn.fn()
  return fn, data, hostfn.calls
end

local kernels
--- The module of spec/kernels/kernels.cu (PTX built by make).
function H.kernels()
  kernels = kernels or cuda.load_module(H.build .. "/kernels.ptx")
  return kernels
end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
H.quote = shell_quote

--- The command line that checks subprocesses under valgrind, when
-- CUGRAPH_LUA_VALGRIND gives one (make test-valgrind); nil otherwise.
H.valgrind = os.getenv("CUGRAPH_LUA_VALGRIND")
if H.valgrind == "" then H.valgrind = nil end

--- Under make sanitize-gpu, the command line that starts a subprocess
-- under a compute-sanitizer of its own (CUGRAPH_LUA_SANITIZER, logging to
-- a file per process in CUGRAPH_LUA_SANITIZER_LOGS); nil otherwise.
-- H.checker is whichever of the two checks the suite.
H.sanitizer = os.getenv("CUGRAPH_LUA_SANITIZER")
if H.sanitizer == "" then H.sanitizer = nil end
--- Why CUPTI's records cannot be had here (nil where they can): the
--- sanitizer is CUPTI's one subscriber in the processes it checks.
H.no_cupti = H.sanitizer and "compute-sanitizer is CUPTI's one subscriber (make test-gpu runs it)"
H.checker = H.valgrind or H.sanitizer

-- A name no other spec process uses, for a child's sanitizer log.
local function unique_name()
  local t = os.tmpname()
  os.remove(t)
  return t:match("[^/]*$")
end

-- The prefix that runs a command under H.checker, "" without one, and the
-- sanitizer's log of that command (the first process's, when it starts
-- several: pattern is "%p" for those).
local function checked(pattern)
  if H.valgrind then return H.valgrind .. " ", nil end
  if not H.sanitizer then return "", nil end
  local name = os.getenv("CUGRAPH_LUA_SANITIZER_LOGS") .. "/" .. unique_name()
  local log = name .. (pattern or "") .. ".log"
  return H.sanitizer .. " --log-file " .. H.quote(log) .. " ", log
end

--- cmd (a command line) prefixed with H.sanitizer, when there is one: for
-- the spec hosts, which run outside valgrind.
function H.sanitized(cmd)
  return H.sanitizer and checked("-%p") .. cmd or cmd
end

-- The variables a sanitizer sets for the process it checks (its
-- injection library and the like), which a child started without one must
-- not inherit: a CUDA process that loads the injection but is followed by
-- no tool waits for the tool.
local tool_vars
local function tool_env()
  if tool_vars then return tool_vars end
  local names = {}
  local p = io.popen("env")
  for line in p:lines() do
    local name, value = line:match("^([%w_]+)=(.*)$")
    if name and not name:find("^CUGRAPH_LUA_")
       and (name:find("INJECTION") or name:find("SANITIZER")
            or (name:find("PRELOAD") and value:lower():find("sanitizer"))) then
      names[#names + 1] = "-u " .. name
    end
  end
  p:close()
  tool_vars = #names > 0 and "env " .. table.concat(names, " ") .. " " or ""
  return tool_vars
end

--- cmd (a command line) run without a compute-sanitizer, when the spec
-- itself runs under one: for a child that faults the device on purpose,
-- loads a tool of its own, or keeps objects past the driver by design.
function H.plain(cmd)
  return H.sanitizer and tool_env() .. cmd or cmd
end

-- Whether a sanitizer's log says its process never called CUDA: the tool
-- then exits 0 whatever the process returned.
local function never_used_cuda(log)
  local f = log and io.open(log)
  if not f then return false end
  local text = f:read("a")
  f:close()
  return text:find("terminated before first instrumented API call", 1, true) ~= nil
end

--- Runs build/cugraph-lua with the given argument string in a subprocess
-- (under H.checker, if set, unless opts.plain: a child that faults the
-- device on purpose, or loads a tool of its own). Returns the exit status
-- and the combined output. A child that never called CUDA runs again
-- without the sanitizer, which does not pass its exit status on.
function H.run(args, env, opts)
  -- plain: the tool's variables go first, so that env's own stay (NVTX's)
  local function run(prefix, plain)
    local p = assert(io.popen((plain and H.plain("") or "") .. (env and env .. " " or "")
                              .. prefix .. H.build .. "/cugraph-lua " .. args .. " 2>&1"))
    local out = p:read("a")
    local _, _, code = p:close()
    return code, out
  end
  if opts and opts.plain and not H.valgrind then return run("", true) end
  local prefix, log = checked()
  local code, out = run(prefix)
  if never_used_cuda(log) then
    os.remove(log)
    return run("", true)
  end
  return code, out
end

--- Runs a Lua chunk in a fresh cugraph-lua process (same driver as this
-- one); opts as H.run's.
function H.script(src, env, opts)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  local code, out = H.run(shell_quote(path), env, opts)
  os.remove(path)
  return code, out
end

--- Runs the Lua chunk src in spec/hosts/capi.c's host (a global capi,
-- support.* on package.path through CUGRAPH_LUA_SPEC), after env; under
-- H.checker when the suite is. Returns whether it exited 0, and its output.
function H.capi(src, env)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  local cmd = ("%s CUGRAPH_LUA_SPEC=%s %s%s %s %s 2>&1"):format(env or "", H.quote(H.build .. "/../spec"),
    (checked("-%p")), H.quote(H.build .. "/capi"), H.quote(H.build .. "/../lua"),
    H.quote(path))
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  os.remove(path)
  return ok, out
end

--- H.capi(src, env) for a script that ends by printing "script done":
--- checks that it did and that every check of the host passed; returns
--- the output.
function H.capi_passes(src, env)
  local check = require "luassert" -- busted's assert, from a spec only
  local ok, out = H.capi(src, env)
  check.matches("script done", out)
  check.matches("capi: all passed", out)
  check.is_true(ok, out)
  return out
end

--- Runs the Lua chunk src in one cugraph-lua process per entry of envs (its
-- variables, "A=1 B=2"), all at once, as srun or mpirun start a job's
-- ranks, each after env (variables for all) and with args (cugraph-lua's
-- options) before the chunk; waits for every one. Returns per process, in
-- order, {code = exit status, out = its output}.
function H.ranks(src, envs, env, args)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  local parts, outs = {}, {}
  for i, e in ipairs(envs) do
    outs[i] = os.tmpname()
    parts[i] = ("(%s %s %s%s/cugraph-lua %s %s > %s 2>&1; echo $? > %s) &"):format(
      env or "", e, (checked("-%p")), H.build, args or "", shell_quote(path),
      shell_quote(outs[i]), shell_quote(outs[i] .. ".rc"))
  end
  os.execute(table.concat(parts, " ") .. " wait")
  os.remove(path)
  local res = {}
  for i, out in ipairs(outs) do
    local o, r = assert(io.open(out)), assert(io.open(out .. ".rc"))
    res[i] = { out = o:read("a"), code = r:read("n") }
    o:close()
    r:close()
    os.remove(out)
    os.remove(out .. ".rc")
  end
  return res
end

--- A TCP port free on 127.0.0.1 now (on ::1 with v6; nil when this
-- machine has no IPv6 loopback), from build/port.
function H.free_port(v6)
  local p = assert(io.popen(H.build .. "/port" .. (v6 and " -6" or "") .. " 2>/dev/null"))
  local port = p:read("n")
  p:close()
  return port
end

--- A port of 127.0.0.1 held by another program for up to seconds: the
-- port and a function that gives it back.
function H.taken_port(seconds)
  local p = assert(io.popen("exec " .. H.build .. "/port hold " .. (seconds or 20)))
  local port, pid = p:read("n", "n")
  return assert(port), function()
    os.execute("kill " .. math.tointeger(pid) .. " 2>/dev/null")
    p:close()
  end
end

--- A fault sweep's count of calls: runs script with trace_var naming a
-- file the double writes "name count" lines to. Returns name -> count,
-- the exit status and the output.
function H.trace(script, trace_var, env)
  local path = os.tmpname()
  local code, out = H.run(shell_quote(script), (env and env .. " " or "") .. trace_var
                          .. "=" .. shell_quote(path))
  local counts = {}
  for name, n in assert(io.open(path)):read("a"):gmatch("(%S+) (%d+)") do
    counts[name] = tonumber(n)
  end
  os.remove(path)
  return counts, code, out
end

--- The tab-separated fields of a sweep workload's result line.
function H.fields(line)
  local t = {}
  for v in (line .. "\t"):gmatch("([^\t]*)\t") do t[#t + 1] = v end
  return t
end

--- Bytes of Lua memory that n calls of fn(i) allocate, after a warm-up,
-- with the collector stopped. Two calls after the collection are not
-- counted: they make again what it shrank or cleared once (call frames,
-- the keys of entries set to nil), which is no call's garbage.
function H.garbage(fn, n)
  for i = 1, 100 do fn(i) end
  collectgarbage("collect")
  collectgarbage("stop")
  fn(101); fn(102)
  local before = collectgarbage("count")
  for i = 1, n do fn(i) end
  local after = collectgarbage("count")
  collectgarbage("restart")
  return math.floor((after - before) * 1024 + 0.5)
end

--- Under make sanitize-gpu (CUGRAPH_LUA_SANITIZER): waits for the device,
-- so that memory allocated and filled just before a capture with a while
-- loop is settled. compute-sanitizer can report a kernel of such a graph
-- reading live memory out of bounds otherwise (seen on an H200 with driver
-- 580; NVIDIA/warp#1406 reports the same false positive, gone after a
-- sync). Does nothing elsewhere.
function H.settle()
  if H.sanitizer then H.cuda.synchronize() end
end

--- The error a call raises (fails the test when it raises none).
function H.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  return err
end

return H
