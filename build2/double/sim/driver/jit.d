build2/double/sim/driver/jit.o: sim/driver/jit.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
