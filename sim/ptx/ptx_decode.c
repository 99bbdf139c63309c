/* PTX text to the simulator's decoded form (ptx_int.h), once per module:
   its directives, functions and bodies, and the calls between them (the
   steps each body takes: ptx_dec.h). What the interpreter does not run is
   refused, naming the instruction and its line: a module that loads runs
   as PTX says it should. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_dec.h"

#include <stdio.h>
#include <stdlib.h>

static void skip_statement(dec *d) {
  for (tok *t; (t = next(d)) && !is(t, ";"); ) {}
}

static void skip_line(dec *d, int line) {
  while (d->i < d->nt && d->t[d->i].line == line) d->i++;
}

/* A number token of t's line, or -1. */
static long line_number(dec *d, const tok *t) {
  tok *n = peek(d);
  uint64_t v;
  int isf;
  if (!n || n->line != t->line || !dec_parse_number(n, 0, &v, &isf) || isf ||
      v > 0x7fffffff)
    return -1;
  next(d);
  return (long)v;
}

int dec_loc(dec *d, const tok *t) {
  long idx = line_number(d, t);
  if (is(t, ".loc")) {
    long line = line_number(d, t);
    if (idx >= 0 && line >= 0) {
      d->at = (loc){(int32_t)idx, (int32_t)line};
      d->has_loc = 1;
    }
  } else if (idx >= 0 && idx < 65536 && peek(d) && peek(d)->line == t->line &&
             peek(d)->s[0] == '"' && peek(d)->len >= 2) {
    tok *name = next(d);
    sim_module *m = d->m;
    if ((size_t)idx >= m->nfiles) {
      char **v = realloc(m->files, ((size_t)idx + 1) * sizeof *v);
      if (!v) return dec_fail(d, t->line, "out of memory");
      memset(v + m->nfiles, 0, ((size_t)idx + 1 - m->nfiles) * sizeof *v);
      m->files = v;
      m->nfiles = (size_t)idx + 1;
    }
    free(m->files[idx]);
    if (!(m->files[idx] = malloc((size_t)name->len - 1)))
      return dec_fail(d, t->line, "out of memory");
    memcpy(m->files[idx], name->s + 1, (size_t)name->len - 2);
    m->files[idx][name->len - 2] = '\0';
  }
  skip_line(d, t->line);
  return 1;
}

/* Places a function's parameters (formals and call-site .param
   declarations) in the module's parameter frame. */
static int64_t place_fparam(dec *d, size_t size, size_t align) {
  size_t at = align_up(d->m->pframe, align ? align : 1);
  d->m->pframe = at + size;
  return (int64_t)at;
}

/* The body of f, from after '{' to its matching '}'. Registers declared
   in a nested block are its own: at its '}' the names mean the outer
   ones again (cuda's math library reuses %r0.. in inline blocks). */
static int body(dec *d, func *f) {
  f->start = (int)d->m->ncode;
  enum { MAX_DEPTH = 64 };
  size_t scope[MAX_DEPTH]; /* the register declarations at each '{' */
  int depth = 1;
  scope[0] = d->nregs;
  while (depth > 0 && !d->failed) {
    tok *t = next(d);
    if (!t)
      return dec_fail(d, line_now(d), "unterminated body of '%s'", f->name);
    if (is(t, "{")) {
      if (depth == MAX_DEPTH)
        return dec_fail(d, t->line, "blocks nested too deep");
      scope[depth++] = d->nregs;
      continue;
    }
    if (is(t, "}")) { d->nregs = scope[--depth]; continue; }
    if (is(t, ";")) continue;
    if (is(t, ".reg") || (t->len > 5 && !memcmp(t->s, ".reg.", 5))) {
      if (!dec_decl_reg(d, t)) return 0;
      continue;
    }
    if (is(t, ".loc") || is(t, ".file")) {
      if (!dec_loc(d, t)) return 0;
      continue;
    }
    if (is(t, ".pragma")) { skip_statement(d); continue; }
    if (is(t, ".shared")) { /* laid out already; measured for the
                               function's %total_smem_size */
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (!dec_decl_var(d, &size, &align, &name, &init)) return 0;
      free(init);
      f->smem = align_up(f->smem, align) + size;
      if (!f->entry) d->outer_shared = 1;
      continue;
    }
    if (is(t, ".local") || is(t, ".param")) {
      int local = is(t, ".local");
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (!dec_decl_var(d, &size, &align, &name, &init)) return 0;
      free(init);
      int64_t at;
      if (local) {
        at = (int64_t)align_up(d->m->local_size, align);
        d->m->local_size = (size_t)at + size;
      } else {
        sym *old = dec_find_sym(d->lsyms, d->nlsyms, name);
        if (old && old->space == SP_FPARAM && (size_t)old->size >= size)
          continue; /* the same name in another call sequence */
        at = place_fparam(d, size, align);
      }
      if (!dec_add_sym(d, 1, name, local ? SP_LOCAL : SP_FPARAM, at, (int)size))
        return 0;
      continue;
    }
    if (t->s[0] == '.')
      return dec_fail(d, t->line, "unsupported directive '%.*s'", t->len, t->s);
    if (is(peek(d), ":")) { /* a label */
      next(d);
      if (!PUSH(d, d->labels, d->nlabels, d->clabels)) return dec_fail(d, t->line, "out of memory");
      d->labels[d->nlabels++] = (label){t->s, t->len, (int)d->m->ncode};
      continue;
    }
    int guard = -1, gneg = 0;
    if (is(t, "@")) {
      tok *p = next(d);
      if (is(p, "!")) { gneg = 1; p = next(d); }
      int pred = 0;
      if (!p || (guard = dec_find_reg(d, p, &pred)) < 0 || !pred)
        return dec_fail(d, t->line, "bad guard predicate");
      if (!(t = next(d))) return dec_fail(d, line_now(d), "unexpected end");
    }
    const char *dot = memchr(t->s, '.', (size_t)t->len);
    int baselen = dot ? (int)(dot - t->s) : t->len;
    if (modw(t->s, baselen, "call")) {
      if (!dec_call(d, t, guard, gneg)) return 0;
    } else if (!dec_instruction(d, t, guard, gneg)) {
      return 0;
    }
  }
  f->end = (int)d->m->ncode;
  /* a body falls off its end into a ret */
  ins *in;
  if (!dec_add_ins(d, &in)) return 0;
  in->op = OP_RET;
  in->line = line_now(d);
  f->end = (int)d->m->ncode;
  for (size_t i = 0; i < d->nfix; i++) {
    fixup *x = &d->fix[i];
    size_t j = 0;
    while (j < d->nlabels && !(d->labels[j].len == x->len
                               && !memcmp(d->labels[j].name, x->name, (size_t)x->len)))
      j++;
    if (j == d->nlabels)
      return dec_fail(d, x->line, "unknown label '%.*s'", x->len, x->name);
    d->m->code[x->pc].target = d->labels[j].pc;
  }
  for (int i = f->start; i < f->end; i++)
    if (d->m->code[i].op == OP_BAR) f->has_bar = 1;
  return 1;
}

static int function(dec *d, int entry, int ext) {
  func *f = calloc(1, sizeof *f);
  if (!f) return dec_fail(d, line_now(d), "out of memory");
  sim_module *m = d->m;
  func **v = realloc(m->funcs, (m->nfuncs + 1) * sizeof *v);
  if (!v) { free(f); return dec_fail(d, line_now(d), "out of memory"); }
  m->funcs = v;
  f->m = m;
  f->entry = entry;
  f->start = f->end = -1;
  d->nlsyms = d->nregs = d->nlabels = d->nfix = 0;
  d->fn = f;
  d->at = (loc){0, 0};
  size_t *osize = NULL, *oalign = NULL, *isize = NULL, *ialign = NULL;
  int nout = 0, nin = 0;
  if (!entry && !dec_param_list(d, f, 1, &osize, &oalign, &nout)) goto bad;
  tok *name = next(d);
  if (!name || name->s[0] == '(' || name->s[0] == '.') {
    dec_fail(d, line_now(d), "a function without a name");
    goto bad;
  }
  if (!(f->name = malloc((size_t)name->len + 1))) goto bad;
  memcpy(f->name, name->s, (size_t)name->len);
  f->name[name->len] = '\0';
  m->funcs[m->nfuncs++] = f;
  if (!dec_param_list(d, f, 0, &isize, &ialign, &nin)) goto fail_late;
  f->nin = nin;
  f->nout = nout;
  f->in = calloc((size_t)nin + 1, sizeof *f->in);
  f->out = calloc((size_t)nout + 1, sizeof *f->out);
  if (!f->in || !f->out) goto fail_late;
  if (entry) {
    f->koff = calloc((size_t)nin + 1, sizeof *f->koff);
    f->ksize = calloc((size_t)nin + 1, sizeof *f->ksize);
    if (!f->koff || !f->ksize) goto fail_late;
    size_t at = 0;
    for (int i = 0; i < nin; i++) {
      at = align_up(at, ialign[i]);
      f->koff[i] = at;
      f->ksize[i] = isize[i];
      at += isize[i];
    }
    f->argbytes = at;
  }
  for (size_t i = 0; i < d->nlsyms; i++) { /* place the parameters */
    sym *s = &d->lsyms[i];
    int idx = (int)(-1 - s->addr), out = s->size;
    size_t size = out ? osize[idx] : isize[idx];
    size_t align = out ? oalign[idx] : ialign[idx];
    if (entry) {
      s->addr = (int64_t)f->koff[idx];
    } else {
      s->addr = place_fparam(d, size, align);
      fparam *p = out ? &f->out[idx] : &f->in[idx];
      p->off = (int32_t)s->addr;
      p->size = (int32_t)size;
    }
    s->size = (int)size;
  }
  free(osize), free(oalign), free(isize), free(ialign);
  osize = oalign = isize = ialign = NULL;
  /* performance directives, then a body or a ';' */
  for (tok *t; (t = peek(d)) && !is(t, "{") && !is(t, ";"); next(d)) {}
  if (is(peek(d), ";")) {
    next(d);
    return 1;
  }
  if (ext) return dec_fail(d, line_now(d), "an .extern function with a body");
  next(d);
  return body(d, f);
fail_late:
  free(osize), free(oalign), free(isize), free(ialign);
  return dec_fail(d, line_now(d), "out of memory");
bad:
  free(osize), free(oalign), free(isize), free(ialign);
  free(f->name);
  free(f);
  return 0;
}

static void free_func(func *f) {
  free(f->name);
  free(f->in);
  free(f->out);
  free(f->koff);
  free(f->ksize);
  free(f);
}

void sim_unload(sim_module *m) {
  if (!m) return;
  for (size_t i = 0; i < m->nfuncs; i++) free_func(m->funcs[i]);
  free(m->funcs);
  for (size_t i = 0; i < m->nvars; i++) {
    free(m->vars[i].name);
    free(m->vars[i].data);
  }
  free(m->vars);
  for (size_t i = 0; i < m->nfiles; i++) free(m->files[i]);
  free(m->files);
  free(m->locs);
  free(m->code);
  free(m->consts);
  free(m);
}

/* Calls of a function declared before its body go to the body. */
static int link_calls(dec *d) {
  sim_module *m = d->m;
  for (size_t pc = 0; pc < m->ncode; pc++) {
    ins *in = &m->code[pc];
    if (in->op != OP_CALL || m->funcs[in->fn]->start >= 0) continue;
    const char *name = m->funcs[in->fn]->name;
    size_t i = 0;
    while (i < m->nfuncs
           && (m->funcs[i]->start < 0 || strcmp(m->funcs[i]->name, name)))
      i++;
    if (i == m->nfuncs)
      return dec_fail(d, in->line, "call of '%s', which has no body", name);
    in->fn = (int32_t)i;
  }
  return 1;
}

/* %total_smem_size and %aggr_smem_size count the static shared memory of
   the kernel reading them: the .shared variables of its body, when the
   module has no others (a GPU counts those of other functions only if the
   kernel uses them). */
static int check_smem_sizes(dec *d) {
  for (size_t i = 0; i < d->m->nfuncs; i++) {
    func *f = d->m->funcs[i];
    for (int pc = f->start; f->start >= 0 && pc < f->end; pc++) {
      ins *in = &d->m->code[pc];
      if (in->op == OP_SREG && (in->d[0] == S_TOTAL_SMEM
                                || in->d[0] == S_AGGR_SMEM)
          && (!f->entry || d->outer_shared))
        return dec_fail(d, in->line, "unsupported: the shared memory size "
                        "of a kernel where .shared variables are declared "
                        "outside kernels' bodies");
    }
  }
  return 1;
}

/* Whether f reaches itself through calls (the simulator gives every
   function one frame), and propagates bar.sync to callers. Past the
   deepest nesting a launch runs the chain is not followed (its host stack
   stays bounded): the launch ends there first. */
static int check_calls(dec *d, int fi, unsigned char *state, int depth) {
  func *f = d->m->funcs[fi];
  if (state[fi] == 2 || depth > SIM_MAX_CALLS) return 1;
  if (state[fi] == 1)
    return dec_fail(d, 0, "recursive call of '%s' is not supported", f->name);
  state[fi] = 1;
  for (int i = f->start; f->start >= 0 && i < f->end; i++) {
    ins *in = &d->m->code[i];
    if (in->op != OP_CALL) continue;
    if (!check_calls(d, in->fn, state, depth + 1)) return 0;
    func *g = d->m->funcs[in->fn];
    if (g->has_bar)
      return dec_fail(d, in->line,
                      "bar.sync in a called function ('%s') is not "
                      "supported", g->name);
    in->target = g->start;
  }
  state[fi] = 2;
  return 1;
}

sim_module *sim_load(const char *ptx, char *err, size_t nerr) {
  dec d;
  memset(&d, 0, sizeof d);
  d.err = err;
  d.nerr = nerr;
  snprintf(err, nerr, "out of memory");
  sim_module *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  d.m = m;
  m->nslots = NSPECIAL;
  if (!dec_lex(&d, ptx)) goto out;
  if (!dec_layout_shared(&d)) goto out;
  for (d.i = 0; d.i < d.nt && !d.failed; ) {
    tok *t = next(&d);
    if (is(t, ".version") || is(t, ".target") || is(t, ".address_size")) {
      skip_line(&d, t->line);
      continue;
    }
    if (is(t, ";") || is(t, ".visible") || is(t, ".weak") || is(t, ".common"))
      continue;
    int ext = 0;
    if (is(t, ".extern")) {
      ext = 1;
      if (!(t = next(&d))) break;
    }
    if (is(t, ".entry") || is(t, ".func")) {
      d.nlsyms = 0;
      function(&d, is(t, ".entry"), ext);
    } else if (is(t, ".global") || is(t, ".const")) {
      dec_decl_global(&d);
    } else if (is(t, ".shared")) {
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (!ext) d.outer_shared = 1;
      if (dec_decl_var(&d, &size, &align, &name, &init)) free(init);
    } else if (is(t, ".file") || is(t, ".loc")) {
      dec_loc(&d, t);
    } else if (is(t, ".section")) {
      while (d.i < d.nt && !is(&d.t[d.i], "}")) d.i++;
      d.i++;
    } else {
      dec_fail(&d, t->line, "unsupported directive '%.*s'", t->len, t->s);
    }
  }
  if (!d.failed) link_calls(&d);
  if (!d.failed) {
    unsigned char *state = calloc(m->nfuncs + 1, 1);
    if (!state) {
      dec_fail(&d, 0, "out of memory");
    } else {
      for (size_t i = 0; i < m->nfuncs && !d.failed; i++)
        check_calls(&d, (int)i, state, 0);
      free(state);
    }
  }
  if (!d.failed) check_smem_sizes(&d);
  if (!d.failed && m->nslots > (1 << 20)) dec_fail(&d, 0, "too many registers");
  if (!d.failed) { /* the immediates' slots follow the registers' */
    m->const_base = m->nslots;
    m->nslots += m->nconst;
    for (size_t i = 0; i < m->ncode; i++) {
      ins *in = &m->code[i];
      int32_t *f[] = {&in->a, &in->b, &in->c, &in->e, &in->base, &in->d[0],
                      &in->d[1], &in->d[2], &in->d[3]};
      for (size_t j = 0; j < sizeof f / sizeof *f; j++)
        if (*f[j] >= CONST_MARK) *f[j] = *f[j] - CONST_MARK + m->const_base;
    }
    if (!dec_fast_forms(m)) dec_fail(&d, 0, "out of memory");
  }
  if (!d.has_loc) { /* no source lines: none kept */
    free(m->locs);
    m->locs = NULL;
  }
out:
  if (!d.failed && !d.t) d.failed = 0;
  free(d.t), free(d.gsyms), free(d.regs), free(d.lsyms), free(d.labels),
    free(d.fix);
  if (d.failed || !m->code) {
    if (!d.failed && !m->code && m->nfuncs) goto ok; /* only declarations */
    if (d.failed) {
      sim_unload(m);
      return NULL;
    }
  }
ok:
  if (m->pframe == 0) m->pframe = 8;
  if (m->local_size == 0) m->local_size = 8;
  return m;
}

const sim_kernel *sim_kernel_find(const sim_module *m, const char *name) {
  for (size_t i = 0; i < m->nfuncs; i++)
    if (m->funcs[i]->entry && !strcmp(m->funcs[i]->name, name))
      return m->funcs[i];
  return NULL;
}

size_t sim_static_shared(const sim_kernel *k) { return k->m->shared_static; }

int sim_global(const sim_module *m, size_t i, const char **name, void **data,
               size_t *size) {
  if (!m || i >= m->nvars) return 0;
  *name = m->vars[i].name;
  *data = m->vars[i].data;
  *size = m->vars[i].size;
  return 1;
}
