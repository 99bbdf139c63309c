/* The interactive loop of cugraph-lua: as lua's (expressions print their
   values, "=expr", continuation lines, _PROMPT and _PROMPT2), with the
   module bound to 'cuda', tables printed in full, buffers with their first
   and last elements, and, on a terminal, a line naming the device and,
   with readline, Tab completion of globals, fields, methods and a module's
   kernels, and a history file in the XDG state folder. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "host/host.h"

#ifdef CG_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

#define MAXINPUT 512 /* a line without readline */
#define HISTORY_LINES 1000

/* Completion and printing, in Lua: format(...) makes the values one line,
   complete(text) lists the completions of the dotted name that ends text.
   A table prints its raw contents (no __len or __index runs), at most 100
   entries of each and 10000 keys looked at in all, "..." for the rest. */
static const char helpers[] =
  "local dgm = debug.getmetatable\n"
  "local function keys(v, out, methods)\n"
  "  local t = type(v) == 'table' and v or nil\n"
  "  if t then for k in next, t do out[#out + 1] = k end end\n"
  "  local mt = dgm(v)\n"
  "  if type(mt) == 'table' and mt.__name == 'cugraph.Module' then\n"
  "    local ok, ks = pcall(v.kernels, v)\n"
  "    if ok then for _, k in ipairs(ks) do out[#out + 1] = k end end\n"
  "  end\n"
  "  if type(mt) == 'table' then\n"
  "    for _, f in ipairs{'methods', '__index'} do\n"
  "      local m = rawget(mt, f)\n"
  "      if type(m) == 'table' then for k in next, m do out[#out + 1] = k end end\n"
  "    end\n"
  "  end\n"
  "  return out\n"
  "end\n"
  "local function complete(text)\n"
  "  local head, sep, last = text:match('^(.-)([.:]?)([%w_]*)$')\n"
  "  local v = _G\n"
  "  if sep ~= '' then\n"
  "    for part in head:gmatch('[^.]+') do\n"
  "      local ok, nv = pcall(function() return v[part] end)\n"
  "      if not ok or nv == nil then return {} end\n"
  "      v = nv\n"
  "    end\n"
  "  end\n"
  "  local out, seen = {}, {}\n"
  "  for _, k in ipairs(keys(v, {})) do\n"
  "    if type(k) == 'string' and k:match('^[%a_][%w_]*$') and not seen[k]\n"
  "       and k:sub(1, #last) == last and k:sub(1, 2) ~= '__' then\n"
  "      local ok, x = pcall(function() return v[k] end)\n"
  "      if sep ~= ':' or (ok and type(x) == 'function') then\n"
  "        seen[k] = true\n"
  "        out[#out + 1] = head .. sep .. k\n"
  "      end\n"
  "    end\n"
  "  end\n"
  "  table.sort(out)\n"
  "  return out\n"
  "end\n"
  "local function key(k)\n"
  "  if type(k) == 'string' and k:match('^[%a_][%w_]*$') then return k end\n"
  "  return '[' .. (type(k) == 'string' and ('%q'):format(k) or tostring(k)) .. ']'\n"
  "end\n"
  "local SHOWN, STEPS = 100, 10000\n"
  "local function pretty(v, indent, seen, left)\n"
  "  if type(v) == 'string' then return ('%q'):format(v) end\n"
  "  if type(v) ~= 'table' or dgm(v) and dgm(v).__tostring then return tostring(v) end\n"
  "  if seen[v] then return '<cycle>' end\n"
  "  if #indent > 8 then return '{...}' end\n"
  "  seen[v] = true\n"
  "  local n, ks, parts = rawlen(v), {}, {}\n"
  "  local more = n > SHOWN\n"
  "  for i = 1, more and SHOWN or n do parts[i] = pretty(rawget(v, i), indent .. '  ', seen, left) end\n"
  "  for k in next, v do\n"
  "    left[1] = left[1] - 1\n"
  "    if left[1] < 0 or #ks == SHOWN then more = true break end\n"
  "    if not (math.type(k) == 'integer' and k >= 1 and k <= n) then ks[#ks + 1] = k end\n"
  "  end\n"
  "  table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)\n"
  "  for _, k in ipairs(ks) do\n"
  "    parts[#parts + 1] = key(k) .. ' = ' .. pretty(rawget(v, k), indent .. '  ', seen, left)\n"
  "  end\n"
  "  if more then parts[#parts + 1] = '...' end\n"
  "  seen[v] = nil\n"
  "  if #parts == 0 then return '{}' end\n"
  "  local line = '{ ' .. table.concat(parts, ', ') .. ' }'\n"
  "  if #line + #indent <= 78 and not line:find('\\n') then return line end\n"
  "  return '{\\n' .. indent .. '  ' .. table.concat(parts, ',\\n' .. indent .. '  ')\n"
  "      .. '\\n' .. indent .. '}'\n"
  "end\n"
  "local function elements(v)\n"
  "  local mt = dgm(v)\n"
  "  if type(mt) ~= 'table' or mt.__name ~= 'cugraph.Buffer' then return '' end\n"
  "  local ok, n = pcall(function() return #v end)\n"
  "  if not ok or math.type(n) ~= 'integer' or n == 0 then return '' end\n"
  "  local function get(at, k)\n"
  "    local ok2, t = pcall(v.download, v, 'table', at, k)\n"
  "    if not ok2 then return nil end\n"
  "    for i = 1, #t do t[i] = tostring(t[i]) end\n"
  "    return table.concat(t, ', ')\n"
  "  end\n"
  "  local s = n <= 6 and get(0, n) or get(0, 3) and (get(0, 3) .. ', ..., ' .. get(n - 3, 3))\n"
  "  return s and ' {' .. s .. '}' or ''\n"
  "end\n"
  "local function format(...)\n"
  "  local out = {}\n"
  "  for i = 1, select('#', ...) do\n"
  "    local v = select(i, ...)\n"
  "    out[i] = type(v) == 'table' and pretty(v, '', {}, {STEPS}) or tostring(v) .. elements(v)\n"
  "  end\n"
  "  return table.concat(out, '\\t')\n"
  "end\n"
  "local function banner()\n"
  "  local cuda = package.loaded.cugraph\n"
  "  if not cuda then return end\n"
  "  local ok, why = cuda.available()\n"
  "  if not ok then\n"
  "    print('cuda: no device (' .. tostring(why):gsub(';.*', '') .. '); cugraph-lua --sim runs on the PTX simulator')\n"
  "    return\n"
  "  end\n"
  "  local d = cuda.device()\n"
  "  print(('cuda: %s (sm_%d%d, %.0f GiB), device %d of %d'):format(d.name, d.major or 0,\n"
  "        d.minor or 0, (d.memory or 0) / 2^30, d.ordinal or 0, cuda.device_count()))\n"
  "end\n"
  "return { complete = complete, format = format, banner = banner }\n";

static const char helpers_key = 'h'; /* registry: the helpers table */

/* Pushes helpers[name], or nil when they failed to load. */
static int get_helper(lua_State *L, const char *name) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &helpers_key) != LUA_TTABLE) return 0;
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  return 1;
}

/* -- line input ----------------------------------------------------------- */

#ifdef CG_READLINE
static lua_State *completing; /* the state completions are looked up in */
static int use_readline;
static char history[4096]; /* the history file, or "" */

/* readline's generator over the list complete() returned, which stays on
   top of the stack until the last call. */
static char *next_match(const char *text, int state) {
  static int i, n, at;
  lua_State *L = completing;
  if (state == 0) {
    if (!get_helper(L, "complete")) {
      lua_pushnil(L);
    } else {
      lua_pushstring(L, text);
      if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
        lua_pop(L, 1);
        lua_pushnil(L);
      }
    }
    at = lua_gettop(L);
    i = 0;
    n = lua_istable(L, at) ? (int)lua_rawlen(L, at) : 0;
  }
  while (i < n) {
    lua_rawgeti(L, at, ++i);
    const char *s = lua_tostring(L, -1);
    char *m = s ? strdup(s) : NULL;
    lua_pop(L, 1);
    if (m) return m;
  }
  lua_settop(L, at - 1);
  return NULL;
}

static char **complete(const char *text, int start, int end) {
  (void)start;
  (void)end;
  rl_attempted_completion_over = 1; /* no file names */
  rl_completion_append_character = '\0';
  return rl_completion_matches(text, next_match);
}

/* $XDG_STATE_HOME/cugraph-lua/history, else ~/.local/state/...; the folder
   is made mode 0700. */
static void find_history(void) {
  const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  char dir[sizeof history - 16];
  int w;
  if (state && state[0] == '/')
    w = snprintf(dir, sizeof dir, "%s/cugraph-lua", state);
  else if (home && home[0] == '/')
    w = snprintf(dir, sizeof dir, "%s/.local/state/cugraph-lua", home);
  else
    return;
  if (w <= 0 || (size_t)w >= sizeof dir) return;
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(dir, 0700);
      *p = '/';
    }
  mkdir(dir, 0700);
  snprintf(history, sizeof history, "%s/history", dir);
}
#endif

static void input_begin(lua_State *L) {
#ifdef CG_READLINE
  use_readline = isatty(0);
  if (!use_readline) return;
  completing = L;
  rl_readline_name = HOST_NAME;
  rl_attempted_completion_function = complete;
  rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,+-*/%^~#[]";
  find_history();
  if (*history && read_history(history) != 0) write_history(history);
#else
  (void)L;
#endif
}

static void input_end(void) {
#ifdef CG_READLINE
  if (use_readline && *history) history_truncate_file(history, HISTORY_LINES);
#endif
}

/* Reads a line into *line (buffer, or readline's malloc'd line); 0 at end
   of input. */
static int read_line(char *buffer, char **line, const char *prompt) {
#ifdef CG_READLINE
  if (use_readline) return (*line = readline(prompt)) != NULL;
#endif
  fputs(prompt, stdout);
  fflush(stdout);
  *line = buffer;
  if (fgets(buffer, MAXINPUT, stdin) == NULL) return 0;
  if (!isatty(0)) { /* echoed, as lua5.4 with readline does off a terminal */
    size_t n = strlen(buffer);
    fputs(buffer, stdout);
    if (n == 0 || buffer[n - 1] != '\n') fputc('\n', stdout);
    fflush(stdout);
  }
  return 1;
}

static void remember(const char *line) {
#ifdef CG_READLINE
  if (!use_readline || !*line) return;
  add_history(line);
  if (*history) append_history(1, history);
#else
  (void)line;
#endif
}

/* -- the loop ---------------------------------------------------------------- */

/* Pushes the prompt (_PROMPT or _PROMPT2 through tostring, or the default)
   and returns it. */
static const char *prompt(lua_State *L, int first) {
  if (lua_getglobal(L, first ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushstring(L, first ? "> " : ">> ");
    return lua_tostring(L, -1);
  }
  const char *p = luaL_tolstring(L, -1, NULL);
  lua_remove(L, -2);
  return p;
}

/* Pushes the next line (first: "=expr" reads as "return expr"); 0 at end
   of input. */
static int push_line(lua_State *L, int first) {
  char buffer[MAXINPUT], *line;
  const char *p = prompt(L, first);
  int got = read_line(buffer, &line, p);
  lua_pop(L, 1);
  if (!got) return 0;
  size_t len = strlen(line);
  if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
  if (first && line[0] == '=')
    lua_pushfstring(L, "return %s", line + 1);
  else
    lua_pushlstring(L, line, len);
  if (line != buffer) free(line);
  return 1;
}

/* A syntax error that only says the input ended early? Pops it if so. */
static int incomplete(lua_State *L, int status) {
  static const char mark[] = "<eof>";
  size_t len, m = sizeof mark - 1;
  const char *msg;
  if (status != LUA_ERRSYNTAX) return 0;
  msg = lua_tolstring(L, -1, &len);
  if (len < m || strcmp(msg + len - m, mark)) return 0;
  lua_pop(L, 1);
  return 1;
}

/* Compiles the line on top as "return <line>;" when that is an
   expression; leaves the function in its place. */
static int as_expression(lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *ret = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2);
    remember(line);
  } else {
    lua_pop(L, 2);
  }
  return status;
}

/* Compiles the line on top as a statement, reading more lines while it is
   incomplete. */
static int as_statement(lua_State *L) {
  for (;;) {
    size_t len;
    const char *text = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, text, len, "=stdin");
    if (!incomplete(L, status) || !push_line(L, 0)) {
      remember(text);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Reads and compiles one input: -1 at end of input, else the status with
   the function or the message on top. */
static int read_input(lua_State *L) {
  int status;
  lua_settop(L, 0);
  if (!push_line(L, 1)) return -1;
  if ((status = as_expression(L)) != LUA_OK) status = as_statement(L);
  lua_remove(L, 1);
  return status;
}

/* Prints the values on the stack through the global print, as lua does:
   tables in full, buffers with elements, the rest by tostring. ^C stops
   the printing (a __tostring that loops) as it stops the code. */
static void show(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  if (get_helper(L, "format")) { /* the values become one string */
    for (int i = 1; i <= n; i++) lua_pushvalue(L, i);
    int status = host_call_plain(L, n, 1);
    if (status == LUA_OK) {
      lua_replace(L, 1);
      lua_settop(L, n = 1);
    } else if (host_interrupted()) {
      host_report(L, status, 0);
      return;
    } else {
      lua_pop(L, 1); /* printed as they are */
    }
  }
  lua_getglobal(L, "print");
  lua_insert(L, 1);
  if (host_call_plain(L, n, 0) != LUA_OK)
    fprintf(stderr, "error calling 'print' (%s)\n",
            lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
}

/* Loads the helpers and binds cuda = require "cugraph" unless a global
   'cuda' exists. */
static void setup(lua_State *L) {
  if (luaL_loadbuffer(L, helpers, sizeof helpers - 1, "=repl") == LUA_OK &&
      lua_pcall(L, 0, 1, 0) == LUA_OK)
    lua_rawsetp(L, LUA_REGISTRYINDEX, &helpers_key);
  else
    lua_pop(L, 1);
  if (lua_getglobal(L, "cuda") == LUA_TNIL) {
    lua_getglobal(L, "require");
    lua_pushliteral(L, "cugraph");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
      lua_setglobal(L, "cuda");
    } else {
      fprintf(stderr, "cuda is not bound: %s\n", lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

void host_repl(lua_State *L) {
  int status;
  setup(L);
  if (isatty(0) && get_helper(L, "banner") && lua_pcall(L, 0, 0, 0) != LUA_OK)
    lua_pop(L, 1); /* on a terminal: the device, or why there is none */
  input_begin(L);
  while ((status = read_input(L)) != -1) {
    if (status == LUA_OK) status = host_call(L, 0, LUA_MULTRET);
    if (status == LUA_OK) show(L);
    else host_report(L, status, 0);
  }
  input_end();
  lua_settop(L, 0);
  fputs("\n", stdout);
  fflush(stdout);
}
