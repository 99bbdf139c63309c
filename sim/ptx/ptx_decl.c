/* Declarations: registers, variables of every space with their layout
   (.shared in one block, .global and .const owned by the module), and the
   parameter lists of functions. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_dec.h"

#include <stdlib.h>

/* -- declarations --------------------------------------------------------- */

/* ".reg .b32 %r<20>, %x;" after ".reg" (dir), or after ".reg.b32" (the
   type joined to the directive, as cuda_fp16.h writes it). */
int dec_decl_reg(dec *d, const tok *dir) {
  tok joined = {dir->s + 4, dir->len - 4, dir->line};
  tok *t = dir->len > 4 ? &joined : next(d);
  uint8_t k, b;
  int vec = 1;
  if (t && (is(t, ".v2") || is(t, ".v4"))) {
    vec = t->s[2] - '0';
    t = next(d);
  }
  if (!t || t->s[0] != '.' || !dec_parse_type(t->s + 1, t->len - 1, &k, &b))
    return dec_fail(d, t ? t->line : line_now(d), "bad .reg declaration");
  if (vec != 1)
    return dec_fail(d, t->line, "vector registers are not supported");
  for (;;) {
    tok *n = next(d);
    if (!n) return dec_fail(d, t->line, "bad .reg declaration");
    if (is(n, ";")) return 1;
    if (is(n, ",")) continue;
    if (!PUSH(d, d->regs, d->nregs, d->cregs)) return dec_fail(d, n->line, "out of memory");
    regdecl *r = &d->regs[d->nregs++];
    r->name = n->s;
    r->len = n->len;
    r->count = 0;
    r->pred = k == K_PRED;
    if (is(peek(d), "<")) {
      next(d);
      tok *c = next(d);
      uint64_t v;
      int isf;
      if (!c || !dec_parse_number(c, 0, &v, &isf) || isf || v > 1000000
          || !dec_expect(d, ">"))
        return dec_fail(d, n->line, "bad register range");
      r->count = (int)v;
    }
    int count = r->count ? r->count : 1;
    if (r->pred) {
      r->base = d->m->npreds;
      d->m->npreds += count;
    } else {
      r->base = dec_new_slots(d, count);
    }
  }
}

/* [.align A] .type name [ '[' N ']' ]... after a space word, attributes
   such as .ptr .global passed over: the name, the element's kind and
   bytes, and the declaration's size and alignment. */
static int decl_shape(dec *d, tok **name, uint8_t *kind, size_t *elem,
                      size_t *size, size_t *align) {
  size_t al = 0, count = 1;
  uint8_t k = 0, b = 0;
  *elem = 0;
  tok *t;
  while ((t = next(d))) {
    if (is(t, ".align")) {
      uint64_t v;
      int isf;
      tok *n = next(d);
      if (!n || !dec_parse_number(n, 0, &v, &isf)) break;
      al = v;
    } else if (t->s[0] == '.' && dec_parse_type(t->s + 1, t->len - 1, &k, &b)) {
      *elem = k == K_PRED ? 1 : b / 8;
    } else if (t->s[0] == '.' && (is(t, ".v2") || is(t, ".v4"))) {
      count *= (size_t)(t->s[2] - '0');
    } else if (t->s[0] != '.') {
      break;
    }
  }
  if (!t || !*elem) return dec_fail(d, t ? t->line : line_now(d), "bad variable declaration");
  *name = t;
  *kind = k;
  while (is(peek(d), "[")) {
    next(d);
    tok *n = next(d);
    uint64_t v;
    int isf;
    if (is(n, "]")) { count = 0; continue; } /* extern name[] */
    if (!n || !dec_parse_number(n, 0, &v, &isf) || isf || !dec_expect(d, "]"))
      return dec_fail(d, t->line, "bad array size");
    count *= v;
  }
  *size = *elem * count;
  *align = al ? al : *elem;
  return 1;
}

/* A declaration (decl_shape) with its ';', or its initializer (global,
   const): the bytes into *init. */
int dec_decl_var(dec *d, size_t *size, size_t *align, tok **name,
                 unsigned char **init) {
  uint8_t k;
  size_t elem;
  *init = NULL;
  if (!decl_shape(d, name, &k, &elem, size, align)) return 0;
  tok *t = *name;
  if (is(peek(d), "=")) {
    next(d);
    unsigned char *data = calloc(*size ? *size : 1, 1);
    if (!data) return dec_fail(d, t->line, "out of memory");
    size_t at = 0;
    int brace = is(peek(d), "{");
    if (brace) next(d);
    for (tok *v; (v = next(d)) && !is(v, ";") && !is(v, "}"); ) {
      if (is(v, ",")) continue;
      int neg = is(v, "-");
      if (neg && !(v = next(d))) break;
      uint64_t x;
      int isf;
      if (!dec_parse_number(v, neg, &x, &isf) || at + elem > *size) {
        free(data);
        return dec_fail(d, v->line, "unsupported initializer '%.*s'", v->len,
                        v->s);
      }
      if ((k == K_F && elem == 2) || k == K_BF || k == K_H2 || k == K_BH2
          || (k != K_F && isf && !(k == K_B && isf == 8 * (int)elem))) {
        /* halves, and floats for integers (a bit type takes their bits) */
        free(data);
        return dec_fail(d, v->line, "unsupported initializer '%.*s'", v->len,
                        v->s);
      }
      if (k == K_F) { /* the literal's value in the variable's width */
        double f;
        if (!isf) {
          f = (double)(int64_t)x;
        } else if (isf == 32) {
          uint32_t u = (uint32_t)x;
          float g;
          memcpy(&g, &u, 4);
          f = g;
        } else {
          memcpy(&f, &x, 8);
        }
        if (elem == 4) { float g = (float)f; uint32_t u; memcpy(&u, &g, 4); x = u; }
        else memcpy(&x, &f, 8);
      }
      memcpy(data + at, &x, elem); /* little-endian host */
      at += elem;
    }
    if (brace && is(peek(d), ";")) next(d);
    *init = data;
    return 1;
  }
  return dec_expect(d, ";");
}

int dec_add_sym(dec *d, int local, const tok *name, int space,
                int64_t addr, int size) {
  sym **v = local ? &d->lsyms : &d->gsyms;
  size_t *n = local ? &d->nlsyms : &d->ngsyms;
  size_t *c = local ? &d->clsyms : &d->cgsyms;
  if (!dec_grow((void **)v, c, *n, sizeof **v)) return dec_fail(d, name->line, "out of memory");
  sym *s = &(*v)[(*n)++];
  s->name = name->s;
  s->len = name->len;
  s->space = space;
  s->addr = addr;
  s->size = size;
  return 1;
}

/* Every .shared variable of the text, in one layout after the reserved
   region; extern (dynamic) ones after all static ones. */
int dec_layout_shared(dec *d) {
  size_t at = 0, extern_align = 16;
  for (int pass = 0; pass < 2 && !d->failed; pass++) {
    for (d->i = 0; d->i < d->nt; ) {
      tok *t = next(d);
      if (!is(t, ".shared")) continue;
      int ext = d->i >= 2 && is(&d->t[d->i - 2], ".extern");
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (!dec_decl_var(d, &size, &align, &name, &init)) return 0;
      free(init);
      if (ext != pass) continue;
      if (ext) {
        if (align > extern_align) extern_align = align;
        continue;
      }
      at = align_up(at, align);
      if (!dec_add_sym(d, 0, name, SP_SHARED, SMEM_RESERVED + (int64_t)at,
                       (int)size))
        return 0;
      at += size;
    }
    if (pass == 0) {
      at = align_up(at, extern_align);
      d->m->shared_static = at;
    }
  }
  for (d->i = 0; d->i < d->nt; ) { /* the extern ones: at the end */
    tok *t = next(d);
    if (!is(t, ".shared") || d->i < 2 || !is(&d->t[d->i - 2], ".extern"))
      continue;
    size_t size, align;
    tok *name;
    unsigned char *init;
    if (!dec_decl_var(d, &size, &align, &name, &init)) return 0;
    free(init);
    if (!dec_find_sym(d->gsyms, d->ngsyms, name)
        && !dec_add_sym(d, 0, name, SP_SHARED,
                        SMEM_RESERVED + (int64_t)d->m->shared_static, 0))
      return 0;
  }
  return !d->failed;
}

/* A .global or .const variable: host memory the module owns. */
int dec_decl_global(dec *d) {
  size_t size, align;
  tok *name;
  unsigned char *init;
  if (!dec_decl_var(d, &size, &align, &name, &init)) return 0;
  sim_module *m = d->m;
  var *v = realloc(m->vars, (m->nvars + 1) * sizeof *v);
  if (!v) { free(init); return dec_fail(d, name->line, "out of memory"); }
  m->vars = v;
  var *x = &v[m->nvars];
  x->data = init ? init : calloc(size ? size : 1, 1);
  x->name = malloc((size_t)name->len + 1);
  if (!x->data || !x->name) {
    free(x->data);
    free(x->name);
    return dec_fail(d, name->line, "out of memory");
  }
  memcpy(x->name, name->s, (size_t)name->len);
  x->name[name->len] = '\0';
  x->size = size;
  m->nvars++;
  return dec_add_sym(d, 0, name, SP_GLOBAL, (int64_t)(uintptr_t)x->data,
                     (int)size);
}

/* "( .param .u64 a, .param .align 8 .b8 b[16] )": each parameter's size and
   alignment, its name a symbol of the function being decoded. */
int dec_param_list(dec *d, func *f, int out, size_t **psize,
                   size_t **palign, int *pn) {
  *pn = 0;
  *psize = *palign = NULL;
  if (!is(peek(d), "(")) return 1;
  next(d);
  size_t cap = 0;
  while (!is(peek(d), ")")) {
    tok *t = next(d);
    if (!t) return dec_fail(d, line_now(d), "unterminated parameter list");
    if (is(t, ",")) continue;
    if (!is(t, ".param") && !is(t, ".reg"))
      return dec_fail(d, t->line, "unsupported parameter '%.*s'", t->len, t->s);
    tok *name;
    uint8_t k;
    size_t elem, size, al;
    if (!decl_shape(d, &name, &k, &elem, &size, &al)) return 0;
    if (!dec_grow((void **)psize, &cap, (size_t)*pn, sizeof **psize)) return 0;
    size_t *a = realloc(*palign, cap * sizeof *a);
    if (!a) return dec_fail(d, name->line, "out of memory");
    *palign = a;
    (*psize)[*pn] = size;
    (*palign)[*pn] = al;
    if (!dec_add_sym(d, 1, name, f->entry ? SP_PARAM : SP_FPARAM, *pn,
                     (int)size))
      return 0;
    d->lsyms[d->nlsyms - 1].addr = -1 - *pn; /* placed below */
    d->lsyms[d->nlsyms - 1].size = out; /* marks which list, for placing */
    (*pn)++;
  }
  next(d);
  return 1;
}
