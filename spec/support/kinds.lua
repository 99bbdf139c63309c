-- Every object kind the runtime has that a graph can use, for the
-- ownership specs: { name, make(), use(o, s, y) }. use records work on the
-- capture stream s that reads or runs through o and leaves y (N i32
-- elements) one higher per launch.
local N = 1024
local kept

return function(cuda, H)
  local m = H.kernels()
  local function inc(s, y) m.inc_i32:launch(s, 4, 256, y, N) end
  local function through(o, s, y) o:copy(y, s); inc(s, o); y:copy(o, s) end
  local list = {
    { "buffer", function() return cuda.buffer("i32", N):fill(0) end, through },
    { "view", function() return cuda.buffer("i32", 2 * N):fill(0):view(N, N) end,
      through },
    { "DLPack buffer", function()
        return cuda.from_dlpack(cuda.buffer("i32", N):fill(0):dlpack())
      end, through },
    { "host buffer", function() return cuda.host_buffer("i32", N) end,
      function(o, s, y) y:download_into(o, s); y:upload(o, s); inc(s, y) end },
    { "scalar", function() return cuda.scalar("f32", 1) end,
      function(o, s, y)
        m.add_scalar_f32:launch(s, 1, 1, y:view(0, nil, "f32"), o, 0)
        inc(s, y)
      end },
    { "stream", function() return cuda.stream() end,
      function(o, s, y) o:wait(s); inc(o, y); s:wait(o) end },
    { "event", function() return cuda.event { timing = false } end,
      function(o, s, y) inc(s, y); o:record(s); s:wait(o) end },
    { "module", function() return cuda.load_module(H.build .. "/kernels.ptx") end,
      function(o, s, y) o.inc_i32:launch(s, 4, 256, y, N) end },
    { "kernel", function() return cuda.load_module(H.build .. "/kernels.ptx").inc_i32 end,
      function(o, s, y) o:launch(s, 4, 256, y, N) end },
    { "condition", function() return cuda.condition(1) end,
      function(o, s, y) s:loop_while(o, function() inc(s, y); o:count_down(s, 1) end) end },
    { "array", function() return cuda.array("i32", N) end,
      function(o, s, y)
        o:copy2d(y, N, 1, { stream = s }); y:copy2d(o, N, 1, { stream = s }); inc(s, y)
      end },
    { "graph", function()
        local gs = cuda.stream()
        local x = cuda.buffer("i32", N):fill(0)
        return gs:capture(function() m.inc_i32:launch(gs, 4, 256, x, N) end)
      end, function(o, s, y) o:launch(s); inc(s, y) end },
  }
  -- memory and semaphores of another API, where one exports them (the
  -- peer's objects live as long as the process: a C graph outlives the
  -- script's)
  local peer = H.peer()
  if peer then
    kept = kept or {}
    list[#list + 1] = { "external buffer", function()
        local pm = peer.memory(N * 4)
        kept[#kept + 1] = pm
        return cuda.external_memory(pm:fd(), pm:size()):buffer("i32", N):fill(0)
      end, through }
    list[#list + 1] = { "external semaphore", function()
        local p = peer.semaphore("binary")
        kept[#kept + 1] = p
        return cuda.external_semaphore(p:fd())
      end, function(o, s, y) s:signal_external(o); s:wait_external(o); inc(s, y) end }
  end
  -- communicators: not under make sanitize-gpu (NCCL's start-up there)
  if pcall(cuda.nccl_version) and not os.getenv("CUGRAPH_LUA_SANITIZER") then
    list[#list + 1] = { "communicator", function() return cuda.comms({ 0 })[1] end,
      function(o, s, y) o:all_reduce(y, y, "sum", s); inc(s, y) end }
  end
  return list, N
end
