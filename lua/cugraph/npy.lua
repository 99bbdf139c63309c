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

local MAXINT = math.maxinteger

-- a * b of non-negative integers, or nil when it passes math.maxinteger.
local function mul(a, b)
  if b ~= 0 and a > MAXINT // b then return nil end
  return a * b
end

-- The header's dictionary, strictly: exactly the keys descr (a string),
-- fortran_order (True or False) and shape (a tuple of decimal integers:
-- digits only, no sign), in any order, each once, with Python's optional
-- trailing commas; then only spaces up to the newline that ends it.
-- Returns descr, fortran, shape; or nil and what is wrong.
local function parse_header(h)
  local pos = 1
  local function skip() pos = h:find("[^ ]", pos) or #h + 1 end
  local function eat(lit)
    skip()
    if h:sub(pos, pos + #lit - 1) ~= lit then return false end
    pos = pos + #lit
    return true
  end
  if not eat("{") then return nil, "it does not start with '{'" end
  local fields = {}
  while true do
    skip()
    if eat("}") then break end
    local key = h:match("^'([%w_]+)'", pos)
    if not key then return nil, "a key is not a quoted name" end
    if fields[key] ~= nil then return nil, "key '" .. key .. "' appears twice" end
    pos = pos + #key + 2
    if not eat(":") then return nil, "no ':' after '" .. key .. "'" end
    skip()
    if key == "descr" then
      local v = h:match("^'([^']*)'", pos)
      if not v then return nil, "'descr' is not a quoted string" end
      fields.descr, pos = v, pos + #v + 2
    elseif key == "fortran_order" then
      local v = h:match("^%a+", pos)
      if v ~= "True" and v ~= "False" then
        return nil, "'fortran_order' is not True or False"
      end
      fields.fortran_order, pos = v == "True", pos + #v
    elseif key == "shape" then
      if not eat("(") then return nil, "'shape' is not a tuple" end
      local shape = {}
      while true do
        skip()
        if eat(")") then break end
        local digits = h:match("^%d+", pos)
        if not digits then
          return nil, ("shape entry %d is not a non-negative decimal integer"):format(#shape + 1)
        end
        local v = math.tointeger(tonumber(digits))
        if not v or #digits > 19 then
          return nil, ("shape entry %d (%s) is too large"):format(#shape + 1, digits)
        end
        shape[#shape + 1], pos = v, pos + #digits
        skip()
        if not eat(",") then
          if not eat(")") then return nil, "the shape's entries are not separated by ','" end
          if #shape == 1 then return nil, "a shape of one entry needs a trailing ',': (n,)" end
          break
        end
      end
      fields.shape = shape
    else
      return nil, "unknown key '" .. key .. "' (a .npy header has descr, fortran_order and shape)"
    end
    skip()
    if not eat(",") then
      if not eat("}") then return nil, "the entries are not separated by ','" end
      break
    end
  end
  for _, k in ipairs { "descr", "fortran_order", "shape" } do
    if fields[k] == nil then return nil, "key '" .. k .. "' is missing" end
  end
  if not h:sub(pos):match("^ *\n$") then return nil, "it does not end with a newline after the '}'" end
  return fields.descr, fields.fortran_order, fields.shape
end

local function checkpath(path, what)
  if type(path) ~= "string" then
    fail("bad argument #1 to '%s' (string expected, got %s)", what, type(path))
  end
  if path:find("\0", 1, true) then fail("%s: the path %q contains a NUL byte", what, path) end
end

--- npy.read(path) -> element type, data (bytes), shape (array of integers)
function npy.read(path)
  checkpath(path, "load")
  local f, err = io.open(path, "rb")
  if not f then fail("load: %s", err) end
  local s = f:read("a")
  f:close()
  if not s or s:sub(1, 6) ~= MAGIC then fail("load: %s: not a .npy file (no \\x93NUMPY magic)", path) end
  local major, minor = s:byte(7), s:byte(8)
  local len_size = ({ 2, 4, 4 })[major]
  if not len_size or minor ~= 0 then
    fail("load: %s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)",
         path, major or -1, minor or -1)
  end
  if #s < 8 + len_size then fail("load: %s: truncated header", path) end
  local hlen = string.unpack(len_size == 2 and "<I2" or "<I4", s, 9)
  local start = 9 + len_size
  if #s < start + hlen - 1 then
    fail("load: %s: the header length field says %d bytes, the file has %d after it",
         path, hlen, #s - start + 1)
  end
  local header = s:sub(start, start + hlen - 1)
  local d, fortran, shape = parse_header(header)
  if not d then fail("load: %s: malformed header (%s): %q", path, fortran, header) end
  local t = element_type(path, d)
  local count = 1
  for i, dim in ipairs(shape) do
    count = mul(count, dim)
    if not count then
      fail("load: %s: the shape's element count overflows at entry %d", path, i)
    end
  end
  if fortran and #shape > 1 then
    fail("load: %s: the array is in Fortran order; save it in C order " ..
         "(numpy: np.ascontiguousarray(a))", path)
  end
  if count == 0 then fail("load: %s: the array is empty; a buffer holds at least one element", path) end
  local size = math.tointeger(tonumber(d:match("%d+$")))
  local data = s:sub(start + hlen)
  local bytes = mul(count, size)
  if not bytes or #data ~= bytes then
    fail("load: %s: shape (%s) of %s needs %s bytes of data, the file has %d",
         path, table.concat(shape, ", "), d, bytes and tostring(bytes) or "more than 2^63", #data)
  end
  return t, data, shape
end

--- npy.write(path, type, n, data, shape): shape (default {n}) must hold n
-- elements.
function npy.write(path, t, n, data, shape)
  checkpath(path, "save")
  if not descr[t] then -- bf16: NumPy has no such dtype
    fail("save: NumPy has no dtype for %s; save b:view(0, nil, \"u16\") for its bits", t)
  end
  shape = shape or { n }
  if type(shape) ~= "table" then
    fail("bad argument #2 to 'save' (table expected, got %s)", type(shape))
  end
  local count, dims = 1, {}
  if #shape == 0 and next(shape) ~= nil then
    fail("save: shape must be a sequence of integers")
  end
  for i, entry in ipairs(shape) do
    local dim = type(entry) == "number" and math.tointeger(entry) -- 2.0 too
    if not dim or dim < 0 then
      fail("save: shape[%d] must be a non-negative integer, got %s", i, tostring(entry))
    end
    count = mul(count, dim)
    if not count then fail("save: the shape's element count overflows at entry %d", i) end
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
