# cugraph-lua. `make` builds build/cugraph-lua, build/cugraph/core.so and
# build/libcugraph.a; `make test` runs the specs on the test double of the
# driver, `make test-gpu` on the real one; `make run` runs the model example.

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= cc
PKG_CONFIG ?= pkg-config
LUA ?= lua5.4
PREFIX ?= /usr/local

WARN = -Wall -Wextra -pedantic -Wmissing-prototypes -Wstrict-prototypes \
       -Wshadow -Wpointer-arith -Wcast-qual -Wno-unused-parameter
WERROR ?=
LUA_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags lua5.4 2>/dev/null)
LUA_LIBS ?= $(shell $(PKG_CONFIG) --libs lua5.4 2>/dev/null)
CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=c11 $(CFLAGS) $(WARN) $(WERROR) -fPIC $(LUA_CFLAGS) \
             -I$(CUDA_HOME)/include -Isrc

READLINE := $(shell test -f /usr/include/readline/readline.h && echo yes)
ifeq ($(READLINE),yes)
HOST_DEFS = -DCG_READLINE
HOST_LIBS = -lreadline
endif

CORE = context driver stream buffer scalar event module graph nvrtc ptx image lcugraph
OBJS = $(CORE:%=build/obj/%.o)
DOUBLE = build/libcuda-double.so
KERNELS = build/kernels.ptx build/kernels.cubin build/kernels.fatbin
SPEC_ENV = CUGRAPH_LUA_BUILD=$(CURDIR)/build XDG_CACHE_HOME=$(CURDIR)/build/cache

all: build/cugraph-lua build/cugraph/core.so build/libcugraph.a

build/obj/%.o: src/%.c src/core.h src/driver.h src/ptx.h src/image.h src/cugraph.h | deps
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

build/obj/host.o: src/host.c | deps
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(HOST_DEFS) -c $< -o $@

# Linked to the shared liblua5.4 so Lua C modules (busted's) load into it.
build/cugraph-lua: build/obj/host.o $(OBJS)
	$(CC) $(CFLAGS) -rdynamic -o $@ $^ $(LUA_LIBS) $(HOST_LIBS) -ldl -lm

build/cugraph/core.so: $(OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -o $@ $^ -ldl -lm

build/libcugraph.a: $(OBJS)
	ar rcs $@ $^

$(DOUBLE): spec/support/cuda_double.c
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(WERROR) -fPIC -shared \
	  -I$(CUDA_HOME)/include -o $@ $< -lm

build/kernels.ptx: spec/kernels/kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_75 $< -o $@

build/kernels.cubin: spec/kernels/kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -cubin -arch=sm_90 $< -o $@

build/kernels.fatbin: spec/kernels/kernels.cu
	@mkdir -p $(@D)
	$(NVCC) -fatbin -gencode arch=compute_90,code=sm_90 \
	  -gencode arch=compute_75,code=compute_75 $< -o $@

# Debian packages the build and the tests need: installed when root, else
# named. CUDA comes from the toolkit (CUDA_HOME).
deps:
	@missing=""; \
	$(PKG_CONFIG) --exists lua5.4 2>/dev/null || missing="$$missing liblua5.4-dev pkgconf"; \
	command -v $(LUA) >/dev/null || missing="$$missing lua5.4"; \
	command -v busted >/dev/null || missing="$$missing lua-busted"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing:$$missing"; \
	    (apt-get install -y -qq $$missing >/dev/null 2>&1 || \
	     (apt-get update -qq && apt-get install -y -qq $$missing)) || exit 1; \
	  else echo "missing Debian packages:$$missing (apt-get install$$missing)"; exit 1; fi; \
	fi; \
	test -f $(CUDA_HOME)/include/cuda.h || \
	  { echo "CUDA headers not found in $(CUDA_HOME)/include; set CUDA_HOME"; exit 1; }

# A host that closes its lua_State at exit, after the driver's teardown.
build/late_close: spec/support/late_close.c build/libcugraph.a
	$(CC) $(ALL_CFLAGS) -o $@ $< build/libcugraph.a $(LUA_LIBS) -ldl -lm

test: all $(DOUBLE) $(KERNELS) build/late_close
	$(SPEC_ENV) CUGRAPH_LUA_LIBCUDA=$(CURDIR)/$(DOUBLE) \
	  build/cugraph-lua "$$(command -v busted)" $(BUSTED_ARGS)

test-gpu: all $(KERNELS) build/late_close
	$(SPEC_ENV) build/cugraph-lua "$$(command -v busted)" $(BUSTED_ARGS)

run: all
	build/cugraph-lua examples/model.lua

# The suite under valgrind on the test double: any invalid access or definite
# leak fails it. Subprocess specs run their children natively.
VALGRIND = valgrind -q --error-exitcode=99 --leak-check=full \
  --errors-for-leak-kinds=definite --show-leak-kinds=definite \
  --suppressions=spec/support/valgrind.supp
test-valgrind: all $(DOUBLE) $(KERNELS) build/late_close
	$(SPEC_ENV) CUGRAPH_LUA_LIBCUDA=$(CURDIR)/$(DOUBLE) \
	  $(VALGRIND) build/cugraph-lua "$$(command -v busted)" $(BUSTED_ARGS)

# compute-sanitizer memcheck (with leak check) over the GPU suite and the
# examples. Driver errors the specs provoke on purpose are not reported;
# any invalid access or leaked allocation fails.
SANITIZER = $(CUDA_HOME)/bin/compute-sanitizer --tool memcheck \
  --leak-check full --report-api-errors no --error-exitcode 99
sanitize-gpu: all examples $(KERNELS) build/late_close
	$(SPEC_ENV) $(SANITIZER) build/cugraph-lua "$$(command -v busted)" $(BUSTED_ARGS)
	$(SANITIZER) build/cugraph-lua examples/model.lua
	$(SANITIZER) build/cugraph-lua examples/graph.lua build/examples/graph.dot
	$(SANITIZER) build/cugraph-lua examples/particles.lua build/examples/frames 40 65536
	$(SANITIZER) build/examples/engine

# libFuzzer (Debian's clang), FUZZ_TIME seconds each: the PTX signature
# parser, then the image checker, seeded with small hand-made images
# (spec/fuzz/image-corpus) and the spec kernels' cubin and fatbin.
FUZZ_TIME ?= 60
FUZZ_CC = clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc
build/ptx_fuzz: spec/fuzz/ptx_fuzz.c src/ptx.c src/ptx.h
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ spec/fuzz/ptx_fuzz.c src/ptx.c
build/image_fuzz: spec/fuzz/image_fuzz.c src/image.c src/image.h
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ spec/fuzz/image_fuzz.c src/image.c
fuzz-ptx: build/ptx_fuzz
	@mkdir -p build/fuzz-corpus
	build/ptx_fuzz -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	  build/fuzz-corpus spec/fuzz/corpus
fuzz-image: build/image_fuzz build/kernels.cubin build/kernels.fatbin
	@mkdir -p build/fuzz-image-corpus build/fuzz-image-seeds
	cp build/kernels.cubin build/kernels.fatbin build/fuzz-image-seeds/
	build/image_fuzz -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	  build/fuzz-image-corpus build/fuzz-image-seeds spec/fuzz/image-corpus
fuzz: fuzz-ptx fuzz-image

clean:
	rm -rf build

.PHONY: all deps test test-gpu test-valgrind sanitize-gpu fuzz fuzz-ptx \
        fuzz-image run clean

# -- install ------------------------------------------------------------------
LUA_LDIR ?= $(PREFIX)/share/lua/5.4
LUA_CDIR ?= $(PREFIX)/lib/lua/5.4

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LUA_CDIR)/cugraph \
	  $(DESTDIR)$(LUA_LDIR)/cugraph $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 build/cugraph-lua $(DESTDIR)$(PREFIX)/bin/
	install -m 755 build/cugraph/core.so $(DESTDIR)$(LUA_CDIR)/cugraph/
	install -m 644 lua/cugraph/*.lua $(DESTDIR)$(LUA_LDIR)/cugraph/
	install -m 644 src/cugraph.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 build/libcugraph.a $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@CUDA_HOME@|$(CUDA_HOME)|' \
	  cugraph-lua.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cugraph-lua.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/cugraph-lua $(DESTDIR)$(LUA_CDIR)/cugraph/core.so \
	  $(DESTDIR)$(LUA_LDIR)/cugraph/init.lua $(DESTDIR)$(PREFIX)/include/cugraph.h \
	  $(DESTDIR)$(PREFIX)/lib/libcugraph.a $(DESTDIR)$(PREFIX)/lib/pkgconfig/cugraph-lua.pc
	-rmdir $(DESTDIR)$(LUA_CDIR)/cugraph $(DESTDIR)$(LUA_LDIR)/cugraph 2>/dev/null

.PHONY: install uninstall
include bench/bench.mk
include examples/examples.mk
