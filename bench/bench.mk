# Benchmarks, included by the top Makefile. `make bench` runs bench/bench.lua:
# each case as interleaved pairs of C blocks (bench/ref.c as the Lua module
# build/bench/ref.so, the same driver calls made directly) and Lua blocks in
# one process, then the same loops in CuPy and PyTorch (bench/anchors.py)
# where python3 has them, and prints one table last; all figures go to
# build/bench/results.json. BENCH_QUICK=1 (or BENCH_ARGS=--quick) for a
# smoke run, BENCH_ARGS=--markdown for bench/RESULTS.md. `make soak` runs
# bench/soak.lua (SOAK_ARGS: count).

# Included before the first rule, this file must not become the default goal.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

# ref.c is built twice (module and program); each uses part of it.
BENCH_CFLAGS = -std=c11 -O2 $(WARN) -Werror -Wno-unused-function \
  -I$(CUDA_HOME)/include

# libcuda and NVRTC are opened with dlopen, as the binding opens them.
build/bench-ref: bench/ref.c | deps
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -ldl

build/bench/clock.so: bench/clock.c | deps
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -fPIC -shared -o $@ $<

build/bench/ref.so: bench/ref.c | deps
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -DBENCH_REF_MODULE -fPIC -shared -o $@ $< -ldl

# The C handle row's engine loop; cugraph_* come from build/cugraph-lua.
build/bench/engine.so: bench/engine.c src/cugraph.h | deps
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -Isrc -fPIC -shared -o $@ $<

# The argsN kernels of the argument rows.
build/bench/kernels.ptx: bench/kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_75 $< -o $@

bench: all build/kernels.ptx build/bench/kernels.ptx build/bench-ref \
       build/bench/clock.so build/bench/ref.so build/bench/engine.so
	build/cugraph-lua bench/bench.lua $(BENCH_ARGS)

soak: all build/kernels.ptx
	build/cugraph-lua bench/soak.lua $(SOAK_ARGS)

.PHONY: bench soak

# The PTX simulator's speed on model.lua's MLP kernels (one host thread, and
# all), beside Numba's CUDA simulator on the same layer (bench/sim.lua).
bench-sim: all build/libcuda-sim.so
	build/cugraph-lua bench/sim.lua $(BENCH_SIM_ARGS)

.PHONY: bench-sim
