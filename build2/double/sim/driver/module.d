build2/double/sim/driver/module.o: sim/driver/module.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
