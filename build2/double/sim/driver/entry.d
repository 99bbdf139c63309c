build2/double/sim/driver/entry.o: sim/driver/entry.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h src/base/sticky.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
src/base/sticky.h:
