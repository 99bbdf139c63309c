build2/obj/host/repl.o: src/host/repl.c /usr/include/lua5.4/lauxlib.h \
 /usr/include/lua5.4/luaconf.h /usr/include/lua5.4/lua.h \
 /usr/include/lua5.4/lua.h /usr/include/lua5.4/lualib.h src/host/host.h
/usr/include/lua5.4/lauxlib.h:
/usr/include/lua5.4/luaconf.h:
/usr/include/lua5.4/lua.h:
/usr/include/lua5.4/lua.h:
/usr/include/lua5.4/lualib.h:
src/host/host.h:
