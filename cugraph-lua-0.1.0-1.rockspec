-- cugraph-lua: CUDA graphs driven from Lua 5.4.
--
-- From a checkout:
--
--   luarocks --lua-version 5.4 make --tree ~/.luarocks CUDA_DIR=/usr/local/cuda
--
-- Only the CUDA headers are needed to build: libcuda and libnvrtc are opened
-- with dlopen at run time, so nothing links against either, and it builds
-- and loads on machines without a GPU. The build is the project's Makefile
-- (the module, the cugraph-lua interpreter, the annotations); `luarocks
-- make` builds from the current directory and never fetches source.url. The
-- version here must match the file VERSION (spec/51-ux_spec.lua checks).
rockspec_format = "3.0"
package = "cugraph-lua"
version = "0.1.0-1"

source = {
   -- Placeholder: the project has no public home yet. `luarocks make` does
   -- not use it; set the real repository (and tag) before `luarocks pack`,
   -- `luarocks install <rockspec>` or an upload.
   url = "git+https://example.invalid/cugraph-lua.git",
   tag = "v0.1.0",
}

description = {
   summary = "CUDA graphs driven from Lua 5.4 through the CUDA Driver API",
   detailed = [[
A C core binds the CUDA Driver API into Lua 5.4: streams, typed device
buffers, modules and kernels (PTX, cubin, or CUDA C compiled at run time
with NVRTC), device scalars, events, and CUDA graphs captured from a Lua
closure. Every launch is checked against the kernel's signature and the
device's limits; a graph replay loop allocates no Lua memory. libcuda and
libnvrtc are loaded with dlopen at run time.
]],
   labels = { "cuda", "gpu", "nvidia", "ffi" },
   license = "MIT",
}

supported_platforms = { "linux" }

dependencies = {
   "lua >= 5.4, < 5.5",
}

-- Sets CUDA_DIR (and CUDA_INCDIR): pass CUDA_DIR=/usr/local/cuda on the
-- command line when cuda.h is not under /usr/local/include, /usr/include or
-- /include.
external_dependencies = {
   CUDA = {
      header = "cuda.h",
   },
}

build = {
   type = "make",
   build_target = "all",
   -- PREFIX in both passes: the core holds where make install puts the
   -- simulator, and is not built again by the install pass.
   build_variables = {
      PREFIX = "$(PREFIX)",
      CFLAGS = "$(CFLAGS)",
      CUDA_HOME = "$(CUDA_DIR)",
      LUA_CFLAGS = "-I$(LUA_INCDIR)",
      NO_DEPS = "1",
   },
   install_target = "install",
   install_variables = {
      PREFIX = "$(PREFIX)",
      BINDIR = "$(BINDIR)",
      LUA_LDIR = "$(LUADIR)",
      LUA_CDIR = "$(LIBDIR)",
      CUDA_HOME = "$(CUDA_DIR)",
      NO_DEPS = "1",
      SO_LINKS = "no",
   },
   copy_directories = { "docs" },
}
