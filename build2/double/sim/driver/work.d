build2/double/sim/driver/work.o: sim/driver/work.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
