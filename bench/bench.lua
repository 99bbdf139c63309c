-- The benchmarks: each case's loop in Lua through the binding, against the
-- same driver calls made directly in C (bench/ref.c, loaded as a module),
-- in one process and thread, and beside the same loops in CuPy and PyTorch
-- (bench/anchors.py) when python3 has them. From the repository root (make
-- bench does this):
--   build/cugraph-lua bench/bench.lua [--quick] [--markdown] [--only KEYS]
-- BENCH_QUICK=1 is --quick (a smoke run: few short pairs, numbers
-- meaningless); BENCH_CPU=n pins to CPU n instead of the current one;
-- BENCH_ANCHORS=0 leaves the CuPy and PyTorch rows out;
-- --only eager,capture10 runs those paired cases alone (the keys of
-- results.json; no solver, compile or cold start rows; CuPy and PyTorch
-- only for those keys), in this one process and in that order. A full run gives each paired case
-- a process of its own (--case KEY, internal), so that no case runs after
-- another's work: cases earlier in a process moved later replay rows by up
-- to 23%, C and Lua alike (bench/RESULTS.md).
--
-- Method (bench/RESULTS.md says more): the thread is pinned to one CPU; a
-- case runs as many pairs of short timed blocks, one block of C then one of
-- Lua (the order alternating pair by pair), each block n iterations of the
-- loop plus a stream synchronize, n calibrated so that a C block lasts
-- about BLOCK seconds. Warm-up pairs run until both sides' rates agree
-- with the last pair's within SETTLE. Each pair gives a ratio Lua/C; the
-- row shows the median ratio, a 95% confidence interval of that median
-- (order statistics) and the interquartile range of the pairs.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local build = os.getenv("CUGRAPH_LUA_BUILD") or here .. "/../build"
package.cpath = build .. "/bench/?.so;" .. package.cpath
local clock = require "clock"
local now = clock.now
local ref = require "ref" -- the C side of each case, in this process
local engine = require "engine" -- an engine's C loop over C handles
local cuda = require "cugraph"

local quick, markdown, child_arch = os.getenv("BENCH_QUICK") == "1", false,
  nil
local only -- --only: the set of case keys to run, nil for all
local child_case -- --case KEY: run that case alone and print its row
do
  local i = 1
  while arg[i] do
    local a = arg[i]
    if a == "--quick" then
      quick = true
    elseif a == "--markdown" then
      markdown = true
    elseif a == "--compile-child" then -- internal: see compile_child
      child_arch = math.tointeger(tonumber(arg[i + 1] or ""))
      if not child_arch then error("--compile-child: expected an arch", 0) end
      i = i + 1
    elseif a == "--case" and arg[i + 1] then -- internal: see in_child
      child_case = arg[i + 1]
      only = {[child_case] = true}
      i = i + 1
    elseif a == "--only" and arg[i + 1] then
      only = {}
      for key in arg[i + 1]:gmatch("[^,%s]+") do only[key] = true end
      i = i + 1
    else
      io.stderr:write("usage: cugraph-lua bench/bench.lua [--quick] ",
                      "[--markdown] [--only KEY,...]\n")
      os.exit(2)
    end
    i = i + 1
  end
end

local PAIRS = quick and 8 or 300         -- timed pairs a case
local BARE_PAIRS = quick and 8 or 100    -- of a case's bare calls
local BLOCK = quick and 2e-4 or 2e-3     -- seconds of a C block
local WARM_MIN, WARM_MAX = 3, quick and 4 or 100 -- warm-up pairs
local SETTLE = 0.01                      -- warm-up ends at this agreement
local FLOOR = 0.05                       -- seconds of a device-floor run
local COLD_PAIRS = quick and 2 or 20     -- pairs of process starts
local COMPILE_PAIRS = quick and 2 or 30  -- pairs of NVRTC compiles
local R = quick and 3 or 5               -- cached compile: runs (median)
local NCACHED = quick and 10 or 200      -- compiles served from the cache
local SOURCE = here .. "/../spec/kernels/kernels.cu" -- inc_i32, mark_u32
local LUA = build .. "/cugraph-lua"
local REF = build .. "/bench-ref"
local PTX = build .. "/kernels.ptx"
local ARGS_PTX = build .. "/bench/kernels.ptx"
local OUT = build .. "/bench/results.json"

local function q(str) return "'" .. str:gsub("'", "'\\''") .. "'" end

local stats = dofile(here .. "/stats.lua")
local quantile, sorted, median = stats.quantile, stats.sorted, stats.median

-- Runs a shell command; returns its output, or nil and a message.
local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  if ok then return out end
  return nil, ("%s: exit %s\n%s"):format(cmd, tostring(code), out)
end

-- The cached compile, in a child whose XDG_CACHE_HOME is a fresh
-- directory: after one compile without the cache and one that writes the
-- entry, NCACHED compiles the cache serves, R times. Prints
-- "compile_cached US", the median microseconds per compile.
local function compile_child(arch)
  local f = assert(io.open(SOURCE, "rb"))
  local src = f:read("a")
  f:close()
  local fresh = cuda.ptx(src, {arch = arch, cache = false})
  local dir = cuda.compile_cache_dir()
  assert(dir == os.getenv("XDG_CACHE_HOME") .. "/cugraph-lua",
         "compile: the cache is not in XDG_CACHE_HOME")
  cuda.ptx(src, {arch = arch})
  assert(assert(run("ls " .. q(dir))):find("%.nvrtc\n"),
         "compile: no cache entry written")
  local t, hit = {}, nil
  for r = 1, R do
    local t0 = now()
    for _ = 1, NCACHED do hit = cuda.ptx(src, {arch = arch}) end
    t[r] = (now() - t0) * 1e6 / NCACHED
  end
  assert(hit == fresh, "compile: the cache served other PTX")
  print(("compile_cached %.17g"):format(median(t)))
end

if child_arch then return compile_child(child_arch) end

-- -- pairs ------------------------------------------------------------------

-- Times cside(n) and lside(n) (each returns microseconds per iteration;
-- lside may add the Lua bytes it allocated per iteration) in interleaved
-- pairs of blocks of n iterations: n from opts.iters or calibrated on the C
-- side, then warm-up pairs, then opts.pairs (PAIRS) timed pairs. Returns
-- the row's figures; bytes: the most of the timed blocks.
local function paired(cside, lside, opts)
  local iters = opts.iters
  if not iters then
    iters = 1
    while true do
      local total = cside(iters) * iters * 1e-6
      if total >= BLOCK / 4 then
        iters = math.max(1, math.ceil(iters * BLOCK / total))
        break
      end
      iters = iters * 4
    end
  end
  local warm, pc, pl = 0, nil, nil
  for w = 1, opts.warm_max or WARM_MAX do
    local c, l = cside(iters), lside(iters)
    warm = w
    if w >= (opts.warm_min or WARM_MIN) and pc
       and math.abs(c / pc - 1) < SETTLE and math.abs(l / pl - 1) < SETTLE
    then
      break
    end
    pc, pl = c, l
  end
  local cs, ls, rs, bytes = {}, {}, {}, nil
  for p = 1, opts.pairs or PAIRS do
    local c, l, b
    if p % 2 == 1 then
      c = cside(iters); l, b = lside(iters)
    else
      l, b = lside(iters); c = cside(iters)
    end
    cs[p], ls[p], rs[p] = c, l, l / c
    if b then bytes = math.max(bytes or 0, b) end
  end
  local r = sorted(rs)
  local k = #r
  -- 95% distribution-free interval of the median: the order statistics
  -- k/2 -+ 0.98 sqrt(k) (the binomial's normal approximation).
  local d = 0.98 * math.sqrt(k)
  return {c = median(cs), lua = median(ls), ratio = quantile(r, 0.5),
          ci_lo = r[math.max(1, math.floor(k / 2 - d))],
          ci_hi = r[math.min(k, math.ceil(k / 2 + 1 + d))],
          p25 = quantile(r, 0.25), p75 = quantile(r, 0.75), min = r[1],
          max = r[k], pairs = k, iters = iters, warmup = warm, bytes = bytes}
end

-- -- the GPU cases ------------------------------------------------------------

local dev = cuda.device()
local m = cuda.load_module(PTX)
local inc, mark = m.inc_i32, m.mark_u32
local s = cuda.stream()
local n = 256                       -- elements; one block of n threads
local x = cuda.buffer("i32", n)     -- inc_i32 and argsN add 1 to x[t]
local out = cuda.buffer("u32", n)   -- mark_u32 writes out[pos] = pos + 1
local pos = cuda.scalar("u32", 0)
local g                             -- the graph of the case being run
ref.open(PTX, ARGS_PTX)

local notes = {}

-- The kernels of bench/kernels.cu (argsN, turn), unless the driver cannot
-- run them (the test double has no host version of them and answers
-- CUDA_ERROR_NOT_SUPPORTED).
local am = cuda.load_module(ARGS_PTX)
do
  local ok, err = pcall(function() am.args1:launch(s, 1, n, x) end)
  if not ok then
    if type(err) ~= "table" or err.name ~= "CUDA_ERROR_NOT_SUPPORTED" then
      error(err, 0)
    end
    am = nil
    notes[#notes + 1] = "argument and while rows skipped: this driver "
      .. "cannot run the kernels of bench/kernels.cu (" .. tostring(err)
      .. ")"
  end
  s:synchronize()
end

-- nodes launches of kernel (inc_i32 by default), then mark_u32 reading
-- pos when with_mark.
local function graph(nodes, with_mark, kernel)
  local k = kernel or inc
  return s:capture(function()
    for _ = 1, nodes do k:launch(s, 1, n, x, n) end
    if with_mark then mark:launch(s, 1, 1, out, pos, n) end
  end)
end

-- gr:launch() on o (the bare rows' ref.bare()) or the case's graph
local function replay_loop(o)
  return function(iters)
    local gr = o or g
    for _ = 1, iters do gr:launch() end
  end
end
local replay = replay_loop()

-- argsK:launch(s, 1, n, x, 0, ...) with K - 1 zeros, written out in the
-- loop as a script would write it (kernel: argsK, or another object).
local function args_loop(k, kernel)
  return assert(load(([[
    local K, S, X, N = ...
    return function(iters)
      local k, st, buf, len = K, S, X, N
      for _ = 1, iters do k:launch(st, 1, len, buf%s) end
    end]]):format((", 0"):rep(k - 1)), "=args" .. k))(kernel or am["args" .. k],
                                                     s, x, n)
end

-- k:launch(s, 1, n, x, n), k a kernel or (the bare rows) ref.bare()
local function launch_loop(k0)
  return function(iters)
    local k, st, buf, len = k0, s, x, n
    for _ = 1, iters do k:launch(st, 1, len, buf, len) end
  end
end

-- s:capture(fn):free() with fn launching inc_i32 k times.
local function capture_loop(k)
  local function fn() for _ = 1, k do inc:launch(s, 1, n, x, n) end end
  return function(iters)
    local st, f = s, fn
    for _ = 1, iters do st:capture(f):free() end
  end
end

-- key: the row's name in results.json and anchors.py; c: ref.setup's
-- arguments; nodes: inc_i32 nodes of the Lua graph (mark: then mark_u32);
-- incs: inc_i32 (argsN, turn) launches an iteration; args: argsK's K;
-- loop_while: the turns a launch of a while node of turn; steady: the
-- loop must allocate no Lua memory; target: the most Lua/C may be; share:
-- the most Lua/bare may be (the binding's own share: the rows whose Lua/C
-- target sat at or below the interpreter's call, bare/C, are judged on it).
-- nop: the case runs bench/kernels.cu's nop, which touches no memory
-- (incs 0); floor: the row also measures the device's floor for its graph
-- (ref.floor).
local cases = {
  {key = "eager_nop", label = "eager launch, nop (2 args, no memory)",
   share = 1.02, c = {"nop"}, incs = 0, nop = true, steady = true,
   bare = launch_loop, loop = am and launch_loop(am.nop)},
  {key = "eager", label = "eager launch, inc_i32 (2 args)", share = 1.02,
   c = {"eager"}, incs = 1, steady = true, bare = launch_loop,
   loop = launch_loop(inc)},
}
for _, k in ipairs {1, 2, 4, 8, 16} do
  cases[#cases + 1] = {key = "args" .. k, label = ("eager launch, args%d "
    .. "(%d arg%s)"):format(k, k, k > 1 and "s" or ""), c = {"args", k},
    share = k == 16 and 1.04 or k == 2 and 1.02 or nil,
    incs = 1, steady = true, args = k,
    bare = function(o) return args_loop(k, o) end}
end
for _, k in ipairs {1, 10, 100, 1000} do
  cases[#cases + 1] = {key = "replay_nop" .. k, label = ("graph replay, %d "
    .. "nop node%s"):format(k, k > 1 and "s" or ""),
    target = k > 1 and 1.02 or nil, share = k == 1 and 1.01 or nil,
    c = {"replay", k}, nodes = k, incs = 0, nop = true, floor = true,
    steady = true, loop = replay, bare = k == 1 and replay_loop or nil}
end
for _, k in ipairs {1, 10, 100, 1000} do
  cases[#cases + 1] = {key = "replay" .. k, label = ("graph replay, %d "
    .. "inc_i32 node%s"):format(k, k > 1 and "s" or ""),
    target = k > 1 and 1.02 or nil, share = k == 1 and 1.01 or nil,
    c = {"replay", k}, nodes = k, incs = k, floor = true, steady = true,
    loop = replay, bare = k == 1 and replay_loop or nil}
end
cases[#cases + 1] = {key = "replayn", label = "g:replay(n), 10 nop nodes",
  target = 1.02, c = {"replay", 10}, nodes = 10, incs = 0, nop = true,
  floor = true, steady = true, loop = function(iters) g:replay(iters) end}
cases[#cases + 1] = {key = "scalar", label = "scalar set + replay, 10 nodes",
  target = 1.02, c = {"scalar", 9}, nodes = 9, mark = true, incs = 9,
  steady = true, loop = function(iters)
    local gr, sc = g, pos
    for i = 1, iters do sc:set(i); gr:launch() end
  end}
-- The engine's loop in C through the embedding API (bench/engine.c):
-- cugraph_scalar_set + cugraph_graph_launch against the same raw calls.
cases[#cases + 1] = {key = "handle", label = "C handle: scalar set + launch",
  target = 1.02, c = {"scalar", 9}, nodes = 9, mark = true, incs = 9,
  steady = true, handle = true, loop = function(iters) engine.run(iters) end}
-- A while node of TURNS turns a launch, its body one kernel (turn) that
-- adds 1 as inc_i32 does and sets the condition itself: the same graph on
-- both sides.
local TURNS = 100
cases[#cases + 1] = {key = "while" .. TURNS, label = ("device while loop, "
  .. "%d turns a launch"):format(TURNS), target = 1.05, c = {"while", TURNS},
  loop_while = TURNS, incs = TURNS, steady = true, loop = replay}
for _, k in ipairs {1, 10, 100} do
  cases[#cases + 1] = {key = "capture" .. k, label = ("capture + "
    .. "instantiate, %d node%s"):format(k, k > 1 and "s" or ""),
    target = k == 10 and 1.15 or k == 100 and 1.10 or nil, c = {"capture", k}, incs = 0,
    capture = k}
end

-- Rebinding: a graph of 9 inc_i32 on x and one on ra (on RGRID blocks,
-- all but the first idle: about 30 µs of device time a launch, so that
-- the rows with a launch wait for the device however fast the host is),
-- whose buffer switches between ra and rb each iteration before the
-- launch: g:rebind
-- (C: cuGraphExecKernelNodeSetParams on the node), and the same through
-- g:update (a capture and cuGraphExecUpdate; the C side stays the rebind's
-- calls, on a graph of its own since an update replaces the node handles,
-- so the row's ratio is update against the driver's own setter).
local ra, rb = cuda.buffer("i32", n), cuda.buffer("i32", n)
local RGRID = 32768
local function rebind_graph()
  return s:capture(function()
    for _ = 1, 9 do inc:launch(s, 1, n, x, n) end
    inc:launch(s, RGRID, n, ra, n)
  end)
end
-- g:rebind(cur, other) swapping ra and rb, on o (the bare row's
-- ref.bare()) or the case's graph, with a launch after each when launch.
local function rebind_loop(o, launch)
  return function(iters)
    local gr, cur, other = o or g, ra, rb
    for _ = 1, iters do
      gr:rebind(cur, other)
      cur, other = other, cur
      if launch then gr:launch() end
    end
    if not o and iters % 2 == 1 then gr:rebind(cur, other) end -- ra again
  end
end
-- Each with a launch, and alone (no launch: what a script pays on the host
-- to point the graph at the other buffer; with a launch, both loops wait
-- for the ten kernels on the device). The C side: the one setter call.
for _, launch in ipairs {true, false} do
  local with, k9 = launch and " + launch" or " alone", launch and 9 or 0
  cases[#cases + 1] = {key = launch and "rebind" or "rebind0",
    label = "g:rebind" .. with .. ", 10 nodes", target = launch and 1.10 or nil,
    share = not launch and 1.15 or nil,
    c = {"rebind", k9}, rebind = true, incs = k9, steady = true,
    bare = not launch and function(o) return rebind_loop(o, false) end or nil,
    loop = rebind_loop(nil, launch)}
  cases[#cases + 1] = {key = launch and "update" or "update0",
    label = "g:update" .. with .. ", 10 nodes", c = {"rebind", k9},
    rebind = true, own = true, incs = k9, loop = function(iters)
      local gr, st, k, len = g, s, inc, n
      local bufs, which = {ra, rb}, 1
      local function fn()
        for _ = 1, 9 do k:launch(st, 1, len, x, len) end
        k:launch(st, RGRID, len, bufs[which], len)
      end
      for _ = 1, iters do
        which = 3 - which
        gr:update(fn)
        if launch then gr:launch() end
      end
      if which == 2 then which = 1; gr:update(fn) end
    end}
end

-- A function of K inc_i32 launches on one buffer, its buffer alternating
-- between ra and rb call by call: through cuda.graphed (a recording, the K
-- nodes set, a launch), by hand (a captured graph, g:rebind of its K nodes
-- and g:launch) and eagerly (K launches). The C side of the first two: the
-- driver's own K node setters and the launch on the graph Lua made; of the
-- eager row, K launches.
local function alt_fn(k)
  return function(st, b)
    for _ = 1, k do inc:launch(st, 1, n, b, n) end
  end
end
for _, k in ipairs {10, 100} do
  cases[#cases + 1] = {key = "graphed" .. k, label = ("graphed call, %d "
    .. "kernels, buffers alternating"):format(k), c = {"setnodes", k},
    alt = k, graphed = true, steady = true}
  cases[#cases + 1] = {key = "hand" .. k, label = ("g:rebind + launch, %d "
    .. "kernels, buffers alternating"):format(k), c = {"setnodes", k},
    alt = k, hand = true, steady = true}
  cases[#cases + 1] = {key = "eagerk" .. k, label = ("eager, %d kernels, "
    .. "buffers alternating"):format(k), c = {"eagerk", k}, alt = k,
    steady = true}
end

-- Host data into a graph's input: 1 MiB from a pinned cuda.host_buffer and
-- from a Lua string (pageable memory), each followed by a launch; the C
-- side copies from cuMemHostAlloc and malloc memory.
local MIB = 1 << 20
local up_dst = cuda.buffer("f32", MIB // 4)
local up_pinned = cuda.host_buffer("f32", MIB // 4)
local up_string = ("\0"):rep(MIB)
for _, v in ipairs {{"pinned", up_pinned}, {"pageable", up_string}} do
  cases[#cases + 1] = {key = v[1], label = ("upload 1 MiB %s + launch")
    :format(v[1]), c = {v[1], MIB}, incs = 1, steady = true,
    loop = function(iters)
      local d, h, st, k, buf, len = up_dst, v[2], s, inc, x, n
      for _ = 1, iters do
        d:upload(h, st)
        k:launch(st, 1, len, buf, len)
      end
    end}
end

-- Runs case c in pairs and checks that both sides' work ran. A steady loop
-- runs with the collector stopped, so the Lua bytes it allocates per
-- iteration (the most over its timed blocks; must be 0) are exact.
-- Each case runs on a stream of its own, made for it: what earlier cases
-- left on a stream moves a later case's replay rate (bench/RESULTS.md).
local function run_case(c)
  s = cuda.stream()
  x:fill(0)
  out:fill(0)
  if c.nodes then g = graph(c.nodes, c.mark, c.nop and am.nop) end
  if c.rebind then g = rebind_graph() end
  local alt -- the alternating rows: their loop, and the graph of the C side
  if c.alt then
    ra:fill(0); rb:fill(0)
    local fn, bufs = alt_fn(c.alt), {ra, rb}
    if c.graphed then
      local f = cuda.graphed(fn)
      f(s, ra)
      g = f:graphs()[1]
      alt = {f = f, loop = function(iters)
        local call, st, b = f, s, bufs
        for i = 1, iters do call(st, b[i % 2 + 1]) end
      end}
    elseif c.hand then
      g = s:capture(function() fn(s, ra) end)
      g:launch()
      alt = {loop = function(iters)
        local gr, cur, other = g, ra, rb
        for _ = 1, iters do
          gr:rebind(cur, other)
          cur, other = other, cur
          gr:launch()
        end
        if iters % 2 == 1 then gr:rebind(cur, other) end -- ra again
      end}
    else
      alt = {loop = function(iters)
        local st, b = s, bufs
        for i = 1, iters do fn(st, b[i % 2 + 1]) end
      end}
    end
    s:synchronize() -- the first call's (or launch's) work is not counted
    ra:fill(0); rb:fill(0)
  end
  if c.loop_while then
    local cond = cuda.condition(1)
    local turns = cuda.buffer("u32", 1):fill(0)
    g = s:capture(function()
      s:loop_while(cond, function()
        am.turn:launch(s, 1, n, x, turns, c.loop_while, cond)
      end)
    end)
  end
  -- the C side of a graph case replays this very graph (the C handle's
  -- copy of it in the handle row): the same work on the device
  local exec = g and (c.handle and engine.take(g, pos, s) or g:handle())
  local cg_graph = c.own and rebind_graph() or g
  if c.rebind then
    exec = cg_graph:handle()
    ref.setup(c.c[1], c.c[2], nil, exec, s:handle(),
              cg_graph:node(10):handle(), ra:address(), rb:address())
  elseif c.alt and g then
    local nodes = {}
    for i = 1, c.alt do nodes[i] = g:node(i):handle() end
    ref.setup(c.c[1], c.c[2], nil, exec, s:handle(), nodes, ra:address(),
              rb:address())
  else
    ref.setup(c.c[1], c.c[2], nil, exec, g and s:handle(),
              c.mark and pos:address())
  end
  local loop = c.loop or alt and alt.loop or c.args and args_loop(c.args)
    or capture_loop(c.capture)
  local count, last = 0, 0
  local function lside(iters)
    local kb = collectgarbage("count")
    local t0 = now()
    loop(iters)
    s:synchronize()
    local t = now() - t0
    count, last = count + iters, iters
    return t * 1e6 / iters,
      c.steady and (collectgarbage("count") - kb) * 1024 / iters or nil
  end
  collectgarbage("collect")
  if c.steady then collectgarbage("stop") end
  local r = paired(ref.block, lside, {})
  collectgarbage("restart")
  if alt then -- the host's time a call: the loop alone, the device idle
    local v, k = {}, 4 -- before it and waited for after (not timed)
    for i = 1, quick and 3 or 41 do
      s:synchronize()
      local t0 = now()
      loop(k)
      v[i] = (now() - t0) * 1e6 / k
      s:synchronize()
      count = count + k
    end
    r.host = median(v)
  end
  local cincs, clast = ref.check() -- a shared graph: the C side's share
  if c.nop then cincs = 0 end -- nop counts nothing
  if c.alt then -- the Lua side's work on ra and rb (and the shared graph's)
    local want = c.alt * count + (g and cincs or 0)
    local got = ra:download("table", 0, 1)[1] + rb:download("table", 0, 1)[1]
    if got ~= want then
      error(("%s: ra[0] + rb[0] is %d, not %d launches"):format(c.label, got,
            want), 0)
    end
  else
    local want = c.incs * count + (cincs or 0)
    local got = x:download("table", 0, 1)[1]
    if got ~= want then
      error(("%s: x[0] is %d, not %d launches"):format(c.label, got, want), 0)
    end
  end
  local p = c.mark and pos:get()
  if c.mark and (p ~= last and p ~= clast or out:download("table", 1, 1)[1] ~= 2)
  then
    error(("%s: Lua side: the graph did not see the scalar's values (the scalar "
      .. "reads %s; the last blocks: Lua %s, C %s)"):format(c.label, tostring(p),
      tostring(last), tostring(clast)), 0)
  end
  if c.bare then -- the same Lua loop, its calls to a bare C method
    local bl = c.bare(ref.bare())
    local br = paired(ref.block, function(iters)
      local t0 = now()
      bl(iters)
      ref.sync()
      return (now() - t0) * 1e6 / iters
    end, {pairs = BARE_PAIRS})
    r.bare, r.bare_lo, r.bare_hi = br.ratio, br.ci_lo, br.ci_hi
  end
  if c.floor then -- the same graph replayed back to back, by events
    local f = {}
    for i = 1, quick and 1 or 5 do
      f[i] = ref.floor(exec, s:handle(), quick and 0.005 or FLOOR)
    end
    r.floor = median(f)
    r.nodes = c.nodes
  end
  if c.handle then engine.release() end
  if c.own then cg_graph:free() end
  if alt and alt.f then
    r.builds = alt.f:stats().builds
    alt.f:free()
    g = nil
  end
  if g then g:free() end
  g = nil
  return r
end

-- A row's line on stderr while the bench runs.
local function progress(r)
  io.stderr:write(("bench: %-34s Lua/C %.3f (95%% CI %.3f–%.3f)\n"):format(
    r.label, r.ratio, r.ci_lo, r.ci_hi))
end

local cpu, pin_err = clock.pin(math.tointeger(tonumber(os.getenv("BENCH_CPU")
                                                     or "")))
-- A row's figures as Lua fields, one line ("row " then the fields).
local function row_line(r)
  local f = {}
  for k, v in pairs(r) do
    if math.type(v) == "integer" then f[#f + 1] = ("%s=%d"):format(k, v)
    elseif type(v) == "number" then
      f[#f + 1] = ("%s=%s"):format(k, v ~= v and "0/0" or v == 1 / 0 and
        "1/0" or v == -1 / 0 and "-1/0" or ("%.17g"):format(v))
    elseif type(v) == "string" or type(v) == "boolean" then
      f[#f + 1] = ("%s=%s"):format(k, ("%q"):format(v):gsub("\\\n", "\\n"))
    end
  end
  return "row " .. table.concat(f, ",")
end

-- Case c in a process of its own, on the CPU this one is pinned to: its
-- row, parsed from the child's last "row" line (its progress goes to
-- stderr as it runs).
local function in_child(c)
  local cmd = ("%s%s %s %s--case %s"):format(cpu and ("BENCH_CPU=%d ")
    :format(cpu) or "", q(LUA), q(arg[0]), quick and "--quick " or "", c.key)
  local p = assert(io.popen(cmd))
  local text = p:read("a")
  local ok, _, code = p:close()
  local line = text:match("\n?row ([^\n]*)\n?$")
  if not ok or not line then
    error(("%s: the case's process failed (exit %s):\n%s"):format(c.key,
          tostring(code), text), 0)
  end
  return assert(load("return {" .. line .. "}", "=row", "t", {}))()
end

local rows = {}
for _, c in ipairs(cases) do
  if (not only or only[c.key]) and (not (c.args or c.loop_while or c.nop)
                                     or am) then
    local alone = not only
    local r = alone and in_child(c) or run_case(c)
    r.key, r.label, r.target, r.share = c.key, c.label, c.target, c.share
    rows[#rows + 1] = r
    if not alone then progress(r) end
    if child_case then
      print(row_line(r))
      os.exit(0)
    end
  end
end
if child_case then error("--case " .. child_case .. ": no such case", 0) end
if not only then
  notes[#notes + 1] = "paired cases: each in a process of its own, started "
    .. "for it (bench.lua --case KEY), none after another case's work"
end

-- The solver of examples/solver.lua (examples/cg.lua) at its default size,
-- to convergence: the device loop (one launch of the solve graph) and the
-- host-driven loop (the start graph, then a launch of the step graph and a
-- read of the residual an iteration), each against the same launches of
-- the same graph execs from C. Unless the driver cannot run its kernels.
local CG_N, CG_TOL = 256, 1e-10
if not only then
  package.path = here .. "/../examples/?.lua;" .. package.path
  local cg = require "cg"
  local ustar, b = cg.problem(CG_N)
  local maxit = 20 * CG_N + 1000
  local ok, solver = pcall(cg.new, CG_N, b, CG_TOL, maxit)
  if not ok then
    if type(solver) ~= "table" or solver.name ~= "CUDA_ERROR_NOT_SUPPORTED"
    then
      error(solver, 0)
    end
    notes[#notes + 1] = "solver rows skipped: this driver cannot run the "
      .. "solver's kernels (" .. tostring(solver) .. ")"
  else
    local st, solve = solver.stream, solver.solve
    solve:launch()
    local want = solver.iterations()
    -- raises unless a solve took want iterations and x is u*
    local function check(label, iters)
      local u, err, big = solver.x:download(), 0, 0
      for i = 1, CG_N * CG_N do
        err = math.max(err, math.abs(u[i] - ustar[i]))
        big = math.max(big, math.abs(ustar[i]))
      end
      if iters ~= want or want >= maxit or err / big >= 1e-5 then
        error(("%s: %d iterations (%d before), max error %.2e"):format(label,
          iters, want, err / big), 0)
      end
    end
    check("solver", want)
    local function row(key, label, lside)
      local r = paired(ref.block, lside, {})
      r.key, r.label = key, label
      rows[#rows + 1] = r
      progress(r)
      return r
    end
    ref.setup("replay", 1, nil, solve:handle(), st:handle())
    local dev_row = row("cg_device", "solver, device loop", function(iters)
      local t0 = now()
      for _ = 1, iters do solve:launch() end
      st:synchronize()
      return (now() - t0) * 1e6 / iters
    end)
    check("solver, device loop", solver.iterations())
    ref.setup("cg", maxit, nil, solver.step:handle(), st:handle(),
              solver.res:address(), solver.start:handle(), CG_TOL)
    local k
    local host_row = row("cg_host", "solver, host-driven loop", function(iters)
      local t0 = now()
      for _ = 1, iters do k = solver.drive() end
      st:synchronize()
      return (now() - t0) * 1e6 / iters
    end)
    check("solver, host-driven loop (Lua)", k)
    check("solver, host-driven loop (C)", select(2, ref.check()))
    local lx, cx = host_row.lua / dev_row.lua, host_row.c / dev_row.c
    notes[#notes + 1] = ("solver, %dx%d Poisson, CG to %g (%d iterations): "
      .. "the device loop %.1fx faster to convergence than the host-driven "
      .. "loop in Lua, %.1fx in C (target at least 3, %s)"):format(CG_N, CG_N,
      CG_TOL, want, lx, cx, lx >= 3 and "met" or "MISS")
  end
end

-- A turn of the device loop against a host launch of a one-node graph
-- (target: at most half).
do
  local w, r1
  for _, r in ipairs(rows) do
    if r.key == "while" .. TURNS then w = r end
    if r.key == "replay1" then r1 = r end
  end
  if w and r1 then
    local turn = w.lua / TURNS
    notes[#notes + 1] = ("a device while-loop turn (1-kernel body) costs %.2f "
      .. "µs in Lua, %.2f µs in C; a host launch of a one-node graph %.2f µs "
      .. "(Lua): %.2fx (target at most 0.5, %s)"):format(turn,
      w.c / TURNS, r1.lua, turn / r1.lua,
      turn / r1.lua <= 0.5 and "met" or "MISS")
  end
end

-- g:rebind against g:update: the change itself at least 10x cheaper (with
-- a launch both wait for the same kernels); pinned against pageable.
do
  local by = {}
  for _, r in ipairs(rows) do by[r.key] = r end
  local re, up = by.rebind0, by.update0
  if re and up and by.rebind and by.update then
    notes[#notes + 1] = ("g:rebind takes %.2f µs, g:update %.2f µs (10 "
      .. "nodes, no launch): %.0fx faster (target at least 10, %s); with a "
      .. "launch %.2f and %.2f µs, both waiting for the device"):format(
      re.lua, up.lua, up.lua / re.lua, up.lua / re.lua >= 10 and "met"
      or "MISS", by.rebind.lua, by.update.lua)
  end
  if by.pinned and by.pageable then
    notes[#notes + 1] = ("1 MiB upload + launch: %.1f µs from a pinned "
      .. "cuda.host_buffer, %.1f µs from a Lua string: %.1fx faster")
      :format(by.pinned.lua, by.pageable.lua,
              by.pageable.lua / by.pinned.lua)
  end
end

-- NVRTC without the cache: cuda.ptx against the same NVRTC calls in C, one
-- compile a block (its rows follow cold start's in the table): for a
-- virtual architecture (PTX) and for the device's own (PTX and a cubin,
-- what cuda.compile asks for by default).
local arch = dev.major * 10 + dev.minor
local nvrtc_rows = {}
if not only then
  local f = assert(io.open(SOURCE, "rb"))
  local src = f:read("a")
  f:close()
  x:fill(0)
  for _, c in ipairs {
    { "compile", "compute_" .. arch, ("NVRTC compile, no cache: PTX (compute_%d)"):format(arch) },
    { "compile_sm", arch, ("NVRTC compile, no cache: PTX and cubin (sm_%d)"):format(arch) },
  } do
    ref.setup(c[1], arch, SOURCE)
    local r = paired(ref.block, function(iters)
      local t0 = now()
      for _ = 1, iters do cuda.ptx(src, {arch = c[2], cache = false}) end
      s:synchronize()
      return (now() - t0) * 1e6 / iters
    end, {iters = 1, pairs = COMPILE_PAIRS, warm_min = 1, warm_max = 1})
    r.key, r.label, r.target = c[1], c[3], 1.10
    nvrtc_rows[#nvrtc_rows + 1] = r
    progress(r)
  end
end
clock.unpin()
ref.close()

-- -- CuPy and PyTorch ---------------------------------------------------------

-- The flat JSON object of a line of anchors.py (string and number values).
local function decode(line)
  if not line:match("^{.*}$") then return nil end
  local t = {}
  for k, v in line:gmatch('"([%w_]+)":%s*"([^"]*)"') do t[k] = v end
  for k, v in line:gmatch('"([%w_]+)":%s*(-?[%d.][%deE.+-]*)') do
    t[k] = tonumber(v)
  end
  return t
end

-- Device memory per instantiated and uploaded graph of k nop nodes: the
-- drop of the device's free memory (cuMemGetInfo) over count such graphs,
-- divided by count (one graph is below the driver's page granularity);
-- anchors.py measures CuPy's and PyTorch's the same way.
local GRAPH_MEM = {{10, 100}, {100, 40}, {1000, 10}}
local graph_mem = {}
if not only and am then
  for _, kc in ipairs(GRAPH_MEM) do
    local k, count = kc[1], kc[2]
    local nop = am.nop
    local function fn() for _ = 1, k do nop:launch(s, 1, n, x, n) end end
    collectgarbage()
    cuda.synchronize()
    local before = cuda.memory().free
    local held = {}
    for i = 1, count do
      held[i] = s:capture(fn)
      held[i]:upload(s)
    end
    cuda.synchronize()
    graph_mem["graphmem" .. k] = {nodes = k, graphs = count,
                                  lua = (before - cuda.memory().free) / count}
    for i = 1, count do held[i]:free() end
  end
end

-- Each library's rows, from anchors.py in its own process; other output
-- (a library's warnings, a failure) becomes notes, 5 lines at most.
local anchors = {cupy = {}, torch = {}}
if os.getenv("BENCH_ANCHORS") ~= "0" then -- under --only, the rows run only
  local by_key, keys = {}, {}
  for _, r in ipairs(rows) do by_key[r.key], keys[#keys + 1] = r, r.key end
  for _, lib in ipairs {"cupy", "torch"} do
    local cmd = ("python3 %s --lib %s --source %s --bench-source %s "
      .. "--blocks %d --block %g --warm-max %d%s%s"):format(
      q(here .. "/anchors.py"), lib, q(SOURCE), q(here .. "/kernels.cu"),
      PAIRS, BLOCK, WARM_MAX, cpu and " --cpu " .. cpu or "",
      only and " --only " .. q(table.concat(keys, ",")) or "")
    local text, err = run(cmd)
    local other = 0
    if not text then
      notes[#notes + 1] = lib .. " rows skipped: anchors.py failed"
      text = err
    end
    for line in text:gmatch("[^\n]+") do
      local a = decode(line)
      if a and a.skip then
        notes[#notes + 1] = ("%s rows skipped: %s"):format(lib, a.skip)
      elseif a and a.error then
        notes[#notes + 1] = ("%s, %s: %s"):format(lib, a.row, a.error)
      elseif a and a.version then
        anchors[lib].version = a.version
      elseif a and a.bytes and graph_mem[a.row] then
        graph_mem[a.row][lib] = a.bytes
      elseif a and by_key[a.row] then
        by_key[a.row][lib] = a.us
        by_key[a.row][lib .. "_p25"] = a.p25
        by_key[a.row][lib .. "_p75"] = a.p75
      elseif line:match("%S") and other < 5 then
        other = other + 1
        notes[#notes + 1] = lib .. ": " .. line
      end
    end
  end
end

for _, kc in ipairs(GRAPH_MEM) do
  local gm = graph_mem["graphmem" .. kc[1]]
  if gm then
    local function kib(v) return v and ("%.1f KiB"):format(v / 1024) or "-" end
    notes[#notes + 1] = ("device memory per instantiated, uploaded graph of "
      .. "%d nop nodes (free memory over %d graphs): Lua %s, CuPy %s, PyTorch "
      .. "%s"):format(gm.nodes, gm.graphs, kib(gm.lua), kib(gm.cupy), kib(gm.torch))
  end
end

-- -- process start to the first kernel result --------------------------------

-- Microseconds the shell command takes; it must succeed.
local function wall(cmd)
  local t0 = now()
  local ok, _, code = os.execute(cmd)
  local t = now() - t0
  if not ok then error(("%s: exit %s"):format(cmd, tostring(code)), 0) end
  return t * 1e6
end

if not only then
  local ccmd = ("%s --cold %s"):format(q(REF), q(PTX))
  local lcmd = ("%s %s %s"):format(q(LUA), q(here .. "/cold.lua"), q(PTX))
  local r = paired(function() return wall(ccmd) end,
                   function() return wall(lcmd) end,
                   {iters = 1, pairs = COLD_PAIRS, warm_min = 1,
                    warm_max = 1})
  r.key, r.label = "cold", "cold start to first result"
  rows[#rows + 1] = r
  for _, nr in ipairs(nvrtc_rows) do rows[#rows + 1] = nr end
  progress(r)
  notes[#notes + 1] = "cold start: one process per block, from the shell "
    .. "(build/cugraph-lua bench/cold.lua against bench-ref --cold)"
end

-- -- NVRTC from the cache ----------------------------------------------------

if not only then
  local tmp = os.tmpname()
  os.remove(tmp)
  assert(os.execute("mkdir -m 700 " .. q(tmp)))
  local text, err = run(("XDG_CACHE_HOME=%s %s %s %s--compile-child %d")
                        :format(q(tmp), q(LUA), q(arg[0]),
                                quick and "--quick " or "", arch))
  os.execute("rm -rf " .. q(tmp))
  rows[#rows + 1] = {key = "compile_cached",
                     label = "NVRTC compile, from the cache",
                     lua = tonumber((text or ""):match("compile_cached (%S+)"))}
  if err then notes[#notes + 1] = "cached compile failed: " .. err end
  notes[#notes + 1] = ("compile: spec/kernels/kernels.cu for compute_%d "
    .. "(PTX) and for sm_%d (PTX and cubin) with the same options; C calls "
    .. "NVRTC directly and fetches what the binding fetches; from the cache: "
    .. "Lua only (NVRTC has no cache), in a child with a fresh cache, the "
    .. "median of %d runs of %d compiles"):format(arch, arch, R, NCACHED)
end

-- -- the table and results.json --------------------------------------------

-- met: the interval's upper end is below the target (and a steady loop
-- allocates nothing); MISS: the median is above it (or the loop
-- allocates); unsure: the interval straddles it.
local counts = {met = 0, MISS = 0, unsure = 0}
for _, r in ipairs(rows) do
  if not r.ratio and r.c and r.lua then r.ratio = r.lua / r.c end
  local alloc = r.bytes and r.bytes > 0
  if r.share and r.ratio and r.bare then -- on Lua/bare, its interval the
    -- widest the two medians' intervals allow
    r.own = r.ratio / r.bare
    r.own_hi = r.ci_hi / r.bare_lo
    r.status = alloc and "MISS" or r.own_hi < r.share and "met"
      or r.own > r.share and "MISS" or "unsure"
    counts[r.status] = counts[r.status] + 1
  elseif r.target and r.ratio then
    r.status = alloc and "MISS" or r.ci_hi < r.target and "met"
      or r.ratio > r.target and "MISS" or "unsure"
    counts[r.status] = counts[r.status] + 1
  end
end

-- The replay rows against the device's floor (target: Lua at most 1.05
-- of it): one note for them all.
do
  local parts, met, n_floor = {}, 0, 0
  for _, r in ipairs(rows) do
    if r.floor and r.lua then
      local ratio = r.lua / r.floor
      n_floor = n_floor + 1
      if ratio <= 1.05 then met = met + 1 end
      parts[#parts + 1] = ("%s %.3f"):format(r.key, ratio)
    end
  end
  if n_floor > 0 then
    notes[#notes + 1] = ("Lua against the device's floor (target at most "
      .. "1.05): %d of %d rows within it (%s)"):format(met, n_floor,
      table.concat(parts, ", "))
  end
end

-- The graphed rows against their eager and hand-captured twins (targets:
-- eager at least 3x the graphed call's time at 10 kernels and 10x at 100;
-- the graphed call at most the hand-captured rebind + launch).
do
  local by = {}
  for _, r in ipairs(rows) do by[r.key] = r end
  for _, k in ipairs {10, 100} do
    local gr, e, h = by["graphed" .. k], by["eagerk" .. k], by["hand" .. k]
    if gr and e and h and gr.host then
      local want = k == 10 and 3 or 10
      local speed, hand = e.host / gr.host, gr.host / h.host
      notes[#notes + 1] = ("graphed call, %d kernels, the host's µs a call "
        .. "(4 calls timed, the device idle before; median of 41): graphed "
        .. "%.2f, eager %.2f (%.1fx, target >= %d: %s), g:rebind + launch "
        .. "%.2f (graphed/hand %.3f, target <= 1: %s); with the device's time "
        .. "(the rows): graphed %.2f, eager %.2f, g:rebind + launch %.2f µs; "
        .. "%s Lua B/call, %s graph%s built"):format(
        k, gr.host, e.host, speed, want, speed >= want and "met" or "MISS",
        h.host, hand, hand <= 1 and "met" or "MISS", gr.lua, e.lua, h.lua,
        tostring(gr.bytes or "-"), tostring(gr.builds or "-"),
        gr.builds == 1 and "" or "s")
    end
  end
end

local v = dev.driver_version
local title = ("cugraph-lua bench: %s (cc %s), driver %d.%d, %s"):format(
  dev.name, dev.compute_capability, v // 1000, v % 1000 // 10,
  os.date("%Y-%m-%d %H:%M"))
local method = ("%d pairs of C and Lua blocks of ~%g ms a case, warm-up to "
  .. "%g%% (at most %d pairs); %s%s"):format(PAIRS, BLOCK * 1e3,
  SETTLE * 100, WARM_MAX, cpu and ("pinned to CPU %d"):format(cpu)
  or "not pinned (" .. tostring(pin_err) .. ")",
  quick and "; QUICK: numbers meaningless" or "")

do
  local keys = {"key", "label", "c", "lua", "ratio", "ci_lo", "ci_hi", "p25",
                "p75", "min", "max", "pairs", "iters", "warmup", "target",
                "status", "bytes", "bare", "bare_lo", "bare_hi", "share",
                "own", "own_hi", "floor",
                "nodes", "cupy", "cupy_p25", "cupy_p75", "torch",
                "torch_p25", "torch_p75"}
  local function value(val)
    if type(val) == "number" then
      return math.type(val) == "integer" and tostring(val)
        or ("%.6g"):format(val)
    end
    return '"' .. tostring(val):gsub('[%c"\\]', " ") .. '"'
  end
  local f = assert(io.open(OUT, "w"))
  f:write(('{"run":%s,"device":%s,"driver":%d,"cpu":%s,"quick":%s,'
           .. '"cupy":%s,"torch":%s}\n'):format(value(os.date("%Y-%m-%d %H:%M")),
    value(dev.name), v, cpu and tostring(cpu) or "null", tostring(quick),
    value(anchors.cupy.version or "none"), value(anchors.torch.version or
                                                 "none")))
  for _, r in ipairs(rows) do
    local parts = {}
    for _, k in ipairs(keys) do
      if r[k] ~= nil then parts[#parts + 1] = ('"%s":%s'):format(k, value(r[k])) end
    end
    f:write("{", table.concat(parts, ","), "}\n")
  end
  f:close()
end

local function fmt(val, f) return val and f:format(val) or "-" end
local function us(val)
  return val and (val >= 1e4 and ("%.0f"):format(val) or ("%.2f"):format(val))
    or "n/a"
end

local function cells(r)
  return {r.label, us(r.c), us(r.lua), fmt(r.ratio, "%.3f"),
          r.ci_lo and ("%.3f–%.3f"):format(r.ci_lo, r.ci_hi) or "-",
          fmt(r.bare, "%.3f"), fmt(r.own, "%.3f"),
          r.p25 and ("%.3f–%.3f"):format(r.p25, r.p75) or "-",
          r.share and ("≤ %.2f Lua/bare"):format(r.share) or fmt(r.target, "≤ %.2f"),
          r.status or "-",
          r.bytes and (r.bytes == 0 and "0" or ("%.1f"):format(r.bytes))
            or "-",
          r.floor and us(r.floor / r.nodes) or "-",
          r.floor and ("%.3f"):format(r.lua / r.floor) or "-",
          r.cupy and ("%.3f"):format(r.lua / r.cupy) or "-",
          r.torch and ("%.3f"):format(r.lua / r.torch) or "-"}
end

local header = {"case", "C µs", "Lua µs", "Lua/C", "95% CI", "bare/C",
                "Lua/bare", "p25–p75",
                "target", "status", "Lua B/it", "floor µs/node",
                "Lua/floor", "Lua/CuPy", "Lua/PyTorch"}
local explain = {
  "C µs, Lua µs: microseconds per iteration, the median over the pairs' "
    .. "blocks (a block: its loop plus one stream synchronize)",
  "Lua/C: the median of the per-pair ratios; 95% CI: of that median; "
    .. "p25–p75: the middle half of the pair ratios",
  "bare/C: the row's Lua loop calling, in place of the kernel or graph, a "
    .. "C method that makes one iteration of the C loop and ignores its "
    .. "arguments: the interpreter's share, the least Lua/C a binding can "
    .. "reach for the row",
  "Lua/bare: Lua/C over bare/C, the binding's own share of the row; the "
    .. "rows whose target reads \"Lua/bare\" are judged on it (its upper end: "
    .. "the CI's upper end over bare/C's lower end), the others on Lua/C",
  "status: met when the CI's upper end is below the target, MISS when the "
    .. "median is above it (or a steady loop allocates), else unsure",
  "Lua B/it: Lua bytes allocated per iteration (collector stopped; must be 0)",
  "floor µs/node: the device's floor for the row's graph (C replays it back "
    .. "to back for 50 ms, timed with events; median of 5) per node; "
    .. "Lua/floor: Lua µs over that floor (target at most 1.05)",
  "Lua/CuPy, Lua/PyTorch: Lua µs over bench/anchors.py's median µs for the "
    .. "same loop, in its own process (no pairing: a guide, not a target)",
}
local summary = ("targets: %d met, %d MISS, %d unsure"):format(
  counts.met, counts.MISS, counts.unsure)
if anchors.cupy.version or anchors.torch.version then
  summary = summary .. ("; CuPy %s, PyTorch %s"):format(
    anchors.cupy.version or "absent", anchors.torch.version or "absent")
end

print()
if markdown then
  print("### " .. title)
  print()
  print(method)
  print()
  print("| " .. table.concat(header, " | ") .. " |")
  print("|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|")
  for _, r in ipairs(rows) do
    print("| " .. table.concat(cells(r), " | ") .. " |")
  end
  print()
  print(summary)
  print()
  for _, note in ipairs(notes) do print("- " .. note) end
else
  local all = {header}
  for _, r in ipairs(rows) do all[#all + 1] = cells(r) end
  local width = {}
  for _, row in ipairs(all) do
    for j, cell in ipairs(row) do
      width[j] = math.max(width[j] or 0, utf8.len(cell))
    end
  end
  print(title)
  print(method)
  for _, line in ipairs(explain) do print(line) end
  print()
  for _, row in ipairs(all) do
    local line = {}
    for j, cell in ipairs(row) do
      local pad = (" "):rep(width[j] - utf8.len(cell))
      line[j] = (j == 1 or j == 9) and cell .. pad or pad .. cell
    end
    print((table.concat(line, "  "):gsub("%s+$", "")))
  end
  print()
  print(summary)
  for _, note in ipairs(notes) do print(note) end
  print("all figures: " .. OUT:gsub("^bench/%.%./", ""))
end
