/* Binary module images: a cubin (ELF64) or a fatbin container. The driver
   takes them without a length, so every table and every part it reads must
   lie inside the image before it sees one. Pure C, no CUDA and no Lua, so
   it can be fuzzed alone. */
#ifndef CUGRAPH_IMAGE_H
#define CUGRAPH_IMAGE_H

#include <stddef.h>

enum { IMAGE_TEXT, IMAGE_CUBIN, IMAGE_FATBIN };

/* Classifies the len bytes at p by their magic number: a cubin ("\177ELF"),
   a fatbin (0xBA55ED50, little-endian) or anything else (IMAGE_TEXT, left to
   the PTX parser). A cubin or a fatbin is checked whole: on success every
   section, segment, name, fatbin entry and cubin inside one lies within the
   image; else returns -1 with a message in err naming the part at fault. */
int image_check(const void *p, size_t len, char *err, size_t errlen);

#endif
