build2/obj/base/nccl.o: src/base/nccl.c src/base/driver.h \
 /usr/local/cuda/include/cuda.h src/base/cudagl.h \
 /usr/include/lua5.4/lua.h /usr/include/lua5.4/luaconf.h \
 src/base/loader.h src/base/sticky.h src/base/nccl.h
src/base/driver.h:
/usr/local/cuda/include/cuda.h:
src/base/cudagl.h:
/usr/include/lua5.4/lua.h:
/usr/include/lua5.4/luaconf.h:
src/base/loader.h:
src/base/sticky.h:
src/base/nccl.h:
