build2/double/sim/driver/streams.o: sim/driver/streams.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
