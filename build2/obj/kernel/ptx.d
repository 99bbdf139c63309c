build2/obj/kernel/ptx.o: src/kernel/ptx.c src/kernel/ptx.h \
 src/base/ctype.h
src/kernel/ptx.h:
src/base/ctype.h:
