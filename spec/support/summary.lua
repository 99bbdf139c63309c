-- busted's output for make test and its kin, and for plain `busted` in a
-- checkout (.busted): a character a test while the suite runs, then the
-- failures in full, the pending tests counted by cause, and last a line of
-- its own that .ci/run and spec/support/each.sh read:
--   N passed, N pending (need ...: make test-sim / test-gpu), N failed
local pretty = require "pl.pretty"

-- What the pending tests wait for, by the driver the suite runs on.
local function waits_for()
  local lib = os.getenv("CUGRAPH_LUA_LIBCUDA") or ""
  if lib:find("double", 1, true) then
    return "need the simulator or a GPU: make test-sim / test-gpu"
  elseif lib == "sim" or lib:find("sim", 1, true) then
    return "need a GPU: make test-gpu"
  end
  return "see their causes above"
end

-- A pending test's cause: its message without the "file:line: " busted
-- puts before it, else the part of its name after the first ": ".
local function cause(p)
  local m = type(p.message) == "string" and p.message:gsub("^[^\n]-:%d+: ", "") or ""
  if m ~= "" then return m end
  return p.name:match("^.-: (.+)$") or p.name
end

local function message(f)
  if type(f.message) == "string" then return f.message end
  if f.message == nil then return "Nil error" end
  return pretty.write(f.message)
end

return function(options)
  local busted = require "busted"
  local handler = require "busted.outputHandlers.base"()
  local column, width = 0, 72

  local function mark(c)
    if column == width then
      io.write("\n")
      column = 0
    end
    io.write(c)
    io.flush()
    column = column + 1
  end

  handler.testEnd = function(_, _, status)
    mark(status == "success" and "." or status == "pending" and "p"
         or status == "failure" and "F" or "E")
    return nil, true
  end

  handler.fileError = function()
    mark("E")
    return nil, true
  end

  local function describe(f, kind)
    local t = f.element.trace
    local at = t and t.short_src and (t.short_src .. ":" .. t.currentline .. ": ") or ""
    local s = ("%s %s%s\n%s"):format(kind, at, f.name, message(f))
    if options.verbose and f.trace and f.trace.traceback then
      s = s .. "\n" .. f.trace.traceback
    end
    return s
  end

  handler.suiteEnd = function()
    if column > 0 then io.write("\n") end
    for _, f in ipairs(handler.failures) do io.write("\n", describe(f, "FAILED"), "\n") end
    for _, f in ipairs(handler.errors) do io.write("\n", describe(f, "ERROR"), "\n") end
    local causes, order = {}, {}
    for _, p in ipairs(handler.pendings) do
      local c = cause(p)
      if not causes[c] then
        causes[c] = { n = 0, files = {}, seen = {} }
        order[#order + 1] = c
      end
      local e = causes[c]
      e.n = e.n + 1
      -- where pending was called, else (a helper's, busted's own) where
      -- the test was declared
      local file = p.trace and p.trace.short_src
      local it = p.element and p.element.trace and p.element.trace.short_src
      local num = file and file:match("spec/(%d%d)%-")
        or it and it:match("spec/(%d%d)%-") or file
      if num and not e.seen[num] then
        e.seen[num] = true
        e.files[#e.files + 1] = num
      end
    end
    if #order > 0 then
      table.sort(order, function(a, b)
        if causes[a].n ~= causes[b].n then return causes[a].n > causes[b].n end
        return a < b
      end)
      io.write("\npending, by cause:\n")
      for _, c in ipairs(order) do
        local files = causes[c].files
        io.write(("%5d  %s (spec%s %s)\n"):format(causes[c].n, c, #files > 1 and "s" or "",
                                                   table.concat(files, ", ")))
      end
    end
    local pending = handler.pendingsCount
    io.write(("\n%d passed, %d pending%s, %d failed\n"):format(handler.successesCount, pending,
             pending > 0 and " (" .. waits_for() .. ")" or "",
             handler.failuresCount + handler.errorsCount))
    return nil, true
  end

  busted.subscribe({ "test", "end" }, handler.testEnd, { predicate = handler.cancelOnPending })
  busted.subscribe({ "suite", "end" }, handler.suiteEnd)
  busted.subscribe({ "error", "file" }, handler.fileError)
  busted.subscribe({ "failure", "file" }, handler.fileError)
  busted.subscribe({ "error", "describe" }, handler.fileError)
  busted.subscribe({ "failure", "describe" }, handler.fileError)
  return handler
end
