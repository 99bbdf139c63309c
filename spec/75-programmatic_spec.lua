-- Programmatic dependent launch, decided from the PTX: every entry's code
-- judged as a consumer (griddepcontrol.wait before any global access and
-- before its end, on every path) and as a producer (no global write after
-- its block's griddepcontrol.launch_dependents), with the instruction
-- that breaks each rule (cuda.entries and k:programmatic, on every
-- platform); k:config{programmatic = true} refused on a kernel that is no
-- consumer; eager and captured launches made programmatic only right after
-- a producer, refused after a kernel that is none, with the Lua line and
-- the access; m:reload keeping the edges safe.
local H = require "support.helper"
local cuda = H.cuda

local THIS = debug.getinfo(1, "S").short_src
-- This file as a pattern: NVRTC names it by its absolute path
local FILE = ".-" .. THIS:match("[^/]*$"):gsub("%p", "%%%0")

-- The line of text (this file when nil) that holds marker (once).
local function line_of(marker, text)
  local n = 0
  for l in text and (text .. "\n"):gmatch("([^\n]*)\n") or io.lines(THIS) do
    n = n + 1
    if l:find(marker, 1, true) then return n end
  end
  error("no line holds " .. marker)
end

-- The verdicts of every entry of a CUDA C text written in this file
-- (cuda.ptx maps its lines to this file's with lineinfo), by name.
local function judge(src)
  local out = {}
  for _, e in ipairs(cuda.entries(cuda.ptx(src, { arch = "sm_90", lineinfo = true }))) do
    out[e.name] = e.programmatic
  end
  return out
end

-- The same for a PTX text, and the text.
local function judge_ptx(body)
  local ptx = ".version 8.0\n.target sm_90\n.address_size 64\n" .. body
  local out = {}
  for _, e in ipairs(cuda.entries(ptx)) do out[e.name] = e.programmatic end
  return out, ptx
end

local KERNELS = [[
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
extern "C" {
__global__ void safe(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  WAIT();
  if (i < n) y[i] = a * x[i];
  __syncthreads();
  TRIGGER();
}
__global__ void prologue(const float *x, float *y, float a, int n) {
  __shared__ float s[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x % 32] = 2 * a;       // parameters and shared memory: no wait
  WAIT();
  if (i < n) y[i] = s[threadIdx.x % 32] * x[i];
}
__global__ void read_early(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0;        // READ BEFORE WAIT
  WAIT();
  if (i < n) y[i] = a * v;
}
__global__ void write_early(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a;               // WRITE BEFORE WAIT
  WAIT();
}
__global__ void one_path(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = 0;
  if (n > 100) v = x[n - 1];         // ONE PATH READS EARLY
  WAIT();
  if (i < n) y[i] = v;
}
__global__ void early_return(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  WAIT();
  y[i] = a * x[i];
}
__global__ void loop_late(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0;
  for (int k = 0; k < n; k++) {
    s += x[k];                       // READ IN LOOP
    WAIT();
  }
  WAIT();
  if (i < n) y[i] = s;
}
__global__ void loop_after(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  WAIT();
  float s = 0;
  for (int k = 0; k < n; k++) s += x[k];
  if (i < n) y[i] = s;
}
__global__ void late_write(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  WAIT();
  TRIGGER();
  if (i < n) y[i] = a * x[i];        // WRITE AFTER TRIGGER
}
__global__ void no_barrier(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  WAIT();
  if (i < n) y[i] = a * x[i];        // WRITE WITHOUT BARRIER
  TRIGGER();
}
__global__ void loop_trigger(const float *x, float *y, float a, int n) {
  WAIT();
  for (int k = 0; k < n; k++) {
    y[k] = a;                        // WRITE IN TRIGGER LOOP
    __syncthreads();
    TRIGGER();
  }
}
__global__ void branch_trigger(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  WAIT();
  if (threadIdx.x == 0) TRIGGER();
  else if (i < n) y[i] = a;          // WRITE BESIDE TRIGGER
}
__global__ void no_trigger(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  WAIT();
  if (i < n) y[i] = a * x[i];
}
__global__ void empty() {}
__global__ void atomic_early(int *c) {
  atomicAdd(c, 1);                   // ATOMIC BEFORE WAIT
  WAIT();
}
}
]]

describe("the PTX of each kernel, judged", function()
  local v
  setup(function() v = judge(KERNELS) end)

  it("takes a wait before every global access and a trigger after a block's last write as both sides", function()
    for _, name in ipairs { "safe", "prologue", "loop_after" } do
      assert.is_true(v[name].consumer, name .. ": " .. tostring(v[name].consumer_why))
      assert.is_nil(v[name].consumer_why)
    end
    assert.same({ consumer = true, producer = true }, v.safe)
    assert.is_true(v.no_trigger.producer) -- its dependents start at its end
  end)

  it("names the read, the write or the atomic before the wait, with its PTX and source lines", function()
    local function check(name, marker, what)
      local why = v[name].consumer_why
      assert.is_false(v[name].consumer)
      assert.matches("%(PTX line %d+, " .. FILE .. ":" .. line_of(marker) .. "%) may "
                     .. what .. " global memory before griddepcontrol%.wait$", why)
    end
    check("read_early", "READ BEFORE WAIT", "read")
    assert.matches("^ld%.global", v.read_early.consumer_why)
    check("write_early", "WRITE BEFORE WAIT", "write")
    assert.matches("^st%.global", v.write_early.consumer_why)
    check("atomic_early", "ATOMIC BEFORE WAIT", "write")
    assert.matches("^atom%.global", v.atomic_early.consumer_why)
  end)

  it("follows branches and loops: one path that reads early, a loop that waits after its first read", function()
    assert.is_false(v.one_path.consumer)
    assert.matches(":" .. line_of("ONE PATH READS EARLY") .. "%) may read", v.one_path.consumer_why)
    assert.is_false(v.loop_late.consumer)
    assert.matches(":" .. line_of("READ IN LOOP") .. "%) may read", v.loop_late.consumer_why)
  end)

  it("wants the wait before the end on every path: an early return, or no wait at all", function()
    assert.is_false(v.early_return.consumer)
    assert.matches("^ret .* can end the thread before griddepcontrol%.wait: its grid would complete "
                   .. "before its producer$", v.early_return.consumer_why)
    assert.is_false(v.empty.consumer)
    assert.matches("before griddepcontrol%.wait %(it has none%)", v.empty.consumer_why)
    assert.is_true(v.empty.producer)
  end)

  it("names a write after the trigger, in its thread or in another of the block", function()
    assert.is_true(v.late_write.consumer)
    assert.is_false(v.late_write.producer)
    assert.matches("^st%.global.*:" .. line_of("WRITE AFTER TRIGGER")
                   .. "%) may write global memory after griddepcontrol%.launch_dependents %(PTX line %d+%)$",
                   v.late_write.producer_why)
    assert.is_false(v.no_barrier.producer)
    assert.matches(":" .. line_of("WRITE WITHOUT BARRIER") .. "%) may write global memory after another "
                   .. "thread of its block ran griddepcontrol%.launch_dependents %(PTX line %d+%): no "
                   .. "bar%.sync of the whole block comes between$", v.no_barrier.producer_why)
    assert.is_false(v.loop_trigger.producer)
    assert.matches(":" .. line_of("WRITE IN TRIGGER LOOP") .. "%) may write", v.loop_trigger.producer_why)
    assert.is_false(v.branch_trigger.producer)
    assert.matches(":" .. line_of("WRITE BESIDE TRIGGER") .. "%) may write", v.branch_trigger.producer_why)
  end)
end)

describe("the PTX rules on hand-written PTX", function()
  it("count guarded waits as none, and brx.idx as a jump to any label", function()
    local v, ptx = judge_ptx [[
.visible .entry guarded(.param .u64 p, .param .u32 c)
{
  .reg .pred %p<2>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [c];
  setp.ne.s32 %p1, %r1, 0;
  @%p1 griddepcontrol.wait;
  ld.global.u32 %r2, [%rd1];
  griddepcontrol.wait;
  ret;
}
.visible .entry jumps(.param .u64 p, .param .u32 c)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<3>;
  ts: .branchtargets L1, L2;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [c];
  griddepcontrol.wait;
  brx.idx %r1, ts;
L1:
  st.global.u32 [%rd1], %r1;
  ret;
L2:
  griddepcontrol.launch_dependents;
  bra.uni L1;
}
]]
    assert.is_false(v.guarded.consumer)
    assert.equals("ld.global.u32 %r2, [%rd1] (PTX line " .. line_of("ld.global.u32 %r2", ptx)
                  .. ") may read global memory before griddepcontrol.wait", v.guarded.consumer_why)
    assert.is_true(v.jumps.consumer)
    assert.is_false(v.jumps.producer)
    assert.equals("st.global.u32 [%rd1], %r1 (PTX line " .. line_of("st.global.u32", ptx)
                  .. ") may write global memory after griddepcontrol.launch_dependents (PTX line "
                  .. line_of("launch_dependents", ptx) .. ")", v.jumps.producer_why)
  end)

  it("take .shared, .local, .const and .param for safe, and generic, texture, async copy and call for global", function()
    local function before_wait(insn, decl)
      return ([[
.visible .entry k(.param .u64 p)
{
  .reg .b32 %%r<4>;
  .reg .f32 %%f<5>;
  .reg .b64 %%rd<4>;
  %s
  ld.param.u64 %%rd1, [p];
  %s
  griddepcontrol.wait;
  ret;
}
]]):format(decl or "", insn)
    end
    local safe = {
      { "ld.shared.u32 %r1, [s];", ".shared .align 4 .b8 s[16];" },
      { "st.local.u32 [l], %r1;", ".local .align 4 .b8 l[16];" },
      { "ld.const.u32 %r1, [c];" },
      { "mbarrier.arrive.shared::cta.b64 %rd2, [s];", ".shared .align 8 .b8 s[16];" },
      { "cvta.to.global.u64 %rd2, %rd1;" },
    }
    for _, case in ipairs(safe) do
      local src = before_wait(case[1], case[2])
      if case[1]:find("ld.const", 1, true) then
        src = ".const .align 4 .b8 c[16];\n" .. src
      end
      local p = judge_ptx(src).k
      assert.is_true(p.consumer, case[1] .. ": " .. tostring(p.consumer_why))
    end
    local global = {
      "ld.u32 %r1, [%rd1];",                                    -- generic: may be global
      "ld.global.nc.f32 %f1, [%rd1];",
      "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f1, %f2}];",
      "cp.async.ca.shared.global [s], [%rd1], 16;",
      "red.global.add.u32 [%rd1], 1;",
      "prefetch.global.L2 [%rd1];",
    }
    for _, insn in ipairs(global) do
      local p = judge_ptx(before_wait(insn, ".shared .align 16 .b8 s[16];")).k
      assert.is_false(p.consumer, insn)
      assert.equals(1, select(2, p.consumer_why:find(insn:sub(1, -2), 1, true)) and 1, p.consumer_why)
    end
    local call = judge_ptx([[
.func f()
{
  ret;
}
]] .. before_wait("call.uni f, ();")).k
    assert.matches("^call%.uni f, %(%) %(PTX line %d+%) may write global memory", call.consumer_why)
  end)

  it("count a call as a trigger when a function of the text triggers", function()
    local src = [[
.func %s()
{
  %s
  ret;
}
.visible .entry k(.param .u64 p)
{
  .reg .b32 %%r<2>;
  .reg .b64 %%rd<2>;
  ld.param.u64 %%rd1, [p];
  griddepcontrol.wait;
  bar.sync 0;
  call.uni f, ();
  st.global.u32 [%%rd1], %%r1;
  ret;
}
]]
    assert.is_true(judge_ptx(src:format("f", "")).k.producer)
    local p = judge_ptx(src:format("f", "griddepcontrol.launch_dependents;")).k
    assert.is_false(p.producer)
    assert.matches("^call%.uni f, %(%) %(PTX line %d+%) may write global memory after another thread of its "
                   .. "block ran a call %(of a function that may run griddepcontrol%.launch_dependents%)", p.producer_why)
  end)

  it("reads .loc with the .file table after the entries, and proves nothing of a body it cannot follow", function()
    local v, ptx = judge_ptx [[
.visible .entry located(.param .u64 p)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  .loc 1 7 3
  ld.param.u64 %rd1, [p];
  .loc 1 9 5
  ld.global.u32 %r1, [%rd1];
  griddepcontrol.wait;
  ret;
}
.visible .entry lost(.param .u64 p)
{
  griddepcontrol.wait;
  bra.uni nowhere;
}
	.file	1 "/src/model.cu"
]]
    assert.equals("ld.global.u32 %r1, [%rd1] (PTX line " .. line_of("ld.global", ptx) .. ", /src/model.cu:9) "
                  .. "may read global memory before griddepcontrol.wait", v.located.consumer_why)
    assert.same({ consumer = false, producer = false,
                  consumer_why = "its PTX body could not be read: a branch to 'nowhere', a label it does not have",
                  producer_why = "its PTX body could not be read: a branch to 'nowhere', a label it does not have" },
                v.lost)
    local cut = judge_ptx(".visible .entry cut(.param .u64 p)\n{\n  griddepcontrol.wait;\n  ret\n").cut
    assert.is_false(cut.consumer or cut.producer)
    assert.equals("its PTX body could not be read: the text ends inside an instruction", cut.consumer_why)
  end)
end)

-- The kernels the launches below use: y = a * x in pdl_scale (the double
-- has its host twin), its two instructions placed well (safe), or the
-- trigger before the store (late: no producer), or the read before the
-- wait (early: no consumer).
local FORMS = {
  safe = [[
extern "C" __global__ void pdl_scale(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (i < n) y[i] = a * x[i];
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}]],
  late = [[
extern "C" __global__ void pdl_scale(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (i < n) y[i] = a * x[i];       // LATE STORE
}]],
  early = [[
extern "C" __global__ void pdl_scale(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0;       // EARLY LOAD
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (i < n) y[i] = a * v;
}]],
}

describe("programmatic launches", function()
  local N = 100
  local s, x, y, z, forms
  setup(function()
    forms = {}
    for name, src in pairs(FORMS) do
      forms[name] = cuda.compile(src, { arch = "sm_90", lineinfo = true }).pdl_scale
    end
  end)
  before_each(function()
    s = cuda.stream()
    local xs = {}
    for i = 1, N do xs[i] = i end
    x, y, z = cuda.buffer("f32", xs), cuda.buffer("f32", N):fill(0), cuda.buffer("f32", N):fill(0)
    for _, k in pairs(forms) do k:config {} end
  end)

  -- Runs fn with the collector stopped (a finalizer between two launches,
  -- any kernel's close, would make the stream's last kernel unknown), and
  -- returns how many launches of k it made programmatic.
  local function count(k, fn)
    local before = k:programmatic().launches
    collectgarbage()
    collectgarbage("stop")
    local ok, err = pcall(fn)
    collectgarbage("restart")
    if not ok then error(err, 0) end
    return k:programmatic().launches - before
  end

  -- "<this file>:<line of marker>: "
  local function at(marker) return "^" .. FILE .. ":" .. line_of(marker) .. ": " end

  it("are refused for a kernel that reads before its wait, naming the line and the load", function()
    local early = forms.early
    local ok, err = pcall(function()
      early:config { programmatic = true } -- REFUSED CONFIG
    end)
    assert.is_false(ok)
    assert.matches(at("REFUSED CONFIG") .. "pdl_scale: k:config{programmatic = true} refused: it cannot start "
                   .. "before the kernel before it ends: ld%.global%.f32 .*%(PTX line %d+, " .. FILE .. ":"
                   .. line_of("EARLY LOAD") .. "%) may read global memory before griddepcontrol%.wait$", err)
    assert.equals(0, early:programmatic().launches)
    assert.error_matches(function() forms.safe:config { programmatic = 1 } end, "opts%.programmatic: a boolean")
    assert.error_matches(function() forms.safe:config { serialize = true } end,
      "unknown option 'serialize' %(valid: cooperative, cluster, priority, programmatic%)")
  end)

  it("follow a producer on the same stream eagerly, and compute the same", function()
    local k = forms.safe:config { programmatic = true }
    assert.equals(1, count(k, function()
      k:launch(s, 1, 128, x, y, 2.0, N) -- the first on the stream: no kernel before it
      k:launch(s, 1, 128, y, z, 3.0, N) -- after a producer: programmatic
    end))
    local out = z:download()
    assert.same({ 6, 6 * N }, { out[1], out[N] })
    local s2, w = cuda.stream(), cuda.buffer("f32", N)
    assert.equals(1, count(k, function()
      k:launch(s, 1, 128, x, y, 2.0, N)  -- s's last work is k's: programmatic
      y:fill(1, s)                       -- other work in between: an ordinary launch
      k:launch(s, 1, 128, y, z, 3.0, N)
      k:launch(s2, 1, 128, x, w, 2.0, N) -- the first on another stream
    end))
    assert.same({ 3, 2 * N }, { z:download()[N], w:download()[N] })
    k:config {}
    assert.equals(0, count(k, function()
      k:launch(s, 1, 128, x, y, 2.0, N)
      k:launch(s, 1, 128, y, z, 3.0, N)
    end))
  end)

  it("are refused after a kernel that writes after its trigger, naming the line and the store", function()
    local k, late = forms.safe:config { programmatic = true }, forms.late
    local ok, err = pcall(count, k, function()
      late:launch(s, 1, 128, x, y, 2.0, N)
      k:launch(s, 1, 128, y, z, 3.0, N) -- REFUSED EAGER
    end)
    assert.is_false(ok)
    assert.matches(at("REFUSED EAGER") .. "pdl_scale: a programmatic launch after pdl_scale is refused: pdl_scale "
                   .. "could still be writing what pdl_scale reads: st%.global%.f32 .*" .. FILE .. ":"
                   .. line_of("LATE STORE") .. "%) may write global memory after "
                   .. "griddepcontrol%.launch_dependents %(PTX line %d+%)$", err)
    assert.equals(0, z:download()[N]) -- nothing was launched
    assert.equals(0, count(k, function() -- other work between them: an ordinary launch
      late:launch(s, 1, 128, x, y, 2.0, N)
      s:wait(cuda.event():record(s))
      k:launch(s, 1, 128, y, z, 3.0, N)
    end))
    assert.equals(6 * N, z:download()[N])
  end)

  it("make programmatic edges between kernel nodes in a capture", function()
    local k = forms.safe:config { programmatic = true }
    local g
    assert.equals(1, count(k, function()
      g = s:capture(function()
        k:launch(s, 1, 128, x, y, 2.0, N)
        k:launch(s, 1, 128, y, z, 3.0, N)
        z:fill(0, s)
        k:launch(s, 1, 128, y, z, 3.0, N) -- after a fill: an ordinary edge
      end)
    end))
    local path = os.tmpname()
    g:dot(path)
    local dot = assert(io.open(path)):read("a")
    os.remove(path)
    local _, edges = dot:gsub("%->", "")
    local _, programmatic = dot:gsub('%-> n%d+ %[label="programmatic", style=bold%]', "")
    assert.same({ 3, 1 }, { edges, programmatic })
    assert.matches('n0 %-> n1 %[label="programmatic"', dot)
    local _, detail = g:nodes("detail")
    assert.same({ false, true, false, false }, {
      detail[1].programmatic == true, detail[2].programmatic == true,
      detail[3].programmatic == true, detail[4].programmatic == true })
    assert.equals(4, #g:profile(1).nodes) -- a copy with event nodes
    g:launch()
    s:synchronize()
    assert.equals(6 * N, z:download()[N])
  end)

  it("stay as they are through g:update, which refuses to change them", function()
    local k = forms.safe:config { programmatic = true }
    local function chain(a)
      k:launch(s, 1, 128, x, y, a, N)
      k:launch(s, 1, 128, y, z, 3.0, N)
    end
    local g = s:capture(function() chain(2.0) end)
    g:update(function() chain(4.0) end) -- the same edges
    k:config {}
    assert.error_matches(function() g:update(function() chain(5.0) end) end,
      "the update of cugraph%.Graph #%d+ changes its programmatic edges, which an update cannot change safely: "
      .. "capture a new graph")
    g:launch()
    s:synchronize()
    assert.equals(12 * N, z:download()[N])
  end)

  it("end a capture with the error after a kernel that writes after its trigger", function()
    local k, late = forms.safe:config { programmatic = true }, forms.late
    local ok, err = pcall(s.capture, s, function()
      late:launch(s, 1, 128, x, y, 2.0, N)
      y:fill(0, s)
      late:launch(s, 1, 128, x, y, 2.0, N)
      k:launch(s, 1, 128, y, z, 3.0, N) -- REFUSED IN CAPTURE
    end)
    assert.is_false(ok)
    assert.matches(at("REFUSED IN CAPTURE") .. "pdl_scale: a programmatic launch after pdl_scale is refused: .*"
                   .. FILE .. ":" .. line_of("LATE STORE") .. "%) may write", tostring(err))
    k:launch(s, 1, 128, x, z, 1.0, N) -- the stream is usable
    s:synchronize()
    assert.equals(N, z:download()[N])
  end)

  it("are decided when a graphed function builds its graph, the recorded line named", function()
    local k, late, first = forms.safe:config { programmatic = true }, forms.late, forms.early
    local f = cuda.graphed(function(st, a, b, c)
      first:launch(st, 1, 128, a, b, 2.0, N) -- a producer: it never triggers
      k:launch(st, 1, 128, b, c, 3.0, N)
    end)
    assert.equals(1, count(k, function() f(s, x, y, z) end))
    s:synchronize()
    assert.equals(6 * N, z:download()[N])
    local bad = cuda.graphed(function(st, a, b, c)
      late:launch(st, 1, 128, a, b, 2.0, N)
      k:launch(st, 1, 128, b, c, 3.0, N) -- REFUSED GRAPHED
    end)
    local ok, err = pcall(bad, s, x, y, z)
    assert.is_false(ok)
    assert.matches("^pdl_scale: a programmatic launch after pdl_scale %(recorded at " .. FILE .. ":"
                   .. line_of("REFUSED GRAPHED") .. "%) is refused", err)
  end)

  it("make the decoder example's one eligible edge programmatic, with the same tokens", function()
    if H.double and not H.sim then
      return pending("the decoder's kernels compute: make test-sim, test-gpu")
    end
    -- the generator's kernel, a producer, then sample, a consumer
    local code, out = H.run("examples/decode.lua 4 16 1")
    assert.equals(0, code, out)
    assert.matches("programmatic%s+%d+ tokens/s%s+%([%d.]+x of the captured%), the same tokens, "
                   .. "1 programmatic edge\n", out)
  end)

  it("keep their code safe through m:reload", function()
    local early, late = cuda.ptx(FORMS.early, { arch = "sm_90" }), cuda.ptx(FORMS.late, { arch = "sm_90" })
    local m = cuda.compile(FORMS.safe, { arch = "sm_90" })
    local k = m.pdl_scale:config { programmatic = true }
    assert.error_matches(function() m:reload(early) end,
      "reload: kernel pdl_scale has k:config{programmatic = true}, and the new code would make it unsafe: "
      .. "ld%.global%.f32 .* may read global memory before griddepcontrol%.wait; the old code stays")
    assert.is_true(k:programmatic().consumer)
    k:config {}
    m:reload(early)                     -- nothing needs it to wait
    assert.is_false(k:programmatic().consumer)
    local m2 = cuda.compile(FORMS.safe, { arch = "sm_90" })
    local p = m2.pdl_scale
    local g = s:capture(function()
      p:launch(s, 1, 128, x, y, 2.0, N) -- the producer of the next
      forms.safe:config { programmatic = true }:launch(s, 1, 128, y, z, 3.0, N)
    end)
    assert.error_matches(function() m2:reload(late) end,
      "reload: kernel pdl_scale had a programmatic edge out of it in a graph, and the new code would make it "
      .. "unsafe: st%.global%.f32 .* may write global memory after griddepcontrol%.launch_dependents")
    g:launch()
    s:synchronize()
    assert.equals(6 * N, z:download()[N]) -- on the old code
  end)
end)

-- Kernels launched straight through the driver (spec/hosts/pdl.c), past
-- the runtime's refusal: each takes (const float *in, float *out, int n).
local RAW = [[
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
extern "C" {
__global__ void twice(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  WAIT();
  if (i < n) out[i] = 2 * in[i];
  __syncthreads();
  TRIGGER();
}
__global__ void read_early(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0;             // RAW READ BEFORE WAIT
  WAIT();
  if (i < n) out[i] = 3 * v;
}
__global__ void write_early(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1;                   // RAW WRITE BEFORE WAIT
  WAIT();
  if (i < n) out[i] += in[i];
}
__global__ void add_early(const float *in, float *out, int n) {
  atomicAdd(out + n - 1, 1.0f);            // RAW ATOMIC BEFORE WAIT
  WAIT();
}
__global__ void no_wait(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] < 0) out[i] = 0;
}
__global__ void trigger_first(const float *in, float *out, int n) {
  TRIGGER();
  WAIT();
}
}
]]

describe("the simulator's check of programmatic launches made through the driver (spec/hosts/pdl.c)", function()
  local path
  setup(function()
    path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(cuda.ptx(RAW, { arch = "sm_90", lineinfo = true }))
    f:close()
  end)
  teardown(function() os.remove(path) end)

  -- Runs the host on the steps (after env); its exit status and output.
  local function pdl(mode, steps, env)
    local p = assert(io.popen((env and env .. " " or "") .. H.sanitized(H.quote(H.build .. "/pdl")) .. " "
                              .. H.quote(path) .. " " .. mode .. " " .. steps .. " 2>&1"))
    local out = p:read("a")
    local _, _, code = p:close()
    return code, out
  end

  -- The kernels run from their PTX: the simulator and a GPU.
  local function runs()
    if H.sim or H.gpu then return true end
    pending("the test double runs only the spec kernels' host twins")
  end

  -- The simulator's strict mode, which checks them (a GPU races).
  local function checks()
    if not runs() then return false end
    if not H.strict then pending(H.gpu and "the simulator's check: a GPU races" or "the simulator's strict mode") end
    return H.strict
  end

  -- The start of the report of a pre-wait race by kernel k at its step
  -- (graph: its node's capture), with what and the bytes, at marker's line.
  local function early(k, step, graph, what, from, to, marker)
    local at = graph and ("its node captured at step " .. step .. ", in the graph launched at the launch")
      or ("sent at step " .. step)
    return "report: a race with the kernel before a programmatic launch: kernel '" .. k .. "', " .. at .. ", "
      .. what .. " bytes " .. from .. " to " .. to .. " of the memory at 0x%x+ before its griddepcontrol%.wait, "
      .. "in thread %(0,0,0%) of block %(0,0,0%) %(" .. FILE .. ":" .. line_of(marker) .. ", PTX line %d+%), which "
  end

  it("runs a safe pair with nothing to report, eagerly and as a graph's programmatic edge", function()
    if not runs() then return end
    for _, mode in ipairs { "eager", "graph" } do
      local code, out = pdl(mode, "twice:0:1 +twice:1:2")
      assert.equals(0, code, out)
      assert.matches("sync: CUDA_SUCCESS\nb0: 1 256\nb1: 2 512\nb2: 4 1024\n", out, 1, true)
      assert.not_matches("report", out)
    end
  end)

  it("reports a read before the wait of what the kernel before it writes: the rule, the thread, both lines", function()
    if not runs() then return end
    for _, mode in ipairs { "eager", "graph" } do
      local code, out = pdl(mode, "twice:0:1 +read_early:1:2")
      assert.equals(0, code, out)
      if H.strict then
        assert.matches("sync: CUDA_ERROR_NOT_PERMITTED\n" .. early("read_early", 2, mode == "graph", "reads", 0, 4,
          "RAW READ BEFORE WAIT") .. "kernel 'twice', " .. (mode == "graph" and "its node captured at step 1, in the "
          .. "graph launched at the launch" or "sent at step 1") .. ", the kernel before it, writes: a programmatic "
          .. "launch may start while the kernel before it runs, and only griddepcontrol%.wait waits for that kernel "
          .. "to complete and its memory to be visible %(the programmatic launch rule: run griddepcontrol%.wait "
          .. "before any access of global memory that the kernels before it may touch; CUDA_SIM_STRICT=0 turns "
          .. "this check off%)\n", out)
        assert.matches("b2: 6 1536\n", out, 1, true) -- the simulator's grids run one after the other
      else
        assert.matches("sync: CUDA_SUCCESS\n", out, 1, true) -- a GPU reads what the timing gives
      end
    end
  end)

  it("reports a write or an atomic before the wait of what the kernel before it reads or writes", function()
    if not checks() then return end
    local code, out = pdl("eager", "twice:0:1 +write_early:2:1")
    assert.equals(0, code, out)
    assert.matches(early("write_early", 2, false, "writes", 0, 4, "RAW WRITE BEFORE WAIT")
                   .. "kernel 'twice', sent at step 1, the kernel before it, writes:", out)
    code, out = pdl("graph", "twice:0:1 +add_early:3:0")
    assert.equals(0, code, out)
    assert.matches(early("add_early", 2, true, "writes", 1020, 1024, "RAW ATOMIC BEFORE WAIT")
                   .. "kernel 'twice', its node captured at step 1, in the graph launched at the launch, the "
                   .. "kernel before it, reads:", out)
  end)

  it("reports nothing where the launch is ordered after the kernel, or touches other memory", function()
    if not runs() then return end
    for _, steps in ipairs {
      "twice:0:1 sync +read_early:1:2",     -- the host waited for it
      "twice:0:1 fill:3 +read_early:1:2",   -- other work between them: an ordinary edge
      "twice:0:1 read_early:1:2",           -- an ordinary launch
      "twice:0:1 +read_early:2:3",          -- memory the kernel before it does not touch
      "twice:0:1 +twice:3:3 +read_early:1:2", -- the one between waited before its trigger
    } do
      local code, out = pdl("eager", steps)
      assert.equals(0, code, out)
      assert.matches("\nsync: CUDA_SUCCESS\n", "\n" .. out, 1, true)
      assert.not_matches("report", out)
    end
  end)

  it("follows what a launch that triggers before its wait lets the next one reach", function()
    if not checks() then return end
    local code, out = pdl("eager", "twice:0:1 +trigger_first:3:3 +read_early:1:2")
    assert.equals(0, code, out)
    assert.matches(early("read_early", 3, false, "reads", 0, 4, "RAW READ BEFORE WAIT")
                   .. "kernel 'twice', sent at step 1, writes, and kernel 'trigger_first', sent at step 2, between "
                   .. "them, let the kernels after it start before it had waited for the kernel before it", out)
  end)

  it("reports the work after a programmatic launch that never waits, until the host waits", function()
    if not checks() then return end
    for _, mode in ipairs { "eager", "graph" } do
      local at = mode == "graph" and ", in the graph launched at the launch" or ""
      local sent = mode == "graph" and "its node captured at step " or "sent at step "
      local code, out = pdl(mode, "twice:0:1 +no_wait:0:3 copy:1:2")
      assert.equals(0, code, out)
      assert.matches("report: a race after a programmatic launch: a copy, " .. sent .. "3" .. at .. ", reads bytes "
                     .. "0 to 1024 of the memory at 0x%x+, which kernel 'twice', " .. sent .. "1" .. at .. ", writes, "
                     .. "and nothing orders the two: kernel 'no_wait', " .. sent .. "2" .. at .. ", between them, "
                     .. "was launched programmatic and ran no griddepcontrol%.wait, so it may complete before the "
                     .. "kernel before it, and the work after it start %(the programmatic launch rule: a "
                     .. "programmatic launch runs griddepcontrol%.wait before it ends;", out)
    end
    local code, out = pdl("eager", "twice:0:1 +no_wait:0:3 sync copy:1:2")
    assert.equals(0, code, out)
    assert.not_matches("report", out)
    assert.matches("b2: 2 512\n", out, 1, true)
  end)

  it("is off with the rest of strict mode (CUDA_SIM_STRICT=0)", function()
    if not H.sim then
      pending("the simulator's")
      return
    end
    local code, out = pdl("eager", "twice:0:1 +read_early:1:2", "CUDA_SIM_STRICT=0")
    assert.equals(0, code, out)
    assert.matches("sync: CUDA_SUCCESS\n", out, 1, true)
    assert.not_matches("report", out)
  end)
end)
