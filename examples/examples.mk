# The examples' native parts; included at the end of the top Makefile, whose
# variables (CC, ALL_CFLAGS, LUA_LIBS, PKG_CONFIG) it uses.
#
#   make examples      $(BUILD)/examples/hello (the smallest embedding host),
#                      $(BUILD)/examples/engine (the embedding demo),
#                      $(BUILD)/examples/frameloop (an engine's frame loop:
#                      a 50-node frame graph fenced by the engine's counters,
#                      its per-frame host time and allocations),
#                      $(BUILD)/examples/dlpack (tensors traded with a script),
#                      $(BUILD)/examples/render (the engine with C-owned graphs,
#                      kernel reload and OpenGL through EGL; GPU only),
#                      $(BUILD)/examples/vulkan (a headless Vulkan renderer
#                      sharing an image, a vertex buffer and a timeline
#                      semaphore with CUDA; GPU only; built only where
#                      <vulkan/vulkan.h> is found) and
#                      $(BUILD)/examples/png.so (the png module of particles.lua)
#   make run-examples  every example on the GPU (examples/run-all.sh)
#   make check-examples  the examples' kernels compile for sm_90 (no GPU)
#   make vulkan-shaders  regenerates examples/embed/vulkan_spv.h from
#                      examples/embed/shaders/ (needs glslangValidator;
#                      spirv-val checks the result where it is installed)
#
# libpng comes from pkg-config, else -lpng16 with headers on CPATH.

PNG_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags libpng 2>/dev/null)
PNG_LIBS ?= $(shell $(PKG_CONFIG) --libs libpng 2>/dev/null || echo -lpng16)

# The Vulkan example needs only the headers to build: libvulkan.so.1 is
# opened with dlopen at run time.
VULKAN_H := $(shell printf '#include <vulkan/vulkan.h>\n' | $(CC) -E - >/dev/null 2>&1 && echo y)
VULKAN_EXAMPLE = $(if $(VULKAN_H),$(BUILD)/examples/vulkan)

## examples: build the examples' native parts (C hosts, png.so)
examples: $(BUILD)/examples/hello $(BUILD)/examples/engine $(BUILD)/examples/dlpack \
  $(BUILD)/examples/frameloop \
  $(BUILD)/examples/render $(VULKAN_EXAMPLE) $(BUILD)/examples/png.so

$(BUILD)/examples/png.so: examples/png.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) $(PNG_CFLAGS) -shared -o $@ $< $(PNG_LIBS)

$(BUILD)/examples/hello: examples/embed/hello.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

$(BUILD)/examples/engine: examples/embed/engine.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DENGINE_SCRIPT='"$(CURDIR)/examples/embed/frame.lua"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

# The frame loop counts malloc, calloc and realloc by who calls them: it
# defines them over glibc's.
$(BUILD)/examples/frameloop: examples/embed/frameloop.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DFRAMELOOP_SCRIPT='"$(CURDIR)/examples/embed/frameloop.lua"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

$(BUILD)/examples/dlpack: examples/embed/dlpack.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DTRADE_SCRIPT='"$(CURDIR)/examples/embed/trade.lua"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

# EGL and GL are opened with dlopen at run time: no GL headers or libraries
# to build.
$(BUILD)/examples/render: examples/embed/render.c $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DRENDER_SCRIPT='"$(CURDIR)/examples/embed/render.lua"' \
	  -DPNG_DIR='"$(CURDIR)/$(BUILD)/examples"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

# Vulkan (the loader and every function) is reached through dlopen and
# vkGetInstanceProcAddr: nothing links against libvulkan. The SPIR-V of
# the point shaders is compiled in (vulkan_spv.h, committed).
$(BUILD)/examples/vulkan: examples/embed/vulkan.c examples/embed/vulkan_spv.h \
  $(LIB_A) src/cugraph.h
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(ALL_CFLAGS) -DCUGRAPH_LUA_DIR='"$(CURDIR)/lua"' \
	  -DVULKAN_SCRIPT='"$(CURDIR)/examples/embed/vulkan.lua"' \
	  -DPNG_DIR='"$(CURDIR)/$(BUILD)/examples"' -o $@ $< \
	  $(LIB_A) $(LUA_LIBS) -pthread -ldl -lm

# examples/embed/vulkan_spv.h, generated: the SPIR-V words of the shaders
# as C arrays (glslangValidator --vn), checked by spirv-val when present.
GLSLANG ?= glslangValidator
SPIRV_VAL ?= spirv-val
SHADERS = examples/embed/shaders
## vulkan-shaders: regenerate examples/embed/vulkan_spv.h (needs glslangValidator)
vulkan-shaders:
	@mkdir -p $(BUILD)/shaders
	for s in vert frag; do \
	  $(GLSLANG) -V --vn points_$$s -o $(BUILD)/shaders/points_$$s.h \
	    $(SHADERS)/points.$$s || exit 1; \
	  $(GLSLANG) -V -o $(BUILD)/shaders/points_$$s.spv $(SHADERS)/points.$$s \
	    >/dev/null || exit 1; \
	  if command -v $(SPIRV_VAL) >/dev/null; then \
	    $(SPIRV_VAL) --target-env vulkan1.2 $(BUILD)/shaders/points_$$s.spv || exit 1; \
	  fi; \
	done
	{ printf '%s\n' \
	  '/* vulkan_spv.h: GENERATED by `make vulkan-shaders` -- do not edit.' \
	  '   The SPIR-V of examples/embed/shaders/points.vert and points.frag,' \
	  '   from glslangValidator -V --vn points_vert -o FILE points.vert' \
	  '   (likewise points_frag), for examples/embed/vulkan.c. */' \
	  '#ifndef VULKAN_SPV_H' '#define VULKAN_SPV_H' '#include <stdint.h>'; \
	  for s in vert frag; do \
	    sed -e '/#pragma once/d' -e '/^[[:space:]]*\/\/ [0-9]/d' \
	      -e 's/^const uint32_t/static const uint32_t/' \
	      $(BUILD)/shaders/points_$$s.h; \
	  done; \
	  printf '#endif\n'; } > examples/embed/vulkan_spv.h

## run-examples: run every example and check each (examples/run-all.sh)
run-examples: all examples
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) examples/run-all.sh $(BUILD)/examples/out

## check-examples: compile the examples' kernels for sm_90 (no GPU needed)
check-examples: all
	CUGRAPH_LUA_BUILD=$(CURDIR)/$(BUILD) $(BUILD)/cugraph-lua examples/check-kernels.lua

.PHONY: examples run-examples check-examples vulkan-shaders
