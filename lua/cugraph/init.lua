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

--- cuda.module(path_or_image [, name]) -> Module
-- A path to a .ptx, .cubin or .fatbin file, or the image itself.
function cuda.module(src, name)
  if type(src) ~= "string" then
    error("bad argument #1 to 'module' (string expected, got " .. type(src) .. ")", 2)
  end
  if is_image(src) then return core.module(src, name) end
  local f, err = io.open(src, "rb")
  if not f then error("module: " .. err, 2) end
  local image = f:read("a")
  f:close()
  return core.module(image, name or src)
end

--- cuda.ptx(source [, opts]) -> ptx, log: CUDA C compiled by NVRTC.
cuda.ptx = core.compile

--- cuda.compile(source [, opts]) -> Module: CUDA C compiled and loaded.
function cuda.compile(source, opts)
  local ptx = core.compile(source, opts)
  return core.module(ptx, opts and opts.name or "kernel.cu")
end

return cuda
