-- The embedding API (src/cugraph.h) checks what C hands it like the Lua API.
local H = require "support.helper"

describe("embedding API", function()
  it("refuses buffer sizes whose byte size overflows, and bad types and pointers", function()
    local p = assert(io.popen(H.build .. "/capi " .. H.quote(H.build .. "/../lua") .. " 2>&1"))
    local out = p:read("a")
    assert.is_true(p:close(), out)
    assert.matches("f64 of 2%^61%+1: cugraph_pushbuffer: the size in bytes of the f64 buffer overflows", out)
    assert.matches("u8 of SIZE_MAX: cugraph_pushbuffer: the size in bytes of the u8 buffer overflows", out)
    assert.matches("f32 of 2%^62: cugraph_pushbuffer: the size in bytes of the f32 buffer overflows", out)
    assert.matches("null pointer: cugraph_pushbuffer: null pointer or size 0", out)
    assert.matches("unknown type: cugraph_pushbuffer: unknown element type 'float4'", out)
    assert.matches("f32 of 4: ok", out)
  end)
end)
