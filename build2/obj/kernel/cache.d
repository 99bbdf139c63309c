build2/obj/kernel/cache.o: src/kernel/cache.c src/kernel/cache.h \
 src/base/hash.h
src/kernel/cache.h:
src/base/hash.h:
