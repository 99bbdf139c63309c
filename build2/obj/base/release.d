build2/obj/base/release.o: src/base/release.c src/base/base.h \
 /usr/include/lua5.4/lua.h /usr/include/lua5.4/luaconf.h \
 /usr/include/lua5.4/lauxlib.h /usr/include/lua5.4/lua.h src/base/ctype.h \
 src/base/driver.h /usr/local/cuda/include/cuda.h src/base/cudagl.h \
 src/base/loader.h src/base/sticky.h src/base/nccl.h
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
src/base/nccl.h:
