build2/libnccl-double.so: sim/nccl/ranks.c sim/nccl/nccl_int.h \
 /usr/local/cuda/include/cuda.h
sim/nccl/nccl_int.h:
/usr/local/cuda/include/cuda.h:
