-- cugraph-lua: CUDA graphs driven from Lua 5.4.
--
-- From a checkout:
--
--   luarocks --lua-version 5.4 make CUDA_DIR=/usr/local/cuda
--
-- (or CUDA_INCDIR=/path/to/cuda/include). Only the CUDA headers are needed
-- to build: libcuda and libnvrtc are opened with dlopen at run time, so the
-- module links against neither, and it builds and loads on machines without
-- a GPU. `luarocks make` builds from the current directory; it never fetches
-- source.url.
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
}

supported_platforms = { "linux" }

dependencies = {
   "lua >= 5.4, < 5.5",
}

-- Sets CUDA_DIR, CUDA_INCDIR (and CUDA_LIBDIR, CUDA_BINDIR, unused here):
-- pass CUDA_DIR=/usr/local/cuda or CUDA_INCDIR=... on the command line when
-- cuda.h is not under /usr/local/include, /usr/include or /include.
external_dependencies = {
   CUDA = {
      header = "cuda.h",
   },
}

build = {
   type = "builtin",
   modules = {
      ["cugraph.core"] = {
         sources = {
            "src/context.c", "src/driver.c", "src/stream.c", "src/buffer.c",
            "src/scalar.c", "src/event.c", "src/module.c", "src/graph.c",
            "src/cond.c", "src/handle.c", "src/reload.c", "src/interop.c",
            "src/nvrtc.c", "src/ptx.c", "src/image.c", "src/lcugraph.c",
         },
         incdirs = { "src", "$(CUDA_INCDIR)" },
         libraries = { "pthread", "dl", "m" },
      },
      cugraph = "lua/cugraph/init.lua",
   },
   copy_directories = { "docs" },
}
