build2/double/sim/driver/graph_node.o: sim/driver/graph_node.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
