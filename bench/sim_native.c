/* The kernels of bench/sim.lua's reduction and divergence rows (its
   WARP_SOURCE) compiled for the host as plain C loops, block by block and
   thread by thread, by the host compiler with the build's CFLAGS: how
   long the same work takes without the simulator, for the ratio that
   `make bench-sim` states. Prints "<kernel> <seconds a launch>
   <checksum>" for each, on one thread.

     sim_native [reps]   (default 10, as bench/sim.lua's rows) */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { BLOCK = 256 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* block_sum: a grid-stride sum per thread, then the block's tree (the
   shuffles of the last warp are its last five steps). */
static void block_sum(const float *x, float *out, int n, int blocks) {
  float s[BLOCK];
  for (int b = 0; b < blocks; b++) {
    for (int t = 0; t < BLOCK; t++) {
      float v = 0.0f;
      for (int i = b * BLOCK + t; i < n; i += BLOCK * blocks) v += x[i];
      s[t] = v;
    }
    for (int k = BLOCK / 2; k > 0; k >>= 1)
      for (int t = 0; t < k; t++) s[t] += s[t + k];
    out[b] = s[0];
  }
}

static unsigned popc(unsigned v) {
  unsigned c = 0;
  for (; v; v &= v - 1) c++;
  return c;
}

/* diverge: four paths by lane, then a loop of data-dependent length. */
static void diverge(const unsigned *x, unsigned *y, int n, int blocks) {
  for (int b = 0; b < blocks; b++)
    for (int t = 0; t < BLOCK; t++) {
      int i = b * BLOCK + t;
      if (i >= n) continue;
      unsigned v = x[i], acc = 0;
      switch (t & 3) {
      case 0: for (unsigned k = 0; k < 8; k++) acc += v * k; break;
      case 1: acc = v ^ (v >> 3); break;
      case 2: acc = v < 0x80000000u ? v + 7 : v - 7; break;
      default: acc = popc(v);
      }
      unsigned steps = 0;
      for (unsigned c = v % 97 + 1; c != 1 && steps < 64; steps++)
        c = (c & 1) ? 3 * c + 1 : c >> 1;
      y[i] = acc + steps;
    }
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 10;
  if (reps < 1) reps = 1;
  long seed = 7;
  /* the inputs bench/sim.lua makes */
  int n = 1 << 20, blocks = 256;
  float *x = malloc((size_t)n * sizeof *x), *out = malloc(BLOCK * sizeof *out);
  int dn = 1 << 16;
  unsigned *u = malloc((size_t)dn * sizeof *u), *y = malloc((size_t)dn * sizeof *y);
  if (!x || !out || !u || !y) return 1;
  for (int i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    x[i] = (float)((double)(seed >> 8) / 8388608 - 0.5);
  }
  seed = 7;
  for (int i = 0; i < dn; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    u[i] = (unsigned)(seed * 2 + (i + 1) % 2);
  }
  double t0 = now(), sum = 0;
  for (int r = 0; r < reps; r++) block_sum(x, out, n, blocks);
  double t1 = now();
  for (int b = 0; b < blocks; b++) sum += out[b];
  printf("reduce %.9f %.6f\n", (t1 - t0) / reps, sum);
  t0 = now();
  for (int r = 0; r < reps; r++) diverge(u, y, dn, dn / BLOCK);
  t1 = now();
  unsigned long long check = 0;
  for (int i = 0; i < dn; i++) check = check * 31 + y[i];
  printf("diverge %.9f %llu\n", (t1 - t0) / reps, check);
  free(x), free(out), free(u), free(y);
  return 0;
}
