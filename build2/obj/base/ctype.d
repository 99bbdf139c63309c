build2/obj/base/ctype.o: src/base/ctype.c src/base/ctype.h
src/base/ctype.h:
