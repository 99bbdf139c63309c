-- The NVRTC fault sweep's workload (spec/60-faults_spec.lua runs it on
-- build/libnvrtc-fault.so with one NVRTC call failed at a time): every
-- NVRTC call the runtime makes, in one script, with the cache off. It
-- prints one line
--   NVRTC-RESULT <outcome> <api> <code> <after>
-- (tab-separated; "-" for none) and exits 0 unless something crashes.
-- outcome: "ok", "error" (an error object) or "message" (any other error,
-- its text in api). after: "works" when a compile succeeds afterwards,
-- else the error it raised ("<api> <code>" for an error object). With
-- NVRTC_WORKLOAD_COUNT set, the compile afterwards is skipped: a trace
-- then counts the calls of the workload itself.
local cuda = require "cugraph"
local src = [[
template <typename T> __device__ T twice(T v) { return v + v; }
extern "C" __global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);
}
extern "C" __global__ void count(unsigned *c) { atomicAdd(c, 1u); }
#define HIDDEN(name) extern "C" __global__ void name(int *p) { *p = 1; }
HIDDEN(hidden) // a name only the compile sees: typed by a front-end pass
]]

local function workload()
  local ptx = cuda.ptx(src, {arch = "compute_90", cache = false})
  assert(ptx:find(".entry scale", 1, true))
  local cubin = cuda.ptx(src, {arch = "sm_90", cache = false}) -- nvrtcGetCUBIN
  assert(#cubin > 0)
  local ok, err = pcall(cuda.ptx, "this is not C++", {arch = "compute_90", cache = false})
  assert(not ok, "a bad source compiled")
  if type(err) ~= "table" or err.code ~= 6 then error(err, 0) end -- not the compile's own error
  assert(err.log:find("error", 1, true), "no log")
end

local function field(v) return v == nil and "-" or tostring(v) end

local outcome, api, code = "ok"
local ok, err = pcall(workload)
if not ok then
  if type(err) == "table" and err.api then
    outcome, api, code = "error", err.api, err.code
  else
    outcome, api = "message", tostring(err):gsub("[\t\n]", " ")
  end
end
local after = "works"
local aok, aerr = true, nil
if not os.getenv("NVRTC_WORKLOAD_COUNT") then
  aok, aerr = pcall(cuda.ptx, src, {arch = "compute_90", cache = false})
end
if not aok then
  after = type(aerr) == "table" and ("%s %s"):format(aerr.api, aerr.code)
          or tostring(aerr):gsub("[\t\n]", " ")
end
print(table.concat({ "NVRTC-RESULT", outcome, field(api), field(code), after }, "\t"))
