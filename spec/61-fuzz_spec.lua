-- Random calls of every function and method with random arguments, inside
-- and outside captures, with frees and collections interleaved
-- (spec/support/fuzz_api.lua), run in subprocesses of CHUNK calls each so
-- that a crash is caught and its seed named. Seeded and reproducible:
-- CUGRAPH_FUZZ_SEED (first chunk's seed, 1) and CUGRAPH_FUZZ_COUNT (calls
-- in all, 20000); make fuzz-api runs a long one with a fresh seed. The
-- double's device memory is kept small (random sizes are allocated), and
-- must all come back once everything is freed and collected.
local H = require "support.helper"

local SEED = math.tointeger(tonumber(os.getenv("CUGRAPH_FUZZ_SEED") or "1"))
local COUNT = math.tointeger(tonumber(os.getenv("CUGRAPH_FUZZ_COUNT") or "20000"))
local CHUNK = 2000

describe("random calls of the whole API", function()
  if H.gpu then
    it("needs the test double", function()
      pending("the fuzz checks the double's memory accounting")
    end)
    return
  end
  assert(SEED and COUNT, "CUGRAPH_FUZZ_SEED and CUGRAPH_FUZZ_COUNT must be integers")
  for i = 0, (COUNT + CHUNK - 1) // CHUNK - 1 do
    local seed, n = SEED + i, math.min(CHUNK, COUNT - i * CHUNK)
    it(("seed %d, %d calls"):format(seed, n), function()
      local env = ("CUDA_DOUBLE_MEM_LIMIT=%d CUGRAPH_FUZZ_SEED=%d CUGRAPH_FUZZ_COUNT=%d")
                  :format(1 << 26, seed, n)
      -- a chunk that runs on (status 124) fails with its seed too
      local status, out = H.run("spec/support/fuzz_api.lua", env .. " timeout 600")
      local driver = (os.getenv("CUGRAPH_LUA_LIBCUDA") or "build/libcuda-double.so")
                     :gsub("^.*/([^/]+/[^/]+)$", "%1")
      assert(status == 0 and out:find("FUZZ%-OK"),
             ("fuzz failed (exit status %s) at seed %d; reproduce with\n  %s %s "
              .. "%s spec/support/fuzz_api.lua\n(CUGRAPH_FUZZ_VERBOSE=1 "
              .. "prints each call)\n%s"):format(tostring(status), seed, env,
                                                 "CUGRAPH_LUA_LIBCUDA=" .. driver,
                                                 driver:match("^[^/]+") .. "/cugraph-lua", out))
    end)
  end
end)
