/* Environment variables read as numbers: checked, and named in their
   errors (base/env.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/world.h"

/* The value of name, or NULL when it is unset or empty. */
static const char *value(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

int cg_env_integer(const char *name, long long lo, long long hi,
                   long long *out, char *err, size_t n) {
  const char *s = value(name);
  if (!s) return 0;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || end == s || v < lo || v > hi)
    return cg_failf(err, n, "%s is '%s', not a whole number from %lld to "
                    "%lld", name, s, lo, hi);
  *out = v;
  return 1;
}

int cg_env_number(const char *name, double lo, double hi, const char *unit,
                  double *out, char *err, size_t n) {
  const char *s = value(name);
  if (!s) return 0;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !(v >= lo && v <= hi) || isinf(v)) {
    if (isinf(hi))
      return cg_failf(err, n, "%s is '%s', not a number of %s, %g or more",
                      name, s, unit, lo);
    return cg_failf(err, n, "%s is '%s', not a number of %s from %g to %g",
                    name, s, unit, lo, hi);
  }
  *out = v;
  return 1;
}

int cg_env_bytes(const char *name, uint64_t *out, char *err, size_t n) {
  const char *s = value(name);
  if (!s) return 0;
  char *end = NULL;
  unsigned long long v = 0;
  int shift = -1;
  errno = 0;
  if (s[0] >= '0' && s[0] <= '9') v = strtoull(s, &end, 10);
  if (end && !errno) {
    switch (*end) {
    case '\0': shift = 0; break;
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    }
    if (shift > 0 && end[1]) shift = -1;
  }
  if (shift < 0 || v > (UINT64_MAX >> shift))
    return cg_failf(err, n, "%s is '%s', not a size in bytes (a whole "
                    "number, with K, M or G for 1024, 1024^2, 1024^3)",
                    name, s);
  *out = (uint64_t)v << shift;
  return 1;
}
