-- What the fault sweeps' workloads share (fault_workload.lua,
-- nccl_workload.lua): the objects made, the outcome of the workload, the
-- frees afterwards and the tab-separated result line.
local cuda = require "cugraph"

local S = { objs = {} } -- every object made, in order, for the frees afterwards

function S.keep(o)
  S.objs[#S.objs + 1] = o
  return o
end

-- Runs workload; with exit_var set in the environment exits right after
-- it without closing the state (a trace then counts the workload's own
-- calls). Returns "ok", "error" (an error object: its api and code) or
-- "message" (any other error: its text).
function S.run(workload, exit_var)
  local ok, err = pcall(workload)
  if os.getenv(exit_var) then os.exit(0, false) end
  if ok then return "ok" end
  if cuda.is_error(err) or (type(err) == "table" and err.api) then
    return "error", err.api, err.code
  end
  return "message", err
end

-- A field of the result line: "-" for none.
function S.field(v)
  if v == nil then return "-" end
  return (tostring(v):gsub("[\t\n]", " "))
end

-- Frees every object kept, newest first, then collects; prints tag and the
-- fields, then the objects whose :free() raised and the finalizer errors.
function S.report(tag, ...)
  local unfreed = {}
  for i = #S.objs, 1, -1 do
    local o = S.objs[i]
    local ok, err = pcall(o.free, o)
    if not ok then unfreed[#unfreed + 1] = tostring(o) .. ": " .. tostring(err) end
  end
  S.objs = {}
  collectgarbage()
  collectgarbage()
  local st = cuda.status()
  local line = { tag }
  for i = 1, select("#", ...) do line[#line + 1] = S.field((select(i, ...))) end
  line[#line + 1] = #unfreed > 0 and S.field(table.concat(unfreed, "; ")) or "-"
  line[#line + 1] = S.field(st.finalizer_errors)
  line[#line + 1] = S.field(st.last_finalizer_error)
  print(table.concat(line, "\t"))
end

return S
