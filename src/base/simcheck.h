/* The PTX simulator's checks (sim/driver/queue.c): one declaration for the
   simulator and the runtime that calls it. In its strict mode (on unless
   CUDA_SIM_STRICT=0) work sent to a stream runs when something waits for
   it, and the simulator checks the synchronization the GPU needs:

     cuSimSetLuaLine(where)   the Lua line ("chunk:line") of the calls this
                              thread sends from now on, named by the
                              reports of their work (NULL: none);
     cuSimHostAccess(p, n, write, text, size)
                              whether the host may read (or write) the
                              host memory [p, p + n) now:
                              CUDA_ERROR_NOT_PERMITTED with why in text
                              while work still to run writes it (or reads
                              it, for a write);
     cuSimTakeReport(text, size)
                              the report of this thread's last failed call
                              whose work broke a rule (a race between
                              streams: CUDA_ERROR_NOT_PERMITTED) or faulted
                              (kernel, source line, thread, block, Lua
                              lines); CUDA_ERROR_NOT_FOUND when none.

   The test double and a GPU's driver have none of them: the runtime finds
   them with dlsym, and on a GPU each costs one compare. */
#ifndef CUGRAPH_SIMCHECK_H
#define CUGRAPH_SIMCHECK_H

#include <stddef.h>
#include <cuda.h>

CUresult CUDAAPI cuSimSetLuaLine(const char *where);
CUresult CUDAAPI cuSimHostAccess(const void *p, size_t n, int write,
                                 char *text, size_t size);
CUresult CUDAAPI cuSimTakeReport(char *text, size_t size);
/* For the library stand-ins (sim/standin.h), which compute at once on the
   host: runs the work sent to stream s so far. */
CUresult CUDAAPI cuSimRunStream(CUstream s);

#endif
