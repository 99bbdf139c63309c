build2/sim/sim/driver/memory.o: sim/driver/memory.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h sim/ptx/ptx_sim.h src/base/cudagl.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
sim/ptx/ptx_sim.h:
src/base/cudagl.h:
