build2/sim/sim/driver/graph.o: sim/driver/graph.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h sim/ptx/ptx_sim.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
sim/ptx/ptx_sim.h:
