-- cugraph: CUDA graphs driven from Lua 5.4. This file parses in every Lua,
-- so that another one (Lua 5.1 and LuaJIT run Debian's busted) is told
-- which it needs instead of failing on the first 5.4 operator; the front
-- end itself is cugraph/main.lua.
if _VERSION ~= "Lua 5.4" then
  error("cugraph needs Lua 5.4, and this is " .. tostring(_VERSION) .. ": run the "
        .. "script with cugraph-lua or lua5.4 (busted: busted --lua=cugraph-lua, "
        .. "or in a checkout build/cugraph-lua $(command -v busted))", 0)
end
return require "cugraph.main"
