# cugraph-lua. `make` builds build/cugraph-lua, build/cugraph/core.so and
# the embedding library build/libcugraph-lua.a and .so; `make test` runs the
# specs on the test double of the driver, `make test-gpu` on the real one;
# `make run` runs the model example; `make help` lists the targets.

# A job a core unless -j is given, for one goal (two, such as clean and
# all or two suites, run one after the other) that is not the fuzzers (one
# after another); sub-makes share the top one's jobs.
ifeq ($(MAKELEVEL)$(word 2,$(MAKECMDGOALS))$(filter fuzz,$(MAKECMDGOALS)),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
# A short line a file (none under -s); V=1 prints the whole commands.
V ?= 0
ifeq ($(V),1)
say =
Q =
else ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
say = @
Q = @
else
say = @printf '  %-5s %s\n' '$(1)' '$(2)';
Q = @
endif

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= cc
PKG_CONFIG ?= pkg-config
LUA ?= lua5.4
PREFIX ?= /usr/local
# The one place the version is written: the binary, the core, the installed
# header and pkg-config file take it from here; spec/51-ux_spec.lua checks
# the rockspec, the header's default, the docs and CHANGELOG.md against it.
VERSION := $(shell cat VERSION)
# Where everything is built; make test-asan builds into build-asan.
BUILD ?= build

WARN = -Wall -Wextra -pedantic -Wmissing-prototypes -Wstrict-prototypes \
       -Wshadow -Wpointer-arith -Wcast-qual -Wno-unused-parameter
WERROR ?=
LUA_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags lua5.4 2>/dev/null)
LUA_LIBS ?= $(shell $(PKG_CONFIG) --libs lua5.4 2>/dev/null)
CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=c11 -pthread $(CFLAGS) $(WARN) $(WERROR) -fPIC $(LUA_CFLAGS) \
             -I$(CUDA_HOME)/include -Isrc -DCUGRAPH_VERSION='"$(VERSION)"'

READLINE := $(shell test -f /usr/include/readline/readline.h && echo yes)
ifeq ($(READLINE),yes)
HOST_DEFS = -DCG_READLINE
HOST_LIBS = -lreadline
endif

# The core's layers (src/<layer>/, lowest first; .ci/layers checks that no
# file includes from a layer above its own), then the two files above them.
LAYERS = base capture types kernel graph inspect embed
CORE_SRC = $(foreach d,$(LAYERS),$(wildcard src/$(d)/*.c)) $(wildcard src/*.c)
HOST_SRC = $(wildcard src/host/*.c)
OBJS = $(CORE_SRC:src/%.c=$(BUILD)/obj/%.o)
HOST_OBJS = $(HOST_SRC:src/%.c=$(BUILD)/obj/%.o)
# The software driver (sim/driver) is the test double with the host twins
# of the spec kernels (spec/support/twins.c), and the PTX simulator with
# sim/ptx; sim/nccl is the NCCL stand-in.
DRIVER_SRC = $(wildcard sim/driver/*.c)
TWINS_SRC = $(wildcard spec/support/twins*.c)
PTX_SRC = $(wildcard sim/ptx/*.c)
NCCL_SRC = $(wildcard sim/nccl/*.c)
BLAS_SRC = $(wildcard sim/blas/*.c)
FFT_SRC = $(wildcard sim/fft/*.c)
DOUBLE_OBJS = $(DRIVER_SRC:%.c=$(BUILD)/double/%.o) $(TWINS_SRC:%.c=$(BUILD)/double/%.o)
SIM_OBJS = $(DRIVER_SRC:%.c=$(BUILD)/sim/%.o) $(PTX_SRC:%.c=$(BUILD)/sim/%.o)
DOUBLE = $(BUILD)/libcuda-double.so
SIM = $(BUILD)/libcuda-sim.so
SIM_CFLAGS ?= -O3 -funroll-loops
NCCL_DOUBLE = $(BUILD)/libnccl-double.so
BLAS_DOUBLE = $(BUILD)/libcublas-double.so
FFT_DOUBLE = $(BUILD)/libcufft-double.so
KERNELS = $(BUILD)/kernels.ptx $(BUILD)/kernels.cubin $(BUILD)/kernels.fatbin \
  $(BUILD)/textures.ptx
SPEC_ENV = CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) XDG_CACHE_HOME=$(CURDIR)/$(BUILD)/cache
DEPFLAGS = -MMD -MP
SIM_BUILD_CFLAGS = -std=c11 $(CFLAGS) $(WARN) $(WERROR) -fPIC $(DEPFLAGS) \
  -Isim -Isrc -I$(CUDA_HOME)/include

# The embedding library is named libcugraph-lua, its header installed under
# include/cugraph-lua/: NVIDIA RAPIDS cuGraph owns libcugraph and
# include/cugraph/ on machines that have it.
LIB_A = $(BUILD)/libcugraph-lua.a
LIB_SO = $(BUILD)/libcugraph-lua.so
SONAME = libcugraph-lua.so.$(firstword $(subst ., ,$(VERSION)))

## all: build cugraph-lua, the core, the embedding library and the simulator (the default)
all: $(BUILD)/cugraph-lua $(BUILD)/cugraph/core.so $(LIB_A) $(LIB_SO) $(SIM)

$(BUILD)/obj/%.o: src/%.c VERSION | deps
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $(OBJ_DEFS) -c $< -o $@
$(HOST_OBJS): OBJ_DEFS = $(HOST_DEFS)
# Where make install puts the simulator, and the build folder: the core
# also looks there for it, beside itself and the program. A stamp holds
# both, so that make install PREFIX=p after make rebuilds the core with p.
SIM_DIR = $(PREFIX)/lib/cugraph-lua
SIM_STAMP = $(BUILD)/sim-dirs
$(BUILD)/obj/base/driver.o: OBJ_DEFS = -DCG_SIM_DIR='"$(SIM_DIR)"' \
  -DCG_BUILD_DIR='"$(abspath $(BUILD))"'
$(BUILD)/obj/base/driver.o: $(SIM_STAMP)
$(SIM_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(SIM_DIR) $(abspath $(BUILD))' | cmp -s - $@ || \
	  echo '$(SIM_DIR) $(abspath $(BUILD))' > $@
FORCE:

# Linked to the shared liblua5.4 so Lua C modules (busted's) load into it.
$(BUILD)/cugraph-lua: $(HOST_OBJS) $(OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -pthread -rdynamic -o $@ $^ $(LUA_LIBS) $(HOST_LIBS) -ldl -lm

$(BUILD)/cugraph/core.so: $(OBJS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(CFLAGS) -pthread -shared -o $@ $^ -ldl -lm

$(LIB_A): $(OBJS)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -pthread -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LUA_LIBS) -ldl -lm

$(BUILD)/double/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) -c $< -o $@

$(DOUBLE): $(DOUBLE_OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -shared -o $@ $^ -pthread -lm

# The NCCL stand-in: collectives on the software driver's memory, across
# the ranks of one process or of several (shared memory).
$(NCCL_DOUBLE): $(NCCL_SRC) sim/halfconv.h sim/standin.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) -shared -o $@ $(NCCL_SRC) -pthread -lm -ldl

# The cuBLAS stand-in: the calls the runtime makes, computed on the host.
$(BLAS_DOUBLE): $(BLAS_SRC) sim/halfconv.h sim/standin.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) -shared -o $@ $(BLAS_SRC) -pthread -lm -ldl

# The cuFFT stand-in: direct DFTs on the host.
$(FFT_DOUBLE): $(FFT_SRC) sim/standin.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) -shared -o $@ $(FFT_SRC) -pthread -lm -ldl

# NVRTC with injected failures, for the fault sweep (spec/60).
NVRTC_FAULT = $(BUILD)/libnvrtc-fault.so
$(NVRTC_FAULT): spec/support/nvrtc_fault.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) -shared -o $@ $^ -pthread -ldl

# An NVTX tool that logs the ranges pushed and popped (spec/31).
NVTX_TOOL = $(BUILD)/libnvtx-tool.so
$(NVTX_TOOL): spec/support/nvtx_tool.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) -shared -o $@ $^

# The other API of the external-memory specs (spec/16): memfds for the
# software driver, Vulkan's exports (where its header is found) for a GPU.
PEER = $(BUILD)/peer.so
$(PEER): spec/support/peer.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) $(LUA_CFLAGS) -shared -o $@ $^ -ldl

# The PTX simulator: the software driver with kernels run from their PTX
# (sim/ptx), built with -frounding-math for the rounding modes PTX names
# (SIM_CFLAGS: -funroll-loops unrolls the interpreter's loops over a warp's
# 32 lanes). ptx_fma.c runs only in the default rounding mode: without it,
# GCC vectorizes its fmaf.
SIM_ROUNDING = -frounding-math
$(BUILD)/sim/sim/ptx/ptx_fma.o: SIM_ROUNDING =
$(BUILD)/sim/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) $(SIM_CFLAGS) $(SIM_ROUNDING) -DCUDA_SIM -c $< -o $@

# The interpreter's loop again for x86-64 CPUs with wider vectors, AVX2
# and AVX-512 (x86-64-v4): its lane loops vectorize that wide, and sim_run
# picks the widest the host runs (ptx_exec.c). Without AVX512DQ's vpmullq,
# which GCC picks for 32-bit products of 64-bit lanes (3 uops, latency 15)
# where vpmuludq (1 uop) does.
ifneq ($(findstring x86_64,$(shell $(CC) -dumpmachine)),)
SIM_VARIANTS = avx2 avx512
endif
SIM_ARCH_avx2 = -mavx2 -mfma -mbmi -mbmi2 -mpopcnt
SIM_ARCH_avx512 = -march=x86-64-v4 -mno-avx512dq
SIM_OBJS += $(SIM_VARIANTS:%=$(BUILD)/sim/sim/ptx/ptx_exec_%.o)
$(SIM_VARIANTS:%=$(BUILD)/sim/sim/ptx/ptx_exec_%.o): \
$(BUILD)/sim/sim/ptx/ptx_exec_%.o: sim/ptx/ptx_exec.c
	@mkdir -p $(@D)
	$(CC) $(SIM_BUILD_CFLAGS) $(SIM_CFLAGS) $(SIM_ROUNDING) -DCUDA_SIM \
	  -DEXEC_VARIANT=$* $(SIM_ARCH_$*) -c $< -o $@

$(SIM): $(SIM_OBJS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -shared -o $@ $^ -pthread -lm

-include $(OBJS:.o=.d) $(HOST_OBJS:.o=.d) $(DOUBLE_OBJS:.o=.d) $(SIM_OBJS:.o=.d)

$(BUILD)/kernels.ptx: spec/kernels/kernels.cu
	@mkdir -p $(@D)
	$(call say,NVCC,$@)$(NVCC) -ptx -arch=compute_75 $< -o $@

$(BUILD)/textures.ptx: spec/kernels/textures.cu
	@mkdir -p $(@D)
	$(call say,NVCC,$@)$(NVCC) -ptx -arch=compute_75 $< -o $@

$(BUILD)/kernels.cubin: spec/kernels/kernels.cu
	@mkdir -p $(@D)
	$(call say,NVCC,$@)$(NVCC) -cubin -arch=sm_90 $< -o $@

$(BUILD)/kernels.fatbin: spec/kernels/kernels.cu
	@mkdir -p $(@D)
	$(call say,NVCC,$@)$(NVCC) -fatbin -no-compress -gencode arch=compute_90,code=sm_90 \
	  -gencode arch=compute_75,code=compute_75 $< -o $@

# Debian packages the build and the tests need: installed when root, else
# named. CUDA comes from the toolkit (CUDA_HOME). `make deps` also installs
# what the REPL (readline) and the examples (libpng) use; the build goes on
# without them and says what it left out. NO_DEPS=1 (the rock) skips all.
## deps: install (as root) or name the Debian packages the build, the REPL and the examples use
deps:
	@test -z "$(NO_DEPS)" || exit 0; missing=""; \
	$(PKG_CONFIG) --exists lua5.4 2>/dev/null || missing="$$missing liblua5.4-dev pkgconf"; \
	command -v $(LUA) >/dev/null || missing="$$missing lua5.4"; \
	command -v busted >/dev/null || missing="$$missing lua-busted"; \
	if [ "$(MAKECMDGOALS)" = deps ]; then \
	  test -f /usr/include/readline/readline.h || missing="$$missing libreadline-dev"; \
	  $(PKG_CONFIG) --exists libpng 2>/dev/null || missing="$$missing libpng-dev"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing:$$missing"; \
	    (apt-get install -y -qq $$missing >/dev/null 2>&1 || \
	     (apt-get update -qq && apt-get install -y -qq $$missing)) || exit 1; \
	  else echo "missing Debian packages:$$missing (apt-get install$$missing)"; exit 1; fi; \
	fi; \
	test -f $(CUDA_HOME)/include/cuda.h || \
	  { echo "CUDA headers not found in $(CUDA_HOME)/include; set CUDA_HOME"; exit 1; }; \
	test -f /usr/include/readline/readline.h || \
	  echo "note: no libreadline-dev: the REPL has no line editing, history or completion (make deps)"

# C hosts the specs run (spec/hosts): the embedding API's argument checks
# (capi); N states in N threads at once, a state handed between threads,
# finalizers on another thread (threads LUA_DIR PTX [N]); graphs replayed by
# C from other threads, before and after lua_close (handles LUA_DIR PTX); a
# host that closes its lua_State at exit, after the driver's teardown
# (late_close); free and taken TCP ports for the rendezvous specs (port);
# states on threads that take turns (turns LUA_DIR A.lua B.lua ...);
# programmatic launches made straight through the driver (pdl PTX MODE
# STEP...).
SPEC_HOSTS = late_close capi threads handles port modes turns pdl
SPEC_BINS = $(SPEC_HOSTS:%=$(BUILD)/%)
$(SPEC_BINS): $(BUILD)/%: spec/hosts/%.c spec/hosts/devmem.h $(LIB_A)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -pthread -o $@ $< $(LIB_A) $(LUA_LIBS) -ldl -lm

# A C host function the specs give s:host (spec/support/hostfn.c): its
# cugraph_pushhostfn comes from build/cugraph-lua, which exports it.
HOSTFN = $(BUILD)/hostfn.so
$(HOSTFN): spec/support/hostfn.c src/cugraph.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(SIM_BUILD_CFLAGS) $(LUA_CFLAGS) -shared -o $@ $<

# The embedding example that spec/43 runs: an engine's frame loop
# (examples/examples.mk builds it).
FRAMELOOP = $(BUILD)/examples/frameloop

# A pseudo-terminal that types into the REPL (spec/50's line editing).
PTY = $(BUILD)/pty
$(PTY): spec/support/pty.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) -std=c11 $(CFLAGS) $(WARN) $(WERROR) -o $@ $<

# Everything the specs need, for make test and its kin, and for plain
# `busted` in a checkout (spec/support/busted-lua makes spec-needs).
SPEC_NEEDS = all $(DOUBLE) $(NCCL_DOUBLE) $(BLAS_DOUBLE) $(FFT_DOUBLE) $(NVRTC_FAULT) $(NVTX_TOOL) $(PEER) $(HOSTFN) $(KERNELS) \
  $(SPEC_BINS) $(PTY) $(FRAMELOOP)
## spec-needs: build what the specs need (plain busted in the checkout does it itself)
spec-needs: $(SPEC_NEEDS)

# $(call specs,DRIVER,PREFIX,ARGS[,FILES]): the suite (or FILES) with
# build/cugraph-lua as busted's interpreter, on the software driver DRIVER
# (empty: the real libcuda), PREFIX before the command (variables, a tool),
# ARGS for busted. The suite leaves out the files numbered in SPEC_SKIP.
# SPEC_JOBS > 1 runs a busted per file, that many at once
# (spec/support/each.sh), PREFIX before each (through env): the sanitizer
# runs use both cores of a CI machine.
SPEC_JOBS ?= 1
SPEC_SKIP ?=
# With SPEC_JOBS > 1, the files numbered here run after the others, one at
# a time (EACH_ALONE of each.sh).
SPEC_ALONE ?=
SPEC_FILES = $(filter-out $(foreach n,$(SPEC_SKIP),spec/$(n)-%),$(sort $(wildcard spec/[0-9][0-9]-*_spec.lua)))
# busted's output is spec/support/summary.lua (BUSTED_OUTPUT): a character
# a test, the failures, the pending tests by cause, and a last line
# "N passed, N pending (...), N failed".
BUSTED_OUTPUT ?= spec/support/summary.lua
define specs
$(Q)$(SPEC_ENV) $(if $(1),CUGRAPH_LUA_LIBCUDA=$(CURDIR)/$(1) \
  CUGRAPH_LUA_LIBNCCL=$(CURDIR)/$(NCCL_DOUBLE)) \
  $(if $(filter-out 0 1,$(SPEC_JOBS)),EACH_ALONE="$(SPEC_ALONE)" sh spec/support/each.sh $(SPEC_JOBS) \
    "$(or $(4),$(SPEC_FILES))" -- env $(2),$(2)) \
  $(BUILD)/cugraph-lua "$$(command -v busted)" --ignore-lua -o $(BUSTED_OUTPUT) $(3) $(BUSTED_ARGS) \
  $(if $(filter-out 0 1,$(SPEC_JOBS)),,$(or $(4),$(SPEC_FILES_GIVEN),$(foreach n,$(SPEC_SKIP),--exclude-pattern='^$(n)%-')))
endef
# make test SPEC_FILES=spec/34-waits_spec.lua runs those files alone.
SPEC_FILES_GIVEN = $(if $(filter command line environment,$(origin SPEC_FILES)),$(SPEC_FILES))

## test: the specs on the test double; the last line is the verdict (SPEC_FILES=... picks files)
test: $(SPEC_NEEDS)
	$(call specs,$(DOUBLE))

# The same specs on the PTX simulator: the kernels run from their PTX.
## test-sim: the specs on the PTX simulator
test-sim: $(SPEC_NEEDS) $(SIM)
	$(call specs,$(SIM))

# What the GPU suites need: the specs' hosts, kernels and stand-ins.
GPU_NEEDS = all $(KERNELS) $(SPEC_BINS) $(NVRTC_FAULT) $(NVTX_TOOL) $(PEER) $(HOSTFN) $(PTY) \
  $(FRAMELOOP)
## test-gpu: the specs on the real driver and GPU
test-gpu: $(GPU_NEEDS)
	$(call specs,)
# spec/34 compares the device's free memory before and after (other
# processes move it) and leaves a loop running that only a time-sliced GPU
# with no other context on it lets run to its timeout (seen on an H200
# beside seven other spec processes: CUDA_ERROR_LAUNCH_FAILED instead);
# spec/43's lifetime checks read the device's free memory while a launch
# is held (beside 14 other spec processes on an H100 they saw more free
# than the held buffers allowed)
test-gpu: SPEC_ALONE = 34 43

## run: the example model, on the GPU or else on the simulator
run: all
	@if $(BUILD)/cugraph-lua -e 'os.exit(require("cugraph").available() and 0 or 1)' \
	    2>/dev/null; then $(BUILD)/cugraph-lua examples/model.lua; \
	else echo "make run: no GPU here: the model runs on the PTX simulator" \
	  "($(BUILD)/cugraph-lua --sim examples/model.lua)"; \
	  $(BUILD)/cugraph-lua --sim examples/model.lua; fi

# The suite with a whole collection cycle, finalizers included, at every
# allocation: a finalizer may run inside any C function of the runtime.
# The fault sweep is left out: its cases run in child processes, which the
# collector of this one does not reach (make test-asan runs them).
# So are the specs whose work runs in child processes or only checks names
# and types (05 jobs, 50 host, 53 stubs): a collection at every allocation
# of their large heaps makes them slow and finds nothing the rest does not.
## test-gcstress: the specs with a full collection at every allocation
test-gcstress: $(SPEC_NEEDS)
	$(call specs,$(DOUBLE),,--helper=spec/support/gcstress.lua)
test-gcstress: SPEC_SKIP += 05 50 53 60

# The suite under valgrind on the test double: any invalid access or definite
# leak fails it. Subprocess specs run their children under valgrind too
# (CUGRAPH_LUA_VALGRIND); the fault sweep then takes one case per call.
VALGRIND = valgrind -q --error-exitcode=99 --leak-check=full \
  --errors-for-leak-kinds=definite --show-leak-kinds=definite \
  --suppressions=$(CURDIR)/spec/support/valgrind.supp
## test-valgrind: the specs under valgrind memcheck (SPEC_JOBS=n: n at once)
test-valgrind: $(SPEC_NEEDS)
	$(call specs,$(DOUBLE),CUGRAPH_LUA_VALGRIND="$(VALGRIND)" $(VALGRIND))

# The suite built with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan (core, host, double; the sanitizer runtimes are linked into
# the host, so Lua C modules load without LD_PRELOAD): any invalid access,
# leak or undefined behaviour fails it, in the specs' subprocesses too.
# Stock lua5.4 loading build-asan/cugraph/core.so preloads the runtime.
# intercept_tls_get_addr=0: GCC 12's runtime takes a dynamic TLS block that
# starts 16 bytes into a page for glibc 2.19's header and reads a length
# from the two words before it; NVRTC's blocks land there by chance (a cold
# compile cache in spec/26), and the leak check's tracer then dies on the
# garbage range (SIGSEGV at 0x9f8). Leaks are still found; pointers kept
# only in dynamic TLS are not scanned.
ASAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
  -fno-sanitize-recover=undefined
## test-asan: the specs built with ASan and UBSan into build-asan
test-asan:
	ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0:allocator_may_return_null=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	CUGRAPH_LUA_PRELOAD="$$($(CC) -print-file-name=libasan.so)" \
	  $(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" $(ASAN_GOAL)
ASAN_GOAL ?= test # test-gcstress: with a collection at every allocation

# Every call of the fault sweep (spec/60-faults_spec.lua), not three per API.
## fault-sweep: every driver call of the fault sweep failed in turn
fault-sweep: $(SPEC_NEEDS)
	$(call specs,$(DOUBLE),CUGRAPH_FULL_SWEEP=1,,spec/60-faults_spec.lua)

# The threads host under helgrind on the test double: any data race or lock
# misuse fails. Races inside libnvrtc's own code are suppressed
# (spec/support/threads.supp). Needs a thread-safe double.
HELGRIND = CUGRAPH_LUA_LIBCUDA=$(CURDIR)/$(DOUBLE) \
  CUGRAPH_LUA_LIBNCCL=$(CURDIR)/$(NCCL_DOUBLE) \
  valgrind --tool=helgrind -q --error-exitcode=99 \
  --suppressions=spec/support/threads.supp
## test-threads-helgrind: the threads and handles hosts under helgrind
test-threads-helgrind: $(SPEC_NEEDS)
	rm -rf $(BUILD)/threads-cache
	XDG_CACHE_HOME=$(CURDIR)/$(BUILD)/threads-cache $(HELGRIND) \
	  $(BUILD)/threads lua $(BUILD)/kernels.ptx 4
	$(HELGRIND) $(BUILD)/handles lua $(BUILD)/kernels.ptx

# compute-sanitizer memcheck (with leak check) over the GPU suite and the
# examples. Driver errors the specs provoke on purpose are not reported;
# any invalid access or leaked allocation fails. Each spec file and each
# example runs under its own sanitizer, SANITIZE_JOBS at once (the tool's
# cost is on the host's cores); the logs go to $(BUILD)/sanitize and
# spec/support/sanitize-summary.sh sums them up.
# Each process runs under a sanitizer of its own: the tool that starts a
# spec follows none of its children (--target-processes application-only:
# a child that made a context under the parent's tool hung there, on an
# H200 with driver 580, even with a long launch timeout), and the specs'
# helpers start their children under a sanitizer of their own
# (CUGRAPH_LUA_SANITIZER), logging to a file per process in
# $(BUILD)/sanitize/children so that their output stays what the specs read.
SANITIZER_OPTS = --tool memcheck --leak-check full --report-api-errors no \
  --error-exitcode 99 --require-cuda-init no --launch-timeout 600 \
  --target-processes application-only
SANITIZER = $(CUDA_HOME)/bin/compute-sanitizer $(SANITIZER_OPTS)
# SANITIZE_JOBS at once, then SANITIZE_ALONE one by one with nothing else
# on the device. With other sanitized processes running on the same H200
# (driver 580, compute-sanitizer 2025.3.1), while loops failed in ways they
# do not alone: in a sanitized spec a graph's loop ended in
# CUDA_ERROR_ILLEGAL_ADDRESS with no access reported (spec/32, 1 run in 2;
# 21 of 21 alone), and an unsanitized child's loop that never ends was
# stopped by CUDA_ERROR_LAUNCH_FAILED within 0.2 s (spec/34; it runs until
# its timeout alone), and graphs whose kernels read a buffer allocated
# just before were reported reading it out of bounds at offsets inside it
# (spec/40 at four and at fourteen at once, not beside two others;
# NVIDIA/warp#1406 is the same false positive, see H.settle in
# spec/support/helper.lua; spec/35's graphed functions, captured on their
# first call right after their buffers are made, at four at once on an
# H100, 90 reports on buffers of 64 live elements). spec/14's while loop
# left running by a timed-out wait, beside three others on an H100 (2 runs
# of 2), ended with the tensor and the condition's cell reported leaked,
# though the deleter ran once and the host's checks passed; alone, clean
# (a68c38a). spec/31's loops and branches under g:profile, beside three
# others on an H100 (1 run of 2), read a condition's 4-byte cell "out of
# bounds" at the very address of its live allocation, and the context was
# lost in the spec and in one of its children at once.
SANITIZE_JOBS ?= 4
SANITIZE_ALONE = 14 31 32 34 35 40
# The devices spec (NCCL's ranks and the launcher's processes) and the
# simulator comparisons (CPU-bound children) run without the sanitizer, and
# so do communicators elsewhere (CUGRAPH_LUA_SANITIZER: NCCL's start-up
# under the sanitizer takes minutes).
SANITIZE_SKIP = 02 71 72
# SANITIZE_SPECS picks spec files (a shell pattern; all by default) and
# SANITIZE_EXAMPLES=no leaves the examples out, so the suite can be run in
# parts (each part's summary counts only its own runs).
SANITIZE_SPECS ?= spec/[0-9][0-9]-*_spec.lua
SANITIZE_EXAMPLES ?= yes
# One line of the list, "kind path [args]": a spec file, an example script
# or an example program, under a sanitizer of its own, logged to
# <name><SANITIZE_LOG> (.log by default).
SANITIZE_ONE = sh -c 'kind=$$0 f=$$1; \
  log=$(BUILD)/sanitize/$$(basename $$f .lua)$${SANITIZE_LOG:-.log}; \
  case $$kind in \
    spec) $(SPEC_ENV) CUGRAPH_LUA_SANITIZER="$(SANITIZER)" \
            CUGRAPH_LUA_SANITIZER_LOGS=$(CURDIR)/$(BUILD)/sanitize/children $(SANITIZER) \
            $(BUILD)/cugraph-lua "$$(command -v busted)" --ignore-lua -o TAP "$$f" ;; \
    run) $(SANITIZER) $(BUILD)/cugraph-lua "$$@" ;; \
    bin) $(SANITIZER) "$$f" ;; \
  esac > $$log 2>&1; echo "exit $$?" >> $$log'
## sanitize-gpu: the GPU specs and the examples under compute-sanitizer
sanitize-gpu: $(GPU_NEEDS) examples
	@rm -rf $(BUILD)/sanitize && mkdir -p $(BUILD)/sanitize/children
	@{ for f in $(SANITIZE_SPECS); do n=$$(basename $$f); n=$${n%%-*}; \
	     case " $(SANITIZE_SKIP) " in *" $$n "*) continue ;; esac; \
	     case " $(SANITIZE_ALONE) " in *" $$n "*) echo "a spec $$f" ;; \
	       *) echo "p spec $$f" ;; esac; done; \
	   if [ "$(SANITIZE_EXAMPLES)" != no ]; then \
	     echo "p run examples/model.lua"; \
	     echo "p run examples/graph.lua $(BUILD)/examples/graph.dot"; \
	     echo "p run examples/particles.lua $(BUILD)/examples/frames 40 65536"; \
	     echo "p bin $(BUILD)/examples/engine"; \
	     echo "p bin $(BUILD)/examples/frameloop"; fi; } > $(BUILD)/sanitize/list
	@sed -n 's/^p //p' $(BUILD)/sanitize/list | \
	 xargs -r -P $(SANITIZE_JOBS) -L 1 $(SANITIZE_ONE) || true
	@sed -n 's/^a //p' $(BUILD)/sanitize/list | xargs -r -L 1 $(SANITIZE_ONE) || true
	@# a run that died of a signal (not 0, 1 or the tool's 99) runs once more,
	@# alone, into <name>.again, for the summary to show beside the verdict
	@sed 's/^[pa] //' $(BUILD)/sanitize/list | while read -r kind f rest; do \
	   log=$(BUILD)/sanitize/$$(basename $$f .lua).log; \
	   case "$$(sed -n 's/^exit \([0-9]*\)$$/\1/p' $$log | tail -n 1)" in \
	     0|1|99) ;; *) echo "$$kind $$f $$rest" | \
	       SANITIZE_LOG=.again xargs -L 1 $(SANITIZE_ONE) || true ;; esac; done
	@sh spec/support/sanitize-summary.sh $(BUILD)/sanitize

# libFuzzer (Debian's clang), FUZZ_TIME seconds each: the PTX signature
# parser, then the image checker, seeded with small hand-made images
# (spec/fuzz/image-corpus) and the spec kernels' cubin and fatbin.
FUZZ_TIME ?= 60
FUZZ_CC = clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -I$(CUDA_HOME)/include
PTX_FUZZ_SRC = src/kernel/ptx.c src/kernel/pdl.c src/kernel/pdl_read.c \
  src/kernel/demangle.c src/base/ctype.c
$(BUILD)/ptx_fuzz: spec/fuzz/ptx_fuzz.c $(PTX_FUZZ_SRC) src/kernel/ptx.h src/kernel/pdl.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(FUZZ_CC) -o $@ spec/fuzz/ptx_fuzz.c $(PTX_FUZZ_SRC)
$(BUILD)/image_fuzz: spec/fuzz/image_fuzz.c src/kernel/image.c src/kernel/image.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(FUZZ_CC) -o $@ spec/fuzz/image_fuzz.c src/kernel/image.c
## fuzz-ptx: libFuzzer on the PTX signature parser (FUZZ_TIME seconds)
fuzz-ptx: $(BUILD)/ptx_fuzz
	@mkdir -p $(BUILD)/fuzz-corpus
	$(BUILD)/ptx_fuzz -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	  $(BUILD)/fuzz-corpus spec/fuzz/corpus
## fuzz-image: libFuzzer on the cubin and fatbin checker
fuzz-image: $(BUILD)/image_fuzz $(BUILD)/kernels.cubin $(BUILD)/kernels.fatbin
	@mkdir -p $(BUILD)/fuzz-image-corpus $(BUILD)/fuzz-image-seeds
	cp $(BUILD)/kernels.cubin $(BUILD)/kernels.fatbin $(BUILD)/fuzz-image-seeds/
	$(BUILD)/image_fuzz -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	  $(BUILD)/fuzz-image-corpus $(BUILD)/fuzz-image-seeds spec/fuzz/image-corpus
## fuzz: fuzz-ptx, fuzz-image and fuzz-api, one after another
fuzz: fuzz-ptx fuzz-image fuzz-api

# Random calls of the whole API (spec/61-fuzz_spec.lua), FUZZ_API_COUNT
# calls from seed FUZZ_API_SEED (a fresh one unless given; failures name it),
# on the test double (FUZZ_API_SIM=1: on the simulator's driver).
FUZZ_API_COUNT ?= 200000
FUZZ_API_SEED ?= $(shell date +%s)
## fuzz-api: random calls of the whole API (FUZZ_API_COUNT from FUZZ_API_SEED)
fuzz-api: $(SPEC_NEEDS)
	$(call specs,$(if $(FUZZ_API_SIM),$(SIM),$(DOUBLE)),CUGRAPH_FUZZ_SEED=$(FUZZ_API_SEED) \
	  CUGRAPH_FUZZ_COUNT=$(FUZZ_API_COUNT),,spec/61-fuzz_spec.lua)
## fuzz-api-asan: the same built with ASan and UBSan, on the test double and
## on the simulator's driver (FUZZ_API_COUNT calls each)
fuzz-api-asan:
	$(MAKE) -s test-asan ASAN_GOAL=fuzz-api FUZZ_API_SEED=$(FUZZ_API_SEED)
	$(MAKE) -s test-asan ASAN_GOAL=fuzz-api FUZZ_API_SEED=$(FUZZ_API_SEED) \
	  FUZZ_API_SIM=1

## clean: remove build and build-asan
clean:
	rm -rf build build-asan

# The targets, a line each: the "## target: what it does" comment above
# each in this file, bench/bench.mk and examples/examples.mk.
## help: this list
help:
	@echo 'make [target] [V=1] [-jN]: a job a core by default; V=1 prints the commands'
	@awk '/^## [a-z][a-z0-9-]*: / { t = $$2; sub(/:$$/, "", t); \
	  sub(/^## [^:]*: /, ""); printf "  %-22s %s\n", t, $$0 }' $(MAKEFILE_LIST)

.PHONY: FORCE help all deps spec-needs test test-sim test-gpu test-gcstress test-valgrind test-threads-helgrind \
  test-asan fault-sweep sanitize-gpu fuzz fuzz-ptx fuzz-image fuzz-api \
  fuzz-api-asan run clean

# -- install ------------------------------------------------------------------
LUA_LDIR ?= $(PREFIX)/share/lua/5.4
LUA_CDIR ?= $(PREFIX)/lib/lua/5.4
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCDIR ?= $(PREFIX)/include/cugraph-lua
TYPES_DIR ?= $(PREFIX)/share/cugraph-lua/types

## install: install into PREFIX (default /usr/local; DESTDIR too)
install: all $(NCCL_DOUBLE) $(BLAS_DOUBLE) $(FFT_DOUBLE)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LUA_CDIR)/cugraph \
	  $(DESTDIR)$(LUA_LDIR)/cugraph $(DESTDIR)$(INCDIR) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(TYPES_DIR) \
	  $(DESTDIR)$(SIM_DIR)
	install -m 755 $(SIM) $(NCCL_DOUBLE) $(BLAS_DOUBLE) $(FFT_DOUBLE) \
	  $(DESTDIR)$(SIM_DIR)/
	install -m 755 $(BUILD)/cugraph-lua $(DESTDIR)$(BINDIR)/
	install -m 755 $(BUILD)/cugraph/core.so $(DESTDIR)$(LUA_CDIR)/cugraph/
	install -m 644 lua/cugraph/*.lua $(DESTDIR)$(LUA_LDIR)/cugraph/
	install -m 644 types/cugraph.lua $(DESTDIR)$(TYPES_DIR)/
	sed -e 's|^#define CUGRAPH_VERSION ".*"|#define CUGRAPH_VERSION "$(VERSION)"|' \
	  src/cugraph.h > $(DESTDIR)$(INCDIR)/cugraph.h
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
ifeq ($(SO_LINKS),no) # the rock: LuaRocks copies files, not links
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/$(SONAME)
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/libcugraph-lua.so
else
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/libcugraph-lua.so.$(VERSION)
	ln -sf libcugraph-lua.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libcugraph-lua.so
endif
	sed -e 's|@INCDIR@|$(INCDIR)|' -e 's|@CUDA_HOME@|$(CUDA_HOME)|' \
	  -e 's|@VERSION@|$(VERSION)|' \
	  cugraph-lua.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/cugraph-lua.pc

## uninstall: remove what make install put in PREFIX
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/cugraph-lua $(DESTDIR)$(LUA_CDIR)/cugraph/core.so \
	  $(DESTDIR)$(LUA_LDIR)/cugraph/*.lua \
	  $(DESTDIR)$(TYPES_DIR)/cugraph.lua $(DESTDIR)$(INCDIR)/cugraph.h \
	  $(DESTDIR)$(LIBDIR)/libcugraph-lua.a $(DESTDIR)$(LIBDIR)/libcugraph-lua.so \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libcugraph-lua.so.$(VERSION) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/cugraph-lua.pc \
	  $(DESTDIR)$(SIM_DIR)/libcuda-sim.so $(DESTDIR)$(SIM_DIR)/libnccl-double.so \
	  $(DESTDIR)$(SIM_DIR)/libcublas-double.so $(DESTDIR)$(SIM_DIR)/libcufft-double.so
	-rmdir $(DESTDIR)$(LUA_CDIR)/cugraph $(DESTDIR)$(LUA_LDIR)/cugraph $(DESTDIR)$(SIM_DIR) \
	  $(DESTDIR)$(TYPES_DIR) $(DESTDIR)$(PREFIX)/share/cugraph-lua $(DESTDIR)$(INCDIR) 2>/dev/null

.PHONY: install uninstall
include bench/bench.mk
include examples/examples.mk

# src/types/setters.h from src/types/setters.cu (needs nvcc; the header is committed):
# the PTX text a line a string, as ISO C limits the length of one string.
## setters: regenerate src/types/setters.h from setters.cu (needs nvcc)
setters:
	{ echo '/* Generated from src/types/setters.cu by `make setters`: do not edit. */'; \
	  echo 'static const char *const setters_ptx[] = {'; \
	  $(NVCC) -ptx -arch=compute_75 src/types/setters.cu -o - | \
	    sed -e '/^\s*\/\//d' -e '/^\s*$$/d' -e 's/^\.version .*/.version 8.3/' \
	        -e 's/\s*\/\/.*$$//' -e 's/\t/ /g' -e 's/^/  "/' -e 's/$$/\\n",/'; \
	  echo '  NULL'; echo '};'; } > src/types/setters.h

.PHONY: setters
