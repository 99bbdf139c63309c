/* The single door to libcuda. Entry points are found with dlsym under the
   versioned names that cuda.h maps the plain names to (cuMemAlloc is
   cuMemAlloc_v2), so a call reads like the API: CU(L, cuMemAlloc, &p, n). */
#ifndef CUGRAPH_DRIVER_H
#define CUGRAPH_DRIVER_H

#include <stdint.h>
#include <cuda.h>
#include "base/cudagl.h"
#include <lua.h>
#include "base/loader.h"
#include "base/sticky.h"
#include "base/simstop.h"
#include "base/simcheck.h"

/* The simulator's own entry point (sim/driver/double.h): the thread-
   instructions its kernels had run when the event was last recorded. */
CUresult CUDAAPI cuSimEventInstructions(CUevent hEvent,
                                        unsigned long long *count);

#define CG_DRIVER_FUNCS(X) \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
  X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuMemGetInfo) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) \
  X(cuStreamQuery) X(cuStreamWaitEvent) X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) X(cuStreamIsCapturing) \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) \
  X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemHostAlloc) X(cuMemFreeHost) \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemsetD16Async) \
  X(cuMemsetD32Async) X(cuMemsetD2D32Async) \
  X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction) \
  X(cuFuncSetAttribute) X(cuLaunchKernel) \
  X(cuGraphInstantiate) X(cuGraphDestroy) X(cuGraphExecDestroy) \
  X(cuGraphLaunch) X(cuGraphUpload) X(cuGraphGetNodes) \
  X(cuGraphNodeGetType) X(cuGraphExecUpdate) X(cuGraphDebugDotPrint) \
  X(cuGraphKernelNodeGetParams) X(cuGraphKernelNodeSetParams)


/* Entry points a driver may lack (older drivers, the test double, a driver
   without graphics interop), or that only C handles call (outside the
   fault sweep's Lua workload): NULL when missing. Conditional nodes need
   cuGraphConditionalHandleCreate and the four after it (CUDA 12.4); cuda.h
   maps cuStreamGetCaptureInfo to cuStreamGetCaptureInfo_v3, cuGraphAddNode
   to cuGraphAddNode_v2, cuStreamUpdateCaptureDependencies to its _v2.
   Rebinding needs the exec setters (cuGraphExecKernelNodeSetParams_v2),
   stream-ordered and graph memory the calls from cuMemAllocAsync on; several
   devices the peer calls; frame fences the stream memory operations from
   cuStreamWaitValue32 on, host hooks cuLaunchHostFunc, the release of what
   a graph uses after its last launch the user object calls. */
#define CG_DRIVER_OPTIONAL(X) X(cuFuncGetParamInfo) X(cuGraphClone) \
  X(cuModuleGetGlobal) X(cuLaunchKernelEx) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuOccupancyMaxPotentialBlockSize) X(cuStreamCreateWithPriority) \
  X(cuCtxGetStreamPriorityRange) X(cuMemAllocManaged) X(cuMemPrefetchAsync) \
  X(cuMemAdvise) X(cuMemAllocPitch) X(cuMemcpy3DAsync) \
  X(cuGraphicsGLRegisterBuffer) X(cuGraphicsGLRegisterImage) \
  X(cuGraphicsMapResources) X(cuGraphicsUnmapResources) \
  X(cuGraphicsResourceGetMappedPointer) \
  X(cuGraphicsSubResourceGetMappedArray) X(cuGraphicsUnregisterResource) \
  X(cuGraphConditionalHandleCreate) X(cuStreamGetCaptureInfo) \
  X(cuGraphAddNode) X(cuStreamUpdateCaptureDependencies) \
  X(cuStreamBeginCaptureToGraph) X(cuGraphGetEdges) \
  X(cuGraphExecKernelNodeSetParams) X(cuGraphExecMemsetNodeSetParams) \
  X(cuGraphExecMemcpyNodeSetParams) X(cuGraphNodeSetEnabled) \
  X(cuGraphNodeGetDependencies) \
  X(cuGraphMemsetNodeSetParams) X(cuGraphMemcpyNodeSetParams) \
  X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuDeviceGetDefaultMemPool) \
  X(cuMemPoolGetAttribute) X(cuMemPoolTrimTo) \
  X(cuDeviceGetGraphMemAttribute) X(cuDeviceGraphMemTrim) \
  X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuMemcpyPeerAsync) \
  X(cuGraphChildGraphNodeGetGraph) X(cuGraphNodeFindInClone) \
  X(cuGraphAddDependencies) X(cuSimEventInstructions) \
  X(cuSimSetWorkLimit) X(cuSimInterrupt) X(cuSimStopReason) \
  X(cuSimSetLuaLine) X(cuSimHostAccess) X(cuSimTakeReport) \
  X(cuArray3DCreate) X(cuArrayDestroy) X(cuArray3DGetDescriptor) \
  X(cuTexObjectCreate) X(cuTexObjectDestroy) X(cuSurfObjectCreate) \
  X(cuSurfObjectDestroy) X(cuImportExternalMemory) \
  X(cuExternalMemoryGetMappedBuffer) X(cuExternalMemoryGetMappedMipmappedArray) \
  X(cuMipmappedArrayGetLevel) X(cuMipmappedArrayDestroy) \
  X(cuDestroyExternalMemory) X(cuImportExternalSemaphore) \
  X(cuDestroyExternalSemaphore) X(cuSignalExternalSemaphoresAsync) \
  X(cuWaitExternalSemaphoresAsync) \
  X(cuGraphExecExternalSemaphoresSignalNodeSetParams) \
  X(cuGraphExecExternalSemaphoresWaitNodeSetParams) \
  X(cuStreamWaitValue32) X(cuStreamWaitValue64) X(cuStreamWriteValue32) \
  X(cuStreamWriteValue64) X(cuGraphExecBatchMemOpNodeSetParams) \
  X(cuMemHostGetDevicePointer) X(cuLaunchHostFunc) \
  X(cuUserObjectCreate) X(cuUserObjectRelease) X(cuGraphRetainUserObject)

#define CG_FIELD(f) __typeof__(f) *f;
typedef struct cg_driver {
  CG_DRIVER_FUNCS(CG_FIELD)
  CG_DRIVER_OPTIONAL(CG_FIELD)
} cg_driver;
#undef CG_FIELD

extern cg_driver cg_drv;

/* Opens libcuda (CUGRAPH_LUA_LIBCUDA overrides the name) and calls cuInit
   once per process, whichever threads call it at once. Returns NULL on
   success, else a message that stays valid for the life of the process.
   cg_drv may be used once it has returned NULL. */
const char *cg_driver_load(void);
/* The places the PTX simulator may be (CUGRAPH_LUA_LIBCUDA=sim): beside
   the program or module that holds this core, installed or built. */
int cg_simulator_paths(char paths[][CG_PATHLEN], int max);

/* The open libcuda (NULL when it cannot be loaded), and a symbol of it
   beyond the API (the software driver's own), or NULL. */
void *cg_driver_handle(void);
void *cg_driver_symbol(const char *name);
/* With the software driver, the path of a library's stand-in beside it:
   the file its symbol sym (a const char *const) names, in the driver's
   folder. 0 when the driver has no such symbol. */
int cg_driver_standin(const char *sym, char *out, size_t n);

/* Writes the size low bytes of bits at p on stream s, as memsets (no host
   memory stays in flight): how a DeviceScalar's value reaches the device.
   *api names the call that failed. */
CUresult cg_memset_value(CUdeviceptr p, uint64_t bits, unsigned size,
                         CUstream s, const char **api);

/* Raises an error object {api, code, name, message}. Never returns. */
int cg_driver_error(lua_State *L, const char *api, CUresult r);

/* Pushes the error object without raising it. */
void cg_driver_pusherror(lua_State *L, const char *api, CUresult r);

/* The simulator's report of an error that another thread's call met on
   this thread's behalf (a bounded whole-device wait's waiter): the next
   error object this thread pushes carries it (a report is its thread's). */
enum { CG_REPORT = 1600 };
void cg_driver_hand_report(const char *text);

/* Pushes an error object of any origin (NVRTC too): a table with fields
   api, code, name, message, where (the "chunk:line" of the Lua code that
   made the call, when known) and the metatable "cugraph.Error", whose
   __tostring gives "where: api: name: message". */
void cg_pusherror(lua_State *L, const char *api, int code, const char *name,
                  const char *message);

/* For the driver's stream-capture errors (CUDA_ERROR_STREAM_CAPTURE_*,
   CUDA_ERROR_CAPTURED_EVENT): the rule of the Driver API the call broke,
   in a sentence, and *fix what to do; NULL for other codes. */
const char *cg_capture_rule(CUresult r, const char **fix);

/* "CUDA_ERROR_OUT_OF_MEMORY" (the driver's constant string), or
   "CUDA_ERROR_<code>" written into the caller's buf when the driver has no
   name for r. */
enum { CG_ERRNAME = 32 };
const char *cg_driver_errname(CUresult r, char buf[CG_ERRNAME]);

/* Registers the error metatable, and is_error in the module table on top
   of the stack; called once from luaopen. */
void cg_driver_open(lua_State *L);

#endif
