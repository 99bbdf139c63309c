/* cugraph-lua: the embedding API, for engines that run their own lua_State.

   Link the engine with build/libcugraph-lua.a (installed: libcugraph-lua.a
   and .so, this header as cugraph-lua/cugraph.h; pkg-config cugraph-lua)
   and Lua 5.4. Then:

     lua_State *L = luaL_newstate();
     luaL_openlibs(L);
     cugraph_openlibs(L, "path/to/lua");  // require "cugraph" works
     ...
     cugraph_pushbuffer(L, ptr, "f32", n);   // engine memory, as a Buffer
     lua_setglobal(L, "positions");

   The engine's memory and streams must belong to the device's primary
   context, the one the CUDA runtime uses. Objects pushed here are borrowed:
   the script can use them anywhere a Buffer or Stream goes (launches,
   captures) but never frees them; their :free() only detaches the Lua
   object. The engine keeps the memory alive while a graph that captured it
   lives. Functions that push raise Lua errors like any Lua API function.

   Threads. A process may run any number of lua_States with the module,
   each used by one thread at a time (Lua's own rule: the host orders the
   hand-over, by a join or a lock) and on any thread, a different one from
   call to call if it likes; lua_close and collection too. Process-wide and
   safe from any thread: libcuda and NVRTC are loaded once, whichever
   states ask first and at once; the NVRTC disk cache may be written and
   read by many threads and processes at once, and a reader sees a whole
   entry or none. Every state of one device shares its primary context:
   before a driver call, the core makes that context current on the calling
   thread when it is not the one the core last made current there (a
   thread-local compare; cuCtxSetCurrent only on a change). A host that
   makes another context current on a thread (cuCtxSetCurrent,
   cuCtxPushCurrent) must make the primary context current again before it
   calls into a state on that thread. As CUDA forbids, a capture in one
   state fails if another thread meanwhile synchronizes the whole context
   (cuda.synchronize, a download, scalar:get, work given no stream) or, in
   global capture mode, allocates or frees: such threads take turns. */
#ifndef CUGRAPH_H
#define CUGRAPH_H

#include <stddef.h>
#include <cuda.h>
#include <lua.h>

#ifndef CUGRAPH_VERSION /* the build defines it from the file VERSION */
#define CUGRAPH_VERSION "0.1.0"
#endif

/* -- DLPack ---------------------------------------------------------------

   The tensor exchange format of PyTorch, CuPy, JAX and others
   (github.com/dmlc/dlpack): the structs of its ABI, versions 0.8 and 1.x,
   that the functions below take and give. A host that includes the real
   dlpack.h before this header uses its definitions instead (the same
   include guard; the layouts are the ABI's). */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

typedef enum {
  kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLOpenCL = 4, kDLVulkan = 7,
  kDLMetal = 8, kDLVPI = 9, kDLROCM = 10, kDLROCMHost = 11, kDLExtDev = 12,
  kDLCUDAManaged = 13, kDLOneAPI = 14, kDLWebGPU = 15, kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;    /* the CUDA device ordinal for kDLCUDA */
} DLDevice;

typedef enum {
  kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLOpaqueHandle = 3U,
  kDLBfloat = 4U, kDLComplex = 5U, kDLBool = 6U
} DLDataTypeCode;

typedef struct {
  uint8_t code;         /* DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data;           /* device address; the first element is at
                           data + byte_offset */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;       /* ndim sizes, outermost first */
  int64_t *strides;     /* ndim strides in elements, or NULL: row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

/* The module's C part, as require "cugraph.core" opens it. */
int luaopen_cugraph_core(lua_State *L);

/* Registers cugraph.core in package.preload and, when dir is not NULL, puts
   dir/?.lua and dir/?/init.lua (the folder holding cugraph/init.lua) at the
   front of package.path, so that require "cugraph" works. */
void cugraph_openlibs(lua_State *L, const char *dir);

/* Stops the simulated work running now, in every state of the process:
   on the software driver (the simulator, the test double) a kernel's or a
   graph's work runs inside the call that launches it, which then raises
   "interrupted!" in its state. Async-signal-safe: a host calls it from its
   SIGINT handler beside setting the hook that stops Lua code, as
   cugraph-lua does. Work on a GPU runs on: waits are bounded by their
   timeouts (CUGRAPH_LUA_TIMEOUT) instead. */
void cugraph_interrupt(void);

/* Pushes a borrowed Buffer of n elements of type ("f32", "u32", ...) at
   device address ptr. */
void cugraph_pushbuffer(lua_State *L, CUdeviceptr ptr, const char *type,
                        size_t n);

/* Pushes a borrowed Stream. The legacy stream (NULL) is refused: it cannot
   be captured. */
void cugraph_pushstream(lua_State *L, CUstream stream);

/* Pushes a borrowed Event (the engine's CUevent): scripts record it, wait
   on it and time with it; its :free() only detaches the Lua object. */
void cugraph_pushevent(lua_State *L, CUevent event);

/* The device address of the Buffer at idx (raises unless it is an open
   Buffer), with its element type ("f32", ...) and count when type and n
   are not NULL. The address stays valid while the Lua object is open, or
   while a C graph that pins it lives. */
CUdeviceptr cugraph_checkbuffer(lua_State *L, int idx, const char **type,
                                size_t *n);

/* The CUstream of the Stream at idx (raises unless it is an open Stream);
   valid while the Lua object is open. */
CUstream cugraph_checkstream(lua_State *L, int idx);

/* -- frame fences -----------------------------------------------------------

   A script's graph can wait for an engine's counter and write one back
   (s:wait_value(counter, v [, op]), s:write_value(counter, v): the
   driver's stream memory operations, captured as batch memory operation
   nodes). The counter is a u32 or u64 element of device memory (a Buffer
   from cugraph_pushbuffer, a Scalar) or of page-locked host memory, which
   the engine writes and reads with plain stores and loads; the value may
   be a Scalar of the counter's type, read at every launch, which C sets
   with cugraph_scalar_set before cugraph_graph_launch:

     cugraph_pushhostbuffer(L, fences, "u64", 2);   // the engine's pinned
     lua_setglobal(L, "fences");                     // go and done counters
     ...                                   // the script captures its frame:
                                           // s:wait_value(go, frame)
                                           // ... s:write_value(done, frame)
     __atomic_store_n(&fences[0], n, __ATOMIC_RELEASE); // frame n may start
     cugraph_scalar_set(frame, &n);
     cugraph_graph_launch(g, stream);
     while (__atomic_load_n(&fences[1], __ATOMIC_ACQUIRE) < n - 2) ...;

   Pushes a borrowed HostBuffer of n elements of type ("u64", ...) over the
   engine's mapped page-locked memory at ptr (cuMemHostAlloc, or registered
   with cuMemHostRegister, with the DEVICEMAP flag) of the state's current
   device: checked to be such, and its device address taken
   (cuMemHostGetDevicePointer), before anything is pushed. Its :free() only
   detaches the Lua object; the engine frees the memory after the state
   and the C graphs that use it. */
void cugraph_pushhostbuffer(lua_State *L, void *ptr, const char *type,
                            size_t n);

/* The host address of the HostBuffer at idx (raises unless it is an open
   HostBuffer), with its element type and count when type and n are not
   NULL; valid while the Lua object is open, or while a C graph that pins
   it lives. */
void *cugraph_checkhostbuffer(lua_State *L, int idx, const char **type,
                              size_t *n);

/* -- host hooks -------------------------------------------------------------

   s:host(fn [, data]) has the driver call a C function of the engine's in
   stream order, between the GPU work before it and after it
   (cuLaunchHostFunc; a host node when captured, called at every launch).
   The driver calls it on a thread of its own, so it may neither make a
   CUDA call (the driver's rule: the call may fail with
   CUDA_ERROR_NOT_PERMITTED or deadlock; the software driver always
   refuses it so) nor use the lua_State, nor call a function of this API
   that makes CUDA calls (cugraph_graph_launch, the releases); it should
   return soon, as the stream waits for it. A Lua function is refused for
   these reasons: a script that wants to run Lua after GPU work has the
   stream write a counter (s:write_value) and reads it on its own thread.

   Pushes fn as a light userdata, registered in this state as a host
   function, which s:host takes (any other light userdata is refused);
   data is passed to s:host as a light userdata (or nil: NULL), and the
   engine keeps what it points to alive while a graph that calls fn with it
   lives. */
void cugraph_pushhostfn(lua_State *L, CUhostFn fn);

/* Pushes a borrowed Array (the engine's CUarray, of the state's current
   device): its shape and format are read from the driver
   (cuArray3DGetDescriptor), which must be one of the formats cuda.array
   makes. Scripts copy to and from it; its :free() only detaches the Lua
   object, and the engine destroys it after the graphs that use it. */
void cugraph_pusharray(lua_State *L, CUarray array);

/* The CUarray of the Array at idx (raises unless it is an open Array). */
CUarray cugraph_checkarray(lua_State *L, int idx);

/* -- memory and semaphores of another API (Vulkan, OpenGL, D3D) -------------

   A script imports exported handles itself (cuda.external_memory(fd,
   size), cuda.external_semaphore(fd, kind): CUDA then owns the fds). An
   engine that imported them already hands its CUDA objects over, borrowed:
   their :free() only detaches the Lua object, and the engine destroys
   them after the state and the C graphs that use them. Buffers and arrays
   a script maps from borrowed memory are the runtime's, unmapped when the
   ExternalMemory object goes (size: the bytes imported). timeline: the
   semaphore was imported as a timeline (its waits and signals take a
   value). */
void cugraph_pushexternalmemory(lua_State *L, CUexternalMemory mem,
                                size_t size);
void cugraph_pushexternalsemaphore(lua_State *L, CUexternalSemaphore sem,
                                   int timeline);

/* -- DLPack tensors ---------------------------------------------------------

   Accepted: contiguous (row-major) tensors of kDLCUDA or kDLCUDAManaged
   memory of the state's current device (cuda.on), one lane of an element
   type the runtime has (float 16/32/64, bfloat 16, int and uint 8..64), at
   least one element, the first aligned for its type; a versioned tensor
   also of major version 1 and not read-only. Anything else raises a Lua
   error that names what is wrong, before any driver call; the tensor then
   stays the caller's (its deleter is not called), as when pushing fails
   for want of memory.

   Pushes a Buffer over tensor t that owns it: #b is the product of the
   shape, b:shape() returns the shape. The deleter is called exactly once,
   on the state's thread, when the Buffer is freed or collected (or at
   lua_close), or later: not while a live graph that captured it lives,
   nor while a C graph or a tensor from cugraph_todlpack holds its memory
   (then by the last to let go, on its thread). Like a free by the
   producer's allocator, the call does not wait for device work: the
   script frees the Buffer after the work that reads it. */
void cugraph_pushdlpack(lua_State *L, DLManagedTensor *t);
void cugraph_pushdlpack_versioned(lua_State *L, DLManagedTensorVersioned *t);

/* A new tensor over the memory of the Buffer at idx (raises unless it is an
   open Buffer whose memory can be lent: not memory a graph allocates, a
   GL map scope's or a module global), or the tensor a cugraph.DLTensor at
   idx holds (b:dlpack(), then taken: the Lua object reads as freed). The
   caller owns it and calls its deleter once, from any thread, before or
   after lua_close; until then the memory stays allocated, whatever becomes
   of the Buffer. The memory of a borrowed buffer (cugraph_pushbuffer)
   stays the engine's to keep alive. Shape: the Buffer's (its tensor's,
   a pitched buffer's rows with their stride), else one dimension of #b;
   device kDLCUDAManaged for managed memory. The versioned tensor is of
   version 1.0 with no flags; a cugraph.DLTensor holds an unversioned one
   and is refused there. */
DLManagedTensor *cugraph_todlpack(lua_State *L, int idx);
DLManagedTensorVersioned *cugraph_todlpack_versioned(lua_State *L, int idx);

/* -- Graphs owned by C ------------------------------------------------------

   A script captures a graph; the engine takes a handle to it and replays it
   from its own render or job thread without entering the lua_State:

     cugraph_graph *g = cugraph_tograph(L, -1);     // on the state's thread
     cugraph_scalar *t = cugraph_toscalar(L, -2);
     ...                                            // on any thread:
     float dt = 1.0f / 60;
     cugraph_scalar_set(t, &dt);
     cugraph_graph_launch(g, stream);
     ...
     cugraph_graph_release(g);                      // any thread, any time,
     cugraph_scalar_release(t);                     // before or after lua_close

   Lifetime. A C graph is an executable copy of the Lua graph as it is when
   taken (a later g:update() does not change it; a kernel reload does). It
   holds the graph's pins: the memory of its buffers and scalars, its
   modules and events stay allocated after their Lua objects are freed or
   collected, and after lua_close, until the last C handle that pins them
   is released; the Lua objects themselves behave as before (a freed one
   raises "attempt to use a freed ..."). Borrowed buffers, streams and
   events stay the engine's to keep alive. Every C handle retains the
   device's primary context, so it stays alive while any handle lives.
   Driver errors of the frees a release makes are not reported.

   Threads. Once made, the functions below that take no lua_State call no
   Lua and may be called from any thread, concurrently with each other and
   with the script running on its own thread (launches, captures, reloads,
   frees, collection, lua_close): each C handle has its own lock. Hand a
   handle to another thread through something that orders memory (a lock,
   a queue, thread creation). They make the primary context current on
   the calling thread when the core did not already (see Threads above).
   A capture in progress on another thread in global mode fails if a
   release here frees memory (CUDA's rule). The functions that take a
   lua_State follow Lua's rule: on the thread that runs that state, and
   they raise Lua errors. */
typedef struct cugraph_graph cugraph_graph;
typedef struct cugraph_scalar cugraph_scalar;

/* A new C graph (one reference) from the open Graph at idx: a copy of its
   driver graph, instantiated, or for a graph with conditional nodes (which
   the driver neither copies nor instantiates twice) the Graph's own
   executable graph, shared; raises on a freed graph, inside a capture, for
   a graph that allocates or frees memory or lies in a GL map scope, or
   when the driver fails. */
cugraph_graph *cugraph_tograph(lua_State *L, int idx);

/* One more reference to h. Any thread. */
void cugraph_graph_retain(cugraph_graph *h);

/* Drops a reference; the last one frees the executable graph and lets go
   of its pins, never waiting for a launch in flight: the memory its nodes
   use (buffers, scalars, host buffers the script allocated) is freed by a
   thread of the runtime once the driver says the last launch is over (a
   CUDA user object the graph's copy holds), and at once when it was never
   launched. NULL is ignored. Any thread; not concurrently with a launch
   of the same handle by the holder of that last reference. */
void cugraph_graph_release(cugraph_graph *h);

/* Launches h on stream (the engine's, or the legacy stream NULL): first
   the values C set on the graph's scalars since their last write, each a
   memset on stream, then the graph. So every launch reads the values set
   before it, on whatever stream it runs; launches on different streams
   that read one scalar must be ordered by the engine (the value is one
   word of device memory). Returns the driver's error, CUDA_SUCCESS on
   success. Any thread; launches of one handle take turns. */
CUresult cugraph_graph_launch(cugraph_graph *h, CUstream stream);

/* h's executable graph, for an engine that launches it itself or adds it
   to graphs of its own (DeviceScalars are then not written first). The
   same handle for h's whole life (a kernel reload updates it in place);
   valid until the last release. Any thread. */
CUgraphExec cugraph_graph_exec(cugraph_graph *h);

/* A handle (one reference) to the open Scalar at idx, for setting from C.
   Every handle to one Scalar, and every C graph that pins it, share one
   pending value that starts as the script's; the script's sc:set() keeps
   its own, written before the script's launches. Raises like
   cugraph_checkbuffer. */
cugraph_scalar *cugraph_toscalar(lua_State *L, int idx);

/* The scalar's element type ("u32", ...): bits holds that many bytes. */
const char *cugraph_scalar_type(const cugraph_scalar *s);

/* Records a value (the element's bytes, native byte order) to be written
   before the next cugraph_graph_launch of a C graph that reads s. No driver
   call. Any thread. */
void cugraph_scalar_set(cugraph_scalar *s, const void *bits);

/* Drops a reference (NULL is ignored). Any thread. */
void cugraph_scalar_release(cugraph_scalar *s);

/* Waits at most seconds for what releases and lua_close left to the
   runtime's threads: the memory of graphs whose last launch was in flight
   when their last reference went (C graphs, and Lua graphs after
   lua_close), freed once the driver says the launch is over, and the frees
   a timed-out wait held back, made once the device's work ends. Returns 1
   when nothing is left, 0 at the deadline. For a host that checks for
   leaks before it exits (compute-sanitizer's leak check), or destroys the
   context itself. Any thread, no lua_State. */
int cugraph_settle(double seconds);

#endif
