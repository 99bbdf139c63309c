build2/double/sim/driver/memory.o: sim/driver/memory.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h src/base/cudagl.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
src/base/cudagl.h:
