/* The decoder's state and what its files share: tokens, the names in
   scope of the function being decoded, operands. The decoder reads PTX
   text into the simulator's decoded form (ptx_int.h): ptx_lex.c splits and
   reads words, ptx_operand.c resolves names and operands, ptx_decl.c reads
   declarations, ptx_ins.c instructions, ptx_forms.c decides which of
   their forms the interpreter runs, ptx_decode.c reads functions and the
   module. */
#ifndef PTX_DEC_H
#define PTX_DEC_H

#include "ptx_int.h"

#include <string.h>

/* The decoder's shared functions stay inside the library. */
#pragma GCC visibility push(hidden)

typedef struct tok { const char *s; int len, line; } tok;

/* Register declarations: "%r<20>" is a range of 20, "%SP" one register. */
typedef struct regdecl {
  const char *name;
  int len, count, base, pred; /* count 0: the exact name */
} regdecl;

typedef struct sym {          /* a named address in some space */
  const char *name;
  int len, space;             /* SP_SHARED, SP_LOCAL, SP_PARAM, SP_FPARAM,
                                 SP_GLOBAL (a module variable) */
  int64_t addr;
  int size;
} sym;

typedef struct label { const char *name; int len, pc; } label;
typedef struct fixup { int pc, line; const char *name; int len; } fixup;

typedef struct dec {
  sim_module *m;
  tok *t;
  size_t nt, i;
  char *err;
  size_t nerr;
  int failed;
  sym *gsyms;                 /* module: shared and global variables */
  size_t ngsyms, cgsyms;
  int outer_shared;           /* static .shared variables outside the
                                 bodies of .entry functions */
  /* the function being decoded */
  regdecl *regs;
  size_t nregs, cregs;
  sym *lsyms;
  size_t nlsyms, clsyms;
  label *labels;
  size_t nlabels, clabels;
  fixup *fix;
  size_t nfix, cfix;
  size_t ccode, cconst, clocs;
  func *fn;
  loc at;                     /* the last .loc: the instructions' line */
  int has_loc;                /* a .loc was seen */
} dec;

#define PUSH(d, v, n, c) dec_grow((void **)&(v), &(c), (n), sizeof *(v))

static inline int is(const tok *t, const char *w) {
  return t && (size_t)t->len == strlen(w) && !memcmp(t->s, w, (size_t)t->len);
}

static inline tok *peek(dec *d) { return d->i < d->nt ? &d->t[d->i] : NULL; }
static inline tok *next(dec *d) {
  return d->i < d->nt ? &d->t[d->i++] : NULL;
}

static inline int line_now(dec *d) {
  return d->i < d->nt ? d->t[d->i].line : d->nt ? d->t[d->nt - 1].line : 0;
}

static inline size_t align_up(size_t x, size_t a) {
  return a > 1 ? (x + a - 1) / a * a : x;
}

static inline int modw(const char *s, int len, const char *w) {
  return (size_t)len == strlen(w) && !memcmp(s, w, (size_t)len);
}

/* -- operands ------------------------------------------------------------- */

enum { O_NONE, O_REG, O_PRED, O_IMM, O_MEM, O_VEC, O_ADDR, O_SINK, O_LIST,
       O_FUNC };

typedef struct opnd {
  int kind, line;
  int32_t r, r2;        /* O_REG slot / O_PRED index; r2: "p|q"'s q */
  int neg;              /* !p */
  uint64_t imm;         /* O_IMM; O_ADDR: the address */
  int isf;
  int32_t base;         /* O_MEM */
  int64_t off;
  int space;            /* O_MEM, O_ADDR: space of the symbol, or -1 */
  int32_t v[4];         /* O_VEC slots (-1 for '_'), O_LIST param syms */
  int nv;
  sym *ps[16];          /* O_LIST: the call's parameters */
} opnd;

/* ptx_lex.c */
int dec_fail(dec *d, int line, const char *fmt, ...);
int dec_grow(void **v, size_t *cap, size_t n, size_t size);
int dec_lex(dec *d, const char *s);
int dec_expect(dec *d, const char *w);
int dec_parse_type(const char *s, int len, uint8_t *k, uint8_t *b);
int dec_parse_number(const tok *t, int neg, uint64_t *v, int *isf);

/* ptx_operand.c */
int dec_new_slots(dec *d, int n);
int dec_const_slot(dec *d, uint64_t v);
int dec_find_reg(dec *d, const tok *t, int *pred);
sym *dec_find_sym(sym *v, size_t n, const tok *t);
int dec_operand(dec *d, opnd *o);
int dec_src_slot(dec *d, const opnd *o, int k, int bits, const char *what);

/* ptx_decode.c */
/* .loc file line [column][, ...] and .file index "name"[, ...], the
   directive's token t already read; the rest of its line skipped. */
int dec_loc(dec *d, const tok *t);

/* ptx_decl.c */
int dec_decl_reg(dec *d, const tok *dir);
int dec_decl_var(dec *d, size_t *size, size_t *align, tok **name,
                 unsigned char **init);
int dec_add_sym(dec *d, int local, const tok *name, int space, int64_t addr,
                int size);
int dec_layout_shared(dec *d);
int dec_decl_global(dec *d);
int dec_param_list(dec *d, func *f, int out, size_t **psize, size_t **palign,
                   int *pn);

/* ptx_forms.c */
int dec_is_half(int k, int b);
int dec_form(ins *in, int op, int n, const opnd *o);
/* Picks the fast form of each instruction of m; 0 when out of memory. */
int dec_fast_forms(sim_module *m);

/* ptx_ins.c */
int dec_add_ins(dec *d, ins **out);
int dec_instruction(dec *d, tok *t, int guard, int gneg);
int dec_call(dec *d, tok *t, int guard, int gneg);

#pragma GCC visibility pop

#endif
