build2/libnvrtc-fault.so: spec/support/nvrtc_fault.c \
 /usr/local/cuda/include/nvrtc.h
/usr/local/cuda/include/nvrtc.h:
