build2/obj/graph/cgraph.o: src/graph/cgraph.c src/graph/graph.h \
 src/kernel/kernel.h src/types/types.h src/capture/capture.h \
 src/base/base.h /usr/include/lua5.4/lua.h /usr/include/lua5.4/luaconf.h \
 /usr/include/lua5.4/lauxlib.h /usr/include/lua5.4/lua.h src/base/ctype.h \
 src/base/driver.h /usr/local/cuda/include/cuda.h src/base/cudagl.h \
 src/base/loader.h src/base/sticky.h src/kernel/image.h src/kernel/ptx.h \
 src/cugraph.h
src/graph/graph.h:
src/kernel/kernel.h:
src/types/types.h:
src/capture/capture.h:
src/base/base.h:
/usr/include/lua5.4/lua.h:
/usr/include/lua5.4/luaconf.h:
/usr/include/lua5.4/lauxlib.h:
/usr/include/lua5.4/lua.h:
src/base/ctype.h:
src/base/driver.h:
/usr/local/cuda/include/cuda.h:
src/base/cudagl.h:
src/base/loader.h:
src/base/sticky.h:
src/kernel/image.h:
src/kernel/ptx.h:
src/cugraph.h:
