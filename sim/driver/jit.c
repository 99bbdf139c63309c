/* What the driver's JIT checks of PTX text before anything runs it: a
   .target, bodies whose statements are instructions of the PTX ISA, and
   well-formed .entry parameter lists, with its reasons in its words. */
#include "double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int blank(int ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f'
         || ch == '\v';
}

static int ident(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
         || (ch >= '0' && ch <= '9') || ch == '_' || ch == '$' || ch == '%';
}

/* Bytes of a PTX type (".u32"), or 0. */
static size_t ptx_type_size(const char *t, size_t len) {
  static const struct { const char *name; size_t size; } types[] = {
    {".b8", 1}, {".s8", 1}, {".u8", 1}, {".b16", 2}, {".s16", 2},
    {".u16", 2}, {".f16", 2}, {".bf16", 2}, {".b32", 4}, {".s32", 4},
    {".u32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
    {".s64", 8}, {".u64", 8}, {".f64", 8},
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (strlen(types[i].name) == len && !memcmp(types[i].name, t, len))
      return types[i].size;
  return 0;
}

/* Size and alignment of one ".param" declaration in [s, e): ".param .align
   A .b8 name[N]" or ".param .u64 [.ptr .global .align A] name"; an .align
   after the type is the pointee's. Zero when it is not one. */
static int ptx_param(const char *s, const char *e, size_t *size,
                     size_t *align) {
  size_t elem = 0, al = 0, count = 1;
  while (s < e) {
    while (s < e && blank(*s)) s++;
    const char *t = s;
    while (s < e && !blank(*s)) s++;
    size_t len = (size_t)(s - t);
    if (!len) break;
    const char *bracket = memchr(t, '[', len);
    if (len == 6 && !memcmp(t, ".align", 6)) {
      while (s < e && blank(*s)) s++;
      size_t a = strtoul(s, NULL, 10);
      if (!elem) al = a;
      while (s < e && !blank(*s)) s++;
    } else if (!elem && ptx_type_size(t, len)) {
      elem = ptx_type_size(t, len);
    } else if (bracket) {
      count = strtoul(bracket + 1, NULL, 10);
    }
  }
  if (!elem || !count || (al & (al - 1))) return 0;
  *size = elem * count;
  *align = al ? al : elem;
  return 1;
}

/* Base names (up to the first '.') of the instructions of the PTX ISA. */
static const char *const opcodes[] = {
  "abs", "activemask", "add", "addc", "alloca", "and", "applypriority",
  "atom", "bar", "barrier", "bfe", "bfi", "bfind", "bmsk", "bra", "brev",
  "brkpt", "brx", "call", "clusterlaunchcontrol", "clz", "cnot", "copysign",
  "cos", "cp", "createpolicy", "cvt", "cvta", "discard", "div", "dp2a",
  "dp4a", "elect", "ex2", "exit", "fence", "fma", "fns", "getctarank",
  "griddepcontrol", "isspacep", "istypeof", "ld", "ldmatrix", "ldu", "lg2",
  "lop3", "mad", "mad24", "madc", "mapa", "match", "max", "mbarrier",
  "membar", "min", "mma", "mov", "movmatrix", "mul", "mul24", "multimem",
  "nanosleep", "neg", "not", "or", "pmevent", "popc", "prefetch",
  "prefetchu", "prmt", "rcp", "red", "redux", "rem", "ret", "rsqrt", "sad",
  "selp", "set", "setmaxnreg", "setp", "shf", "shfl", "shl", "shr", "sin",
  "slct", "sqrt", "st", "stackrestore", "stacksave", "stmatrix", "sub",
  "subc", "suld", "suq", "sured", "sust", "szext", "tanh", "tcgen05",
  "tensormap", "testp", "tex", "tld4", "trap", "txq", "vabsdiff",
  "vabsdiff2", "vabsdiff4", "vadd", "vadd2", "vadd4", "vavrg2", "vavrg4",
  "vmad", "vmax", "vmax2", "vmax4", "vmin", "vmin2", "vmin4", "vote",
  "vset", "vset2", "vset4", "vshl", "vshr", "vsub", "vsub2", "vsub4",
  "wgmma", "wmma", "xor",
};

static const char *skip_blanks(const char *p, const char *end) {
  while (p < end && blank(*p)) p++;
  return p;
}

/* What follows the labels ("$L__BB0_2:") at the start of [p, end). */
static const char *skip_labels(const char *p, const char *end) {
  for (;;) {
    p = skip_blanks(p, end);
    const char *q = p;
    while (q < end && ident(*q)) q++;
    const char *colon = skip_blanks(q, end);
    if (q == p || colon == end || *colon != ':') return p;
    p = colon + 1;
  }
}

/* Whether a statement of a function body in [p, end) is empty, a directive
   (.reg, .loc, ...) or a known instruction, after labels and a predicate. */
static int known_statement(const char *p, const char *end) {
  p = skip_labels(p, end);
  if (p < end && *p == '@') /* guard predicate */
    while (p < end && !blank(*p)) p++;
  p = skip_blanks(p, end);
  if (p == end || *p == '.') return 1;
  const char *word = p;
  while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
                     || *p == '_'))
    p++;
  if (p < end && *p != '.' && !blank(*p)) return 0;
  for (size_t i = 0; i < sizeof opcodes / sizeof *opcodes; i++)
    if (strlen(opcodes[i]) == (size_t)(p - word)
        && !memcmp(opcodes[i], word, (size_t)(p - word)))
      return 1;
  return 0;
}

/* Whether the word w (".entry") occurs in [p, end) between blanks. */
static int has_word(const char *p, const char *end, const char *w) {
  size_t n = strlen(w);
  for (; (size_t)(end - p) >= n; p++)
    if (!memcmp(p, w, n) && (p + n == end || blank(p[n]) || p[n] == '('))
      return 1;
  return 0;
}

/* Copies PTX text with its comments and strings blanked out, line breaks
   kept, so that braces and semicolons in them do not count. */
static char *uncomment(const char *text) {
  size_t n = strlen(text);
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, text, n + 1);
  for (char *p = s; *p; ) {
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') *p++ = ' ';
    } else if (p[0] == '/' && p[1] == '*') {
      *p++ = ' ', *p++ = ' ';
      while (*p && !(p[0] == '*' && p[1] == '/')) {
        if (*p != '\n') *p = ' ';
        p++;
      }
      if (*p) *p++ = ' ', *p++ = ' ';
    } else if (*p == '"') {
      do *p++ = ' '; while (*p && *p != '"' && *p != '\n');
      if (*p == '"') *p++ = ' ';
    } else {
      p++;
    }
  }
  return s;
}

static int line_of(const char *text, const char *p) {
  int line = 1;
  for (; text < p; text++) line += *text == '\n';
  return line;
}

/* Checks that every statement of every .entry and .func body is a known
   instruction, as the JIT would; the reason goes into msg. */
static int check_bodies(const char *s, char *msg, size_t nmsg) {
  const char *header = s, *stmt = s;
  int depth = 0, body = 0;
  for (const char *p = s; *p; p++) {
    if (!depth) {
      if (*p == ';' || *p == '}') header = p + 1;
      if (*p != '{') continue;
      body = !memchr(header, '=', (size_t)(p - header))
             && (has_word(header, p, ".entry") || has_word(header, p, ".func"));
      depth = 1;
      stmt = p + 1;
      continue;
    }
    if (*p == '{' && skip_labels(stmt, p) != p) { /* a vector operand */
      while (p[1] && p[1] != '}') p++;
      if (p[1]) p++; /* at its '}' */
      continue;
    }
    if (*p != '{' && *p != '}' && *p != ';') continue;
    if (body && !known_statement(stmt, p)) {
      const char *word = skip_labels(stmt, p);
      if (word < p && *word == '@')
        while (word < p && !blank(*word)) word++;
      word = skip_blanks(word, p);
      int len = 0;
      while (word + len < p && ident(word[len]) && len < 40) len++;
      snprintf(msg, nmsg, "ptxas application ptx input, line %d; error   : "
               "Not a name of any known instruction: '%.*s'",
               line_of(s, word), len, word);
      return 0;
    }
    depth += (*p == '{') - (*p == '}');
    stmt = p + 1;
    if (!depth) header = p + 1;
  }
  return 1;
}

static char reason[200]; /* why the last PTX failed to load */

/* Adds the .entry functions of comment-free PTX text to m. */
static CUresult collect_entries(CUmodule m, const char *text,
                                const char **why) {
  for (const char *p = text; (p = strstr(p, ".entry")); ) {
    p += 6;
    if ((p - 6 > text && !blank(p[-7])) || !blank(*p)) continue;
    while (blank(*p)) p++;
    const char *name = p;
    while (ident(*p)) p++;
    int len = (int)(p - name);
    const char *syntax = "ptxas application ptx input, line %d; fatal   : "
                         "Parsing error: %s of .entry '%.*s'";
    if (!len) {
      snprintf(reason, sizeof reason, syntax, line_of(text, name), "no name",
               0, "");
      return CUDA_ERROR_INVALID_PTX;
    }
    while (blank(*p)) p++;
    size_t n = 0, cap = 0, *pair = NULL;
    if (*p == '(') {
      const char *close = p + 1;
      for (int depth = 1; depth; close++) {
        if (!*close) {
          snprintf(reason, sizeof reason, syntax, line_of(text, name),
                   "unbalanced parameter list", len, name);
          return CUDA_ERROR_INVALID_PTX;
        }
        depth += (*close == '(') - (*close == ')');
      }
      close--; /* at the matching ')' */
      for (const char *q = p + 1; q < close; n++) {
        const char *comma = memchr(q, ',', (size_t)(close - q));
        const char *end = comma ? comma : close;
        if (n == cap) {
          cap = cap ? 2 * cap : 8;
          size_t *v = realloc(pair, 2 * cap * sizeof *v);
          if (!v) {
            free(pair);
            return *why = "out of memory", CUDA_ERROR_OUT_OF_MEMORY;
          }
          pair = v;
        }
        if (!ptx_param(q, end, &pair[2 * n], &pair[2 * n + 1])) {
          const char *s = q;
          while (s < end && blank(*s)) s++;
          if (s == end && !comma && !n) break; /* "( )" */
          free(pair);
          snprintf(reason, sizeof reason, syntax, line_of(text, q),
                   "malformed .param", len, name);
          return CUDA_ERROR_INVALID_PTX;
        }
        q = comma ? comma + 1 : close;
      }
      p = close + 1;
    }
    CUfunction f = dbl_add_function(m, name, (size_t)len, 1, n, pair);
    free(pair);
    if (!f) return *why = "out of memory", CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

/* Loads NUL-terminated PTX text into m. Returns CUDA_ERROR_INVALID_PTX with
   the JIT's kind of reason in *why where the JIT would fail. */
CUresult dbl_load_ptx(CUmodule m, const char *text, const char **why) {
  *why = reason;
  if (!strstr(text, ".target")) {
    snprintf(reason, sizeof reason, "ptxas fatal   : Missing .target "
             "directive at start of file 'application ptx input'");
    return CUDA_ERROR_INVALID_PTX;
  }
  char *plain = uncomment(text);
  if (!plain) return *why = "out of memory", CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = check_bodies(plain, reason, sizeof reason)
                 ? collect_entries(m, plain, why)
                 : CUDA_ERROR_INVALID_PTX;
  free(plain);
#ifdef CUDA_SIM
  if (!r && !(m->sim = sim_load(text, reason, sizeof reason)))
    r = strcmp(reason, "out of memory") ? CUDA_ERROR_INVALID_PTX
                                        : CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; !r && i < m->nfuncs; i++)
    m->funcs[i]->sim = sim_kernel_find(m->sim, m->funcs[i]->name);
  const char *name;
  void *data;
  size_t size;
  for (size_t i = 0; !r && sim_global(m->sim, i, &name, &data, &size); i++)
    if (size) r = dbl_add_module_memory(data, size);
#endif
  return r;
}

/* Text as a PTX file holds it: printable bytes and blanks up to a NUL. */
int dbl_is_text(const unsigned char *p) {
  if (!*p) return 0;
  for (; *p; p++)
    if ((*p < 0x20 && !blank(*p)) || *p == 0x7f) return 0;
  return 1;
}

#ifdef CUDA_SIM
/* Loads the PTX of m's fatbin image p (m->nimage bytes); a cubin has none. */
CUresult dbl_load_image_ptx(CUmodule m, const unsigned char *p,
                            const char **why) {
  char *ptx = p[0] == 0x7f ? NULL : sim_fatbin_ptx(p, m->nimage, reason,
                                                   sizeof reason);
  if (p[0] == 0x7f)
    snprintf(reason, sizeof reason, "no PTX in this image; the simulator "
             "runs PTX");
  *why = reason;
  CUresult r = ptx ? dbl_load_ptx(m, ptx, why) : CUDA_ERROR_NO_BINARY_FOR_GPU;
  free(ptx);
  return r;
}
#endif
