-- One side of the fidelity comparison (spec/72-fidelity_spec.lua): runs
-- the named forms' cases on this process's driver and writes the results.
--
--   cugraph-lua spec/support/fidelity_run.lua FORMS OUT
--
-- FORMS: a file of form names, one a line, or "-": the forms the driver's
-- PTX loader takes (it must then be the simulator's), written to OUT.forms.
-- OUT: a Lua chunk returning { {entry, n, forms, out | error}, ... }.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../?.lua;" .. package.path
local cuda = require "cugraph"
local F = require "support.fidelity"

local forms_path, out_path = arg[1], arg[2]
local names = {}
if forms_path == "-" then
  local ok = F.probe(cuda)
  local f = assert(io.open(out_path .. ".forms", "w"))
  for _, form in ipairs(ok) do
    names[#names + 1] = form.name
    f:write(form.name, "\n")
  end
  f:close()
else
  for line in assert(io.open(forms_path)):lines() do
    if line ~= "" then names[#names + 1] = line end
  end
end
local results = F.run(cuda, names)
F.write(out_path, results)
print(("%d forms in %d launches written to %s"):format(#names, #results, out_path))
