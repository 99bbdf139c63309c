"""The dense GELU layer of examples/model.lua (dense<2>: 16x16 tiles of x and
W in shared memory, one thread per output) in Numba, timed on Numba's CUDA
simulator (NUMBA_ENABLE_CUDASIM=1) for bench/sim.lua.

    NUMBA_ENABLE_CUDASIM=1 python3 bench/sim_numba.py ROWS K N

Prints "seconds S" for one launch after a warm-up launch."""
import math
import sys
import time

import numpy as np
from numba import cuda, float32

TILE = 16


@cuda.jit
def dense_gelu(x, w, b, y, rows, k, n):
    xs = cuda.shared.array((TILE, TILE), float32)
    ws = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r, c = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, k, TILE):
        xs[ty, tx] = x[r * k + t + tx] if r < rows and t + tx < k else 0.0
        ws[ty, tx] = w[(t + ty) * n + c] if t + ty < k and c < n else 0.0
        cuda.syncthreads()
        for i in range(TILE):
            acc += xs[ty, i] * ws[i, tx]
        cuda.syncthreads()
    if r < rows and c < n:
        acc += b[c]
        acc = 0.5 * acc * (1.0 + math.tanh(0.7978845608 *
                                           (acc + 0.044715 * acc * acc * acc)))
        y[r * n + c] = acc


def main():
    rows, k, n = (int(a) for a in sys.argv[1:4])
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, rows * k).astype(np.float32)
    w = rng.uniform(-0.1, 0.1, k * n).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, n).astype(np.float32)
    y = np.zeros(rows * n, np.float32)
    grid = ((n + TILE - 1) // TILE, (rows + TILE - 1) // TILE)
    dense_gelu[grid, (TILE, TILE)](x, w, b, y, rows, k, n)
    start = time.perf_counter()
    dense_gelu[grid, (TILE, TILE)](x, w, b, y, rows, k, n)
    secs = time.perf_counter() - start
    ref = x.reshape(rows, k).astype(np.float64) @ w.reshape(k, n) + b
    ref = 0.5 * ref * (1 + np.tanh(0.7978845608 * (ref + 0.044715 * ref ** 3)))
    assert np.allclose(y.reshape(rows, n), ref, rtol=1e-4, atol=1e-5)
    print("seconds %.6f" % secs)


main()
