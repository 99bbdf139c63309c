build2/obj/types/interop.o: src/types/interop.c src/types/types.h \
 src/capture/capture.h src/base/base.h /usr/include/lua5.4/lua.h \
 /usr/include/lua5.4/luaconf.h /usr/include/lua5.4/lauxlib.h \
 /usr/include/lua5.4/lua.h src/base/ctype.h src/base/driver.h \
 /usr/local/cuda/include/cuda.h src/base/cudagl.h src/base/loader.h \
 src/base/sticky.h
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
