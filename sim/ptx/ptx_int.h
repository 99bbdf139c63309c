/* The simulator's decoded form, shared by the decoder (ptx_dec.h) and the
   interpreter (ptx_exec.h). */
#ifndef PTX_INT_H
#define PTX_INT_H

#include "ptx_sim.h"

/* Operations. */
enum {
  OP_NOP, OP_MOV, OP_ADD, OP_SUB, OP_MUL, OP_MAD, OP_FMA, OP_DIV, OP_REM,
  OP_ABS, OP_NEG, OP_MIN, OP_MAX, OP_AND, OP_OR, OP_XOR, OP_NOT, OP_CNOT,
  OP_SHL, OP_SHR, OP_SHF, OP_BFE, OP_BFI, OP_BREV, OP_POPC, OP_CLZ,
  OP_BFIND, OP_PRMT, OP_SETP, OP_SELP, OP_SLCT, OP_CVT, OP_CVTA, OP_LD,
  OP_ST, OP_ATOM, OP_BAR, OP_BRA, OP_CALL, OP_RET, OP_EXIT, OP_SHFL,
  OP_VOTE, OP_MATCH, OP_ACTIVEMASK, OP_EX2, OP_LG2, OP_RCP, OP_RSQRT,
  OP_SQRT, OP_SIN, OP_COS, OP_TANH, OP_COPYSIGN, OP_TESTP, OP_TRAP,
  OP_SETCOND, OP_PACK, OP_UNPACK, OP_ISSPACEP, OP_MUL24, OP_MAD24, OP_SAD,
  OP_LOP3, OP_REDUX, OP_WSYNC, OP_SREG, OP_SET, OP_HALF, OP_BMSK, OP_SZEXT,
  OP_CARRY, OP_TEX, OP_SULD, OP_SUST, OP_GRIDDEP,
  OP_PRINTF, OP_ASSERT, /* calls of vprintf and __assertfail */
};

/* Fast forms: the commonest instructions in one form each, run by the
   interpreter ahead of the general cases (X_NONE: the general code). The
   decoder picks one where the instruction's form is exactly that. */
enum {
  X_NONE,
  X_LD_SH4, X_LD_SH4S, X_LD_SH8,  /* ld.shared of 4 (unsigned, signed), 8 */
  X_ST_SH4, X_ST_SH8,             /* st.shared */
  X_LD_GL4, X_LD_GL4S, X_LD_GL8,  /* ld.global */
  X_ST_GL4, X_ST_GL8,             /* st.global */
  X_FMA_F32, X_ADD_F32, X_SUB_F32, X_MUL_F32, /* .rn (or none), no .ftz */
  X_ADD_I, X_SUB_I,               /* integers of 32 or 64 bits */
  X_MUL_LO, X_MUL_WIDE_S32, X_MUL_WIDE_U32, X_MAD_LO,
  X_SHL_I, X_SHR_U, X_SHR_S, X_AND_I, X_OR_I, X_SELP,
  X_MOV,                          /* mov, cvta.to, cvt of one 64-bit value */
  X_CVT_S64_S32, X_CVT_U64_U32, X_CVT_TO32,
  X_SETP_EQ, X_SETP_NE, X_SETP_LT, X_SETP_LE, X_SETP_GT, X_SETP_GE,
                                  /* setp of integers of 32 and 64 bits
                                     (lo ls hi hs: LT LE GT GE) */
  X_PLOGIC,                       /* and, or, xor of predicates */
  X_BRA,                          /* every bra */
};

/* Generic addresses of shared and local memory: a tag in the top bits
   above the offset in the space (host addresses are below both). */
#define GEN_SHARED 0xFFFF000000000000ull
#define GEN_LOCAL 0xFFFE000000000000ull
#define GEN_OFFSET 0x0000FFFFFFFFFFFFull

/* Immediates while decoding: CONST_MARK + index, given slots after every
   register's at the end. */
#define CONST_MARK (1 << 28)

/* Type kinds; a type is a kind and a width in bits (K_H2, K_BH2: f16x2
   and bf16x2, two halves in 32 bits). */
enum { K_B, K_U, K_S, K_F, K_PRED, K_BF, K_H2, K_BH2 };

/* State spaces of ld, st, atom, cvta. */
enum { SP_GENERIC, SP_GLOBAL, SP_SHARED, SP_LOCAL, SP_PARAM, SP_FPARAM,
       SP_CONST };

/* Flags. */
enum {
  F_FTZ = 1, F_SAT = 2, F_HI = 4, F_WIDE = 8, F_APPROX = 16, F_TO = 32,
  F_UNI = 64, F_SHIFTAMT = 128, F_SYNC = 256, F_NAN = 512, F_XORSIGN = 1024,
  F_RELU = 2048, F_SATFINITE = 4096, F_NOFTZ = 8192, F_CC = 16384,
  F_CIN = 32768, /* .cc: sets the carry flag; addc, subc, madc: add it */
};

/* Rounding: R_N.. for floats, R_NI.. for rounding to integers. */
enum { R_NONE, R_N, R_Z, R_M, R_P, R_NI, R_ZI, R_MI, R_PI };

/* Comparisons of setp, modes of shfl, vote, atom. */
enum {
  C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, C_LO, C_LS, C_HI, C_HS, C_EQU, C_NEU,
  C_LTU, C_LEU, C_GTU, C_GEU, C_NUM, C_NAN,
};
enum { SH_UP, SH_DOWN, SH_BFLY, SH_IDX };
enum { V_ALL, V_ANY, V_UNI, V_BALLOT };
/* bar: cmp the form, bop bar.red's reduction */
enum { BAR_SYNC, BAR_WARP, BAR_RED };
enum { BR_NONE, BR_POPC, BR_AND, BR_OR };
/* griddepcontrol: cmp the action */
enum { GD_NONE, GD_WAIT, GD_LAUNCH };
enum { A_ADD, A_MIN, A_MAX, A_INC, A_DEC, A_AND, A_OR, A_XOR, A_EXCH,
       A_CAS };
/* Boolean combination of setp (and, or, xor with a third predicate). */
enum { B_NONE, B_AND, B_OR, B_XOR };

/* Special registers, each a slot: those before S_READ filled when a warp
   starts, the others (clocks, and what few kernels read) by an OP_SREG the
   decoder puts before each instruction that reads one. */
enum {
  S_TID_X, S_TID_Y, S_TID_Z, S_NTID_X, S_NTID_Y, S_NTID_Z, S_CTAID_X,
  S_CTAID_Y, S_CTAID_Z, S_NCTAID_X, S_NCTAID_Y, S_NCTAID_Z, S_LANEID,
  S_WARPID, S_NWARPID, S_SMID, S_NSMID, S_GRIDID, S_LANEMASK_EQ,
  S_LANEMASK_LE, S_LANEMASK_LT, S_LANEMASK_GE, S_LANEMASK_GT, S_DYN_SMEM,
  S_ZERO, S_READ,
  S_CLOCK = S_READ, S_CLOCK_HI, S_CLOCK64, S_GLOBALTIMER, S_GLOBALTIMER_LO,
  S_GLOBALTIMER_HI, S_TOTAL_SMEM, S_AGGR_SMEM, S_RESERVED_BEGIN,
  S_RESERVED_END,
  S_RESERVED_CAP, S_RESERVED_0, S_RESERVED_1, S_CLUSTERID_X,
  S_CLUSTERID_Y, S_CLUSTERID_Z, S_NCLUSTERID_X, S_NCLUSTERID_Y,
  S_NCLUSTERID_Z, S_CLUSTER_CTAID_X, S_CLUSTER_CTAID_Y, S_CLUSTER_CTAID_Z,
  S_CLUSTER_NCTAID_X, S_CLUSTER_NCTAID_Y, S_CLUSTER_NCTAID_Z,
  S_CLUSTER_CTARANK, S_CLUSTER_NCTARANK, NSPECIAL
};

/* The device: an sm_90 part of SIM_SMS multiprocessors, SIM_WARPS warps
   each. A block's shared window starts with SMEM_RESERVED bytes reserved
   for the system (cooperative groups' scratch from SMEM_CG_SCRATCH in it),
   zeroed when the block starts if its kernel reads where they are, then
   the kernel's static and dynamic shared memory, in units of SMEM_UNIT. */
enum {
  SIM_SMS = 132, SIM_WARPS = 64, SMEM_RESERVED = 1024, SMEM_CG_SCRATCH = 512,
  SMEM_UNIT = 128,
};

/* One decoded instruction. Operands are slots of the warp's register file
   (registers, immediates and special registers all have one) or, for
   predicates, indices of its predicate masks. */
typedef struct ins {
  uint8_t op, tk, tb, t2k, t2b; /* operation, type, second type (cvt; set:
                                   tk the compared type, t2k the result) */
  uint8_t cmp, bop, rnd, space, vec;
  uint16_t flags;
  int16_t guard;      /* predicate of @p / @!p, or -1 */
  uint8_t gneg;
  uint8_t nd;         /* destinations (vector loads) */
  int32_t d[4];       /* destination slots (pred: d[0] predicate, d[1] the
                         second of setp's p|q, or -1) */
  int32_t a, b, c, e; /* sources; a predicate source is a predicate index;
                         e: the member mask of a .sync warp instruction */
  int32_t base;       /* memory: slot of the address register, or -1 */
  uint8_t sub;        /* OP_HALF, OP_CARRY: the operation (OP_ADD, ...) */
  uint8_t x;          /* the fast form (X_...), or X_NONE */
  uint8_t inval;      /* writes a register that a fast load or store
                         takes its address from */
  uint8_t pre;        /* has a guard or inval: work before it runs */
  int64_t off;        /* memory: immediate offset (symbols resolved) */
  int32_t target;     /* bra, call: instruction index */
  int32_t fn;         /* call: callee function index */
  int line;           /* PTX line */
} ins;

/* A .param of a function: its offset in the caller's or the callee's
   parameter frame. */
typedef struct fparam { int32_t off, size; } fparam;

typedef struct sim_kernel func;

struct sim_kernel {
  char *name;
  int entry;                 /* .entry (a kernel), else .func */
  int start, end;            /* its instructions [start, end) */
  int nin, nout;
  fparam *in, *out;          /* .func: formal and return parameters */
  size_t *koff, *ksize;      /* .entry: kernel parameter layout */
  size_t argbytes;
  size_t smem;               /* its body's .shared variables, laid out */
  int has_bar;               /* has (or calls what has) a bar.sync */
  int calls_user;            /* calls a .func */
  struct sim_module *m;
};

/* The source line of an instruction (.loc): file index, line (0: none). */
typedef struct loc { int32_t file, line; } loc;

typedef struct var {          /* a module variable in global or const space */
  char *name;
  unsigned char *data;
  size_t size;
} var;

struct sim_module {
  ins *code;
  size_t ncode;
  func **funcs;
  size_t nfuncs;
  int nslots, npreds;        /* of every function together */
  int nconst;                /* immediates: slots const_base .. */
  int const_base;
  uint64_t *consts;
  size_t shared_static;      /* all .shared variables (after the
                                reserved region) */
  int reserved_smem;         /* reads where the reserved region is */
  size_t local_size;         /* .local frames of all functions */
  size_t pframe;             /* .param frames of all functions */
  var *vars;
  size_t nvars;
  loc *locs;                 /* of each instruction; NULL without .loc */
  char **files;              /* .file names by index (NULL: none) */
  size_t nfiles;
};

/* Calls nested deeper than this end the launch (each takes host stack, of
   the calling thread too); a GPU's own call stack is 1 KiB a thread by
   default. */
enum { SIM_MAX_CALLS = 256 };

#endif
