build2/sim/sim/driver/graph_exec.o: sim/driver/graph_exec.c \
 sim/driver/double.h /usr/local/cuda/include/cuda.h sim/ptx/ptx_sim.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
sim/ptx/ptx_sim.h:
