-- Jobs the way clusters start them: cuda.world() from the variables of
-- the launcher, Slurm, Open MPI and PMI starters; the TCP rendezvous; and
-- cuda.comm_world across processes started as srun, mpirun and the
-- launcher start them (loopback, the NCCL double without a GPU).
local H = require "spec.support.helper"
local cuda = H.cuda

-- n devices for n ranks: the double makes them, a GPU machine must have them
local function devices(n)
  if H.double then return "CUDA_DOUBLE_DEVICES=" .. math.max(n, 2) end
  if cuda.device_count() < n then return nil end
  return ""
end

-- Unique per run, so that jobs of concurrent spec runs never meet.
local serial = 0
local function job_id()
  serial = serial + 1
  return ("spec-%d-%d-%d"):format(os.time(), math.random(1 << 30), serial)
end

-- cuda.world() of a process with the variables env, as "k=v;" pairs in
-- key order, or the error it raised.
local function world(env)
  local code, out = H.script([[
    local cuda = require "cugraph"
    local ok, w = pcall(cuda.world)
    if not ok then print("ERROR " .. tostring(w)) return end
    local keys = {}
    for k in pairs(w) do keys[#keys + 1] = k end
    table.sort(keys)
    local t = {}
    for _, k in ipairs(keys) do t[#t + 1] = k .. "=" .. tostring(w[k]) end
    print("WORLD " .. table.concat(t, ";"))
  ]], env)
  assert.equals(0, code, out)
  return assert(out:match("WORLD ([^\n]*)") or out:match("(ERROR [^\n]*)"), out)
end

describe("cuda.world", function()
  it("is one process of its own without a starter", function()
    assert.equals("job=;local_rank=0;local_size=1;rank=0;size=1", world(""))
  end)

  it("reads the launcher's, Slurm's, Open MPI's and PMI's variables", function()
    assert.equals("job=j1;local_rank=1;local_size=2;rank=3;size=4;starter=cugraph-lua",
      world("CUGRAPH_RANK=3 CUGRAPH_WORLD_SIZE=4 CUGRAPH_LOCAL_RANK=1 CUGRAPH_LOCAL_WORLD_SIZE=2 CUGRAPH_JOB_ID=j1"))
    assert.equals("job=812.3;local_rank=1;rank=5;size=8;starter=Slurm",
      world("SLURM_JOB_ID=812 SLURM_STEP_ID=3 SLURM_PROCID=5 SLURM_NTASKS=8 SLURM_LOCALID=1"))
    assert.equals("job=812.0;local_rank=1;local_size=2;rank=1;size=2;starter=Slurm",
      world("SLURM_JOB_ID=812 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 SLURM_STEP_NUM_NODES=1"))
    assert.equals("job=77;local_rank=0;local_size=1;rank=2;size=3;starter=Open MPI",
      world("OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_LOCAL_RANK=0 "
            .. "OMPI_COMM_WORLD_LOCAL_SIZE=1 OMPI_MCA_ess_base_jobid=77"))
    assert.equals("job=prterun-x-1@1;local_rank=1;rank=1;size=2;starter=Open MPI",
      world("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 PMIX_NAMESPACE=prterun-x-1@1"))
    assert.equals("job=;local_rank=1;local_size=2;rank=1;size=2;starter=PMI",
      world("PMI_RANK=1 PMI_SIZE=2 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2"))
    assert.equals("job=ns;local_rank=0;rank=3;size=4;starter=PMI",
      world("PMIX_RANK=3 PMI_SIZE=4 PMI_LOCAL_RANK=0 PMIX_NAMESPACE=ns"))
  end)

  it("takes the first starter in order, and CUGRAPH_JOB_ID over the starter's job", function()
    local slurm = "SLURM_JOB_ID=9 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1"
    local ompi = "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=0"
    assert.matches("rank=2;size=3;starter=cugraph%-lua",
      world("CUGRAPH_RANK=2 CUGRAPH_WORLD_SIZE=3 " .. slurm .. " " .. ompi))
    assert.matches("rank=1;size=2;starter=Slurm", world(slurm .. " " .. ompi .. " PMI_RANK=3"))
    assert.matches("rank=0;size=4;starter=Open MPI", world(ompi .. " PMI_RANK=3"))
    assert.matches("^job=mine;", world(slurm .. " CUGRAPH_JOB_ID=mine"))
    -- a batch script's own shell, and the batch step, are one process
    assert.matches("rank=0;size=1$", world("SLURM_JOB_ID=9 SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0"))
    assert.matches("rank=0;size=1$", world("SLURM_JOB_ID=9 SLURM_STEP_ID=4294967291 SLURM_PROCID=0 "
                                            .. "SLURM_NTASKS=4 SLURM_LOCALID=0"))
  end)

  it("names the variable that is missing or wrong", function()
    local cases = {
      { "CUGRAPH_RANK=1", "CUGRAPH_RANK is set but CUGRAPH_WORLD_SIZE is not" },
      { "CUGRAPH_WORLD_SIZE=2", "CUGRAPH_WORLD_SIZE is set but CUGRAPH_RANK is not" },
      { "CUGRAPH_RANK=2 CUGRAPH_WORLD_SIZE=2", "CUGRAPH_RANK is 2, not below CUGRAPH_WORLD_SIZE (2)" },
      { "CUGRAPH_RANK=x CUGRAPH_WORLD_SIZE=2", "CUGRAPH_RANK is 'x', not a whole number from 0" },
      { "SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0", "SLURM_STEP_ID is set but SLURM_JOB_ID is not" },
      { "SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_NTASKS=2 SLURM_LOCALID=0", "SLURM_STEP_ID is set but SLURM_PROCID is not" },
      { "SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_LOCALID=0", "SLURM_STEP_ID is set but SLURM_NTASKS is not" },
      { "SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=2", "SLURM_STEP_ID is set but SLURM_LOCALID is not" },
      { "SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=0 SLURM_LOCALID=0", "SLURM_NTASKS is '0', not a whole number from 1" },
      { "SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_PROCID=4 SLURM_NTASKS=4 SLURM_LOCALID=0", "SLURM_PROCID is 4, not below SLURM_NTASKS (4)" },
      { "SLURM_JOB_ID=1 SLURM_STEP_ID=s SLURM_PROCID=0", "SLURM_STEP_ID is 's', not a whole number" },
      { "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not" },
      { "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not" },
      { "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_LOCAL_RANK is not" },
      { "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_LOCAL_SIZE=1",
        "OMPI_COMM_WORLD_LOCAL_RANK is 1, not below OMPI_COMM_WORLD_LOCAL_SIZE (1)" },
      { "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=3",
        "OMPI_COMM_WORLD_LOCAL_SIZE is 3, more than OMPI_COMM_WORLD_SIZE (2)" },
      { "PMI_RANK=0 MPI_LOCALRANKID=0", "PMI_RANK is set but PMI_SIZE is not" },
      { "PMI_SIZE=2", "PMI_SIZE is set but PMI_RANK is not" },
      { "PMIX_RANK=0", "PMIX_RANK is set but PMI_SIZE is not (PMIx does not export the world size" },
      { "PMI_RANK=0 PMI_SIZE=2", "PMI_RANK is set but neither MPI_LOCALRANKID nor PMI_LOCAL_RANK is" },
    }
    for _, c in ipairs(cases) do
      local got = world(c[1])
      assert.is_truthy(got:find("ERROR cuda.world: " .. c[2], 1, true), c[1] .. " -> " .. got)
    end
  end)

  it("picks the device by the local rank, unless CUGRAPH_LUA_DEVICE or one visible device says", function()
    local two = devices(2)
    if not two then return pending("needs two devices") end
    local function device(env)
      local code, out = H.script("print('DEV', require('cugraph').current_device())", two .. " " .. env)
      assert.equals(0, code, out)
      return tonumber(out:match("DEV\t(%d+)"))
    end
    local slurm = "SLURM_JOB_ID=9 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1"
    assert.equals(1, device(slurm))
    assert.equals(1, device("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1"))
    assert.equals(1, device("PMI_RANK=1 PMI_SIZE=2 MPI_LOCALRANKID=1"))
    assert.equals(0, device(slurm .. " CUGRAPH_LUA_DEVICE=0"))
    assert.equals(0, device(slurm .. " CUDA_VISIBLE_DEVICES=1"))
    assert.equals(1, device(slurm .. " CUDA_VISIBLE_DEVICES=0,1"))
    assert.equals(0, device("SLURM_PROCID=1 SLURM_LOCALID=1")) -- no step: no starter
  end)

  it("derives a rendezvous from the job, or says what to set", function()
    local code, out = H.script([[
      local core = require "cugraph.core"
      print("RDZV", core.world_rendezvous())
    ]], "SLURM_JOB_ID=812 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=8 SLURM_LOCALID=1 "
        .. "SLURM_STEP_NODELIST='gpu[03-04,07],cpu1' SLURM_JOB_NODELIST=other")
    assert.equals(0, code, out)
    local port = tonumber(out:match("RDZV\ttcp\tgpu03:(%d+)"))
    assert.is_true(port and port >= 20000 and port < 30000, out)
    local function rdzv(env)
      local _, o = H.script("print('RDZV', pcall(require('cugraph.core').world_rendezvous))", env)
      return o
    end
    assert.matches("RDZV\ttrue\ttcp\tgpu9:%d+", rdzv("SLURM_JOB_ID=8 SLURM_STEP_ID=0 SLURM_PROCID=1 "
      .. "SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_JOB_NODELIST=gpu9"))
    -- all ranks on this machine, a job id: the loopback at a port of the job
    assert.matches("RDZV\ttrue\ttcp\t127%.0%.0%.1:%d+", rdzv("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 "
      .. "OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_MCA_ess_base_jobid=5"))
    assert.matches("RDZV\ttrue\ttcp\th:1", rdzv("PMI_RANK=1 PMI_SIZE=2 MPI_LOCALRANKID=1 CUGRAPH_RDZV=h:1 "
      .. "CUGRAPH_RENDEZVOUS=/f"))
    assert.matches("RDZV\ttrue\tfile\t/f", rdzv("PMI_RANK=1 PMI_SIZE=2 MPI_LOCALRANKID=1 CUGRAPH_RENDEZVOUS=/f"))
    assert.matches("RDZV\ttrue\n", rdzv(""))
    local o = rdzv("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0")
    assert.is_truthy(o:find("cuda.comm_world: OMPI_COMM_WORLD_SIZE is 2 but no rendezvous is set: set "
      .. "CUGRAPH_RDZV=host:port (rank 0's machine and a free port) or CUGRAPH_RENDEZVOUS=PATH", 1, true), o)
    o = rdzv("PMI_RANK=1 PMI_SIZE=2 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2")
    assert.is_truthy(o:find("PMI_SIZE is 2 but no rendezvous is set and the starter gives no job id", 1, true), o)
    o = rdzv("CUGRAPH_RANK=1 CUGRAPH_WORLD_SIZE=2")
    assert.is_truthy(o:find("neither CUGRAPH_RDZV nor CUGRAPH_RENDEZVOUS is set; start the script with "
      .. "cugraph-lua --nproc N", 1, true), o)
  end)
end)

describe("cuda.nccl_rendezvous_tcp", function()
  it("checks its arguments", function()
    local function err(...) return tostring(H.error_of(cuda.nccl_rendezvous_tcp, ...)) end
    assert.matches("'h' is not host:port", err("h", 1, 2))
    assert.matches("'h:0': the port must be a number from 1 to 65535", err("h:0", 1, 2))
    assert.matches("'h:70000': the port must", err("h:70000", 1, 2))
    assert.matches("'::1:5': write an IPv6 address in brackets", err("::1:5", 1, 2))
    assert.matches("'%[::1%]5' is not %[address%]:port", err("[::1]5", 1, 2))
    assert.matches("':5' names no host", err(":5", 1, 2))
    assert.matches("rank must be in 0 .. size%-1", err("h:5", 2, 2))
    assert.matches("the timeout must be a positive", err("h:5", 1, 2, 0))
    assert.matches("the timeout must be a positive", err("h:5", 1, 2, 0 / 0))
    assert.matches("a job id is one line", err("h:5", 1, 2, 1, "a\nb"))
    assert.matches("contains a NUL byte", err("h:5\0", 1, 2))
  end)

  it("hands rank 0's id to the others, over IPv4, IPv6 and a host name", function()
    local two = devices(2)
    if not two then return pending("needs two devices") end
    local v6 = H.free_port(true)
    for _, addr in ipairs { "127.0.0.1:" .. H.free_port(), "localhost:" .. H.free_port(),
                            v6 and "[::1]:" .. v6 or nil } do
      local res = H.ranks(([[
        local cuda = require "cugraph"
        local rank = tonumber(os.getenv("R"))
        local id = cuda.nccl_rendezvous_tcp(%q, rank, 2, 10, "j")
        print("ID " .. #id .. " " .. id:gsub("%%z", ""))
      ]]):format(addr), { "R=0", "R=1" }, two)
      assert.equals(0, res[1].code, res[1].out)
      assert.equals(0, res[2].code, res[2].out)
      local id = res[1].out:match("ID 128 (%S+)")
      assert.is_truthy(id, res[1].out)
      assert.equals(id, res[2].out:match("ID 128 (%S+)"), addr)
    end
  end)
end)

-- The all-reduce every rank of a job runs: rank r gives r + 1.
local ALLREDUCE = [[
  local cuda = require "cugraph"
  local w = cuda.world()
  local c = cuda.comm_world()
  assert(c:rank() == w.rank and c:size() == w.size)
  local x = cuda.buffer("f64", 2):upload { w.rank + 1, 10 }
  c:all_reduce(x, x)
  print(("RANK %d/%d device %d: %s"):format(c:rank(), c:size(), cuda.current_device(),
                                            table.concat(x:download(), " ")))
]]

-- The environment of each of n ranks of a starter, from fmt(rank).
local function each(n, fmt)
  local t = {}
  for r = 0, n - 1 do t[#t + 1] = fmt(r) end
  return t
end

local function all_reduced(res, n)
  local sum = n * (n + 1) / 2
  for r, p in ipairs(res) do
    assert.equals(0, p.code, p.out)
    assert.is_truthy(p.out:find(("RANK %d/%d device %d: %.1f %.1f"):format(r - 1, n, r - 1, sum, 10.0 * n),
                                1, true), p.out)
  end
end

describe("jobs started by srun, mpirun and PMI", function()
  local function slurm(n, job, extra)
    return each(n, function(r)
      return ("SLURM_JOB_ID=%s SLURM_STEP_ID=0 SLURM_PROCID=%d SLURM_NTASKS=%d SLURM_LOCALID=%d %s")
             :format(job, r, n, r, extra or "")
    end)
  end
  local function ompi(n, extra)
    return each(n, function(r)
      return ("OMPI_COMM_WORLD_RANK=%d OMPI_COMM_WORLD_SIZE=%d OMPI_COMM_WORLD_LOCAL_RANK=%d %s")
             :format(r, n, r, extra or "")
    end)
  end
  local function pmi(n, extra)
    return each(n, function(r)
      return ("PMI_RANK=%d PMI_SIZE=%d MPI_LOCALRANKID=%d %s"):format(r, n, r, extra or "")
    end)
  end
  local function common(n) return devices(n) and devices(n) .. " CUGRAPH_RDZV_TIMEOUT=20" end

  it("all-reduce across srun's tasks (SLURM_*), at CUGRAPH_RDZV", function()
    local env = common(3)
    if not env then return pending("needs three devices") end
    all_reduced(H.ranks(ALLREDUCE, slurm(3, job_id(), "CUGRAPH_RDZV=127.0.0.1:" .. H.free_port()), env), 3)
  end)

  it("all-reduce across srun's tasks at the rendezvous of the step's first node", function()
    local env = common(2)
    if not env then return pending("needs two devices") end
    all_reduced(H.ranks(ALLREDUCE, slurm(2, job_id(), "SLURM_STEP_NODELIST=localhost"), env), 2)
  end)

  it("all-reduce across mpirun's ranks (OMPI_*), at CUGRAPH_RDZV and on this machine by default", function()
    local env = common(3)
    if not env then return pending("needs three devices") end
    all_reduced(H.ranks(ALLREDUCE, ompi(3, "CUGRAPH_RDZV=127.0.0.1:" .. H.free_port()), env), 3)
    all_reduced(H.ranks(ALLREDUCE, ompi(2, "OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_MCA_ess_base_jobid=" .. job_id()),
                        common(2)), 2)
  end)

  it("all-reduce across a PMI starter's ranks (PMI_*), at a host name", function()
    local env = common(2)
    if not env then return pending("needs two devices") end
    all_reduced(H.ranks(ALLREDUCE, pmi(2, "CUGRAPH_RDZV=localhost:" .. H.free_port()), env), 2)
  end)

  it("fails every rank with a clear error, within the timeout, when a rank dies", function()
    local env = devices(3)
    if not env then return pending("needs three devices") end
    local src = "if os.getenv('OMPI_COMM_WORLD_RANK') == '1' then os.exit(3) end\n" .. ALLREDUCE
    local addr = "127.0.0.1:" .. H.free_port()
    local t0 = os.time()
    local res = H.ranks(src, ompi(3, "CUGRAPH_RDZV=" .. addr .. " CUGRAPH_JOB_ID=jd"),
                        env .. " CUGRAPH_RDZV_TIMEOUT=1")
    assert.is_true(os.time() - t0 < 10, "the ranks outwaited their timeout")
    assert.equals(3, res[2].code)
    assert.equals(1, res[1].code, res[1].out)
    assert.is_truthy(res[1].out:find("cuda.nccl_rendezvous_tcp: rank 0 waited 1 s at " .. addr
      .. " for the ranks of job 'jd': 2 of 3 arrived (missing: 1)", 1, true), res[1].out)
    assert.equals(1, res[3].code, res[3].out)
    assert.is_truthy(res[3].out:find("rank 2: rank 0 at " .. addr .. " gave up after 1 s: 2 of 3 ranks of "
      .. "job 'jd' arrived (missing: 1)", 1, true), res[3].out)
    -- rank 0 dies: the others cannot reach it
    src = "if os.getenv('OMPI_COMM_WORLD_RANK') == '0' then os.exit(3) end\n" .. ALLREDUCE
    res = H.ranks(src, ompi(2, "CUGRAPH_RDZV=" .. addr), devices(2) .. " CUGRAPH_RDZV_TIMEOUT=1")
    assert.equals(1, res[2].code, res[2].out)
    assert.is_truthy(res[2].out:find("rank 1 could not reach rank 0 at " .. addr .. " within 1 s "
      .. "(Connection refused): it has not started, or failed before it listened", 1, true), res[2].out)
  end)

  it("refuses a rank of another job, of another world, or a rank given twice", function()
    local env = devices(2)
    if not env then return pending("needs two devices") end
    local addr = "127.0.0.1:" .. H.free_port()
    local ranks = ompi(2, "CUGRAPH_RDZV=" .. addr)
    ranks[1] = ranks[1] .. " CUGRAPH_JOB_ID=job-a"
    ranks[2] = ranks[2] .. " CUGRAPH_JOB_ID=job-b"
    local res = H.ranks(ALLREDUCE, ranks, env .. " CUGRAPH_RDZV_TIMEOUT=1")
    assert.equals(1, res[2].code, res[2].out)
    assert.is_truthy(res[2].out:find("rank 1: rank 0 at " .. addr .. " is of job 'job-a', rank 1 of job "
      .. "'job-b': a rank of another run", 1, true), res[2].out)
    assert.equals(1, res[1].code, res[1].out)
    assert.is_truthy(res[1].out:find("1 of 2 arrived (missing: 1); refused 1 peer (the last: rank 1 of "
      .. "job 'job-b')", 1, true), res[1].out)
    -- a world of 3: rank 1 comes, then a second rank 1 and a rank of a
    -- world of 4 are refused, then rank 2 completes it
    res = H.ranks([[
      local cuda = require "cugraph"
      local r, n = tonumber(os.getenv("R")), tonumber(os.getenv("N"))
      if os.getenv("D") then os.execute("sleep " .. os.getenv("D")) end
      local ok, e = pcall(cuda.nccl_rendezvous_tcp, os.getenv("A"), r, n, 5, "j")
      print(ok and "GOT " .. #e or e)
    ]], { "R=0 N=3", "R=1 N=3", "R=1 N=3 D=0.5", "R=2 N=4", "R=2 N=3 D=1.5" }, env .. " A=" .. addr)
    for i = 1, 5 do assert.equals(0, res[i].code, res[i].out) end
    for _, i in ipairs { 1, 2, 5 } do assert.matches("GOT 128\n", res[i].out) end
    assert.is_truthy(res[3].out:find("rank 1: rank 0 at " .. addr .. " has a rank 1 already: two processes "
      .. "were given rank 1", 1, true), res[3].out)
    assert.is_truthy(res[4].out:find("rank 2: rank 0 at " .. addr .. " has a world of 3 ranks, rank 2 one "
      .. "of 4", 1, true), res[4].out)
  end)

  it("says so when the port is taken", function()
    local env = devices(2)
    if not env then return pending("needs two devices") end
    local port, release = H.taken_port()
    local res = H.ranks(ALLREDUCE, ompi(2, "CUGRAPH_RDZV=127.0.0.1:" .. port), env .. " CUGRAPH_RDZV_TIMEOUT=1")
    local code, out = H.run("--nproc 2 --rdzv 127.0.0.1:" .. port .. " -e " .. H.quote(
      "require('cugraph').comm_world()"), env .. " CUGRAPH_RDZV_TIMEOUT=5")
    release()
    assert.equals(1, res[1].code, res[1].out)
    assert.is_truthy(res[1].out:find("rank 0 cannot listen at 127.0.0.1:" .. port .. ": the port is taken",
                                     1, true), res[1].out)
    assert.equals(1, res[2].code, res[2].out)
    assert.equals(1, code, out)
    assert.is_truthy(out:find("the port is taken", 1, true), out)
    assert.matches("rank 0 exited with status 1; stopping the others", out)
  end)
end)

describe("the launcher with a TCP rendezvous", function()
  local function script(src)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(src)
    f:close()
    return path
  end

  it("all-reduce across --nproc N --rdzv 127.0.0.1:PORT", function()
    local env = devices(3)
    if not env then return pending("needs three devices") end
    local path = script(ALLREDUCE .. "print('RDZV ' .. tostring(os.getenv('CUGRAPH_RDZV')) .. ' '"
                        .. " .. tostring(os.getenv('CUGRAPH_RENDEZVOUS')))\n")
    local port = H.free_port()
    local code, out = H.run("--nproc 3 --rdzv 127.0.0.1:" .. port .. " " .. H.quote(path),
                            env .. " CUGRAPH_RENDEZVOUS=/stale")
    os.remove(path)
    assert.equals(0, code, out)
    for r = 0, 2 do
      assert.is_truthy(out:find(("RANK %d/3 device %d: 6.0 30.0"):format(r, r), 1, true), out)
    end
    assert.matches("RDZV 127%.0%.0%.1:" .. port .. " nil", out)
  end)

  it("takes --nnodes, --node-rank and the job from srun's tasks, one per machine", function()
    local env = devices(4)
    if not env then return pending("needs four devices") end
    local job = job_id()
    -- two "machines" of two GPUs: each launcher's ranks take devices 0 and 1
    local res = H.ranks(ALLREDUCE .. "print('JOB ' .. os.getenv('CUGRAPH_JOB_ID'))\n",
      each(2, function(r)
        return ("SLURM_JOB_ID=%s SLURM_STEP_ID=2 SLURM_PROCID=%d SLURM_NTASKS=2 SLURM_LOCALID=0 "
                .. "SLURM_STEP_NODELIST=localhost,elsewhere"):format(job, r)
      end), env, "--nproc 2")
    local out = res[1].out .. res[2].out
    for r = 0, 3 do
      assert.is_truthy(out:find(("RANK %d/4 device %d: 10.0 40.0"):format(r, r % 2), 1, true), out)
    end
    assert.matches("JOB " .. job:gsub("%p", "%%%0") .. "%.2\n", out)
  end)

  it("explains its TCP options", function()
    local code, out = H.run("--nproc 2 --rdzv 127.0.0.1 x.lua")
    assert.equals(1, code)
    assert.matches("%-%-rdzv '127%.0%.0%.1' is not host:port", out)
    code, out = H.run("--nproc 2 --rdzv h:1 --rendezvous /tmp/f x.lua")
    assert.equals(1, code)
    assert.matches("give %-%-rendezvous PATH or %-%-rdzv HOST:PORT, not both", out)
    code, out = H.run("--nproc 2 x.lua", "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1")
    assert.equals(1, code)
    assert.matches("Open MPI started more than one launcher on this machine %(local rank 1%)", out)
    code, out = H.run("--nproc 2 x.lua", "OMPI_COMM_WORLD_RANK=1")
    assert.equals(1, code)
    assert.matches("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not", out)
    code, out = H.run("--nproc 1 x.lua", "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0")
    assert.equals(1, code)
    assert.matches("OMPI_COMM_WORLD_SIZE is 2 but no rendezvous is set", out)
    code, out = H.run("--nproc 2")
    assert.equals(1, code)
    assert.matches("%-%-rdzv HOST:PORT", out)
  end)

  it("says what is wrong with CUGRAPH_RDZV_TIMEOUT", function()
    local code, out = H.script("require('cugraph').comm_world()",
                               "CUGRAPH_RANK=1 CUGRAPH_WORLD_SIZE=2 CUGRAPH_RDZV=h:1 CUGRAPH_RDZV_TIMEOUT=soon")
    assert.equals(1, code)
    assert.matches("cuda.comm_world: CUGRAPH_RDZV_TIMEOUT is 'soon', not a number of seconds from 0.001 to 1e%+09", out)
  end)
end)
