build2/sim/sim/driver/entry.o: sim/driver/entry.c sim/driver/double.h \
 /usr/local/cuda/include/cuda.h sim/ptx/ptx_sim.h src/base/sticky.h
sim/driver/double.h:
/usr/local/cuda/include/cuda.h:
sim/ptx/ptx_sim.h:
src/base/sticky.h:
