build2/double/sim/driver/capture.o: sim/driver/capture.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
