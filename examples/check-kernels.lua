-- check-kernels.lua: compiles the CUDA C of every example with NVRTC for
-- sm_90 and lists its kernels with the signatures their launches are
-- checked against. Needs no GPU: each script runs up to its cuda.compile,
-- which stops it. Exits 1 when any kernel fails to compile.
--
--   cugraph-lua examples/check-kernels.lua
local cuda = require "cugraph"

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local scripts = { "model.lua", "particles.lua", "graph.lua", "solver.lua", "substeps.lua",
                  "embed/frame.lua", "ddp.lua", "decode.lua" }
local STOP = setmetatable({}, { __tostring = function() return "stop" end })

-- Stands in for cugraph: compile checks and stops; anything else stops.
local compiled
local stub = setmetatable({
  compile = function(source, opts)
    local ptx = cuda.ptx(source, { arch = "sm_90", name = opts and opts.name })
    for _, e in ipairs(cuda.entries(ptx)) do
      print(("  %s(%s)"):format(e.base, table.concat(e.params, ", ")))
    end
    compiled = true
    error(STOP)
  end,
}, { __index = function() error(STOP) end })

local failed = 0
for _, name in ipairs(scripts) do
  print(name)
  compiled = false
  package.loaded.cugraph = stub
  package.preload.png = function() return {} end
  local ok, err = pcall(dofile, here .. "/" .. name)
  package.loaded.cugraph = cuda
  if ok or err ~= STOP or not compiled then
    print("  FAILED: " .. (ok and "no cuda.compile" or tostring(err)))
    failed = failed + 1
  end
end
print(("%d of %d scripts compile for sm_90"):format(#scripts - failed, #scripts))
if failed > 0 then os.exit(1, true) end
