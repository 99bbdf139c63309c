/* Environment variables read as numbers (pure C): every one the runtime
   reads goes through these, so a value that is not what it must be is an
   error that names the variable and its value, never a silent default. */
#ifndef CUGRAPH_ENV_H
#define CUGRAPH_ENV_H

#include <stddef.h>
#include <stdint.h>

/* The whole number (decimal) in variable name, lo to hi: 1 and *out; 0
   when it is unset or empty; -1 with the message in err. */
int cg_env_integer(const char *name, long long lo, long long hi,
                   long long *out, char *err, size_t n);
/* The number (as strtod reads it, finite) in variable name, lo to hi (hi
   may be HUGE_VAL), of `unit` for the message: as cg_env_integer. */
int cg_env_number(const char *name, double lo, double hi, const char *unit,
                  double *out, char *err, size_t n);
/* A size in bytes in variable name: a whole number with an optional K, M
   or G (powers of 1024) that fits 64 bits: as cg_env_integer. */
int cg_env_bytes(const char *name, uint64_t *out, char *err, size_t n);

#endif
