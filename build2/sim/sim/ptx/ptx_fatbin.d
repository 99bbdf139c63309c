build2/sim/sim/ptx/ptx_fatbin.o: sim/ptx/ptx_fatbin.c sim/ptx/ptx_sim.h
sim/ptx/ptx_sim.h:
