build2/double/sim/driver/kernels.o: sim/driver/kernels.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
