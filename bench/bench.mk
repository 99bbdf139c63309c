# Benchmarks, included by the top Makefile. `make bench` runs bench/bench.lua:
# each case in Lua and in C (build/bench-ref, the same driver calls made
# directly), one table; BENCH_ARGS=--quick for a smoke run, --markdown for
# bench/RESULTS.md. `make soak` runs bench/soak.lua (SOAK_ARGS: count).

# Included before the first rule, this file must not become the default goal.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

BENCH_CFLAGS = -std=c11 -O2 $(WARN) -Werror -I$(CUDA_HOME)/include

# libcuda and NVRTC are opened with dlopen, as the binding opens them.
build/bench-ref: bench/ref.c | deps
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -ldl

build/bench/clock.so: bench/clock.c | deps
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -fPIC -shared -o $@ $<

# The same cases as a Lua module, so bench.lua runs C and Lua in one process.
build/bench/ref.so: bench/ref.c | deps
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Wno-unused-function $(LUA_CFLAGS) -DBENCH_REF_MODULE -fPIC -shared -o $@ $< -ldl

bench: all build/kernels.ptx build/bench-ref build/bench/clock.so build/bench/ref.so
	build/cugraph-lua bench/bench.lua $(BENCH_ARGS)

soak: all build/kernels.ptx
	build/cugraph-lua bench/soak.lua $(SOAK_ARGS)

.PHONY: bench soak
