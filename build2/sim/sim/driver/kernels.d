build2/sim/sim/driver/kernels.o: sim/driver/kernels.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h sim/ptx/ptx_sim.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
sim/ptx/ptx_sim.h:
