build2/double/sim/driver/graph_exec.o: sim/driver/graph_exec.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
