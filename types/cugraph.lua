---@meta cugraph
-- LuaCATS annotations of the cugraph module, for lua-language-server:
-- add this folder (installed as <prefix>/share/cugraph-lua/types) to
-- "workspace.library" in .luarc.json. docs/api.md is the full reference;
-- spec/51-ux_spec.lua checks that every function and method is here.

---@class cugraph
---@field version string "0.1.0"
---@field _VERSION string "cugraph-lua 0.1.0"
---@field types cugraph.ElementType[]
local cuda = {}

---@alias cugraph.ElementType
---| "f32" | "f64" | "i8" | "u8" | "i16" | "u16" | "i32" | "u32" | "i64" | "u64"
---| "f16" | "bf16" | "__half" | "half" | "__nv_bfloat16" | "nv_bfloat16"
---| "float" | "double" | "int8_t" | "uint8_t" | "char" | "unsigned char"
---| "short" | "unsigned short" | "int16_t" | "uint16_t" | "int" | "unsigned"
---| "unsigned int" | "int32_t" | "uint32_t" | "long" | "unsigned long"
---| "long long" | "unsigned long long" | "int64_t" | "uint64_t" | "size_t"

---@alias cugraph.Dims integer|{[1]: integer, [2]: integer?, [3]: integer?}

---@class cugraph.DeviceInfo
---@field name string
---@field ordinal integer
---@field compute_capability string "9.0"
---@field major integer
---@field minor integer
---@field multiprocessors integer
---@field warp_size integer
---@field memory integer bytes
---@field free_memory integer? bytes; only for the selected device
---@field driver_version integer e.g. 13000
---@field max_threads_per_block integer
---@field max_shared_memory integer opt-in dynamic shared memory per block, bytes

---@class cugraph.Status
---@field initialized boolean
---@field capturing boolean
---@field poisoned string? the sticky error's name
---@field finalizer_errors integer
---@field last_finalizer_error string?

---@class cugraph.Info
---@field version string
---@field lua string
---@field driver string? "13.0" when a device answered
---@field reason string? why there is no usable GPU
---@field device_count integer
---@field devices (cugraph.DeviceInfo|{ordinal: integer, error: string})[]
---@field nvrtc string? "13.0"
---@field nvrtc_error string? why NVRTC is unusable
---@field cache_dir string? the compile cache folder
---@field cache_size integer its size cap in bytes

---@class cugraph.CompileOptions
---@field arch? string|integer "sm_90" (cubin), "compute_90" (PTX only), "90" or 90; default: the device's
---@field std? string "c++17"
---@field defines? table<string, boolean|string|number>
---@field include? string[]
---@field lineinfo? boolean
---@field fast_math? boolean
---@field options? string[] passed to NVRTC as they are
---@field name? string the program name in messages (default "kernel.cu")
---@field cache? boolean use the compile cache (default true)

---@class cugraph.CaptureOptions
---@field mode? "thread_local"|"global"|"relaxed"
---@field auto_free? boolean
---@field upload? boolean

---@class cugraph.EventOptions
---@field timing? boolean default true

---@class cugraph.Entry
---@field name string the entry name as written in the PTX
---@field base string the demangled function name
---@field typed boolean the parameter types are C types
---@field params string[] parameter type texts
---@field programmatic cugraph.Programmatic what its code allows of programmatic edges

---@class cugraph.Programmatic
---@field consumer boolean it waits (griddepcontrol.wait) before any global access and before it ends, on every path
---@field producer boolean no global write can follow its block's griddepcontrol.launch_dependents
---@field consumer_why? string the instruction that breaks the consumer's rule, its PTX and source lines
---@field producer_why? string the instruction that breaks the producer's rule
---@field launches? integer k:programmatic(): its launches made programmatic

---@class cugraph.Error
---@field api string the call that failed, e.g. "cuMemAlloc"
---@field code integer the CUresult or nvrtcResult
---@field name string e.g. "CUDA_ERROR_OUT_OF_MEMORY"
---@field message string
---@field where string? "script.lua:12", the Lua line that made the call
---@field log string? JIT or NVRTC log
---@field rule string? a stream-capture error: the Driver API rule the call broke
---@field fix string? with rule: what to do instead
---@field first string? after a broken capture: "api (name) at script.lua:12", the call that broke it
---@field unjoined string? an unjoined fork: "the stream that joined at script.lua:12"

---@class cugraph.Stream
local Stream = {}
---@param fn fun(s: cugraph.Stream)
---@param opts? cugraph.CaptureOptions
---@return cugraph.Graph
function Stream:capture(fn, opts) end
---@param name string labels the nodes fn makes (g:node(name) finds the first)
---@param fn fun(s: cugraph.Stream): ...
---@return any ... fn's results
function Stream:label(name, fn) end
---@return cugraph.Stream self
---@param other cugraph.Event|cugraph.Stream
function Stream:wait(other) end
--- Work after it waits until a timeline semaphore reaches value (a binary one: is signalled); a graph node when captured.
---@param sem cugraph.ExternalSemaphore
---@param value integer|cugraph.Scalar an integer, or a u64 Scalar read at each graph launch
---@return cugraph.Stream self
---@overload fun(self: cugraph.Stream, sem: cugraph.ExternalSemaphore): cugraph.Stream
function Stream:wait_external(sem, value) end
--- Signals the semaphore (a timeline: to value) once the work before it is done; a graph node when captured.
---@param sem cugraph.ExternalSemaphore
---@param value integer|cugraph.Scalar an integer, or a u64 Scalar read at each graph launch
---@return cugraph.Stream self
---@overload fun(self: cugraph.Stream, sem: cugraph.ExternalSemaphore): cugraph.Stream
function Stream:signal_external(sem, value) end
---@alias cugraph.WaitOp "geq"|"eq"|"and"|"nor"
--- Work after it waits until the counter compares with value as op says (cuStreamWaitValue32/64); a batch memory operation node when captured.
---@param counter cugraph.Buffer|cugraph.HostBuffer|cugraph.Scalar a u32 or u64 counter: a buffer's first element, or a scalar
---@param value integer|cugraph.Scalar an integer, or a Scalar of the counter's type read at each graph launch
---@param op? cugraph.WaitOp "geq" (the default: a cyclic >=), "eq", "and" (any bit of value set), "nor"
---@return cugraph.Stream self
function Stream:wait_value(counter, value, op) end
--- Writes value to the counter once the work before it is done (cuStreamWriteValue32/64); a batch memory operation node when captured.
---@param counter cugraph.Buffer|cugraph.HostBuffer|cugraph.Scalar a u32 or u64 counter: a buffer's first element, or a scalar
---@param value integer|cugraph.Scalar an integer, or a Scalar of the counter's type read at each graph launch
---@return cugraph.Stream self
function Stream:write_value(counter, value) end
--- Has the driver call a C function of the host's in stream order (cuLaunchHostFunc); a host node when captured. Never a Lua function.
---@param fn lightuserdata a C host function, from cugraph_pushhostfn
---@param data? lightuserdata its argument (nil: NULL)
---@return cugraph.Stream self
function Stream:host(fn, data) end
function Stream:synchronize() end
---@return boolean done
function Stream:query() end
---@return integer priority as made (0: the default)
function Stream:priority() end
---@return integer handle the CUstream
function Stream:handle() end
function Stream:free() end
function Stream:close() end
---@param cond cugraph.Condition
---@param body fun(s: cugraph.Stream)
---@return cugraph.Stream self
function Stream:loop_while(cond, body) end
---@param cond cugraph.Condition
---@param then_fn fun(s: cugraph.Stream)
---@param else_fn? fun(s: cugraph.Stream)
---@return cugraph.Stream self
function Stream:branch(cond, then_fn, else_fn) end
---@param cond cugraph.Condition
---@param cases (fun(s: cugraph.Stream))[]
---@return cugraph.Stream self
function Stream:switch(cond, cases) end

---@class cugraph.Condition
local Condition = {}
---@param s cugraph.Stream
---@param v integer
function Condition:set(s, v) end
---@param s cugraph.Stream
---@param buf cugraph.Buffer
---@param op "<"|"<="|">"|">="|"=="|"~="|"!="
---@param value number
---@param index? integer 0-based
function Condition:set_when(s, buf, op, value, index) end
---@param s cugraph.Stream
---@param n integer
function Condition:count_down(s, n) end
---@return integer? default
function Condition:default() end
function Condition:free() end
function Condition:close() end

---@class cugraph.GLResource
local GLResource = {}
---@param stream cugraph.Stream
---@param fn fun(mem: cugraph.Buffer|cugraph.Array) a buffer object's Buffer, an image's Array
function GLResource:map(stream, fn) end
function GLResource:free() end
function GLResource:close() end

---@class cugraph.Event
local Event = {}
---@param stream? cugraph.Stream
---@return cugraph.Event self
function Event:record(stream) end
function Event:synchronize() end
---@return boolean done
function Event:query() end
---@param start cugraph.Event
---@return number milliseconds
function Event:elapsed(start) end
function Event:free() end
function Event:close() end

---@class cugraph.Buffer
---@operator len: integer
local Buffer = {}
---@param data number[]|string|cugraph.HostBuffer a host buffer: all of it, asynchronous on a stream, capturable
---@param offset? integer 0-based element offset; may be left out before a stream
---@param stream? cugraph.Stream
---@return cugraph.Buffer self
---@overload fun(self: cugraph.Buffer, data: number[]|string|cugraph.HostBuffer, stream: cugraph.Stream): cugraph.Buffer
function Buffer:upload(data, offset, stream) end
---@param h cugraph.HostBuffer receives #h elements; its type must be the buffer's
---@param offset? integer 0-based element offset into the buffer; may be left out before a stream
---@param stream? cugraph.Stream asynchronous (capturable); none: synchronous
---@return cugraph.Buffer self
---@overload fun(self: cugraph.Buffer, h: cugraph.HostBuffer, stream: cugraph.Stream): cugraph.Buffer
function Buffer:download_into(h, offset, stream) end
---@param first integer 0-based element offset into this buffer
---@param count? integer elements of the view's type; nil: to the end
---@param type? cugraph.ElementType reinterpret (sizes and alignment permitting)
---@return cugraph.Buffer view shares this buffer's memory and keeps it alive
function Buffer:view(first, count, type) end
---@return boolean managed whether it is managed memory (cuda.managed)
function Buffer:managed() end
---@return integer? pitch bytes a row of a pitched buffer (cuda.pitched)
function Buffer:pitch() end
---@return integer width or the element count of a buffer that is not pitched, or a DLPack buffer's first size (its shape, outermost first)
---@return integer? height
---@return integer? depth
function Buffer:shape() end
---@class cugraph.BoxOpts
---@field stream? cugraph.Stream
---@field dst_x? integer
---@field dst_y? integer
---@field dst_z? integer
---@field src_x? integer
---@field src_y? integer
---@field src_z? integer
---@field dst_pitch? integer row length in elements (buffers that are not pitched)
---@field src_pitch? integer
---@field dst_height? integer rows a slice
---@field src_height? integer
---@param src cugraph.Buffer|cugraph.HostBuffer|cugraph.Array
---@param width integer elements, or an array's texels
---@param height integer
---@param opts? cugraph.BoxOpts
---@return cugraph.Buffer self
function Buffer:copy2d(src, width, height, opts) end
---@param src cugraph.Buffer|cugraph.HostBuffer|cugraph.Array
---@param width integer
---@param height integer
---@param depth integer
---@param opts? cugraph.BoxOpts
---@return cugraph.Buffer self
function Buffer:copy3d(src, width, height, depth, opts) end
---@param where? "device"|"host"|integer
---@param stream? cugraph.Stream
---@return cugraph.Buffer self
function Buffer:prefetch(where, stream) end
---@param advice "read_mostly"|"unset_read_mostly"|"preferred_location"|"unset_preferred_location"|"accessed_by"|"unset_accessed_by"
---@param where? "device"|"host"|integer
---@return cugraph.Buffer self
function Buffer:advise(advice, where) end
---@return cugraph.Buffer? parent the buffer a view was made from; nil for others
function Buffer:parent() end
---@param format? "table"|"string"
---@param offset? integer 0-based element offset
---@param count? integer
---@return number[]|string
function Buffer:download(format, offset, count) end
---@param v number
---@param stream? cugraph.Stream
---@return cugraph.Buffer self
function Buffer:fill(v, stream) end
---@class cugraph.CopyOptions
---@field dst_offset? integer 0-based, in the destination's elements
---@field src_offset? integer 0-based, in the source's elements
---@field count? integer source elements; nil: the rest of the source

---@param src cugraph.Buffer
---@param opts_or_stream? cugraph.CopyOptions|cugraph.Stream
---@param stream? cugraph.Stream
---@return cugraph.Buffer self
function Buffer:copy(src, opts_or_stream, stream) end
---@return string type the element type, e.g. "f32"
function Buffer:type() end
---@return integer
function Buffer:bytes() end
---@return integer address the CUdeviceptr
function Buffer:address() end
---@param default? integer applied at every launch; nil: the value carries over
---@return cugraph.Condition
function cuda.condition(default) end
---@param path string
---@param fn fun(path: string)
---@return fun(): boolean?, string? poll
function cuda.watch(path, fn) end
---@param id integer a GL buffer object
---@param type cugraph.ElementType
---@param access? "read_write"|"read_only"|"write_discard"
---@return cugraph.GLResource
function cuda.gl_buffer(id, type, access) end
---@class cugraph.GLImageOpts
---@field access? "read_write"|"read_only"|"write_discard"
---@field surface? boolean surface stores into the mapped Array
---@field gather? boolean texture gather
---@param id integer a GL texture or renderbuffer
---@param target "2d"|"rectangle"|"renderbuffer"
---@param opts? cugraph.GLImageOpts
---@return cugraph.GLResource
function cuda.gl_image(id, target, opts) end
---@param path string a .npy file to write
---@param shape? integer[] default {#b}
---@return cugraph.Buffer self
function Buffer:save(path, shape) end
---@param stream? cugraph.Stream a stream-ordered free (a free node in a capture)
function Buffer:free(stream) end
function Buffer:close() end
---@param shape? integer[] sizes, outermost first, whose product is #b; default: the buffer's own (b:shape())
---@return cugraph.DLTensor t lends this buffer's memory: it stays allocated while t (or what consumes it) lives
function Buffer:dlpack(shape) end

---A DLPack tensor (b:dlpack()): consumed once by cuda.from_dlpack or taken by C (cugraph_todlpack).
---@class cugraph.DLTensor
local DLTensor = {}
---@return integer ... sizes, outermost first
function DLTensor:shape() end
---@return cugraph.ElementType? type nil for an element type a Buffer cannot have
function DLTensor:type() end
---Calls the tensor's deleter; refused while a Buffer made from it is open.
function DLTensor:free() end
function DLTensor:close() end

---@param t cugraph.DLTensor|cugraph.Buffer a Buffer stands for b:dlpack()
---@return cugraph.Buffer b over the tensor's memory, which it owns (freed with it); b:shape() is the tensor's shape
function cuda.from_dlpack(t) end

---@alias cugraph.ReduceOp "sum"|"prod"|"max"|"min"|"avg"

---@class cugraph.Comm
local Comm = {}
---@param send cugraph.Buffer
---@param recv cugraph.Buffer may be send
---@param op? cugraph.ReduceOp default "sum"
---@param stream? cugraph.Stream
function Comm:all_reduce(send, recv, op, stream) end
---@param send cugraph.Buffer
---@param recv cugraph.Buffer
---@param root integer
---@param op? cugraph.ReduceOp
---@param stream? cugraph.Stream
function Comm:reduce(send, recv, root, op, stream) end
---@param send cugraph.Buffer
---@param recv cugraph.Buffer
---@param root integer
---@param stream? cugraph.Stream
function Comm:broadcast(send, recv, root, stream) end
---@param send cugraph.Buffer
---@param recv cugraph.Buffer size() times #send elements
---@param stream? cugraph.Stream
function Comm:all_gather(send, recv, stream) end
---@param send cugraph.Buffer size() times #recv elements
---@param recv cugraph.Buffer
---@param op? cugraph.ReduceOp
---@param stream? cugraph.Stream
function Comm:reduce_scatter(send, recv, op, stream) end
---@param buf cugraph.Buffer
---@param peer integer
---@param stream? cugraph.Stream
function Comm:send(buf, peer, stream) end
---@param buf cugraph.Buffer
---@param peer integer
---@param stream? cugraph.Stream
function Comm:recv(buf, peer, stream) end
---@return integer
function Comm:rank() end
---@return integer
function Comm:size() end
function Comm:free() end
function Comm:close() end

---A cuBLAS handle of one device, with its own workspace; matrices are column-major.
---@class cugraph.Blas
local Blas = {}
---@class cugraph.GemmShape
---@field m integer rows of op(a) and c
---@field n integer columns of op(b) and c
---@field k integer columns of op(a), rows of op(b)
---@field transa? boolean op(a) = a transposed
---@field transb? boolean
---@field lda? integer default: rows of a as stored
---@field ldb? integer
---@field ldc? integer default m
---@field alpha? number|cugraph.Scalar default 1; a Scalar is read when the call runs
---@field beta? number|cugraph.Scalar default 0
---@field tf32? boolean f32 inputs rounded to TF32 (tensor cores)
---@field batch? integer products of a strided batch (default 1)
---@field stride_a? integer elements between a batch's matrices (default: packed)
---@field stride_b? integer
---@field stride_c? integer

---c = alpha op(a) op(b) + beta c (cublasGemmEx; batch > 1: cublasGemmStridedBatchedEx).
---@param a cugraph.Buffer f32, f64, f16 or bf16
---@param b cugraph.Buffer of a's type
---@param c cugraph.Buffer of a's type
---@param shape cugraph.GemmShape
---@param stream? cugraph.Stream default: the handle's
function Blas:gemm(a, b, c, shape, stream) end
---c = epilogue(alpha op(a) op(b) + beta c + bias) in one cuBLASLt call (f32, f16, bf16; no batch).
---@param a cugraph.Buffer
---@param b cugraph.Buffer
---@param c cugraph.Buffer
---@param shape cugraph.GemmShape|{bias?: cugraph.Buffer, epilogue?: "none"|"relu"|"gelu"} batch and strides excepted; bias: m elements added to each column
---@param stream? cugraph.Stream
function Blas:matmul(a, b, c, shape, stream) end
---y = alpha op(a) x + beta y, a m x n (cublasSgemv, cublasDgemv).
---@param a cugraph.Buffer f32 or f64
---@param x cugraph.Buffer
---@param y cugraph.Buffer
---@param shape {m: integer, n: integer, trans?: boolean, lda?: integer, alpha?: number|cugraph.Scalar, beta?: number|cugraph.Scalar, incx?: integer, incy?: integer}
---@param stream? cugraph.Stream
function Blas:gemv(a, x, y, shape, stream) end
---y = alpha x + y.
---@param alpha number|cugraph.Scalar
---@param x cugraph.Buffer f32 or f64
---@param y cugraph.Buffer
---@param opts? {n?: integer, incx?: integer, incy?: integer}
---@param stream? cugraph.Stream
function Blas:axpy(alpha, x, y, opts, stream) end
---The dot product x . y: written to result (device memory, capturable), or returned.
---@param x cugraph.Buffer f32 or f64
---@param y cugraph.Buffer
---@param result? cugraph.Buffer|cugraph.Scalar its first element
---@param opts? {n?: integer, incx?: integer, incy?: integer}
---@param stream? cugraph.Stream
---@return number? value without a result
function Blas:dot(x, y, result, opts, stream) end
---The Euclidean norm of x: written to result, or returned.
---@param x cugraph.Buffer f32 or f64
---@param result? cugraph.Buffer|cugraph.Scalar
---@param opts? {n?: integer, incx?: integer}
---@param stream? cugraph.Stream
---@return number? value without a result
function Blas:nrm2(x, result, opts, stream) end
---@return integer bytes of the handle's workspace
function Blas:workspace() end
---Destroys the handle and frees its workspace; refused while a live graph captured it.
function Blas:free() end
function Blas:close() end

---A cuFFT plan of one device with its own work area; complex data are interleaved (re, im) pairs.
---@class cugraph.FFT
local FFT = {}
---The forward transform (c2c or r2c); c2c may run in place (input == output).
---@param input cugraph.Buffer
---@param output cugraph.Buffer
---@param stream? cugraph.Stream default: the plan's
function FFT:forward(input, output, stream) end
---The inverse transform (c2c or c2r), unnormalized; c2r may overwrite its input.
---@param input cugraph.Buffer
---@param output cugraph.Buffer
---@param stream? cugraph.Stream
function FFT:inverse(input, output, stream) end
---@return integer input elements of the plan's type its transform reads (all of the batch)
---@return integer output elements it writes
function FFT:elements() end
---@return integer bytes of the plan's work area
function FFT:workspace() end
---Destroys the plan and frees its work area; refused while a live graph captured it.
function FFT:free() end
function FFT:close() end

---@class cugraph.HostBuffer
---@operator len: integer
---@field [integer] number element i, 0-based (h[0] .. h[#h - 1])
local HostBuffer = {}
---@param data number[]|string
---@param offset? integer 0-based element offset
---@return cugraph.HostBuffer self
function HostBuffer:set(data, offset) end
---@param src cugraph.Buffer|cugraph.Array
---@param width integer
---@param height integer
---@param opts? cugraph.BoxOpts
---@return cugraph.HostBuffer self
function HostBuffer:copy2d(src, width, height, opts) end
---@param src cugraph.Buffer|cugraph.Array
---@param width integer
---@param height integer
---@param depth integer
---@param opts? cugraph.BoxOpts
---@return cugraph.HostBuffer self
function HostBuffer:copy3d(src, width, height, depth, opts) end
---@return number[] t h[0] at t[1]
function HostBuffer:totable() end
---@return string bytes the contents
function HostBuffer:tostring() end
---@return integer size in bytes
function HostBuffer:bytes() end
---@return string type the element type
function HostBuffer:type() end
function HostBuffer:free() end
function HostBuffer:close() end

---@class cugraph.Array
local Array = {}
---@return integer width
---@return integer? height
---@return integer? depth
function Array:shape() end
---@return string format "f32x4", ...
---@return string type the element type
---@return integer channels 1, 2 or 4
function Array:format() end
---@return integer bytes of its texels
function Array:bytes() end
---@param src cugraph.Buffer|cugraph.HostBuffer|cugraph.Array
---@param width integer texels
---@param height integer
---@param opts? cugraph.BoxOpts
---@return cugraph.Array self
function Array:copy2d(src, width, height, opts) end
---@param src cugraph.Buffer|cugraph.HostBuffer|cugraph.Array
---@param width integer texels
---@param height integer
---@param depth integer
---@param opts? cugraph.BoxOpts
---@return cugraph.Array self
function Array:copy3d(src, width, height, depth, opts) end
---@class cugraph.TextureOpts
---@field filter? "point"|"linear"
---@field address? "clamp"|"wrap"|"mirror"|"border"|string[] one for all, or one a dimension
---@field normalized? boolean coordinates in [0, 1)
---@field read? "element"|"normalized" integer texels of 8 or 16 bits as floats
---@field border? number[] {r, g, b, a} outside the array in "border" mode
---@param opts? cugraph.TextureOpts
---@return cugraph.Texture
function Array:texture(opts) end
---@return cugraph.Surface needs an array made with {surface = true}
function Array:surface() end
---Destroys the array; refused while a live graph copies to or from it, or a texture or surface over it is open.
function Array:free() end
function Array:close() end

---@class cugraph.Texture
local Texture = {}
---@return cugraph.Array
function Texture:array() end
---@return integer the CUtexObject
function Texture:handle() end
function Texture:free() end
function Texture:close() end

---@class cugraph.Surface
local Surface = {}
---@return cugraph.Array
function Surface:array() end
---@return integer the CUsurfObject
function Surface:handle() end
function Surface:free() end
function Surface:close() end

---@class cugraph.ExternalMemory
local ExternalMemory = {}
--- A Buffer over n elements from byte offset: a mapping of its own, unmapped when it is freed.
---@param type cugraph.ElementType
---@param n integer
---@param offset? integer bytes, 0 by default
---@return cugraph.Buffer
function ExternalMemory:buffer(type, n, offset) end
---@class cugraph.ExternalArrayOpts
---@field offset? integer bytes
---@field surface? boolean writable by surface stores
---@field color_attachment? boolean the image is a render target of the other API
---@param format string as cuda.array takes it: "u8x4", "f32"
---@param width integer texels
---@param height? integer
---@param depth? integer
---@param opts? cugraph.ExternalArrayOpts
---@return cugraph.Array
---@overload fun(self: cugraph.ExternalMemory, format: string, width: integer, height: integer, opts: cugraph.ExternalArrayOpts): cugraph.Array
function ExternalMemory:array(format, width, height, depth, opts) end
---@return integer bytes as imported
function ExternalMemory:size() end
---@return integer the CUexternalMemory
function ExternalMemory:handle() end
---Destroys the import; refused while a buffer or array mapped from it is open.
function ExternalMemory:free() end
function ExternalMemory:close() end

---@class cugraph.ExternalSemaphore
local ExternalSemaphore = {}
---@return "binary"|"timeline"
function ExternalSemaphore:kind() end
---@return integer the CUexternalSemaphore
function ExternalSemaphore:handle() end
function ExternalSemaphore:free() end
function ExternalSemaphore:close() end

---@class cugraph.Scalar
local Scalar = {}
---@param v number
function Scalar:set(v) end
---@return number
function Scalar:get() end
---@return string
function Scalar:type() end
---@return integer
function Scalar:address() end
function Scalar:free() end
function Scalar:close() end

---@class cugraph.Rng
local Rng = {}
--- Fills buf with uniform values in [lo, hi) from the counter on the device, then advances it.
---@param buf cugraph.Buffer f32 or f64
---@param lo? number 0 by default
---@param hi? number 1 by default
---@param stream? cugraph.Stream none: after all device work, complete on return
---@return cugraph.Rng self
---@overload fun(self: cugraph.Rng, buf: cugraph.Buffer, stream?: cugraph.Stream): cugraph.Rng
function Rng:uniform(buf, lo, hi, stream) end
--- Fills buf with normal values (Box-Muller), then advances the counter.
---@param buf cugraph.Buffer f32 or f64
---@param mean? number 0 by default
---@param std? number 1 by default
---@param stream? cugraph.Stream
---@return cugraph.Rng self
---@overload fun(self: cugraph.Rng, buf: cugraph.Buffer, stream?: cugraph.Stream): cugraph.Rng
function Rng:normal(buf, mean, std, stream) end
--- Fills a u32 buffer with the raw Philox words.
---@param buf cugraph.Buffer u32
---@param stream? cugraph.Stream
---@return cugraph.Rng self
function Rng:bits(buf, stream) end
--- A new key; the offset goes back to 0.
---@param seed integer
---@param subsequence? integer the generator's own by default
---@return cugraph.Rng self
function Rng:seed(seed, subsequence) end
---@return integer offset the counter, in Philox blocks of four 32-bit words
function Rng:offset() end
---@param n integer
---@return cugraph.Rng self
function Rng:set_offset(n) end
function Rng:free() end
function Rng:close() end

--- A kernel from a signature and a body; call it with its arguments (inputs, then outputs) and an optional stream.
---@class cugraph.Elementwise
---@overload fun(...: number|cugraph.Buffer|cugraph.Scalar|cugraph.Stream)
local Elementwise = {}
---@return string source the CUDA C it compiled
function Elementwise:source() end
---@return cugraph.Kernel
function Elementwise:kernel() end

--- A reduction; call it with its inputs, then the result (a Buffer's element 0 or a Scalar), and an optional stream.
---@class cugraph.Reduction
---@overload fun(...: number|cugraph.Buffer|cugraph.Scalar|cugraph.Stream)
local Reduction = {}
---@return string source
function Reduction:source() end
---@return cugraph.Kernel part the per-block pass
---@return cugraph.Kernel final the pass over the partial results
function Reduction:kernels() end

---@class cugraph.ReductionSpec
---@field input string "f32 x, f32 y": parameters as for cuda.elementwise's inputs
---@field map? string C expression of the inputs and i, n; the sole input by default
---@field reduce string C expression of a and b
---@field identity number|string the value reduce starts from
---@field post? string C expression of r and n; "r" by default
---@field output? cugraph.ElementType the result's type; the accumulator's by default
---@field accumulate? cugraph.ElementType the accumulator's type; output's, else the first input's
---@field name? string a C identifier, the kernels' name
---@field preamble? string CUDA C before the kernels

---@class cugraph.Module
---@field [string] cugraph.Kernel? a kernel by name; nil when there is none
local Module = {}
---@param name string
---@param signature? string "float a, const float *x, int n" or "f32, f32*, i32"
---@return cugraph.Kernel
function Module:kernel(name, signature) end
---@return string[]
function Module:kernels() end
--- A Buffer over the module's __device__ or __constant__ variable name.
---@param name string
---@param type? cugraph.ElementType its element type, when C and PTX do not say
---@return cugraph.Buffer
function Module:global(name, type) end
---@param image string PTX text, a cubin or a fatbin
---@param name? string
---@return cugraph.Module self
function Module:reload(image, name) end
function Module:free() end
function Module:close() end

---@class cugraph.Kernel
local Kernel = {}
---@param stream cugraph.Stream
---@param grid cugraph.Dims
---@param block cugraph.Dims
---@param ... number|string|cugraph.Buffer|cugraph.Scalar|cugraph.Condition a Condition inside a capture
function Kernel:launch(stream, grid, block, ...) end
---@return string name the C++ name of opts.names, else the base name
---@return string entry the PTX entry (the lowered name)
function Kernel:name() end
--- Launch attributes of later launches; {} takes them away.
---@param opts {cooperative?: boolean, cluster?: integer|integer[], priority?: integer, programmatic?: boolean}
---@return cugraph.Kernel self
function Kernel:config(opts) end
--- What its code allows of programmatic edges, and its launches made so.
---@return cugraph.Programmatic
function Kernel:programmatic() end
---@param block integer threads a block
---@param shared? integer dynamic shared memory, bytes
---@return integer per_sm blocks one SM holds
---@return integer device blocks the device holds
function Kernel:occupancy(block, shared) end
---@param shared? integer
---@return integer block the block size of the highest occupancy
---@return integer grid the smallest grid that fills the device
function Kernel:block_size(shared) end
---@return string
function Kernel:signature() end
---@return integer
function Kernel:params() end
---@param bytes? integer
---@return cugraph.Kernel|integer self, or the bytes when called without
function Kernel:shared(bytes) end
function Kernel:free() end
function Kernel:close() end

---@class cugraph.Graph
local Graph = {}
---@param stream? cugraph.Stream
function Graph:launch(stream) end
---@param n integer
---@param stream? cugraph.Stream
function Graph:replay(n, stream) end
---@param stream? cugraph.Stream
function Graph:upload(stream) end
---@param fn fun(s: cugraph.Stream)
---@return cugraph.Graph self
function Graph:update(fn) end
---@class cugraph.NodeInfo
---@field index integer for g:node(index)
---@field kind "kernel"|"fill"|"copy"|"alloc"|"free"|"conditional"|"graph"
---@field source string? the Lua chunk that made it
---@field line integer? ... and its line
---@field label string? from s:label
---@field depth integer 0, or how deep in conditional bodies
---@field enabled boolean
---@field kernel cugraph.Kernel? kernel nodes
---@field name string? the kernel's name
---@field args any[]? the kernel's arguments: objects and values
---@field buffer cugraph.Buffer? fills, allocations and frees
---@field dst cugraph.Buffer? copies
---@field src cugraph.Buffer? copies

---@param deep_or_detail? boolean|"detail" deep: with bodies; "detail": the records
---@return integer count
---@return string[]|cugraph.NodeInfo[] kinds, or records with "detail"
function Graph:nodes(deep_or_detail) end
---@param index_or_label integer|string
---@return cugraph.Node
function Graph:node(index_or_label) end
---@param old cugraph.Buffer|cugraph.Scalar
---@param new cugraph.Buffer|cugraph.Scalar
---@param ... cugraph.Buffer|cugraph.Scalar more old, new pairs, applied at once
---@return cugraph.Graph self
function Graph:rebind(old, new, ...) end
---@param path string a .dot file; .png or .svg are rendered by Graphviz's dot
---@param verbose_or_opts? boolean|cugraph.DotOptions
---@return cugraph.Graph self
function Graph:dot(path, verbose_or_opts) end
---@param measure? boolean instantiate and upload a copy to measure what an instance takes
---@return cugraph.GraphMemory
function Graph:memory(measure) end
---@param n_or_opts? integer|cugraph.ProfileOptions replays (default 10), or options
---@return cugraph.Profile
function Graph:profile(n_or_opts) end
---@return integer
function Graph:launches() end
---@return integer
function Graph:id() end
---@return integer exec the CUgraphExec, for foreign code
function Graph:handle() end
function Graph:free() end
function Graph:close() end

---@class cugraph.Node
local Node = {}
---@param ... any the kernel's arguments, checked as k:launch checks them
---@return cugraph.Node self
function Node:set(...) end
---@param on boolean
---@return cugraph.Node self
function Node:enable(on) end
---@return boolean
function Node:enabled() end
---@return cugraph.NodeInfo
function Node:info() end
---@return integer index in its graph
function Node:index() end
---@return integer node the CUgraphNode, for foreign code (cuGraphExec*NodeSetParams)
function Node:handle() end
function Node:free() end
function Node:close() end

---@class cugraph.GraphedStats
---@field calls integer
---@field graphs integer graphs kept now
---@field builds integer graphs built from a call's record
---@field set integer nodes set in place
---@field same integer calls that found a graph with their work and parameters

---@class cugraph.GraphedOptions
---@field graphs? integer graphs kept, 1 to 64 (default 8); the least recently used goes first
---@field key? fun(...): any its value joins the call's key (numbers too)
---@field stream? cugraph.Stream the stream calls run on (default: the first Stream argument)
---@field eager? boolean run fn itself at each call (also CUGRAPH_LUA_EAGER=1)

---@class cugraph.Graphed
---@overload fun(...): ...
local Graphed = {}
---@return cugraph.Graph[] graphs the most recently used first
function Graphed:graphs() end
---@return cugraph.GraphedStats
function Graphed:stats() end
function Graphed:free() end
function Graphed:close() end


---@param ordinal? integer
---@return cugraph.DeviceInfo
function cuda.device(ordinal) end
---@return integer count 0 without a driver
function cuda.device_count() end
---@return boolean available
---@return string? why
function cuda.available() end
---@param ordinal integer
function cuda.select(ordinal) end
function cuda.synchronize() end
---@generic T
---@param ordinal integer the device objects made by fn belong to
---@param fn fun(...): T
---@param ... any passed to fn
---@return T ... fn's results
function cuda.on(ordinal, fn, ...) end
---@return integer ordinal the device new objects belong to
function cuda.current_device() end
---@param object userdata any cugraph object
---@return integer ordinal the device it belongs to
function cuda.device_of(object) end
---@param a integer device whose kernels would access ...
---@param b integer ... memory of this device
---@return boolean
function cuda.can_access_peer(a, b) end
---@param a integer
---@param b integer
function cuda.enable_peer_access(a, b) end
---@return integer version NCCL's version code (22809 for 2.28.9)
function cuda.nccl_version() end
---@return string id 128 bytes
function cuda.nccl_id() end
---@param path string a fresh file every rank sees
---@param rank integer 0 writes the id, the others wait for it
---@param timeout_s? number default 600
---@param job? string default CUGRAPH_JOB_ID, else none
---@return string id
function cuda.nccl_rendezvous(path, rank, timeout_s, job) end
---@param addr string rank 0's "host:port" or "[v6 address]:port"
---@param rank integer 0 listens and sends the id, the others connect
---@param size integer the number of ranks
---@param timeout_s? number default 600
---@param job? string default CUGRAPH_JOB_ID, else none
---@return string id
function cuda.nccl_rendezvous_tcp(addr, rank, size, timeout_s, job) end
---@class cugraph.World
---@field rank integer
---@field size integer
---@field local_rank? integer absent when the starter does not say
---@field local_size? integer absent when the starter does not say
---@field job string the job id ("" when none)
---@field starter? string "cugraph-lua", "Slurm", "Open MPI" or "PMI"; absent: one process

---@return cugraph.World
function cuda.world() end
---@param id string from cuda.nccl_id(), the same on every rank
---@param nranks integer
---@param rank integer
---@return cugraph.Comm
function cuda.comm(id, nranks, rank) end
---@param devices integer[] device ordinals, rank i on devices[i + 1]
---@return cugraph.Comm[]
function cuda.comms(devices) end
---@return cugraph.Comm
function cuda.comm_world() end
---A cuBLAS handle on the current device (cuBLAS loaded on first use; CUGRAPH_LUA_LIBCUBLAS names it).
---@param stream? cugraph.Stream where its calls run unless they name one (default: the device's, complete on return)
---@param opts? {workspace?: integer} bytes (default 32 MiB on Hopper and later, 4 MiB before)
---@return cugraph.Blas
---@overload fun(opts: {workspace?: integer}): cugraph.Blas
function cuda.blas(stream, opts) end
---@return integer version cuBLAS's, major * 10000 + minor * 100 + patch
function cuda.blas_version() end
---A cuFFT plan on the current device (cuFFT loaded on first use; CUGRAPH_LUA_LIBCUFFT names it).
---@param lengths integer|integer[] 1 to 3 lengths, row-major (the last the fastest)
---@param kind "c2c"|"r2c"|"c2r"
---@param opts? {type?: "f32"|"f64", batch?: integer, stream?: cugraph.Stream}
---@return cugraph.FFT
function cuda.fft(lengths, kind, opts) end
---@return integer version cuFFT's
function cuda.fft_version() end
---@param fn fun(...): ...
---@param ... any passed to fn
---@return any ... fn's results
function cuda.nccl_group(fn, ...) end
---@return cugraph.Status
function cuda.status() end
---@return cugraph.Info
function cuda.info() end
---@param v any
---@return boolean
function cuda.is_error(v) end
---@param opts? {priority?: integer|"highest"|"lowest"}
---@return cugraph.Stream
function cuda.stream(opts) end
---@param opts? cugraph.EventOptions
---@return cugraph.Event
function cuda.event(opts) end
---@param type cugraph.ElementType
---@param n_or_data integer|number[]|string
---@param opts? {stream: cugraph.Stream} stream-ordered (a graph allocation in a capture)
---@return cugraph.Buffer
function cuda.buffer(type, n_or_data, opts) end
---@class cugraph.MemoryUse
---@field used integer
---@field used_high integer
---@field reserved integer
---@field reserved_high integer

---@class cugraph.Memory
---@field free integer bytes
---@field total integer
---@field used integer
---@field graph cugraph.MemoryUse? graph allocations (cuDeviceGetGraphMemAttribute)
---@field pool cugraph.MemoryUse? the default pool (cuMemPoolGetAttribute)
---@field graphs {id: integer, allocations: integer, keeps: integer, keeps_host: integer}[] open graphs, largest first

---@class cugraph.GraphKeeps
---@field device integer bytes of device memory its nodes refer to (buffers, scalars, conditions)
---@field host integer bytes of host buffers its nodes copy from or to
---@field buffers integer
---@field host_buffers integer
---@field scalars integer
---@field conditions integer
---@field others integer

---@class cugraph.DotOptions
---@field verbose? boolean the driver's own description
---@field profile? cugraph.Profile what g:profile returned: times label and shade the nodes

---@class cugraph.ProfileOptions
---@field n? integer replays, 1 to 100000 (default 10)
---@field trace? string a path for the last replay as a Chrome trace
---@field stream? cugraph.Stream default: the capture stream
---@field method? "events"|"stamps"|"activity" default: events where the driver copies the graph, stamps for one with conditional nodes
---@field cupti? boolean the same as method = "activity": kernels timed from CUPTI's records

---@class cugraph.ProfileNode
---@field index integer in capture order
---@field node? integer position in the driver's node list (g:dot reads it; events only)
---@field kind string "kernel", "memcpy", "memset", "graph", ...
---@field name? string the kernel's
---@field label? string its s:label name
---@field source? string the Lua chunk that made it
---@field line? integer
---@field graph? integer a child graph's id
---@field us? number median time, µs (nil when untimed: see Profile.note, and non-kernels of method "activity")
---@field depth? integer 1 and more: in a child graph's or a conditional node's body
---@field children? integer a child graph's or conditional node's nodes, which follow it
---@field runs? integer methods "stamps" and "activity": its runs a replay (activity: its records, 1 the last turn's; stamps: every turn, summed in us)
---@field min_us? number
---@field max_us? number
---@field start_us? number median start after the first node's
---@field instructions? integer the simulator only, by event nodes: thread-instructions its kernels ran
---@field enabled? boolean false for a node node:enable(false) turned off

---@class cugraph.ProfileLine
---@field source string
---@field line integer
---@field us number the sum of its nodes' medians
---@field nodes integer
---@field instructions? integer the simulator only: the sum of its nodes' thread-instructions

---@class cugraph.Profile
---@field replays integer
---@field us number µs a replay of the graph itself, back to back
---@field method? "stamps"|"activity" timed by stamps in a copy captured again, or from CUPTI's kernel records (nil: event nodes)
---@field profiled_us? number the same for the copy with its event nodes or stamps (or while CUPTI records)
---@field stamp_us? number method "stamps": a stamp's own time, which each node's includes
---@field overhead? number profiled_us / us
---@field nodes cugraph.ProfileNode[]
---@field lines? cugraph.ProfileLine[] the most time first
---@field trace? string the path written
---@field note? string why there are no node times
---@field instructions? integer the simulator only: a replay's thread-instructions

---@class cugraph.GraphMemory
---@field allocations integer bytes its allocation nodes allocate
---@field keeps cugraph.GraphKeeps what it keeps alive
---@field instance integer? bytes an instantiation takes on the device (g:memory(true))

---@return cugraph.Memory
function cuda.memory() end

--- The cap on the bytes the open graphs' allocation nodes allocate; false removes it.
---@param bytes? integer|boolean a positive number of bytes, or false for none
---@return integer? before the cap before the call, nil for none
function cuda.graph_memory_cap(bytes) end
---@param keep? integer bytes the default pool keeps
function cuda.trim(keep) end
--- Pitched memory: rows of width elements at the driver's pitch.
---@param type cugraph.ElementType
---@param width integer
---@param height integer
---@param depth? integer
---@return cugraph.Buffer
function cuda.pitched(type, width, height, depth) end
--- Managed memory: a Buffer the host and the devices reach (cuMemAllocManaged).
---@param type cugraph.ElementType
---@param data integer|number[]|string count, or the elements
---@return cugraph.Buffer
function cuda.managed(type, data) end
---@param type cugraph.ElementType
---@param n_or_data integer|number[]|string a count (zeroed elements) or the contents
---@return cugraph.HostBuffer
function cuda.host_buffer(type, n_or_data) end
---@class cugraph.ArrayOpts
---@field surface? boolean writable by surface stores
---@param format string an element type, with x2 or x4 for channels: "f32", "u8x4"
---@param width integer texels
---@param height? integer
---@param depth? integer
---@param opts? cugraph.ArrayOpts
---@return cugraph.Array
---@overload fun(format: string, width: integer, opts: cugraph.ArrayOpts): cugraph.Array
---@overload fun(format: string, width: integer, height: integer, opts: cugraph.ArrayOpts): cugraph.Array
function cuda.array(format, width, height, depth, opts) end
---@class cugraph.ExternalMemoryOpts
---@field kind? "opaque_fd" the handle's kind (the only one on Linux)
---@field dedicated? boolean a dedicated allocation (Vulkan images)
--- Imports memory another API exported; CUDA owns the descriptor once this succeeds.
---@param fd integer an opaque file descriptor (vkGetMemoryFdKHR)
---@param size integer bytes of the allocation
---@param opts? cugraph.ExternalMemoryOpts
---@return cugraph.ExternalMemory
function cuda.external_memory(fd, size, opts) end
--- Imports a semaphore another API exported; CUDA owns the descriptor once this succeeds.
---@param fd integer an opaque file descriptor (vkGetSemaphoreFdKHR)
---@param kind? "binary"|"timeline" "binary" by default
---@return cugraph.ExternalSemaphore
function cuda.external_semaphore(fd, kind) end
---@param type cugraph.ElementType
---@param value? number
---@return cugraph.Scalar
function cuda.scalar(type, value) end
---@param image string PTX text, a cubin or a fatbin
---@param name? string
---@return cugraph.Module
function cuda.module(image, name) end
---@param path string a .ptx, .cubin or .fatbin file
---@param name? string
---@return cugraph.Module
function cuda.load_module(path, name) end
---@param source string CUDA C++
---@param opts? cugraph.CompileOptions
---@return cugraph.Module
function cuda.compile(source, opts) end
---@param source string CUDA C++
---@param opts? cugraph.CompileOptions
---@return string ptx
---@return string log
function cuda.ptx(source, opts) end
---@return string? dir
---@return integer cap bytes
function cuda.compile_cache_dir() end
---@param ptx string
---@return cugraph.Entry[]
function cuda.entries(ptx) end
---@param path string a .npy file
---@return cugraph.Buffer
---@return integer[] shape
function cuda.load(path) end

---@param seed integer its 64 bits are the Philox key
---@param opts? {subsequence?: integer}
---@return cugraph.Rng
function cuda.rng(seed, opts) end
---@param signature string "f32 x, f32 a -> f32 y"
---@param body string CUDA C with the parameters by name, i and n
---@param opts? {name?: string, preamble?: string, block?: integer}
---@return cugraph.Elementwise
function cuda.elementwise(signature, body, opts) end
---@param spec cugraph.ReductionSpec
---@return cugraph.Reduction
function cuda.reduction(spec) end
---@param fn function eager code: launches, fills, copies, library calls on the stream it is given
---@param opts? cugraph.GraphedOptions
---@return cugraph.Graphed
function cuda.graphed(fn, opts) end

return cuda
