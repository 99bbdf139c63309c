build2/obj/host/launch.o: src/host/launch.c src/host/host.h \
 /usr/include/lua5.4/lua.h /usr/include/lua5.4/luaconf.h
src/host/host.h:
/usr/include/lua5.4/lua.h:
/usr/include/lua5.4/luaconf.h:
