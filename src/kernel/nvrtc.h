/* What the NVRTC door (nvrtc.c) and its options (nvrtc_opts.c) share. */
#ifndef CUGRAPH_NVRTC_H
#define CUGRAPH_NVRTC_H

#include <lua.h>

/* Stack slots of core.compile. LIST holds the NVRTC options in order;
   LIST[1] is the -arch option, filled last. NAME is the program name,
   NAMES the array of C++ names of opts.names (name expressions). */
enum { SRC = 1, OPTS, LIST, NAME, NAMES };

/* Fills LIST, NAME and NAMES from the table at OPTS (n options so far);
   returns opts.cache. */
/* Whether -lineinfo is the default (on the simulator). */
int cg_nvrtc_lineinfo(void);
int cg_nvrtc_options(lua_State *L, int *n);
/* Pushes the -arch option of the current device (a real architecture), or
   raises why there is none. */
void cg_nvrtc_device_arch(lua_State *L, int module);
/* Appends -I options for the toolkit's headers. */
void cg_nvrtc_toolkit_include(lua_State *L, int *n);

/* nvrtc_scan.c: guesses, from the text of src, the names of its extern "C"
   kernels and of its device variables in the global namespace, whose C
   types the compile can ask for. Writes them into out (2 * len + 2 bytes)
   one after another, each ended by a NUL, variables marked by a leading
   '@'; returns how many. */
int cg_nvrtc_guess(const char *src, size_t len, char *out);

#endif
