build2/obj/base/driver.o: src/base/driver.c /usr/include/lua5.4/lauxlib.h \
 /usr/include/lua5.4/luaconf.h /usr/include/lua5.4/lua.h \
 src/base/driver.h /usr/local/cuda/include/cuda.h src/base/cudagl.h \
 /usr/include/lua5.4/lua.h src/base/loader.h src/base/sticky.h
/usr/include/lua5.4/lauxlib.h:
/usr/include/lua5.4/luaconf.h:
/usr/include/lua5.4/lua.h:
src/base/driver.h:
/usr/local/cuda/include/cuda.h:
src/base/cudagl.h:
/usr/include/lua5.4/lua.h:
src/base/loader.h:
src/base/sticky.h:
