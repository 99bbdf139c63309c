-- Cold start, timed by bench/bench.lua from process start: load the module
-- (arg[1], the PTX of spec/kernels/kernels.cu), make a buffer, launch
-- inc_i32 once and read the result. bench-ref --cold does the same in C.
local cuda = require "cugraph"
local m = cuda.load_module(arg[1])
local x = cuda.buffer("i32", 256):fill(0)
local s = cuda.stream()
m.inc_i32:launch(s, 1, 256, x, 256)
assert(x:download("table", 0, 1)[1] == 1, "cold: inc_i32 gave a wrong result")
