# Benchmarks, included by the top Makefile. `make bench` runs bench/bench.lua:
# each case as interleaved pairs of C blocks (bench/ref.c as the Lua module
# $(BUILD)/bench/ref.so, the same driver calls made directly) and Lua blocks in
# one process, then the same loops in CuPy and PyTorch (bench/anchors.py)
# where python3 has them, and prints one table last; all figures go to
# $(BUILD)/bench/results.json. BENCH_QUICK=1 (or BENCH_ARGS=--quick) for a
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
$(BUILD)/bench-ref: bench/ref.c | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(BENCH_CFLAGS) -o $@ $< -ldl

$(BUILD)/bench/clock.so: bench/clock.c | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -fPIC -shared -o $@ $<

$(BUILD)/bench/ref.so: bench/ref.c | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -DBENCH_REF_MODULE -fPIC -shared -o $@ $< -ldl

# The C handle row's engine loop; cugraph_* come from $(BUILD)/cugraph-lua.
$(BUILD)/bench/engine.so: bench/engine.c src/cugraph.h | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -Isrc -fPIC -shared -o $@ $<

# The argsN kernels of the argument rows.
$(BUILD)/bench/kernels.ptx: bench/kernels.cu
	@mkdir -p $(@D)
	$(call say,NVCC,$@)$(NVCC) -ptx -arch=compute_75 $< -o $@

# The C side of the all-reduce benchmark (bench/nccl.lua).
$(BUILD)/bench/nccl_ref.so: bench/nccl_ref.c | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(BENCH_CFLAGS) $(LUA_CFLAGS) -fPIC -shared -o $@ $< -ldl

## bench: the hot paths from Lua against C, CuPy and PyTorch (GPU)
bench: all $(BUILD)/kernels.ptx $(BUILD)/bench/kernels.ptx $(BUILD)/bench-ref \
       $(BUILD)/bench/clock.so $(BUILD)/bench/ref.so $(BUILD)/bench/engine.so
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua bench/bench.lua $(BENCH_ARGS)
	$(MAKE) -s bench-nccl
	$(MAKE) -s bench-decode
	$(MAKE) -s bench-pdl

# The decoder rows: examples/decode.lua eager and captured against the same
# model in PyTorch (bench/decode.lua; DECODE_BENCH_ARGS: runs and size).
## bench-decode: the decoder example against PyTorch (GPU)
bench-decode: all
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua bench/decode.lua $(DECODE_BENCH_ARGS)

# Programmatic dependent launch on replays (bench/pdl.lua): chains of
# 10-1000 kernel nodes with and without programmatic edges.
## bench-pdl: dependent chains with and without programmatic edges (GPU, or the simulator)
bench-pdl: all
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua bench/pdl.lua $(PDL_BENCH_ARGS)

# What a user object retained by a graph costs each launch (bench/userobj.c):
# the keep of the memory a graph's nodes use rides on one (base.h).
$(BUILD)/bench/userobj: bench/userobj.c | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(BENCH_CFLAGS) -o $@ $< -ldl

## bench-userobj: a graph launch's device time with and without a user object (GPU)
bench-userobj: $(BUILD)/bench/userobj
	$(BUILD)/bench/userobj

# The all-reduce rows: one rank per GPU through the launcher, on 2 GPUs
# (BENCH_NCCL_GPUS); skipped with a note on fewer. NCCL_BENCH_ARGS:
# --quick, --markdown, --max BYTES.
BENCH_NCCL_GPUS ?= 2
## bench-nccl: all-reduce from Lua against C (two GPUs)
bench-nccl: all $(BUILD)/bench/clock.so $(BUILD)/bench/nccl_ref.so
	@n=$$($(BUILD)/cugraph-lua -e 'print(require("cugraph").device_count())' 2>/dev/null); \
	if [ "$${n:-0}" -ge $(BENCH_NCCL_GPUS) ]; then \
	  CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua --nproc $(BENCH_NCCL_GPUS) bench/nccl.lua $(NCCL_BENCH_ARGS); \
	else \
	  echo "bench-nccl: skipped: $${n:-0} GPU(s); the all-reduce rows need $(BENCH_NCCL_GPUS)"; \
	fi

## soak: 10 million pos:set(i); g:launch() iterations; fails if memory grows
soak: all $(BUILD)/kernels.ptx
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua bench/soak.lua $(SOAK_ARGS)

# An engine's frame loop (examples/embed/frameloop.c): the host time of
# the runtime's calls a frame (p50, p99, p99.9) for a 50-node frame graph
# fenced by the engine's counters, replayed from C and from Lua, and the
# bytes allocated a frame (the runtime's, Lua's, the driver's).
# FRAME_ARGS: frames (10000).
## bench-frame: an engine's frame loop: host time and allocations a frame (GPU, or the software drivers)
bench-frame: all $(BUILD)/examples/frameloop
	$(BUILD)/examples/frameloop $(FRAME_ARGS)

# The cost of g:profile's event nodes (bench/profile.lua).
## bench-profile: what a g:profile stamp and event node cost (GPU)
bench-profile: all
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua bench/profile.lua $(PROFILE_ARGS)

# The binding's own host instructions a call (bench/ir.lua): callgrind over
# the test double, deterministic, no GPU needed.
## bench-ir: host instructions a call costs, by callgrind on the test double
bench-ir: all $(DOUBLE) $(KERNELS) $(BUILD)/bench/ref.so
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua bench/ir.lua $(IR_CASES)

.PHONY: bench bench-nccl bench-decode bench-pdl soak bench-profile bench-ir bench-frame \
        bench-userobj

# The PTX simulator's speed on model.lua's MLP kernels (one host thread, and
# all), on a reduction and a divergent kernel beside the same kernels built
# for the host as plain C loops (bench/sim_native.c), and beside Numba's
# CUDA simulator on the MLP's layer (bench/sim.lua).
$(BUILD)/bench/sim_native: bench/sim_native.c | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) -std=c11 $(CFLAGS) $(WARN) -o $@ $<

## bench-sim: the simulator's speed on model.lua's kernels, beside the host's and Numba's
bench-sim: all $(BUILD)/libcuda-sim.so $(BUILD)/bench/sim_native
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua bench/sim.lua $(BENCH_SIM_ARGS)

.PHONY: bench-sim
