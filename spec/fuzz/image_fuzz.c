/* libFuzzer harness for src/kernel/image.c: the bytes go to image_check as they
   are, with a full-size, a tiny and no message buffer. An image it accepts
   is then read as the driver would read it (section and program header
   tables, every section and segment, every name up to its NUL, the symbols,
   each fatbin entry, its name, options and cubin), so that AddressSanitizer
   stops on any part the check let lie outside the input.

   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
     spec/fuzz/image_fuzz.c src/kernel/image.c -o /tmp/image_fuzz
   mkdir -p /tmp/seeds && cp build/kernels.cubin build/kernels.fatbin /tmp/seeds
   /tmp/image_fuzz -max_total_time=60 /tmp/seeds */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static uint64_t rd(const uint8_t *p, int n) {
  uint64_t v = 0;
  while (n--) v = v << 8 | p[n];
  return v;
}

/* Reads the first and last byte of [off, off + size). */
static void touch(const uint8_t *p, uint64_t off, uint64_t size) {
  if (size) sink ^= p[off] ^ p[off + size - 1];
}

/* Reads the string at p + off up to its NUL. */
static void name(const uint8_t *p, uint64_t off) {
  while (p[off]) sink ^= p[off++];
}

static void read_elf(const uint8_t *p) {
  uint64_t phoff = rd(p + 0x20, 8), shoff = rd(p + 0x28, 8);
  uint64_t phes = rd(p + 0x36, 2), phn = rd(p + 0x38, 2);
  uint64_t shes = rd(p + 0x3a, 2), shn = rd(p + 0x3c, 2), i, j;
  const uint8_t *names = p + shoff + rd(p + 0x3e, 2) * shes, *sh, *ph;
  touch(p, shoff, shn * shes);
  touch(p, phoff, phn * phes);
  for (i = 0; i < shn; i++) {
    sh = p + shoff + i * shes;
    name(p, rd(names + 0x18, 8) + rd(sh, 4));
    if (rd(sh + 4, 4) != 0 && rd(sh + 4, 4) != 8)
      touch(p, rd(sh + 0x18, 8), rd(sh + 0x20, 8));
    if (rd(sh + 4, 4) == 2 || rd(sh + 4, 4) == 11) { /* symbols */
      const uint8_t *strs = p + shoff + rd(sh + 0x28, 4) * shes;
      for (j = 0; j < rd(sh + 0x20, 8) / 24; j++)
        name(p, rd(strs + 0x18, 8) + rd(p + rd(sh + 0x18, 8) + j * 24, 4));
    }
  }
  for (i = 0; i < phn; i++) {
    ph = p + phoff + i * phes;
    if (rd(ph, 4)) touch(p, rd(ph + 8, 8), rd(ph + 0x20, 8));
  }
}

static void read_fatbin(const uint8_t *p) {
  uint64_t hsize = rd(p + 6, 2), body = rd(p + 8, 8), off, ehs, len, opt;
  const uint8_t *e;
  for (off = 0; off < body; off += ehs + len) {
    e = p + hsize + off;
    ehs = rd(e + 4, 4);
    len = rd(e + 8, 8);
    touch(e, 0, ehs + len);
    if (rd(e + 32, 4)) touch(e, rd(e + 32, 4), rd(e + 36, 4));
    if ((opt = rd(e + 20, 4)) != 0 && rd(e + opt, 4))
      touch(e, rd(e + opt, 4), rd(e + opt + 4, 4));
    if (rd(e + 40, 8) & 0xa000) /* compressed */
      touch(e + ehs, 0, rd(e + 16, 4));
    else if (rd(e, 2) == 1) /* PTX text */
      name(e + ehs, 0);
    else if (len >= 4 && !memcmp(e + ehs, "\177ELF", 4))
      read_elf(e + ehs);
  }
}

static void check_err(const char *err, size_t errlen) {
  if (memchr(err, '\0', errlen) == NULL || err[0] == '\0') abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[256], tiny[4];
  int elf = size >= 4 && !memcmp(data, "\177ELF", 4);
  int fat = size >= 4 && rd(data, 4) == 0xba55ed50u;
  int k = image_check(data, size, err, sizeof err);
  if (k != image_check(data, size, tiny, sizeof tiny) ||
      k != image_check(data, size, NULL, 0))
    abort();
  if (k < 0) {
    check_err(err, sizeof err);
    check_err(tiny, sizeof tiny);
    if (!elf && !fat) abort();
  } else if (k == IMAGE_CUBIN) {
    if (!elf) abort();
    read_elf(data);
  } else if (k == IMAGE_FATBIN) {
    if (!fat) abort();
    read_fatbin(data);
  } else if (k != IMAGE_TEXT || elf || fat) {
    abort();
  }
  return 0;
}
