-- Streams and events: ordering, waiting, timing, lifetime.
local H = require "support.helper"
local cuda = H.cuda

describe("cugraph.Stream", function()
  it("runs work in order and synchronizes", function()
    local s = cuda.stream()
    local x = cuda.buffer("i32", 256):fill(0)
    local inc = H.kernels().inc_i32
    for _ = 1, 5 do inc:launch(s, 2, 128, x, 256) end
    s:synchronize()
    assert.is_true(s:query())
    assert.equals(5, x:download()[256])
    assert.matches("^cugraph%.Stream %(0x%x+%)$", tostring(s))
    assert.is_number(s:handle())
  end)

  it("waits on another stream and on events", function()
    local a, b = cuda.stream(), cuda.stream()
    local x = cuda.buffer("i32", 1024):fill(0)
    local inc = H.kernels().inc_i32
    inc:launch(a, 8, 128, x, 1024)
    b:wait(a)
    inc:launch(b, 8, 128, x, 1024)
    local e = cuda.event():record(b)
    a:wait(e)
    inc:launch(a, 8, 128, x, 1024)
    a:synchronize()
    assert.equals(3, x:download()[1000])
    assert.error_matches(function() a:wait(x) end, "cugraph.Event or cugraph.Stream expected")
  end)

  it("frees three ways and refuses use after free", function()
    local s = cuda.stream()
    s:free()
    s:close()
    assert.equals("cugraph.Stream (freed)", tostring(s))
    for _, call in ipairs { function() s:synchronize() end, function() s:query() end,
                            function() s:wait(cuda.stream()) end,
                            function() s:capture(function() end) end } do
      assert.error_matches(call, "attempt to use a freed cugraph.Stream")
    end
    assert.error_matches(function() H.kernels().noop:launch(s, 1, 1) end,
                         "attempt to use a freed cugraph.Stream")
    do local _ <close> = cuda.stream() end
  end)
end)

describe("cugraph.Event", function()
  it("times work between two records", function()
    local s = cuda.stream()
    local t0, t1 = cuda.event(), cuda.event()
    local x = cuda.buffer("i32", 1 << 20):fill(0)
    t0:record(s)
    for _ = 1, 10 do H.kernels().inc_i32:launch(s, 4096, 256, x, 1 << 20) end
    t1:record(s)
    local ms = t1:elapsed(t0)
    assert.is_true(ms >= 0 and ms < 10000)
    t1:synchronize()
    assert.is_true(t1:query())
  end)

  it("refuses to time an event made without timing", function()
    local e = cuda.event { timing = false }
    assert.error_matches(function() e:elapsed(cuda.event()) end, "has no time")
    assert.error_matches(function() cuda.event(5) end, "table expected")
  end)

  it("frees three ways and refuses use after free", function()
    local e = cuda.event()
    e:free()
    e:free()
    assert.equals("cugraph.Event (freed)", tostring(e))
    assert.error_matches(function() e:record(cuda.stream()) end, "attempt to use a freed cugraph.Event")
    assert.error_matches(function() e:synchronize() end, "attempt to use a freed cugraph.Event")
    do local _ <close> = cuda.event() end
  end)
end)
