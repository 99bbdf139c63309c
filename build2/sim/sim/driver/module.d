build2/sim/sim/driver/module.o: sim/driver/module.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h sim/ptx/ptx_sim.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
sim/ptx/ptx_sim.h:
