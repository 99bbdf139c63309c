build2/sim/sim/ptx/ptx_exec.o: sim/ptx/ptx_exec.c sim/ptx/ptx_convert.h \
 sim/ptx/ptx_exec.h sim/ptx/ptx_int.h sim/ptx/ptx_sim.h sim/ptx/ptx_mem.h \
 sim/ptx/ptx_warp.h
sim/ptx/ptx_convert.h:
sim/ptx/ptx_exec.h:
sim/ptx/ptx_int.h:
sim/ptx/ptx_sim.h:
sim/ptx/ptx_mem.h:
sim/ptx/ptx_warp.h:
