/* What the two files of the cugraph-lua executable share: host.c runs
   scripts and options, repl.c the interactive loop. */
#ifndef CUGRAPH_HOST_H
#define CUGRAPH_HOST_H

#include <lua.h>

#define HOST_NAME "cugraph-lua"

/* The name messages start with: argv[0], as lua's (host.c). */
extern const char *host_progname;

/* Calls the function below narg arguments with the message handler (a
   traceback for every error, error objects through __tostring) and ^C
   stopping the running code. Returns the status; the error stays on top. */
int host_call(lua_State *L, int narg, int nres);
/* The same without the message handler: the error as raised. */
int host_call_plain(lua_State *L, int narg, int nres);
/* Whether ^C came during the last of those calls. */
int host_interrupted(void);

/* Prints the error on top of the stack (when status is not LUA_OK), after
   the program name when named, and pops it. Returns status. */
int host_report(lua_State *L, int status, int named);

/* cugraph-lua --nproc N ...: the launcher (launch.c); its exit status. */
int host_launch(int argc, char **argv);

/* The read-eval-print loop, until end of input. */
void host_repl(lua_State *L);

#endif
