-- NumPy .npy files (format versions 1.0, 2.0 and 3.0): the header and the
-- raw little-endian data of one array in C order. Errors are strings
-- without a position; the front end raises them at the caller's line.
local npy = {}

local MAGIC = "\147NUMPY"

-- Element types by NumPy type code (kind and size), and back.
local by_code = {
  f4 = "f32", f8 = "f64", i1 = "i8", u1 = "u8", i2 = "i16", u2 = "u16",
  i4 = "i32", u4 = "u32", i8 = "i64", u8 = "u64", f2 = "f16",
}
local descr = {}
for code, t in pairs(by_code) do
  descr[t] = (code:sub(2) == "1" and "|" or "<") .. code
end
local SUPPORTED = "float16, float32, float64, int8, uint8, int16, uint16, int32, uint32, int64, uint64"

local function fail(fmt, ...) error(fmt:format(...), 0) end

-- The element type of a descr like '<f4', or an error naming it.
local function element_type(path, d)
  local order, code = d:match("^([<>|=]?)(%a%d+)$")
  local t = code and by_code[code]
  if not t then
    fail("load: %s: dtype '%s' is not supported (supported: %s)", path, d, SUPPORTED)
  end
  if order == ">" and code:sub(2) ~= "1" then
    fail("load: %s: dtype '%s' is big-endian; only little-endian data is " ..
         "supported (numpy: a.astype(a.dtype.newbyteorder('<')))", path, d)
  end
  return t
end

--- npy.read(path) -> element type, data (bytes), shape (array of integers)
function npy.read(path)
  if type(path) ~= "string" then
    fail("bad argument #1 to 'load' (string expected, got %s)", type(path))
  end
  local f, err = io.open(path, "rb")
  if not f then fail("load: %s", err) end
  local s = f:read("a")
  f:close()
  if not s or s:sub(1, 6) ~= MAGIC then fail("load: %s: not a .npy file (no \\x93NUMPY magic)", path) end
  local major = s:byte(7)
  local len_size = ({ 2, 4, 4 })[major]
  if not len_size then fail("load: %s: .npy format version %d is not supported", path, major or -1) end
  if #s < 8 + len_size then fail("load: %s: truncated header", path) end
  local hlen = string.unpack(len_size == 2 and "<I2" or "<I4", s, 9)
  local start = 9 + len_size
  if #s < start + hlen - 1 then fail("load: %s: truncated header", path) end
  local header = s:sub(start, start + hlen - 1)
  local d = header:match("'descr'%s*:%s*'([^']*)'")
  local fortran = header:match("'fortran_order'%s*:%s*(%a+)")
  local shape_text = header:match("'shape'%s*:%s*(%b())")
  if not (d and fortran and shape_text) then
    fail("load: %s: malformed header %q", path, header)
  end
  local t = element_type(path, d)
  local shape, count = {}, 1
  for dim in shape_text:gmatch("%d+") do
    shape[#shape + 1] = math.tointeger(tonumber(dim))
    count = count * shape[#shape]
  end
  if fortran == "True" and #shape > 1 then
    fail("load: %s: the array is in Fortran order; save it in C order " ..
         "(numpy: np.ascontiguousarray(a))", path)
  end
  if count == 0 then fail("load: %s: the array is empty; a buffer holds at least one element", path) end
  local size = tonumber(d:match("%d+$"))
  local data = s:sub(start + hlen)
  if #data ~= count * size then
    fail("load: %s: shape (%s) of %s needs %d bytes of data, the file has %d",
         path, table.concat(shape, ", "), d, count * size, #data)
  end
  return t, data, shape
end

--- npy.write(path, type, n, data, shape): shape (default {n}) must hold n
-- elements.
function npy.write(path, t, n, data, shape)
  if type(path) ~= "string" then
    fail("bad argument #1 to 'save' (string expected, got %s)", type(path))
  end
  if not descr[t] then -- bf16: NumPy has no such dtype
    fail("save: NumPy has no dtype for %s; save b:view(0, nil, \"u16\") for its bits", t)
  end
  shape = shape or { n }
  if type(shape) ~= "table" then
    fail("bad argument #2 to 'save' (table expected, got %s)", type(shape))
  end
  local count, dims = 1, {}
  for i, dim in ipairs(shape) do
    if math.type(dim) ~= "integer" or dim < 0 then
      fail("save: shape[%d] must be a non-negative integer, got %s", i, tostring(dim))
    end
    count = count * dim
    dims[i] = tostring(dim)
  end
  if count ~= n then
    fail("save: shape {%s} holds %d elements, the buffer %d", table.concat(dims, ", "), count, n)
  end
  local text = ("{'descr': '%s', 'fortran_order': False, 'shape': (%s%s), }")
    :format(descr[t], table.concat(dims, ", "), #dims == 1 and "," or "")
  -- magic, version, length, header: padded with spaces to a multiple of 64
  local long = #text + 11 > 65535
  local fixed = long and 12 or 10
  local pad = (64 - (fixed + #text + 1) % 64) % 64
  local header = MAGIC .. (long and "\2\0" or "\1\0")
      .. string.pack(long and "<I4" or "<I2", #text + pad + 1) .. text .. (" "):rep(pad) .. "\n"
  local f, err = io.open(path, "wb")
  if not f then fail("save: %s", err) end
  local ok, werr = f:write(header, data)
  f:close()
  if not ok then fail("save: %s: %s", path, werr) end
end

return npy
