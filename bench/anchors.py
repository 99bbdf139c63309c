"""The loops of bench/bench.lua in CuPy and PyTorch, for comparison.

Run by bench.lua (make bench), once for each library (--lib cupy, --lib
torch, each in its own process); prints one JSON object a line:
  {"lib": L, "version": V}                      the library is importable
  {"lib": L, "skip": why}                       it is not (rows skipped)
  {"lib": L, "row": R, "us": M, "p25": A, "p75": B, "blocks": K, "iters": N}
  {"lib": L, "row": R, "error": why}            the row failed
  {"lib": L, "row": "graphmemK", "bytes": B, "graphs": G}
                                                device memory per graph of K
                                                nop nodes, instantiated and
                                                uploaded: the drop of the
                                                device's free memory
                                                (cudaMemGetInfo) over G such
                                                graphs, divided by G
L is cupy or torch, R a row key of bench.lua (eager_nop, eager,
replay_nop1 to replay_nop1000, replay1 to replay1000, scalar, capture1 to
capture100; PyTorch also eagerk10, eagerk100, hand10, hand100, graphed10
and graphed100), M the median microseconds per iteration
over K timed blocks of N iterations (each block: its loop plus a stream
synchronize, N calibrated to about --block seconds), after warm-up blocks
until two successive rates agree within 1% (at most --warm-max); A and B
are the 25th and 75th percentiles of the blocks. The main thread is pinned
to --cpu after CUDA is initialized, as bench.lua pins its own.

The loops (each on one non-blocking stream, Python's defaults otherwise):
  CuPy: inc_i32 and mark_u32 from spec/kernels/kernels.cu and nop from
    bench/kernels.cu (it touches no memory) as RawKernels (grid 1, block
    256); graphs by Stream.begin_capture/end_capture,
    replayed with Graph.launch; the update is cudaMemsetAsync of the
    4-byte scalar (runtime.memsetAsync: CuPy has no 32-bit memset), then
    a replay of 9 inc_i32 and mark_u32. A capture row: begin_capture, k
    inc_i32, end_capture (which instantiates), the graph dropped.
  PyTorch: x.add_(1) on an int32 tensor of 256 elements (PyTorch's own
    elementwise kernel: the same work as inc_i32, no raw kernel), and for
    the nop rows torch.cuda._sleep(0) (PyTorch's one kernel that touches
    no memory: one thread reads the clock once); graphs
    by torch.cuda.graph, replayed with CUDAGraph.replay; the update is
    pos.fill_(i) of a one-element tensor, then a replay of 9 add_ and
    y.add_(pos), which reads it. A capture row: a CUDAGraph captured
    with torch.cuda.graph (which instantiates it) over k add_, then
    reset(). The alternating rows: k add_ on one of two tensors, the
    other each call: eagerly (eagerk), by a torch.cuda.graph over a static
    tensor with the call's tensor copied in and back out (hand), and by
    torch.compile(mode="reduce-overhead") of the same function (graphed).
--only R1,R2,... measures only those rows (no graph memory rows).
"""
import argparse
import json
import os
import statistics
import time

N = 256


def say(**obj):
    for k, v in obj.items():
        if isinstance(v, str):  # bench.lua reads flat, plain strings
            obj[k] = v.replace('"', "'").replace("\\", "/").replace("\n", " ")
    print(json.dumps(obj), flush=True)


def timed(loop, iters, sync):
    t0 = time.perf_counter()
    loop(iters)
    sync()
    return (time.perf_counter() - t0) * 1e6 / iters


def measure(loop, sync, opts):
    """The row's figures: calibration, warm-up, then opts.blocks blocks."""
    iters = 1
    while True:
        total = timed(loop, iters, sync) * iters * 1e-6
        if total >= opts.block / 4:
            iters = max(1, round(iters * opts.block / total))
            break
        iters *= 4
    last = None
    for w in range(opts.warm_max):
        t = timed(loop, iters, sync)
        if w >= 2 and last and abs(t / last - 1) < 0.01:
            break
        last = t
    ts = sorted(timed(loop, iters, sync) for _ in range(opts.blocks))
    q = statistics.quantiles(ts, n=4, method="inclusive") if len(ts) > 1 \
        else [ts[0]] * 3
    return {"us": statistics.median(ts), "p25": q[0], "p75": q[2],
            "blocks": len(ts), "iters": iters}


def rows(lib, cases, sync, opts):
    for row, make in cases:
        if opts.only and row not in opts.only:
            continue
        try:
            loop = make()
            say(lib=lib, row=row, **measure(loop, sync, opts))
        except Exception as e:  # one row's failure leaves the others
            say(lib=lib, row=row, error="%s: %s" % (type(e).__name__, e))


GRAPHS = {10: 100, 100: 40, 1000: 10}  # nodes: graphs measured at once


def graph_memory(lib, make, free, sync):
    """One graphmemK line per size: the device memory G graphs of K nop
    nodes hold once instantiated and uploaded, per graph."""
    import gc
    for k, count in GRAPHS.items():
        try:
            gc.collect()
            sync()
            before = free()
            held = [make(k) for _ in range(count)]
            sync()
            after = free()
            say(lib=lib, row="graphmem%d" % k, bytes=(before - after) / count,
                graphs=count)
            del held
            gc.collect()
        except Exception as e:
            say(lib=lib, row="graphmem%d" % k, error="%s: %s" % (type(e).__name__, e))


def pin(opts):
    if opts.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {opts.cpu})


def kernel(src, name):
    """The text of __global__ function name in src, to its closing brace."""
    start = src.index("__global__ void %s(" % name)
    end = src.index("\n}\n", start) + 2
    return src[start:end]


def cupy_rows(opts):
    try:
        import cupy
    except Exception as e:
        return say(lib="cupy", skip="import cupy: %s" % e)
    say(lib="cupy", version=cupy.__version__)
    with open(opts.source) as f:
        src = f.read()
    # the two kernels alone: the file's others need the device runtime
    with open(opts.bench_source) as f:
        bsrc = f.read()
    start = bsrc.index("__global__ void nop(")
    src = 'extern "C" {\n%s\n%s\n%s\n}\n' % (
        kernel(src, "mark_u32"), kernel(src, "inc_i32"),
        bsrc[start:bsrc.index("\n", start)])
    inc = cupy.RawKernel(src, "inc_i32")
    mark = cupy.RawKernel(src, "mark_u32")
    nop = cupy.RawKernel(src, "nop")
    s = cupy.cuda.Stream(non_blocking=True)
    n = cupy.int32(N)
    with s:
        x = cupy.zeros(N, dtype=cupy.int32)
        out = cupy.zeros(N, dtype=cupy.uint32)
        pos = cupy.zeros(2, dtype=cupy.uint32)
        s.synchronize()
        pin(opts)

        def eager(k=inc):
            def make():
                def loop(iters):
                    for _ in range(iters):
                        k((1,), (N,), (x, n))
                return loop
            return make

        def graph(nodes, with_mark=False, k=inc):
            s.begin_capture()
            for _ in range(nodes):
                k((1,), (N,), (x, n))
            if with_mark:
                mark((1,), (1,), (out, pos, n))
            return s.end_capture()

        def replay(nodes, k=inc):
            def make():
                g = graph(nodes, False, k)

                def loop(iters):
                    for _ in range(iters):
                        g.launch(s)
                return loop
            return make

        def scalar():
            g = graph(9, True)
            memset, p, sp = cupy.cuda.runtime.memsetAsync, pos.data.ptr, s.ptr

            def loop(iters):
                for i in range(1, iters + 1):
                    memset(p, i & 0xff, 4, sp)
                    g.launch(s)
            return loop

        def capture(nodes):
            def make():
                def loop(iters):
                    for _ in range(iters):
                        s.begin_capture()
                        for _ in range(nodes):
                            inc((1,), (N,), (x, n))
                        g = s.end_capture()
                        del g
                return loop
            return make

        def uploaded(nodes):
            g = graph(nodes, False, nop)
            g.upload(s)
            return g

        inc((1,), (N,), (x, n))  # compiles the kernels
        mark((1,), (1,), (out, pos, n))
        nop((1,), (N,), (x, n))
        rows("cupy", [("eager_nop", eager(nop)), ("eager", eager())]
             + [("replay_nop%d" % k, replay(k, nop))
                for k in (1, 10, 100, 1000)]
             + [("replay%d" % k, replay(k)) for k in (1, 10, 100, 1000)]
             + [("scalar", scalar)]
             + [("capture%d" % k, capture(k)) for k in (1, 10, 100)],
             s.synchronize, opts)
        if not opts.only:
            graph_memory("cupy", uploaded,
                         lambda: cupy.cuda.runtime.memGetInfo()[0],
                         s.synchronize)


def torch_rows(opts):
    try:
        import torch
    except Exception as e:
        return say(lib="torch", skip="import torch: %s" % e)
    if not torch.cuda.is_available():
        return say(lib="torch", skip="torch.cuda.is_available() is False")
    say(lib="torch", version=torch.__version__)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.zeros(N, dtype=torch.int32, device="cuda")
        y = torch.zeros(1, dtype=torch.int32, device="cuda")
        pos = torch.zeros(1, dtype=torch.int32, device="cuda")
        x.add_(1)
        y.add_(pos)
        s.synchronize()
        pin(opts)

        def inc():
            x.add_(1)

        def nop():
            torch.cuda._sleep(0)

        def eager(k=inc):
            def make():
                def loop(iters):
                    for _ in range(iters):
                        k()
                return loop
            return make

        def graph(nodes, with_read=False, k=inc):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                for _ in range(nodes):
                    k()
                if with_read:
                    y.add_(pos)
            return g

        def replay(nodes, k=inc):
            def make():
                g = graph(nodes, False, k)

                def loop(iters):
                    for _ in range(iters):
                        g.replay()
                return loop
            return make

        def scalar():
            g = graph(9, True)

            def loop(iters):
                for i in range(1, iters + 1):
                    pos.fill_(i)
                    g.replay()
            return loop

        def capture(nodes):
            def make():
                def loop(iters):
                    for _ in range(iters):
                        graph(nodes).reset()
                return loop
            return make

        def replayed(nodes):
            # PyTorch has no upload call: the first replay puts the graph
            # on the device
            g = graph(nodes, False, nop)
            g.replay()
            return g

        # K add_ on one of two buffers, alternating call by call (bench.lua's
        # graphed, hand and eagerk rows): eagerly; by torch.cuda.graph over
        # a static buffer, each call copying its buffer in and out (a
        # graph's input cannot change in place); by torch.compile's
        # mode="reduce-overhead" (its CUDA graphs, copies and fusion)
        bufs = (torch.zeros(N, dtype=torch.int32, device="cuda"),
                torch.zeros(N, dtype=torch.int32, device="cuda"))

        def kinc(k):
            def f(b):
                for _ in range(k):
                    b.add_(1)
            return f

        def alternating(f):
            def loop(iters):
                for i in range(iters):
                    f(bufs[i % 2])
            return loop

        def eagerk(k):
            return lambda: alternating(kinc(k))

        def handk(k):
            def make():
                st = torch.zeros(N, dtype=torch.int32, device="cuda")
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=s):
                    kinc(k)(st)

                def call(b):
                    st.copy_(b)
                    g.replay()
                    b.copy_(st)
                return alternating(call)
            return make

        def compiledk(k):
            def make():
                f = torch.compile(kinc(k), mode="reduce-overhead")
                for i in range(4):  # compiles, then records its graphs
                    f(bufs[i % 2])
                return alternating(f)
            return make

        nop()
        rows("torch", [("eagerk%d" % k, eagerk(k)) for k in (10, 100)]
             + [("hand%d" % k, handk(k)) for k in (10, 100)]
             + [("graphed%d" % k, compiledk(k)) for k in (10, 100)],
             s.synchronize, opts)
        rows("torch", [("eager_nop", eager(nop)), ("eager", eager())]
             + [("replay_nop%d" % k, replay(k, nop))
                for k in (1, 10, 100, 1000)]
             + [("replay%d" % k, replay(k)) for k in (1, 10, 100, 1000)]
             + [("scalar", scalar)]
             + [("capture%d" % k, capture(k)) for k in (1, 10, 100)],
             s.synchronize, opts)
        # torch.cuda.graph empties the caching allocator as it begins: so
        # does each measurement, or the drop would hide that much
        if not opts.only:
            graph_memory("torch", replayed,
                         lambda: torch.cuda.mem_get_info()[0],
                         lambda: (s.synchronize(), torch.cuda.empty_cache()))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", choices=("cupy", "torch"), required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--bench-source", required=True)
    p.add_argument("--blocks", type=int, default=300)
    p.add_argument("--block", type=float, default=2e-3)
    p.add_argument("--warm-max", type=int, default=100)
    p.add_argument("--cpu", type=int)
    p.add_argument("--only", help="row keys, comma-separated: only these")
    opts = p.parse_args()
    opts.only = set(opts.only.split(",")) if opts.only else None
    (cupy_rows if opts.lib == "cupy" else torch_rows)(opts)


if __name__ == "__main__":
    main()
