/* The software driver's bounds on simulated work (sim/driver/stop.c): one
   declaration for the driver and the runtime that calls it. Simulated work
   runs inside the call that sends it; work the calling thread sends stops
   after seconds (0: no bound); cuSimInterrupt stops the work running now
   in any thread (async-signal-safe). Stopped work ends its call with
   CUDA_ERROR_TIMEOUT, and cuSimStopReason says why this thread's last
   did (0: none stopped). */
#ifndef CUGRAPH_SIMSTOP_H
#define CUGRAPH_SIMSTOP_H

#include <cuda.h>

enum { CU_SIM_STOP_LIMIT = 1, CU_SIM_STOP_INTERRUPT = 2 };

CUresult CUDAAPI cuSimSetWorkLimit(double seconds);
void CUDAAPI cuSimInterrupt(void);
CUresult CUDAAPI cuSimStopReason(int *why);

#endif
