build2/obj/base/loader.o: src/base/loader.c src/base/loader.h
src/base/loader.h:
