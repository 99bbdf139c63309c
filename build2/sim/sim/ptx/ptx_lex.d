build2/sim/sim/ptx/ptx_lex.o: sim/ptx/ptx_lex.c sim/ptx/ptx_dec.h \
 sim/ptx/ptx_int.h sim/ptx/ptx_sim.h
sim/ptx/ptx_dec.h:
sim/ptx/ptx_int.h:
sim/ptx/ptx_sim.h:
