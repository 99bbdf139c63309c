build2/obj/kernel/image.o: src/kernel/image.c src/kernel/image.h
src/kernel/image.h:
