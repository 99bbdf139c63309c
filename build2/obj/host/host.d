build2/obj/host/host.o: src/host/host.c /usr/include/lua5.4/lauxlib.h \
 /usr/include/lua5.4/luaconf.h /usr/include/lua5.4/lua.h \
 /usr/include/lua5.4/lua.h /usr/include/lua5.4/lualib.h src/cugraph.h \
 /usr/local/cuda/include/cuda.h src/host/host.h
/usr/include/lua5.4/lauxlib.h:
/usr/include/lua5.4/luaconf.h:
/usr/include/lua5.4/lua.h:
/usr/include/lua5.4/lua.h:
/usr/include/lua5.4/lualib.h:
src/cugraph.h:
/usr/local/cuda/include/cuda.h:
src/host/host.h:
