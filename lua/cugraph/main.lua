-- cugraph's front end (cugraph/init.lua returns it): CUDA graphs driven
-- from Lua. The C core (cugraph.core) does every driver call; this front
-- end adds what reads better in Lua. Its errors are raised at the
-- caller's line, as the core's own are.
local core = require "cugraph.core"
local npy = require "cugraph.npy"
local got = require("cugraph.gen").got

local cuda = {}
for k, v in pairs(core) do cuda[k] = v end

-- Internal parts of the core, not part of the API.
local readfile, add_method, compile = core.readfile, core.add_method, core.compile
cuda.readfile, cuda.add_method, cuda.nvrtc_version = nil, nil, nil
cuda.simulator_path, cuda.world_rendezvous, cuda.guard_methods = nil, nil, nil
cuda.element_value, cuda.env_number = nil, nil
local nvrtc_version = core.nvrtc_version

cuda._VERSION = "cugraph-lua " .. core.version

local is_error = core.is_error
local dbg = debug -- absent in some embedders' states: positions are then left out

local MAX_FILE = 1 << 30 -- larger module files are refused unread

-- "chunk:line" of the function `level` levels above the caller (error's
-- convention), or nil for C or unknown.
local function where(level)
  local info = dbg and dbg.getinfo(level + 1, "Sl")
  if info and info.currentline > 0 then
    return info.short_src .. ":" .. info.currentline
  end
end

-- Re-raises e at `level` above the caller: strings gain that position, error
-- objects a `where` (unless they carry one).
local function raise(e, level)
  if type(e) == "string" then error(e, level + 1) end
  if is_error(e) and e.where == nil then e.where = where(level + 1) end
  error(e, 0)
end

-- fn(...) from a public function: its errors are raised at the caller of
-- that function (a C function called through pcall has no position of its
-- own, so raise gives it the user's).
local function call(fn, ...)
  local ok, a, b, c, d = pcall(fn, ...)
  if not ok then raise(a, 3) end
  return a, b, c, d
end

--- PTX text, a cubin or a fatbin, by content (never a path).
local function is_image(s)
  local head = s:sub(1, 4)
  return head == "\127ELF" or head == "\80\237\85\186" -- fatbin 0xBA55ED50, LE
      or s:find("\n", 1, true) ~= nil or s:find(".version", 1, true) ~= nil
end

-- Reads a module file for `fname`; raises at `level` above the caller.
local function read_module(path, fname, level)
  if path:find("\0", 1, true) then
    error(("%s: the path %q contains a NUL byte"):format(fname, path), level + 1)
  end
  local image, err = readfile(path, MAX_FILE)
  if not image then error(fname .. ": " .. err, level + 1) end
  return image
end

--- cuda.load_module(path [, name]) -> Module: a .ptx, .cubin or .fatbin file.
function cuda.load_module(...)
  local path, name = ...
  if type(path) ~= "string" then
    error("bad argument #1 to 'load_module' (string expected, got " .. got(select("#", ...), 1, path) .. ")", 2)
  end
  return (call(core.module, read_module(path, "load_module", 2), name or path))
end

local warned = false

--- cuda.module(image [, name]) -> Module: PTX text, a cubin or a fatbin.
-- A string that is none of these but names a file is loaded from it, as
-- before cuda.load_module existed, with a warning (see -W).
function cuda.module(...)
  local image, name = ...
  if type(image) ~= "string" then
    error("bad argument #1 to 'module' (string expected, got " .. got(select("#", ...), 1, image) .. ")", 2)
  end
  if not is_image(image) then
    local _, err = readfile(image, 0)
    if err and err:find("No such file", 1, true) and not image:find("\0", 1, true) then
      error(("module: %q is not PTX, cubin or fatbin, and no file has that " ..
             "name; load files with cuda.load_module(path)"):format(image:sub(1, 80)), 2)
    end
    if not warned then
      warned = true
      warn("cugraph: cuda.module(path) reads a file; use cuda.load_module(path)")
    end
    return (call(core.module, read_module(image, "module", 2), name or image))
  end
  return (call(core.module, image, name))
end

-- Prepends #line so that NVRTC's messages name the Lua file and line where
-- the source text is written, when the calling chunk holds it verbatim
-- (the usual cuda.compile [[ ... ]]); otherwise the source is unchanged.
local function locate(source)
  local info = dbg and dbg.getinfo(3, "Sl")
  if not info or info.currentline <= 0 then return source end
  local text, lead = nil, info.source:sub(1, 1)
  if lead == "@" then
    text = readfile(info.source:sub(2), MAX_FILE)
  elseif lead ~= "=" then
    text = info.source
  end
  local at = text and text:find(source, 1, true)
  if not at then return source end
  local _, lines = text:sub(1, at - 1):gsub("\n", "")
  -- NVRTC's -lineinfo writes the name into the PTX's .file unescaped, where
  -- ptxas cannot read a quote: a string chunk's [string "..."] gets ' instead
  local name = info.short_src:gsub('"', "'"):gsub("\\", "\\\\")
  return ('#line %d "%s"\n'):format(lines + 1, name) .. source
end

local function opt_name(opts)
  return type(opts) == "table" and rawget(opts, "name") or "kernel.cu"
end

--- cuda.ptx(source [, opts]) -> ptx, log: CUDA C compiled by NVRTC.
function cuda.ptx(...)
  if select("#", ...) == 0 then return call(compile) end -- "got no value"
  local source, opts = ...
  if type(source) == "string" then source = locate(source) end
  local ptx, log = call(compile, source, opts)
  return ptx, log
end

-- A cubin the driver cannot use on this device is loaded from its PTX.
local fallback = {
  CUDA_ERROR_NO_BINARY_FOR_GPU = true, CUDA_ERROR_INVALID_IMAGE = true,
  CUDA_ERROR_INVALID_SOURCE = true,
}

--- cuda.compile(source [, opts]) -> Module: CUDA C compiled and loaded, as a
-- cubin when the architecture is real (sm_XX, or the device's), else as
-- PTX. extern "C" kernels get their C types from the compiler.
function cuda.compile(...)
  if select("#", ...) == 0 then call(compile) end -- "got no value"
  local source, opts = ...
  if type(source) == "string" then source = locate(source) end
  local ptx, _, cubin, typetext = call(compile, source, opts, true)
  local types = {}
  -- "<entry> <mangled>", "@<variable> <type>", "=<entry> <C++ name>"
  for line in typetext:gmatch("[^\n]+") do
    local key, value = line:match("^(%S+) (.+)$")
    if key then types[key] = value end
  end
  local name = opt_name(opts)
  if cubin ~= "" then
    local ok, m = pcall(core.module, cubin, name, ptx, types)
    if ok then return m end
    if not (is_error(m) and fallback[m.name]) then raise(m, 2) end
  end
  return (call(core.module, ptx, name, nil, types))
end

--- cuda.info() -> table: the driver, devices, NVRTC and compile cache, for
-- a report (cugraph-lua --info). Never raises.
function cuda.info()
  local i = { version = core.version, lua = _VERSION, devices = {} }
  local ok, why = core.available()
  i.reason = why
  i.device_count = ok and core.device_count() or 0
  for d = 0, i.device_count - 1 do
    local ok_d, dev = pcall(core.device, d)
    i.devices[#i.devices + 1] = ok_d and dev or { ordinal = d, error = tostring(dev) }
    if ok_d then i.driver = ("%d.%d"):format(dev.driver_version // 1000, dev.driver_version % 1000 // 10) end
  end
  i.nvrtc, i.nvrtc_error = nvrtc_version()
  i.simulator = core.simulator_path()
  i.cache_dir, i.cache_size = core.compile_cache_dir()
  return i
end

--- cuda.load(path) -> Buffer, shape: a NumPy .npy file into a new buffer.
function cuda.load(...)
  local path = ...
  if select("#", ...) == 0 then error("bad argument #1 to 'load' (string expected, got no value)", 2) end
  local ok, t, data, shape = pcall(npy.read, path)
  if not ok then raise(t, 2) end
  return (call(core.buffer, t, data)), shape
end

--- b:save(path [, shape]) -> b: the buffer as a NumPy .npy file.
add_method("cugraph.Buffer", "save", function(b, ...)
  local path, shape = ...
  if select("#", ...) == 0 then error("bad argument #1 to 'save' (string expected, got no value)", 2) end
  local t = call(b.type, b)
  local data = call(b.download, b, "string")
  local ok, err = pcall(npy.write, path, t, #b, data, shape)
  if not ok then raise(err, 2) end
  return b
end)

--- cuda.comm_world() -> Comm: this process's communicator among all the
-- processes of its job, on its device. Rank and size come from its
-- starter (cuda.world(): the launcher, srun, mpirun, a PMI starter); the
-- unique id through the job's rendezvous: CUGRAPH_RDZV (TCP host:port),
-- CUGRAPH_RENDEZVOUS (a file), or one derived from the job. Ranks wait up
-- to CUGRAPH_RDZV_TIMEOUT seconds (600). Without a starter: one rank.
function cuda.comm_world()
  local w = call(core.world)
  local id
  if w.size == 1 then
    id = call(core.nccl_id)
  else
    local ok, t = pcall(core.env_number, "CUGRAPH_RDZV_TIMEOUT", 1e-3, 1e9, "seconds")
    if not ok then error("cuda.comm_world: " .. t, 2) end
    local timeout = t or 600
    local kind, at = call(core.world_rendezvous)
    if kind == "tcp" then
      id = call(core.nccl_rendezvous_tcp, at, w.rank, w.size, timeout, w.job)
    else
      id = call(core.nccl_rendezvous, at, w.rank, timeout, w.job)
    end
  end
  return (call(core.comm, id, w.size, w.rank))
end

local gen = require "cugraph.gen"
gen.init(cuda, raise, core.guard_methods)
require "cugraph.rng" (cuda)
require "cugraph.elementwise" (cuda)

return cuda
