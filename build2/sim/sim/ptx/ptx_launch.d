build2/sim/sim/ptx/ptx_launch.o: sim/ptx/ptx_launch.c sim/ptx/ptx_exec.h \
 sim/ptx/ptx_int.h sim/ptx/ptx_sim.h
sim/ptx/ptx_exec.h:
sim/ptx/ptx_int.h:
sim/ptx/ptx_sim.h:
