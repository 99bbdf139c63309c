-- Binary images and module files are checked before the driver sees them:
-- the driver takes a cubin or fatbin without a length, so a forged or cut
-- one would make it read past the string.
local H = require "support.helper"
local cuda = H.cuda

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- s with the bytes at the 0-based offset off replaced by bytes.
local function patch(s, off, bytes)
  return s:sub(1, off) .. bytes .. s:sub(off + #bytes + 1)
end

local function u(s, off, n) return (string.unpack("<I" .. n, s, off + 1)) end

local here = debug.getinfo(1, "S").short_src

-- The message cuda.module(src) raises, with the position checked to be
-- this file and the line of the call.
local function refused(src, fn)
  local line = debug.getinfo(1, "l").currentline + 1
  local ok, err = pcall(function() (fn or cuda.module)(src) end)
  assert.is_false(ok, "expected an error")
  assert.is_string(err)
  local at = here .. ":" .. line .. ": "
  assert.equals(at, err:sub(1, #at))
  return err:sub(#at + 1)
end

-- A 64-byte ELF64 little-endian header for NVIDIA CUDA (machine 190).
local function elf_header(phoff, shoff, phnum, shnum, shstrndx)
  return "\127ELF\2\1\1" .. ("\0"):rep(9) ..
         string.pack("<I2I2I4I8i8i8I4I2I2I2I2I2I2", 2, 190, 1, 0, phoff, shoff,
                     0, 64, 56, phnum, 64, shnum, shstrndx)
end

-- A fatbin of one uncompressed sm_90 entry, a cubin (kind 2) or PTX (1),
-- laid out as nvcc does.
local function fatbin_of(payload, kind)
  local entry = string.pack("<I2I2I4I8I4I4I2I2I4I4I4I8I8I8", kind or 2, 0x101, 64,
                            #payload, 0, 0, 0, 0, 90, 0, 0, 0x11, 0, 0)
  return string.pack("<I4I2I2I8", 0xBA55ED50, 1, 16, #entry + #payload) ..
         entry .. payload
end

-- Runs a chunk in a child cugraph-lua with at most 10 s and 2 GB of address
-- space: unchecked, reading /dev/zero never ends and opening a FIFO blocks.
-- (An AddressSanitizer build reserves more address space than that: the
-- time limit alone then.)
local LIMIT = os.getenv("ASAN_OPTIONS") and "" or "ulimit -v 2000000; "
local function child(src)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  local p = assert(io.popen(LIMIT .. "timeout 10 " .. H.build ..
                            "/cugraph-lua " .. H.quote(path) .. " 2>&1"))
  local out = p:read("a")
  local _, _, code = p:close()
  os.remove(path)
  return code, out
end

-- What cuda.load_module(path) raises in a child process.
local function refused_in_child(path)
  return child(("local ok, err = pcall(function() require('cugraph').load_module(%q) end)\n" ..
                "io.write(tostring(ok), ' ', tostring(err))\n"):format(path))
end

describe("cuda.module(image)", function()
  local cubin, fatbin
  setup(function()
    cubin = read(H.build .. "/kernels.cubin")
    fatbin = read(H.build .. "/kernels.fatbin")
  end)

  it("refuses a 16-byte fatbin header that claims 1 MiB of entries", function()
    local forged = string.pack("<I4I2I2I8", 0xBA55ED50, 1, 16, 1 << 20)
    assert.equals("module: fatbin: header says 1048576 bytes of entries, " ..
                  "the image has 0", refused(forged))
  end)

  it("refuses an ELF header whose section table lies past the end", function()
    assert.equals("module: cubin: section header table (offset 64, 10 x 64 " ..
                  "bytes) lies past the end of the 64-byte image",
                  refused(elf_header(0, 64, 0, 10, 1)))
    -- an offset near 2^64, where offset + size would wrap
    assert.equals("module: cubin: section header table (offset " ..
                  "18446744073709551600, 10 x 64 bytes) lies past the end of " ..
                  "the 64-byte image", refused(elf_header(0, -16, 0, 10, 1)))
    assert.equals("module: cubin: 40 bytes, shorter than an ELF header (64)",
                  refused(elf_header(0, 64, 0, 10, 1):sub(1, 40)))
  end)

  it("refuses a cubin whose program header table lies past the end", function()
    local phnum = u(cubin, 0x38, 2)
    local bad = patch(cubin, 0x20, string.pack("<I8", #cubin - 8))
    assert.equals(("module: cubin: program header table (offset %d, %d x 56 " ..
                   "bytes) lies past the end of the %d-byte image"):format(
                    #cubin - 8, phnum, #cubin), refused(bad))
  end)

  it("refuses a cubin with a section past the end, or a bad name table", function()
    local shoff, shnum = u(cubin, 0x28, 8), u(cubin, 0x3c, 2)
    local sh2 = shoff + 2 * 64 -- .strtab in nvcc's cubins; any non-empty one does
    local bad = patch(cubin, sh2 + 0x20, string.pack("<I8", #cubin))
    assert.equals(("module: cubin: section 2 (offset %d, %d bytes) lies past " ..
                   "the end of the %d-byte image"):format(u(cubin, sh2 + 0x18, 8),
                                                          #cubin, #cubin),
                  refused(bad))
    bad = patch(cubin, 0x3e, string.pack("<I2", shnum))
    assert.equals(("module: cubin: section name table index %d is not a " ..
                   "NUL-terminated string table (of %d sections)"):format(shnum, shnum),
                  refused(bad))
  end)

  it("refuses kernels.cubin cut short anywhere", function()
    local shoff, shnum = u(cubin, 0x28, 8), u(cubin, 0x3c, 2)
    assert.equals(("module: cubin: section header table (offset %d, %d x 64 " ..
                   "bytes) lies past the end of the 2000-byte image"):format(shoff, shnum),
                  refused(cubin:sub(1, 2000)))
    for _, cut in ipairs { 4, 63, 64, 1000, shoff, shoff + 64 * shnum - 1, #cubin - 1 } do
      local msg = refused(cubin:sub(1, cut))
      assert.matches("^module: cubin: ", msg)
      assert.is_truthy(msg:find("past the end of the " .. cut .. "-byte image", 1, true) or
                       msg:find(cut .. " bytes, shorter than an ELF header", 1, true), msg)
    end
  end)

  it("refuses kernels.fatbin cut short, or with an entry past its end", function()
    local body = u(fatbin, 8, 8)
    for _, cut in ipairs { 16, 100, #fatbin // 2, #fatbin - 1 } do
      assert.equals(("module: fatbin: header says %d bytes of entries, the " ..
                     "image has %d"):format(body, cut - 16), refused(fatbin:sub(1, cut)))
    end
    assert.equals("module: fatbin: 15 bytes, shorter than its header (16)",
                  refused(fatbin:sub(1, 15)))
    local bad = patch(fatbin, 16 + 8, string.pack("<I8", body))
    assert.equals(("module: fatbin: entry 1 (offset 16, %d + %d bytes) lies past " ..
                   "the end of the %d bytes of entries"):format(u(fatbin, 16 + 4, 4),
                                                                body, body),
                  refused(bad))
  end)

  it("checks the cubin inside a fatbin", function()
    local shnum = u(cubin, 0x3c, 2)
    local bad = fatbin_of(patch(cubin, 0x28, string.pack("<I8", #cubin)))
    assert.equals(("module: fatbin: entry 1: cubin: section header table " ..
                   "(offset %d, %d x 64 bytes) lies past the end of the %d-byte " ..
                   "payload"):format(#cubin, shnum, #cubin), refused(bad))
    assert.matches("^module: fatbin: entry 1: cubin: .* lies past the end of " ..
                   "the 2000%-byte payload$", refused(fatbin_of(cubin:sub(1, 2000))))
  end)

  it("refuses PTX text in a fatbin that does not end inside it", function()
    local ptx = read(H.build .. "/kernels.ptx")
    assert.equals(("module: fatbin: entry 1: PTX text with no NUL in its " ..
                   "%d-byte payload"):format(#ptx), refused(fatbin_of(ptx, 1)))
  end)

  it("still loads the valid images, from files and from strings", function()
    local sig = "unsigned *out, unsigned base, int n"
    for _, src in ipairs { H.build .. "/kernels.cubin", H.build .. "/kernels.fatbin",
                           cubin, fatbin } do
      if H.sim and (src == cubin or src:match("%.cubin$")) then
        -- the simulator runs PTX, which a cubin lacks
        assert.matches("no PTX in this image; the simulator runs PTX",
                       tostring(H.error_of(cuda.module, src)), 1, true)
        goto next
      end
      local m = cuda.module(src)
      assert.equals("iota_u32(u32*, u32, i32)", m:kernel("iota_u32", sig):signature())
      m:free()
      ::next::
    end
    local m = cuda.module(H.build .. "/kernels.ptx")
    assert.equals("saxpy(f32, u64|ptr, u64|ptr, b32)", m.saxpy:signature())
  end)
end)

describe("cuda.load_module(path)", function()
  it("refuses a path with a NUL byte instead of loading its prefix", function()
    local path = H.build .. "/kernels.ptx\0junk"
    assert.equals(("load_module: the path %q contains a NUL byte"):format(path),
                  refused(path, cuda.load_module))
  end)

  it("refuses a directory, naming it, at the caller's line", function()
    assert.equals("load_module: " .. H.build .. ": a directory, not a regular file",
                  refused(H.build, cuda.load_module))
    assert.equals("load_module: /no/such/file.ptx: No such file or directory",
                  refused("/no/such/file.ptx", cuda.load_module))
  end)

  it("refuses /dev/zero unread", function()
    local code, out = refused_in_child("/dev/zero")
    assert.equals(0, code, out)
    assert.matches("^false .*:1: load_module: /dev/zero: a character device, not a " ..
                   "regular file$", out)
  end)

  it("refuses a FIFO without waiting for a writer", function()
    local fifo = os.tmpname()
    os.remove(fifo)
    assert.is_true(os.execute("mkfifo " .. H.quote(fifo)))
    local code, out = refused_in_child(fifo)
    os.remove(fifo)
    assert.equals(0, code, out)
    assert.matches("^false .*:1: load_module: " .. fifo:gsub("%p", "%%%0") ..
                   ": a FIFO, not a regular file$", out)
  end)

  it("refuses a file over 1 GiB without reading it", function()
    local big = os.tmpname()
    local f = assert(io.open(big, "wb"))
    f:seek("set", 2 ^ 31) -- sparse: takes no disk space
    f:write("\n")
    f:close()
    local code, out = refused_in_child(big)
    os.remove(big)
    assert.equals(0, code, out)
    assert.matches("^false .*:1: load_module: " .. big:gsub("%p", "%%%0") ..
                   ": 2147483649 bytes, more than the limit of 1073741824$", out)
  end)
end)
