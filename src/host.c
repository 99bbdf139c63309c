/* cugraph-lua: a stand-alone Lua 5.4 interpreter with the CUDA binding built
   in. Modelled on Lua 5.4's lua.c: same options, 'arg' table, LUA_INIT,
   message handler with traceback and read-eval-print loop. */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#ifdef CG_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

#define CG_PROGNAME "cugraph-lua"
#define CG_VERSION "0.1.0"

#define LUA_INIT_VAR "LUA_INIT"
#define LUA_INITVARVERSION LUA_INIT_VAR LUA_VERSUFFIX

#define LUA_PROMPT "> "
#define LUA_PROMPT2 ">> "
#define LUA_MAXINPUT 512

/* Defined in the core module, linked into this executable. */
int luaopen_cugraph_core(lua_State *L);

static lua_State *globalL = NULL;
static const char *progname = CG_PROGNAME;

/* Hook set by 'laction': raises an error at the next Lua event. */
static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void setsignal(int sig, void (*handler)(int)) {
  struct sigaction sa;
  sa.sa_handler = handler;
  sa.sa_flags = 0;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

/* SIGINT while Lua runs: a second ^C before the hook fires kills the
   process (default action); the hook stops the running code. */
static void laction(int sig) {
  int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
  setsignal(sig, SIG_DFL);
  lua_sethook(globalL, lstop, flag, 1);
}

static void print_usage(FILE *f) {
  fprintf(f,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  --help    show this help\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n"
          "Environment variables:\n"
          "  " LUA_INITVARVERSION ", " LUA_INIT_VAR
          "     code to run first ('@file' runs a file)\n"
          "  LUA_PATH, LUA_CPATH        module search paths\n"
          "  CUGRAPH_LUA_LIBCUDA        path of libcuda to load\n"
          "  CUGRAPH_LUA_DEVICE         device ordinal (default 0)\n"
          "  CUGRAPH_LUA_LIBNVRTC       path of libnvrtc to load\n"
          "require \"cugraph\" loads the CUDA binding\n",
          CG_PROGNAME);
  fflush(f);
}

static void print_badoption(const char *badoption) {
  fprintf(stderr, "%s: ", progname);
  if (badoption[1] == 'e' || badoption[1] == 'l')
    fprintf(stderr, "'%s' needs argument\n", badoption);
  else
    fprintf(stderr, "unrecognized option '%s'\n", badoption);
  print_usage(stderr);
}

/* Prints an error message, prefixed by the program name when there is one. */
static void l_message(const char *pname, const char *msg) {
  if (pname) fprintf(stderr, "%s: ", pname);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

/* Reports the error object on the top of the stack and pops it. */
static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) msg = "(error object is not a string)";
    l_message(progname, msg);
    lua_pop(L, 1);
  }
  return status;
}

/* Message handler: converts the error to a string and adds a traceback. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)",
                          luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Calls the function under 'narg' arguments with the message handler and
   the SIGINT handler in place. */
static int docall(lua_State *L, int narg, int nres) {
  int status;
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  globalL = L;
  setsignal(SIGINT, laction);
  status = lua_pcall(L, narg, nres, base);
  setsignal(SIGINT, SIG_DFL);
  lua_remove(L, base);
  return status;
}

static void print_version(void) {
  fputs(CG_PROGNAME " " CG_VERSION " (" LUA_RELEASE ")\n", stdout);
  fflush(stdout);
}

/* Builds the global 'arg': the script at index 0, its arguments at positive
   indices, the interpreter and options at negative ones. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  int i, narg;
  narg = argc - (script + 1);
  lua_createtable(L, narg, script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

static int dofile(lua_State *L, const char *name) {
  return dochunk(L, luaL_loadfile(L, name));
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* Receives 'globname[=modname]' and runs 'globname = require(modname)'. */
static int dolibrary(lua_State *L, char *globname) {
  int status;
  char *modname = strchr(globname, '=');
  if (modname == NULL) {
    modname = globname;
  } else {
    *modname = '\0';
    modname++;
  }
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  status = docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, globname);
  return report(L, status);
}

/* Pushes the script arguments arg[1..n]; returns n. */
static int pushargs(lua_State *L) {
  int i, n;
  if (lua_getglobal(L, "arg") != LUA_TTABLE)
    luaL_error(L, "'arg' is not a table");
  n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return n;
}

static int handle_script(lua_State *L, char **argv) {
  int status;
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
    fname = NULL; /* stdin */
  status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

#define has_error 1 /* bad option */
#define has_i 2     /* -i */
#define has_v 4     /* -v */
#define has_e 8     /* -e */
#define has_E 16    /* -E */
#define has_help 32 /* --help */

/* Checks the options; '*first' gets the index of the script name (or of
   the bad option; 0 when there is no script). */
static int collectargs(char **argv, int *first) {
  int args = 0;
  int i;
  if (argv[0] == NULL) {
    *first = -1;
    return 0;
  }
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args;
    switch (argv[i][1]) {
    case '-':
      if (strcmp(argv[i], "--help") == 0) return has_help;
      if (argv[i][2] != '\0') return has_error;
      *first = (argv[i + 1] != NULL) ? i + 1 : 0;
      return args;
    case '\0': /* '-': the script is stdin */
      return args;
    case 'E':
      if (argv[i][2] != '\0') return has_error;
      args |= has_E;
      break;
    case 'W':
      if (argv[i][2] != '\0') return has_error;
      break;
    case 'i':
      args |= has_i; /* -i implies -v */
      /* fall through */
    case 'v':
      if (argv[i][2] != '\0') return has_error;
      args |= has_v;
      break;
    case 'e':
      args |= has_e;
      /* fall through */
    case 'l': /* both need an argument */
      if (argv[i][2] == '\0') {
        i++;
        if (argv[i] == NULL || argv[i][0] == '-') return has_error;
      }
      break;
    default:
      return has_error;
    }
  }
  *first = 0; /* no script name */
  return args;
}

/* Runs the -e, -l and -W options in order; returns 0 on failure. */
static int runargs(lua_State *L, char **argv, int n) {
  int i;
  for (i = 1; i < n; i++) {
    int option = argv[i][1];
    switch (option) {
    case 'e':
    case 'l': {
      int status;
      char *extra = argv[i] + 2;
      if (*extra == '\0') extra = argv[++i];
      status = (option == 'e') ? dostring(L, extra, "=(command line)")
                               : dolibrary(L, extra);
      if (status != LUA_OK) return 0;
      break;
    }
    case 'W':
      lua_warning(L, "@on", 0);
      break;
    }
  }
  return 1;
}

static int handle_luainit(lua_State *L) {
  const char *name = "=" LUA_INITVARVERSION;
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=" LUA_INIT_VAR;
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dofile(L, init + 1);
  return dostring(L, init, name);
}

/* Makes 'require "cugraph.core"' find the linked-in module. */
static void preload_core(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_cugraph_core);
  lua_setfield(L, -2, "cugraph.core");
  lua_pop(L, 1);
}

/* Pushes the directory of the executable; returns 0 when it is unknown. */
static int push_exedir(lua_State *L, const char *argv0) {
  char buf[PATH_MAX];
  const char *path = buf;
  const char *slash;
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf);
  if (n > 0 && (size_t)n < sizeof buf)
    buf[n] = '\0';
  else if (argv0 != NULL && strchr(argv0, '/') != NULL)
    path = argv0;
  else
    return 0;
  slash = strrchr(path, '/');
  lua_pushlstring(L, path, (size_t)(slash - path));
  return 1;
}

/* Prepends the in-tree and installed locations of the Lua front end,
   relative to the executable, to package.path. */
static void prepend_path(lua_State *L, const char *argv0) {
  const char *dir;
  if (!push_exedir(L, argv0)) return;
  dir = lua_tostring(L, -1);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L,
                  "%s/../lua/?.lua;%s/../lua/?/init.lua;"
                  "%s/../share/lua/5.4/?.lua;"
                  "%s/../share/lua/5.4/?/init.lua;%s",
                  dir, dir, dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 3);
}

/* Line input for the REPL: readline on a terminal, fgets otherwise. */
#ifdef CG_READLINE
static int use_readline = 0;
#endif

static void initreadline(void) {
#ifdef CG_READLINE
  use_readline = isatty(0);
  if (use_readline) rl_readline_name = CG_PROGNAME;
#endif
}

/* Reads a line into '*line' (either 'buffer' or malloc'ed); returns 0 at
   end of input. */
static int readinput(char *buffer, char **line, const char *prompt) {
#ifdef CG_READLINE
  if (use_readline) return (*line = readline(prompt)) != NULL;
#endif
  fputs(prompt, stdout);
  fflush(stdout);
  *line = buffer;
  return fgets(buffer, LUA_MAXINPUT, stdin) != NULL;
}

static void saveline(const char *line) {
#ifdef CG_READLINE
  if (use_readline) add_history(line);
#else
  (void)line;
#endif
}

static void freeline(char *line, char *buffer) {
  if (line != buffer) free(line);
}

/* Pushes the prompt (_PROMPT or _PROMPT2 through tostring, or the default)
   and returns it; the caller pops it. */
static const char *get_prompt(lua_State *L, int firstline) {
  if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL)
    return firstline ? LUA_PROMPT : LUA_PROMPT2;
  else {
    const char *p = luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    return p;
  }
}

#define EOFMARK "<eof>"
#define marklen (sizeof(EOFMARK) / sizeof(char) - 1)

/* Is a syntax error due to an incomplete statement? Pops it if so. */
static int incomplete(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= marklen && strcmp(msg + lmsg - marklen, EOFMARK) == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

/* Prompts for a line and pushes it; returns 0 at end of input. */
static int pushline(lua_State *L, int firstline) {
  char buffer[LUA_MAXINPUT];
  char *b;
  size_t l;
  const char *prmt = get_prompt(L, firstline);
  if (!readinput(buffer, &b, prmt)) return 0; /* caller pops the prompt */
  lua_pop(L, 1);
  l = strlen(b);
  if (l > 0 && b[l - 1] == '\n') b[--l] = '\0';
  if (firstline && b[0] == '=') /* '=expr' as in Lua 5.2 */
    lua_pushfstring(L, "return %s", b + 1);
  else
    lua_pushlstring(L, b, l);
  freeline(b, buffer);
  return 1;
}

/* Tries to compile the line as 'return line;'. */
static int addreturn(lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2);
    if (line[0] != '\0') saveline(line);
  } else {
    lua_pop(L, 2);
  }
  return status;
}

/* Compiles the line as a statement, reading continuation lines while it is
   incomplete. */
static int multiline(lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, line, len, "=stdin");
    if (!incomplete(L, status) || !pushline(L, 0)) {
      saveline(line);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Reads and compiles one input; returns -1 at end of input, else the
   status with the function or error message on the stack. */
static int loadline(lua_State *L) {
  int status;
  lua_settop(L, 0);
  if (!pushline(L, 1)) return -1;
  if ((status = addreturn(L)) != LUA_OK) status = multiline(L);
  lua_remove(L, 1);
  return status;
}

/* Prints the values on the stack with the global 'print'. */
static void l_print(lua_State *L) {
  int n = lua_gettop(L);
  if (n > 0) {
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
      l_message(progname, lua_pushfstring(L, "error calling 'print' (%s)",
                                          lua_tostring(L, -1)));
  }
}

static void doREPL(lua_State *L) {
  int status;
  const char *oldprogname = progname;
  progname = NULL; /* no program name on errors in interactive mode */
  initreadline();
  while ((status = loadline(L)) != -1) {
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK)
      l_print(L);
    else
      report(L, status);
  }
  lua_settop(L, 0);
  fputs("\n", stdout);
  fflush(stdout);
  progname = oldprogname;
}

static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script;
  int args = collectargs(argv, &script);
  int optlim = (script > 0) ? script : argc;
  luaL_checkversion(L);
  if (args == has_help) {
    print_usage(stdout);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (args == has_error) {
    print_badoption(argv[script]);
    return 0;
  }
  if (args & has_v) print_version();
  if (args & has_E) { /* tells the libraries to ignore LUA_PATH etc. */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  preload_core(L);
  prepend_path(L, argv[0]);
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (!(args & has_E) && handle_luainit(L) != LUA_OK) return 0;
  if (!runargs(L, argv, optlim)) return 0;
  if (script > 0 && handle_script(L, argv + script) != LUA_OK) return 0;
  if (args & has_i) {
    doREPL(L);
  } else if (script < 1 && !(args & (has_e | has_v))) {
    if (isatty(0)) {
      print_version();
      doREPL(L);
    } else if (dofile(L, NULL) != LUA_OK) { /* run stdin as a file */
      return 0;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  int status, result;
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    l_message(CG_PROGNAME, "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP); /* no GC while building the state */
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  status = lua_pcall(L, 2, 1, 0);
  result = lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
