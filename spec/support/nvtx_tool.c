/* An NVTX tool for the specs: loaded by the NVTX calls of the runtime
   through NVTX_INJECTION64_PATH, as Nsight Systems is, it appends each range
   pushed ("push <message>") and popped ("pop") to the file NVTX_TOOL_LOG
   names. */
#include <stdio.h>
#include <stdlib.h>
#pragma GCC diagnostic push /* the header casts dlsym's result */
#pragma GCC diagnostic ignored "-Wpedantic"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop

static FILE *log_file;

static int push(const char *message) {
  if (log_file) fprintf(log_file, "push %s\n", message), fflush(log_file);
  return 0;
}

static int pop(void) {
  if (log_file) fputs("pop\n", log_file), fflush(log_file);
  return 0;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
      size <= NVTX_CBID_CORE_RangePop)
    return 0;
  const char *path = getenv("NVTX_TOOL_LOG");
  log_file = path ? fopen(path, "a") : NULL;
  *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)push;
  *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)pop;
  return 1;
}
