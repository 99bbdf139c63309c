/* cugraph-lua: a Lua 5.4 interpreter with the CUDA binding built in. It
   takes the options of `lua` and behaves as it does (the arg table,
   LUA_INIT, a traceback with every error, the exit status), plus -h,
   --version, --info, --sim and --paths. The interactive loop is in repl.c. */
#define _XOPEN_SOURCE 700 /* realpath */

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "base/base.h"
#include "cugraph.h"
#include "host/host.h"

/* The options, in one pass over argv before anything runs. */
typedef struct options {
  int script;   /* index of the script in argv; 0: none */
  int end;      /* argv[1..end-1] are options */
  int interactive, version, execute, noenv, help, info, sim, paths;
  const char *profile; /* --profile[=path]: the trace's file */
  const char *bad; /* the offending option, when there is one */
} options;

static lua_State *running; /* the state ^C interrupts */
static volatile sig_atomic_t signalled; /* ^C came in the last host_call */

/* -- signals and calls ---------------------------------------------------- */

static int traceback(lua_State *L);

/* Raises "interrupted!", but not in the message handler: an error already
   on its way (a call's own "interrupted!" for the simulated work ^C
   stopped) is reported, and host_call takes the hook off. */
static void stop_hook(lua_State *L, lua_Debug *ar) {
  lua_getinfo(L, "f", ar);
  int handler = lua_tocfunction(L, -1) == traceback;
  lua_pop(L, 1);
  if (handler) return;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_signal(int sig, void (*handler)(int)) {
  struct sigaction sa;
  sa.sa_handler = handler;
  sa.sa_flags = 0;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

/* ^C while Lua runs stops it at the next hook, and simulated work inside
   a call stops too (cugraph_interrupt: the call raises); a second ^C
   before that kills the process (the default action is back). */
static void interrupt(int sig) {
  on_signal(sig, SIG_DFL);
  signalled = 1;
  lua_sethook(running, stop_hook,
              LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
  cugraph_interrupt();
}

/* Whether a function's source is the Lua front end (cugraph/init.lua, ...). */
static int front_end(const lua_Debug *ar) {
  const char *slash = strrchr(ar->source, '/');
  return ar->source[0] == '@' && slash && slash - ar->source >= 8 &&
         !strncmp(slash - 8, "/cugraph/", 9);
}

/* The level a traceback starts at: past the front end's frames (and the C
   functions they called, error among them) above the user's own line, so
   that an error raised by cuda.compile starts at the script's call. */
static int user_level(lua_State *L) {
  lua_Debug ar;
  int level = 1, seen = 0;
  while (lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar)) {
    if (front_end(&ar)) seen = level + 1;
    else if (strcmp(ar.what, "C")) break;
    level++;
  }
  return seen ? seen : 1;
}

/* The message handler: every error gets a traceback, error objects (the
   runtime's, or any with __tostring) too. */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)",
                            luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, user_level(L));
  return 1;
}

/* lua_pcall with ^C stopping the running code; handler: the message
   handler's index, or 0. */
static int interruptible(lua_State *L, int narg, int nres, int handler) {
  running = L;
  signalled = 0;
  on_signal(SIGINT, interrupt);
  int status = lua_pcall(L, narg, nres, handler);
  on_signal(SIGINT, SIG_DFL);
  if (lua_gethook(L) == stop_hook) lua_sethook(L, NULL, 0, 0);
  return status;
}

int host_call(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int status = interruptible(L, narg, nres, base);
  lua_remove(L, base);
  return status;
}

int host_call_plain(lua_State *L, int narg, int nres) {
  return interruptible(L, narg, nres, 0);
}

int host_interrupted(void) { return signalled; }

const char *host_progname = HOST_NAME;

int host_report(lua_State *L, int status, int named) {
  if (status == LUA_OK) return status;
  const char *msg = lua_tostring(L, -1);
  if (msg == NULL) msg = "(error object is not a string)";
  if (named) fprintf(stderr, "%s: ", host_progname);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
  lua_pop(L, 1);
  return status;
}

static int run_chunk(lua_State *L, int status) {
  if (status == LUA_OK) status = host_call(L, 0, 0);
  return host_report(L, status, 1);
}

static int run_string(lua_State *L, const char *s, const char *name) {
  return run_chunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -- usage, version, info --------------------------------------------------- */

static void usage(FILE *f) {
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
          "  -h, --help  show this help\n"
          "  --version   show version information and exit\n"
          "  --info      show the driver, devices, NVRTC and cache, and exit\n"
          "  --sim       run on the PTX simulator (no GPU needed): as\n"
          "              CUGRAPH_LUA_LIBCUDA=sim\n"
          "  --paths     print the LUA_PATH and LUA_CPATH that let stock\n"
          "              lua5.4 require \"cugraph\" (eval \"$(cugraph-lua --paths)\")\n"
          "  --profile[=path]  write every launch, copy and graph replay\n"
          "              of the script, with its Lua line, to a Chrome trace\n"
          "              (default cugraph-lua-trace.json): as\n"
          "              CUGRAPH_LUA_PROFILE=path\n"
          "  --nproc N   (first) run the script in N processes, one per GPU\n"
          "              (%s --nproc 1 shows the launcher's options;\n"
          "              srun and mpirun start the processes without it)\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n"
          "Environment variables:\n"
          "  LUA_INIT_5_4, LUA_INIT   code to run first ('@file' runs a file)\n"
          "  LUA_PATH, LUA_CPATH      module search paths\n"
          "  CUGRAPH_LUA_LIBCUDA      libcuda to load; sim: the PTX simulator\n"
          "  CUGRAPH_LUA_TIMEOUT      bound of every wait, in seconds\n"
          "  CUGRAPH_LUA_PROFILE      file of the script's trace (--profile)\n"
          "  CUGRAPH_LUA_DEVICE       device ordinal (default: the local rank, else 0)\n"
          "  CUGRAPH_RDZV             TCP rendezvous of a job's ranks (host:port)\n"
          "  CUGRAPH_RDZV_TIMEOUT     seconds ranks wait for each other (600)\n"
          "  CUGRAPH_LUA_LIBNVRTC     libnvrtc to load\n"
          "  CUGRAPH_LUA_LIBNCCL      libnccl to load\n"
          "  CUGRAPH_LUA_CACHE_DIR    compile cache folder\n"
          "  CUGRAPH_LUA_CACHE_SIZE   compile cache cap (default 256M)\n"
          "Without a script, on a terminal: an interactive session with the\n"
          "module bound to 'cuda'.\n"
          "Unlike lua: errors that are objects print with a traceback too;\n"
          "the runtime's modules are found whatever LUA_PATH says.\n",
          host_progname, host_progname);
  fflush(f);
}

static void version(void) {
  fputs(HOST_NAME " " CUGRAPH_VERSION " (" LUA_RELEASE ")\n", stdout);
  fflush(stdout);
}

#ifdef CG_READLINE
#define BUILD_READLINE "yes"
#else
#define BUILD_READLINE "no (make deps installs libreadline-dev)"
#endif
#define STR(x) #x
#define XSTR(x) STR(x)

/* What --info prints, written in Lua over cuda.info(). */
static const char info_chunk[] =
  "local build = ...\n"
  "local i = require('cugraph').info()\n"
  "local function row(k, v) print(('%-14s %s'):format(k, v)) end\n"
  "row('cugraph-lua', i.version .. ' (' .. i.lua .. ')')\n"
  "local d = i.devices[1]\n"
  "local soft = d and d.name and d.name:match('^cugraph%-lua (.+)$')\n"
  "local lib = os.getenv('CUGRAPH_LUA_LIBCUDA')\n"
  "if soft then\n"
  "  row('driver', ('%s (%s), no GPU: CUDA %s'):format(soft,\n"
  "      lib ~= 'sim' and lib or i.simulator or '?', i.driver))\n"
  "else\n"
  "  row('driver', i.driver or ('none: ' .. i.reason))\n"
  "end\n"
  "row('simulator', i.simulator or 'not found')\n"
  "row('devices', i.device_count)\n"
  "for _, d in ipairs(i.devices) do\n"
  "  row('  ' .. d.ordinal, d.name and ('%s, sm_%d%d, %d SMs, %d MiB')\n"
  "      :format(d.name, d.major, d.minor, d.multiprocessors,\n"
  "              d.memory // 2^20) or d.error)\n"
  "end\n"
  "row('NVRTC', i.nvrtc or ('none: ' .. i.nvrtc_error))\n"
  "row('cache', (i.cache_dir or 'none') .. (' (cap %d MiB)')\n"
  "    :format(i.cache_size // 2^20))\n"
  "for _, kv in ipairs(build) do row(kv[1], kv[2]) end\n";

static int info(lua_State *L) {
  static const char *const build[][2] = {
    {"readline", BUILD_READLINE},
    {"CUDA headers", XSTR(CUDA_VERSION)},
  };
  int n = (int)(sizeof build / sizeof *build);
  if (luaL_loadbuffer(L, info_chunk, sizeof info_chunk - 1, "=--info"))
    return host_report(L, LUA_ERRSYNTAX, 1);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_createtable(L, 2, 0);
    lua_pushstring(L, build[i][0]);
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, build[i][1]);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, i + 1);
  }
  return host_report(L, host_call(L, 1, 0), 1);
}

/* -- options ---------------------------------------------------------------- */

/* The long option within two edits of a bad one (--simm: --sim), or NULL;
   a short option is lua's and gets lua's message alone. */
static const char *nearest_option(const char *bad) {
  static const char *const longs[] = {
    "--help", "--version", "--info", "--sim", "--paths", "--profile",
    "--nproc"
  };
  size_t best = 3;
  const char *found = NULL;
  if (strncmp(bad, "--", 2)) return NULL;
  for (size_t k = 0; k < sizeof longs / sizeof *longs; k++) {
    size_t d = cg_distance(longs[k], bad);
    if (d > 0 && d < best) { /* an exact one is misplaced */
      best = d;
      found = longs[k];
    }
  }
  return found;
}

/* Reads the options up to the script; sets o->bad on a bad one. */
static void parse(char **argv, options *o) {
  int i;
  memset(o, 0, sizeof *o);
  for (i = 1; argv[i] != NULL; i++) {
    const char *a = argv[i];
    if (a[0] != '-') break;                        /* the script */
    if (a[1] == '\0') break;                       /* "-": stdin */
    if (!strcmp(a, "--")) { i++; break; }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { o->help = 1; continue; }
    if (!strcmp(a, "--version")) { o->version = 2; continue; }
    if (!strcmp(a, "--info")) { o->info = 1; continue; }
    if (!strcmp(a, "--sim")) { o->sim = 1; continue; }
    if (!strcmp(a, "--paths")) { o->paths = 1; continue; }
    if (!strncmp(a, "--profile", 9) && (a[9] == '\0' || a[9] == '=')) {
      o->profile = a[9] ? a + 10 : "cugraph-lua-trace.json";
      if (!*o->profile) { o->bad = a; return; }
      continue;
    }
    if (a[2] != '\0' && a[1] != 'e' && a[1] != 'l') { o->bad = a; return; }
    switch (a[1]) {
    case 'E': o->noenv = 1; break;
    case 'W': break;                               /* in run_options */
    case 'i': /* -i implies -v */
      o->interactive = 1;
      /* fall through */
    case 'v':
      if (!o->version) o->version = 1;
      break;
    case 'e': /* -e and -l take an argument */
      o->execute = 1;
      /* fall through */
    case 'l':
      if (a[2] == '\0' && (argv[i + 1] == NULL || argv[i + 1][0] == '-')) {
        o->bad = a;
        return;
      }
      if (a[2] == '\0') i++;
      break;
    default: o->bad = a; return;
    }
  }
  o->end = i;
  o->script = argv[i] != NULL ? i : 0;
}

/* Runs 'g = require "mod"' for "g=mod" or "mod". */
static int require_into(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  const char *mod = eq ? eq + 1 : spec;
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  int status = host_call(L, 1, 1);
  if (status == LUA_OK) {
    lua_pushlstring(L, spec, eq ? (size_t)(eq - spec) : strlen(spec));
    lua_insert(L, -2);
    lua_setglobal(L, lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  return host_report(L, status, 1);
}

/* Runs -e, -l and -W in the order given; 0 on the first failure. */
static int run_options(lua_State *L, char **argv, int end) {
  for (int i = 1; i < end; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || (a[1] != 'e' && a[1] != 'l' && a[1] != 'W')) continue;
    if (a[1] == 'W') {
      lua_warning(L, "@on", 0);
      continue;
    }
    const char *val = a[2] ? a + 2 : argv[++i];
    int status = a[1] == 'e' ? run_string(L, val, "=(command line)")
                             : require_into(L, val);
    if (status != LUA_OK) return 0;
  }
  return 1;
}

static int run_init(lua_State *L) {
  const char *name = "=LUA_INIT_5_4";
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return run_chunk(L, luaL_loadfile(L, init + 1));
  return run_string(L, init, name);
}

/* The global 'arg': the script at 0, its arguments after, the interpreter
   and the options at negative indices. */
static void make_arg(lua_State *L, char **argv, int argc, int script) {
  lua_createtable(L, argc - script - 1 > 0 ? argc - script - 1 : 0,
                  script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int run_script(lua_State *L, char **argv) {
  const char *name = argv[0];
  if (!strcmp(name, "-") && strcmp(argv[-1], "--")) name = NULL; /* stdin */
  int status = luaL_loadfile(L, name);
  if (status == LUA_OK) {
    if (lua_getglobal(L, "arg") != LUA_TTABLE)
      luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    status = host_call(L, n, LUA_MULTRET);
  }
  return host_report(L, status, 1);
}

/* -- the state ------------------------------------------------------------- */

/* A searcher, second in package.searchers (after the preloads), finds the
   module "cugraph" and its submodules in the front end beside the
   executable: the build tree (<bin>/../lua) or an install
   (<bin>/../share/lua/5.4). So the front end always matches the core built
   in, and package.path stays the user's (LUA_PATH, -E). Other names it
   leaves silently to the next searchers, so that require's message for a
   missing module is lua5.4's. Upvalue: the template for
   package.searchpath. */
static int search_front_end(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (strcmp(name, "cugraph") && strncmp(name, "cugraph.", 8)) return 0;
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchpath");
  lua_pushvalue(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_call(L, 2, 2);
  if (lua_isnil(L, -2)) {
    lua_pushfstring(L, "no front-end file for '%s'", name);
    return 1;
  }
  const char *file = lua_tostring(L, -2);
  if (luaL_loadfilex(L, file, "t") != LUA_OK)
    return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s",
                      name, file, lua_tostring(L, -1));
  lua_pushstring(L, file);
  return 2;
}

static void find_front_end(lua_State *L, const char *argv0) {
  char buf[PATH_MAX];
  const char *path = buf, *slash;
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf);
  if (n > 0 && (size_t)n < sizeof buf)
    buf[n] = '\0';
  else if (argv0 != NULL && strchr(argv0, '/') != NULL)
    path = argv0;
  else
    return;
  slash = strrchr(path, '/');
  lua_pushlstring(L, path, (size_t)(slash - path));
  const char *dir = lua_tostring(L, -1);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  lua_pushfstring(L, "%s/../lua/?.lua;%s/../lua/?/init.lua;"
                  "%s/../share/lua/5.4/?.lua;%s/../share/lua/5.4/?/init.lua",
                  dir, dir, dir, dir);
  lua_pushcclosure(L, search_front_end, 1);
  for (lua_Integer i = (lua_Integer)luaL_len(L, -2) + 1; i > 2; i--) {
    lua_rawgeti(L, -2, i - 1);
    lua_rawseti(L, -3, i);
  }
  lua_rawseti(L, -2, 2);
  lua_pop(L, 3);
}

/* The first of two folders under the executable's that holds file, as a
   canonical path in out; 0 when neither does. */
static int first_dir(const char *bin, const char *a, const char *b,
                     const char *file, char out[PATH_MAX]) {
  char dir[PATH_MAX], f[PATH_MAX + 64];
  const char *sub[2] = { a, b };
  for (int i = 0; i < 2; i++) {
    snprintf(dir, sizeof dir, "%s/%s", bin, sub[i]);
    if (!realpath(dir, out)) continue;
    snprintf(f, sizeof f, "%s/%s", out, file);
    if (access(f, R_OK) == 0) return 1;
  }
  return 0;
}

/* --paths: shell lines setting the search paths of stock lua5.4 to this
   build's or install's front end and C module. */
static int paths(const char *argv0) {
  char exe[PATH_MAX], lua[PATH_MAX], c[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = '\0';
  else snprintf(exe, sizeof exe, "%s", argv0 ? argv0 : "");
  char *slash = strrchr(exe, '/');
  if (slash) *slash = '\0';
  else snprintf(exe, sizeof exe, ".");
  if (!first_dir(exe, "../lua", "../share/lua/5.4", "cugraph/init.lua", lua) ||
      !first_dir(exe, ".", "../lib/lua/5.4", "cugraph/core.so", c)) {
    fprintf(stderr, "%s: --paths: no cugraph front end or core.so beside "
            "%s (build with make, or make install)\n", HOST_NAME, exe);
    return 0;
  }
  printf("export LUA_PATH='%s/?.lua;%s/?/init.lua;;'\n", lua, lua);
  printf("export LUA_CPATH='%s/?.so;;'\n", c);
  return 1;
}

static int main_protected(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  options o;
  luaL_checkversion(L);
  parse(argv, &o);
  if (o.bad) {
    fprintf(stderr, "%s: ", host_progname);
    const char *near = nearest_option(o.bad);
    if ((o.bad[1] == 'e' || o.bad[1] == 'l') && o.bad[2] == '\0')
      fprintf(stderr, "'%s' needs argument\n", o.bad);
    else if (near)
      fprintf(stderr, "unrecognized option '%s' (did you mean '%s'?)\n",
              o.bad, near);
    else
      fprintf(stderr, "unrecognized option '%s'\n", o.bad);
    usage(stderr);
    return 0;
  }
  if (o.help) {
    usage(stdout);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (o.paths) {
    lua_pushboolean(L, paths(argv[0]));
    return 1;
  }
  if (o.version) version();
  if (o.sim) setenv("CUGRAPH_LUA_LIBCUDA", "sim", 1);
  if (o.profile) setenv("CUGRAPH_LUA_PROFILE", o.profile, 1);
  if (o.noenv) { /* the libraries then ignore LUA_PATH and friends */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  cugraph_openlibs(L, NULL);
  find_front_end(L, argv[0]);
  make_arg(L, argv, argc, o.script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (o.version == 2) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (o.info) {
    lua_pushboolean(L, info(L) == LUA_OK);
    return 1;
  }
  if (!o.noenv && run_init(L) != LUA_OK) return 0;
  if (!run_options(L, argv, o.script ? o.script : o.end)) return 0;
  if (o.script && run_script(L, argv + o.script) != LUA_OK) return 0;
  if (o.interactive) {
    host_repl(L);
  } else if (!o.script && !o.execute && !o.version) {
    if (isatty(0)) {
      version();
      host_repl(L);
    } else if (run_chunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
      return 0; /* stdin as a file */
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--sim") && !strncmp(argv[2], "--nproc", 7)) {
    setenv("CUGRAPH_LUA_LIBCUDA", "sim", 1); /* every rank on the simulator */
    argv[1] = argv[0];
    return host_launch(argc - 1, argv + 1);
  }
  if (argc > 1 && !strncmp(argv[1], "--nproc", 7)) return host_launch(argc, argv);
  if (argv[0] && argv[0][0]) host_progname = argv[0];
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create state: not enough memory\n",
            host_progname);
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP); /* no collection while the state is built */
  lua_pushcfunction(L, main_protected);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int ok = lua_toboolean(L, -1);
  host_report(L, status, 1);
  lua_close(L);
  return ok && status == LUA_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}
