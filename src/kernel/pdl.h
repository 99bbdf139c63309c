/* Programmatic dependent launch from PTX (pdl.c), its reading of the
   text (pdl_read.c): what the two share, inside the kernel layer. */
#ifndef CG_KERNEL_PDL_H
#define CG_KERNEL_PDL_H
#include <stddef.h>
#include "kernel/ptx.h"

enum {
  I_WAIT = 1 << 0,    /* griddepcontrol.wait */
  I_TRIGGER = 1 << 1, /* griddepcontrol.launch_dependents (or such a call) */
  I_ACCESS = 1 << 2,  /* may touch global memory */
  I_WRITE = 1 << 3,   /* ... and may write it */
  I_BARRIER = 1 << 4, /* bar.sync of the whole block */
  I_END = 1 << 5,     /* ret, exit: the thread ends */
  I_STOP = 1 << 6,    /* trap: the grid fails */
  I_JUMP = 1 << 7,    /* bra */
  I_ANY = 1 << 8,     /* brx.idx: to any label of the body */
  I_GUARD = 1 << 9    /* @p: may not run */
};

/* One instruction: its flags, PTX line, the .loc in force (file 0: none),
   its text [at, at + len) and a jump's target (a label, then an index). */
typedef struct insn {
  unsigned flags, line, file, srcline;
  size_t at, len, tat, tlen, target;
} insn;

typedef struct label { size_t at, len, insn; } label;

typedef struct body {
  insn *v;
  size_t n, cap;
  label *l;
  size_t nl, cl;
} body;

/* A cursor over the text: pos <= len; line is s[pos]'s, from 1. */
typedef struct cur {
  const char *s;
  size_t len, pos;
  unsigned line;
} cur;

/* .file's names: number -> the text of its string, quotes left out. */
typedef struct files {
  struct fname { unsigned num; size_t at, len; } *v;
  size_t n, cap;
} files;

int pdl_is_space(int c);
/* Reads the body whose '{' the cursor just passed, to its '}', into b.
   NULL, or why it could not be read. */
const char *pdl_read_body(cur *c, body *b, int calls_trigger);
/* The next token of the module-level walk: a word ([A-Za-z0-9_$%.]+), a
   string, or one other byte; at = len at the end. */
size_t pdl_token(cur *c, size_t *n);
/* Whether the token [at, at + n) is w. */
int pdl_tok(const cur *c, size_t at, size_t n, const char *w);
/* The first walk: .file's names, and whether a function body issues
   griddepcontrol.launch_dependents (its calls may then trigger). */
int pdl_first_walk(const char *src, size_t len, files *f);

#endif
