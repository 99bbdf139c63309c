-- The driver door, the device, error objects and the no-driver path.
local H = require "support.helper"
local cuda = H.cuda

describe("the driver", function()
  it("reports the device", function()
    local d = cuda.device()
    assert.is_string(d.name)
    assert.matches("^%d+%.%d+$", d.compute_capability)
    assert.is_true(d.memory > 0)
    assert.is_true(d.free_memory > 0 and d.free_memory <= d.memory)
    assert.is_true(d.multiprocessors > 0)
    assert.is_true(d.driver_version >= 12000)
    assert.is_true(d.max_threads_per_block >= 1024)
    assert.equals(0, d.ordinal)
    assert.is_true(cuda.device_count() >= 1)
  end)

  it("refuses a device that does not exist", function()
    assert.error_matches(function() cuda.device(1000) end, "no such device")
    assert.error_matches(function() cuda.select(-1) end, "out of range")
  end)

  it("will not switch devices after the first GPU call", function()
    cuda.device()
    assert.error_matches(function() cuda.select(1) end, "already in use")
  end)

  it("raises error objects that name the API and the code", function()
    local err = H.error_of(cuda.buffer, "u8", 1 << 50)
    assert.equals("cuMemAlloc", err.api)
    assert.equals("CUDA_ERROR_OUT_OF_MEMORY", err.name)
    assert.equals(2, err.code)
    assert.is_string(err.message)
    assert.equals("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: " .. err.message, tostring(err))
  end)

  it("recovers from an out-of-memory error", function()
    assert.has_error(function() cuda.buffer("f64", 1 << 47) end)
    local b = cuda.buffer("f32", 1024)
    b:fill(2)
    assert.equals(2, b:download()[1024])
  end)

  it("reports its status", function()
    local s = cuda.status()
    assert.is_true(s.initialized)
    assert.is_nil(s.poisoned)
    assert.is_false(s.capturing)
    assert.is_number(s.finalizer_errors)
  end)

  it("lists the element types", function()
    assert.same({ "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16" },
                cuda.types)
  end)
end)

describe("without a driver", function()
  local env = "CUGRAPH_LUA_LIBCUDA=/nonexistent/libcuda.so.1"

  it("the host still answers -v and --help", function()
    local code, out = H.run("-v", env)
    assert.equals(0, code)
    assert.matches("cugraph%-lua %d+%.%d+%.%d+ %(Lua 5%.4", out)
    code, out = H.run("--help", env)
    assert.equals(0, code)
    assert.matches("CUGRAPH_LUA_LIBCUDA", out)
  end)

  it("scripts that never touch the GPU run", function()
    local code, out = H.run("-e " .. H.quote('local c = require "cugraph"; print(c.version, 6 * 7)'), env)
    assert.equals(0, code)
    assert.matches("42", out)
  end)

  it("the first GPU call fails clearly, with status 1", function()
    local code, out = H.run("-e " .. H.quote('require("cugraph").device()'), env)
    assert.equals(1, code)
    assert.matches("no CUDA driver found %(/nonexistent/libcuda.so.1%)", out)
  end)

  it("says clearly when the driver sees no GPU", function()
    -- plain: with no device there is nothing for a sanitizer to check, and
    -- compute-sanitizer's own exit status would hide the child's
    local code, out = H.run("-e " .. H.quote('require("cugraph").buffer("f32", 4)'),
                            "CUDA_VISIBLE_DEVICES=", { plain = true })
    assert.equals(1, code)
    assert.matches("cuInit: CUDA_ERROR_NO_DEVICE: no CUDA%-capable device is detected", out)
    code, out = H.run("-v", "CUDA_VISIBLE_DEVICES=", { plain = true })
    assert.equals(0, code, out)
  end)

  it("says so for every kind of GPU object", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      for _, f in ipairs { function() cuda.buffer("f32", 4) end,
                           function() cuda.stream() end,
                           function() cuda.scalar("u32") end,
                           function() cuda.event() end,
                           function() cuda.device() end } do
        local ok, err = pcall(f)
        assert(not ok and err:find("no CUDA driver found"), err)
      end
      assert(cuda.device_count() == 0)
      local ok, why = cuda.available()
      assert(ok == false and why:find("no CUDA driver found"), why)
      print("all refused")
    ]], env)
    assert.equals(0, code, out)
    assert.matches("all refused", out)
  end)
end)
