build2/double/sim/driver/graph.o: sim/driver/graph.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
