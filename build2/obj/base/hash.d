build2/obj/base/hash.o: src/base/hash.c src/base/hash.h
src/base/hash.h:
