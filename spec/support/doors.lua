-- The doors for device memory and the bad buffers spec/66 gives them.
-- doors() lists every call of the module whose recipe in
-- spec/support/calls.lua takes memory with F:mem (the list of names from
-- the runtime), try(door, slot, kind) makes that call with a bad buffer of
-- kind in the slot-th such place and says what became of it.
return function(cuda, H)
  local C = require("support.calls")(cuda, H)
  local D = { C = C }

  -- make(type, n, keep) returns a buffer of n elements of type, or nil and
  -- why it cannot be had here; keep holds what must outlive the call.
  -- refused: every door must refuse it; extent: a door must refuse it or
  -- keep within its bounds, which a kernel's code decides for itself.
  D.kinds = {
    { name = "a freed buffer", refused = true, make = function(t, n)
        local b = cuda.buffer(t, n)
        b:free()
        return b
      end },
    { name = "graph memory not allocated", refused = true, graphmem = true,
      make = function(t, n, keep)
        local s, b = cuda.stream(), nil
        keep[#keep + 1] = s:capture(function()
          b = cuda.buffer(t, n, { stream = s })
          b:fill(0, s)
        end)
        return b
      end },
    { name = "graph memory after the launch that freed it", refused = true,
      graphmem = true, make = function(t, n, keep)
        local s, b = cuda.stream(), nil
        local g = s:capture(function()
          b = cuda.buffer(t, n, { stream = s })
          b:fill(0, s)
          b:free(s)
        end)
        g:launch()
        s:synchronize()
        keep[#keep + 1] = g
        return b
      end },
    { name = "a view of a GL buffer after its map scope", refused = true,
      make = function(t, n, keep)
        if H.gpu then return nil, "the GL stand-in is the software driver's" end
        local r = cuda.gl_buffer(100 + #keep, t)
        keep[#keep + 1] = r
        local v
        r:map(cuda.stream(), function(b) v = b:view(0, n) end)
        return v
      end },
    { name = "a buffer one element short", extent = true, make = function(t, n)
        return cuda.buffer(t, n - 1):fill(0)
      end },
    { name = "a buffer of another element type", extent = true, make = function(t, n)
        return cuda.buffer(t == "u8" and "i8" or "u8", n):fill(0)
      end },
  }
  -- on device 1 where device 0 has no access to it (two devices, no peer
  -- access: the test double's CUDA_DOUBLE_DEVICES=2 CUDA_DOUBLE_NO_PEER=1).
  -- A Buffer's own methods work on its own device, and copies between
  -- devices need no access: those take it.
  D.other_device = { name = "a buffer of a device without peer access",
    refused = true, make = function(t, n)
      return cuda.on(1, function() return cuda.buffer(t, n):fill(0) end)
    end,
    own = function(door, slot)
      return door.name:match("^Buffer:") and (slot == 1 or door.name == "Buffer:copy")
    end }

  function D.doors()
    local list = {}
    for _, name in ipairs(C.names()) do
      for v, recipe in ipairs(C.recipes(name) or {}) do
        local F = C.fixtures()
        local ok, fn = pcall(C.prepare, name, recipe, F)
        if ok and fn and (F.nmem or 0) > 0 then
          list[#list + 1] = { name = name, recipe = recipe, nmem = F.nmem,
            title = name .. (v > 1 and (" (" .. v .. ")") or "") }
        end
      end
    end
    return list
  end

  local function driver_error(e)
    return cuda.is_error(e) or tostring(e):match("cu%u%w+: CUDA_ERROR") ~= nil
  end

  -- "pending", why | "refused", err | "accepted" | "driver", err
  function D.try(door, slot, kind)
    if H.double and not H.sim and C.runs_kernels[door.name] then
      return "pending", "launches kernels of the runtime's own: make test-sim, test-gpu"
    end
    if kind.graphmem and C.in_capture[door.name] then
      return "pending", "inside a capture the graph orders its memory"
    end
    if kind.extent and C.raw[door.name] then
      return "pending", "the extent a kernel touches is its code's"
    end
    if kind.own and kind.own(door, slot) then
      return "pending", "a buffer's own work runs on its device; copies need no access"
    end
    local keep, why = {}, nil
    local F = C.fixtures { mem = function(t, n, i)
      if i ~= slot then return nil end
      local b, w = kind.make(t, n, keep)
      why = w
      return b or false
    end }
    local ok, err = pcall(function()
      local fn, args = C.prepare(door.name, door.recipe, F)
      if not fn then why = args; return end
      C.invoke(door.name, fn, args)
    end)
    if why then return "pending", why end
    if not ok and driver_error(err) then return "driver", err end
    if not ok then return "refused", err end
    return "accepted"
  end

  return D
end
