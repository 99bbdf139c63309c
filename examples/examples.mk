# The examples' native parts; included at the end of the top Makefile, whose
# variables (CC, ALL_CFLAGS, LUA_LIBS, PKG_CONFIG) it uses.
#
#   make examples      $(BUILD)/examples/hello (the smallest embedding host),
#                      $(BUILD)/examples/engine (the embedding demo),
#                      $(BUILD)/examples/dlpack (tensors traded with a script),
#                      $(BUILD)/examples/render (the engine with C-owned graphs,
#                      kernel reload and OpenGL through EGL; GPU only) and
#                      $(BUILD)/examples/png.so (the png module of particles.lua)
#   make run-examples  every example on the GPU (examples/run-all.sh)
#   make check-examples  the examples' kernels compile for sm_90 (no GPU)
#
# libpng comes from pkg-config, else -lpng16 with headers on CPATH.

PNG_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags libpng 2>/dev/null)
PNG_LIBS ?= $(shell $(PKG_CONFIG) --libs libpng 2>/dev/null || echo -lpng16)

examples: $(BUILD)/examples/hello $(BUILD)/examples/engine $(BUILD)/examples/dlpack \
  $(BUILD)/examples/render $(BUILD)/examples/png.so

$(BUILD)/examples/png.so: examples/png.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PNG_CFLAGS) -shared -o $@ $< $(PNG_LIBS)

$(BUILD)/examples/hello: examples/embed/hello.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

$(BUILD)/examples/engine: examples/embed/engine.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DENGINE_SCRIPT='"$(CURDIR)/examples/embed/frame.lua"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

$(BUILD)/examples/dlpack: examples/embed/dlpack.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DTRADE_SCRIPT='"$(CURDIR)/examples/embed/trade.lua"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

# EGL and GL are opened with dlopen at run time: no GL headers or libraries
# to build.
$(BUILD)/examples/render: examples/embed/render.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DRENDER_SCRIPT='"$(CURDIR)/examples/embed/render.lua"' \
	  -DPNG_DIR='"$(CURDIR)/$(BUILD)/examples"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

run-examples: all examples
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) examples/run-all.sh $(BUILD)/examples/out

check-examples: all
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua examples/check-kernels.lua

.PHONY: examples run-examples check-examples
