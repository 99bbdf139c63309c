/* Checks of binary module images. Every byte read is first shown to lie
   within the bytes at hand; ranges are compared by subtraction, so no sum of
   header fields can wrap. Nothing recurses deeper than a fatbin's cubins. */
#include "kernel/image.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef unsigned long long ull;

/* ELF64: sizes of the header, a section header, a program header and a
   symbol; the types and indices that matter here. */
#define ELF_HEADER 64
#define ELF_SHDR 64
#define ELF_PHDR 56
#define ELF_SYM 24
#define EM_CUDA 190
enum { SHT_NULL = 0, SHT_SYMTAB = 2, SHT_STRTAB = 3, SHT_NOBITS = 8,
       SHT_DYNSYM = 11 };
#define SHN_LORESERVE 0xff00
#define PT_NULL 0

/* Fatbin: a 16-byte header (magic, version, header size, size of the
   entries), then entries, each a header of at least 64 bytes (kind,
   version, header size, payload size, compressed size, options offset,
   version, arch, name offset and length, flags, ...) and its payload. */
#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_HEADER 16
#define FATBIN_ENTRY 64
#define FATBIN_PTX 1 /* entry kind; 2 is a cubin */
#define FATBIN_COMPRESSED (0x2000u | 0x8000u) /* LZ4, zstd */

static uint64_t rd(const unsigned char *p, int n) { /* little-endian */
  uint64_t v = 0;
  while (n--) v = v << 8 | p[n];
  return v;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err && errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Whether [off, off + size) lies within len bytes. */
static int within(uint64_t off, uint64_t size, uint64_t len) {
  return off <= len && size <= len - off;
}

/* An ELF under check; `what` and `whole` name it and its bound in messages
   ("cubin", "image"; "fatbin: entry 2: cubin", "payload"). */
typedef struct elf {
  const unsigned char *p;
  uint64_t len, shoff;
  unsigned shnum, shentsize;
  const char *what, *whole;
  char *err;
  size_t errlen;
} elf;

/* Section header i < shnum; the table is known to lie within the image. */
static const unsigned char *shdr(const elf *e, unsigned i) {
  return e->p + e->shoff + (uint64_t)i * e->shentsize;
}

/* Size of section i as a string table: a STRTAB ending in NUL, so every
   name that starts inside it ends inside it; 0 when it is none. Called once
   every section is known to lie within the image. */
static uint64_t strtab(const elf *e, uint64_t i) {
  const unsigned char *sh;
  uint64_t off, size;
  if (i == 0 || i >= e->shnum) return 0;
  sh = shdr(e, (unsigned)i);
  off = rd(sh + 0x18, 8);
  size = rd(sh + 0x20, 8);
  if (rd(sh + 4, 4) != SHT_STRTAB || size == 0 || e->p[off + size - 1])
    return 0;
  return size;
}

/* The symbols of section i: 24 bytes each, names inside the linked string
   table, section indices naming sections or reserved. */
static int check_symbols(const elf *e, unsigned i) {
  const unsigned char *sh = shdr(e, i), *sym;
  uint64_t off = rd(sh + 0x18, 8), n = rd(sh + 0x20, 8) / ELF_SYM, j;
  uint64_t link = rd(sh + 0x28, 4), names, name, sec;
  if (rd(sh + 0x38, 8) != ELF_SYM)
    return fail(e->err, e->errlen, "%s: section %u: symbols of %llu bytes, "
                "expected 24", e->what, i, (ull)rd(sh + 0x38, 8));
  if (!(names = strtab(e, link)))
    return fail(e->err, e->errlen, "%s: section %u: its names' section %llu "
                "is not a NUL-terminated string table", e->what, i, (ull)link);
  for (j = 0; j < n; j++) {
    sym = e->p + off + j * ELF_SYM;
    name = rd(sym, 4);
    sec = rd(sym + 6, 2);
    if (name >= names)
      return fail(e->err, e->errlen, "%s: section %u: symbol %llu's name "
                  "(at %llu) lies past the end of its %llu-byte string table",
                  e->what, i, (ull)j, (ull)name, (ull)names);
    if (sec >= e->shnum && sec < SHN_LORESERVE)
      return fail(e->err, e->errlen, "%s: section %u: symbol %llu is in "
                  "section %llu, of %u", e->what, i, (ull)j, (ull)sec,
                  e->shnum);
  }
  return 0;
}

/* An ELF64 little-endian NVIDIA object of len bytes: header, section and
   program header tables, every section (but NOBITS) and segment, section
   names and symbols within it. */
static int check_elf(const unsigned char *p, uint64_t len, const char *what,
                     const char *whole, char *err, size_t errlen) {
  elf e = {p, len, 0, 0, 0, what, whole, err, errlen};
  const unsigned char *h;
  uint64_t phoff, off, size, names;
  unsigned phnum, phentsize, shstrndx, i;
  if (len < ELF_HEADER)
    return fail(err, errlen, "%s: %llu bytes, shorter than an ELF header "
                "(64)", what, (ull)len);
  if (p[4] != 2 || p[5] != 1 || p[6] != 1)
    return fail(err, errlen, "%s: not a 64-bit little-endian ELF version 1",
                what);
  if (rd(p + 0x12, 2) != EM_CUDA)
    return fail(err, errlen, "%s: machine %llu, not NVIDIA CUDA (190)", what,
                (ull)rd(p + 0x12, 2));
  phoff = rd(p + 0x20, 8);
  e.shoff = rd(p + 0x28, 8);
  phentsize = (unsigned)rd(p + 0x36, 2);
  phnum = (unsigned)rd(p + 0x38, 2);
  e.shentsize = (unsigned)rd(p + 0x3a, 2);
  e.shnum = (unsigned)rd(p + 0x3c, 2);
  shstrndx = (unsigned)rd(p + 0x3e, 2);
  if (e.shnum == 0)
    return fail(err, errlen, "%s: no section header table", what);
  if (e.shentsize < ELF_SHDR)
    return fail(err, errlen, "%s: section headers of %u bytes, less than 64",
                what, e.shentsize);
  if (!within(e.shoff, (uint64_t)e.shnum * e.shentsize, len))
    return fail(err, errlen, "%s: section header table (offset %llu, %u x %u "
                "bytes) lies past the end of the %llu-byte %s", what,
                (ull)e.shoff, e.shnum, e.shentsize, (ull)len, whole);
  if (phnum && phentsize < ELF_PHDR)
    return fail(err, errlen, "%s: program headers of %u bytes, less than 56",
                what, phentsize);
  if (phnum && !within(phoff, (uint64_t)phnum * phentsize, len))
    return fail(err, errlen, "%s: program header table (offset %llu, %u x %u "
                "bytes) lies past the end of the %llu-byte %s", what,
                (ull)phoff, phnum, phentsize, (ull)len, whole);
  for (i = 0; i < e.shnum; i++) {
    h = shdr(&e, i);
    off = rd(h + 0x18, 8);
    size = rd(h + 0x20, 8);
    if (rd(h + 4, 4) != SHT_NOBITS && rd(h + 4, 4) != SHT_NULL &&
        !within(off, size, len))
      return fail(err, errlen, "%s: section %u (offset %llu, %llu bytes) "
                  "lies past the end of the %llu-byte %s", what, i, (ull)off,
                  (ull)size, (ull)len, whole);
  }
  for (i = 0; i < phnum; i++) {
    h = p + phoff + (uint64_t)i * phentsize;
    off = rd(h + 8, 8);
    size = rd(h + 0x20, 8);
    if (rd(h, 4) != PT_NULL && !within(off, size, len))
      return fail(err, errlen, "%s: segment %u (offset %llu, %llu bytes) "
                  "lies past the end of the %llu-byte %s", what, i, (ull)off,
                  (ull)size, (ull)len, whole);
  }
  if (!(names = strtab(&e, shstrndx)))
    return fail(err, errlen, "%s: section name table index %u is not a "
                "NUL-terminated string table (of %u sections)", what,
                shstrndx, e.shnum);
  for (i = 0; i < e.shnum; i++) {
    h = shdr(&e, i);
    if (rd(h, 4) >= names)
      return fail(err, errlen, "%s: section %u: name (at %llu) lies past the "
                  "end of the %llu-byte section name table", what, i,
                  (ull)rd(h, 4), (ull)names);
    if ((rd(h + 4, 4) == SHT_SYMTAB || rd(h + 4, 4) == SHT_DYNSYM) &&
        check_symbols(&e, i))
      return -1;
  }
  return 0;
}

/* A fatbin container: its header, the entries within the size it gives and
   that size within the image, each entry's name, options and compressed
   payload within the entry; uncompressed, PTX text ends in the payload and
   a cubin is checked whole. */
static int check_fatbin(const unsigned char *p, uint64_t len, char *err,
                        size_t errlen) {
  const unsigned char *q;
  uint64_t hsize, body, off, left, ehs, size, all, flags, o, n;
  unsigned k;
  char what[48];
  if (len < FATBIN_HEADER)
    return fail(err, errlen, "fatbin: %llu bytes, shorter than its header "
                "(16)", (ull)len);
  hsize = rd(p + 6, 2);
  body = rd(p + 8, 8);
  if (rd(p + 4, 2) != 1)
    return fail(err, errlen, "fatbin: version %llu, expected 1",
                (ull)rd(p + 4, 2));
  if (hsize < FATBIN_HEADER)
    return fail(err, errlen, "fatbin: header of %llu bytes, less than 16",
                (ull)hsize);
  if (hsize > len)
    return fail(err, errlen, "fatbin: header of %llu bytes, the image has "
                "%llu", (ull)hsize, (ull)len);
  if (body > len - hsize)
    return fail(err, errlen, "fatbin: header says %llu bytes of entries, the "
                "image has %llu", (ull)body, (ull)(len - hsize));
  if (body == 0) return fail(err, errlen, "fatbin: no entries");
  for (k = 1, off = 0; off < body; k++, off += all) {
    q = p + hsize + off;
    left = body - off;
    if (left < FATBIN_ENTRY)
      return fail(err, errlen, "fatbin: entry %u (offset %llu): %llu bytes "
                  "left, shorter than an entry header (64)", k,
                  (ull)(hsize + off), (ull)left);
    ehs = rd(q + 4, 4);
    size = rd(q + 8, 8);
    flags = rd(q + 40, 8);
    if (ehs < FATBIN_ENTRY)
      return fail(err, errlen, "fatbin: entry %u: header of %llu bytes, less "
                  "than 64", k, (ull)ehs);
    if (!within(ehs, size, left))
      return fail(err, errlen, "fatbin: entry %u (offset %llu, %llu + %llu "
                  "bytes) lies past the end of the %llu bytes of entries", k,
                  (ull)(hsize + off), (ull)ehs, (ull)size, (ull)body);
    all = ehs + size;
    if ((flags & FATBIN_COMPRESSED) && rd(q + 16, 4) > size)
      return fail(err, errlen, "fatbin: entry %u: %llu compressed bytes in a "
                  "%llu-byte payload", k, (ull)rd(q + 16, 4), (ull)size);
    o = rd(q + 32, 4);
    n = rd(q + 36, 4);
    if (o && !within(o, n, all))
      return fail(err, errlen, "fatbin: entry %u: its name (offset %llu, %llu "
                  "bytes) lies outside the entry", k, (ull)o, (ull)n);
    if ((o = rd(q + 20, 4)) != 0) { /* options: offset and size, 4 bytes each */
      if (!within(o, 8, ehs))
        return fail(err, errlen, "fatbin: entry %u: its options (at %llu) lie "
                    "outside its %llu-byte header", k, (ull)o, (ull)ehs);
      n = rd(q + o + 4, 4);
      o = rd(q + o, 4);
      if (o && !within(o, n, all))
        return fail(err, errlen, "fatbin: entry %u: its options (offset %llu, "
                    "%llu bytes) lie outside the entry", k, (ull)o, (ull)n);
    }
    if (flags & FATBIN_COMPRESSED) continue;
    if (rd(q, 2) == FATBIN_PTX && !memchr(q + ehs, 0, size))
      return fail(err, errlen, "fatbin: entry %u: PTX text with no NUL in its "
                  "%llu-byte payload", k, (ull)size);
    if (size >= 4 && !memcmp(q + ehs, "\177ELF", 4)) {
      snprintf(what, sizeof what, "fatbin: entry %u: cubin", k);
      if (check_elf(q + ehs, size, what, "payload", err, errlen)) return -1;
    }
  }
  return IMAGE_FATBIN;
}

int image_check(const void *image, size_t len, char *err, size_t errlen) {
  const unsigned char *p = image;
  if (len >= 4 && !memcmp(p, "\177ELF", 4))
    return check_elf(p, len, "cubin", "image", err, errlen) ? -1
                                                            : IMAGE_CUBIN;
  if (len >= 4 && rd(p, 4) == FATBIN_MAGIC)
    return check_fatbin(p, len, err, errlen);
  return IMAGE_TEXT;
}
