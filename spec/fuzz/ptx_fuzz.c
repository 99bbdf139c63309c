/* libFuzzer harness for src/kernel/ptx.c, pdl.c, pdl_read.c, demangle.c
   and base/ctype.c: the bytes go to ptx_parse, ptx_pdl_scan and ptx_globals as
   they are (not NUL-terminated), and as a C string (whole, then line by
   line) to cg_signature and ptx_demangle, with full-size and tiny
   outputs. Any result must keep the documented invariants; a broken one
   aborts.

   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
     spec/fuzz/ptx_fuzz.c src/kernel/ptx.c src/kernel/pdl.c \
     src/kernel/pdl_read.c src/kernel/demangle.c src/base/ctype.c \
     -o /tmp/ptx_fuzz
   mkdir -p /tmp/corpus_work
   /tmp/ptx_fuzz -max_total_time=60 /tmp/corpus_work spec/fuzz/corpus */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/ptx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_param(const cg_param *p) {
  if (p->type > CG_P_ANY || p->size == 0 || p->align == 0) abort();
  if (p->type == CG_P_PTR && (p->elem > CG_P_ANY || p->elem == CG_P_INT ||
                              p->elem == CG_P_PTR_OR_INT ||
                              p->elem == CG_P_PTR || p->elem == CG_P_BYTES ||
                              p->size != 8))
    abort();
}

static void check_err(const char *err, size_t errlen) {
  if (memchr(err, '\0', errlen) == NULL || err[0] == '\0') abort();
}

static void run_parse(const uint8_t *data, size_t size) {
  char err[256];
  int n = -1, i, k;
  ptx_entry *e = ptx_parse((const char *)data, size, &n, err, sizeof err);
  if (!e) {
    check_err(err, sizeof err);
    return;
  }
  if (n < 0) abort();
  ptx_pdl_scan((const char *)data, size, e, n);
  for (i = 0; i < n; i++) {
    const ptx_pdl *p = &e[i].pdl;
    if (!memchr(p->consumer_why, '\0', sizeof p->consumer_why) ||
        !memchr(p->producer_why, '\0', sizeof p->producer_why) ||
        p->read > 1 || p->consumer > 1 || p->producer > 1 ||
        (!p->read && (p->consumer || p->producer)) ||
        !p->consumer != (p->consumer_why[0] != '\0') ||
        !p->producer != (p->producer_why[0] != '\0'))
      abort();
  }
  for (i = 0; i < n; i++) {
    if (!memchr(e[i].name, '\0', sizeof e[i].name) ||
        !memchr(e[i].base, '\0', sizeof e[i].base) || e[i].nparams < 0 ||
        e[i].nparams > CG_MAX_PARAMS || (e[i].typed != 0 && e[i].typed != 1))
      abort();
    for (k = 0; k < e[i].nparams; k++) check_param(&e[i].params[k]);
  }
  free(e);
  ptx_global *g = ptx_globals((const char *)data, size, &n, err, sizeof err);
  if (!g) {
    check_err(err, sizeof err);
    return;
  }
  for (i = 0; i < n; i++)
    if (!memchr(g[i].name, '\0', sizeof g[i].name) || !g[i].name[0] ||
        g[i].type < -1 || g[i].type >= CG_NTYPES)
      abort();
  free(g);
}

static void run_string(const char *s) {
  cg_param p[CG_MAX_PARAMS], two[2];
  char err[256], tiny[4], base[128];
  int k, i;
  k = cg_signature(s, p, CG_MAX_PARAMS, err, sizeof err);
  if (k < 0) check_err(err, sizeof err);
  if (k > CG_MAX_PARAMS) abort();
  for (i = 0; i < k; i++) check_param(&p[i]);
  k = cg_signature(s, two, 2, tiny, sizeof tiny);
  if (k > 2 || (k < 0 && memchr(tiny, '\0', sizeof tiny) == NULL)) abort();
  k = ptx_demangle(s, base, sizeof base, p, CG_MAX_PARAMS);
  if (k > CG_MAX_PARAMS || (k >= 0 && !memchr(base, '\0', sizeof base)))
    abort();
  for (i = 0; i < k; i++) check_param(&p[i]);
  k = ptx_demangle(s, tiny, sizeof tiny, two, 2);
  if (k > 2) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s, *line, *nl;
  run_parse(data, size);
  if (!(s = malloc(size + 1))) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  run_string(s);
  /* then each line alone, so a seed can list names or signatures */
  for (line = s; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
    *nl = '\0';
    run_string(line);
  }
  if (line != s) run_string(line);
  free(s);
  return 0;
}
