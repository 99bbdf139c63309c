-- cugraph: CUDA graphs driven from Lua. The C core (cugraph.core) does every
-- driver call; this front end adds what reads better in Lua.
local core = require "cugraph.core"

local cuda = {}
for k, v in pairs(core) do cuda[k] = v end

local function is_image(s)
  local head = s:sub(1, 4)
  return s:find("\n", 1, true) ~= nil or head == "\127ELF"
      or head == "\80\237\85\186" -- fatbin magic 0xBA55ED50, little-endian
end

-- core.readfile serves cuda.module; it is not part of the API.
local readfile = core.readfile
cuda.readfile = nil

local MAX_FILE = 1 << 30 -- larger module files are refused unread

--- cuda.module(path_or_image [, name]) -> Module
-- A path to a .ptx, .cubin or .fatbin file, or the image itself.
function cuda.module(src, name)
  if type(src) ~= "string" then
    error("bad argument #1 to 'module' (string expected, got " .. type(src) .. ")", 2)
  end
  local image = src
  if not is_image(src) then
    if src:find("\0", 1, true) then
      error(("module: the path %q contains a NUL byte"):format(src), 2)
    end
    local err
    image, err = readfile(src, MAX_FILE)
    if not image then error("module: " .. err, 2) end
    name = name or src
  end
  -- Under pcall a C error carries no position; error() gives it the
  -- caller's line. An error object passes unchanged.
  local ok, m = pcall(core.module, image, name)
  if not ok then error(m, 2) end
  return m
end

--- cuda.ptx(source [, opts]) -> ptx, log: CUDA C compiled by NVRTC.
cuda.ptx = core.compile

--- cuda.compile(source [, opts]) -> Module: CUDA C compiled and loaded.
function cuda.compile(source, opts)
  local ptx = core.compile(source, opts)
  local ok, m = pcall(core.module, ptx, opts and opts.name or "kernel.cu")
  if not ok then error(m, 2) end -- at the caller's line, as cuda.module
  return m
end

return cuda
