"""The decoder of examples/decode.lua in PyTorch, eager and replayed from a
CUDA graph (torch.cuda.graphs), timed the way decode.lua times itself:
events around the T steps of one decode, after a warm-up decode. The
shapes, the operations and their order are the Lua example's (cuBLAS
GEMMs, a masked softmax over the cache, sampling by inverse CDF from
uniform draws); the weights are other random numbers, so only the rates
compare. Prints one JSON line.

    python3 bench/decode_torch.py [tokens [width [batch]]]
"""
import json
import math
import sys

import torch


def main():
    T = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    d = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    B = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    V, H = 2 * d, 4 * d
    dev = torch.device("cuda")
    torch.manual_seed(2024)

    def weights(rows, cols):
        return torch.randn(rows, cols, device=dev) / math.sqrt(cols)

    E, P = weights(V, d), weights(T, d)
    Wqkv, Wo = weights(3 * d, d), weights(d, d)
    W1, W2, Wout = weights(H, d), weights(d, H), weights(V, d)
    K = torch.zeros(B, T, d, device=dev)
    Vc = torch.zeros(B, T, d, device=dev)
    tok = torch.zeros(B, dtype=torch.long, device=dev)
    out = torch.zeros(B, T, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    steps = torch.arange(T, device=dev)
    scale = 1 / math.sqrt(d)

    def step():
        x = E.index_select(0, tok) + P.index_select(0, pos)
        qkv = x @ Wqkv.t()
        q, k, v = qkv.split(d, dim=1)
        K.index_copy_(1, pos, k.unsqueeze(1))
        Vc.index_copy_(1, pos, v.unsqueeze(1))
        s = torch.bmm(K, q.unsqueeze(2)).squeeze(2) * scale
        s = s.masked_fill(steps > pos, float("-inf"))
        att = torch.bmm(torch.softmax(s, dim=1).unsqueeze(1), Vc).squeeze(1)
        x = x + att @ Wo.t()
        x = x + torch.relu(x @ W1.t()) @ W2.t()
        logits = x @ Wout.t()
        u = torch.rand(B, 1, device=dev)
        cdf = torch.softmax(logits, dim=1).cumsum(dim=1)
        pick = torch.searchsorted(cdf, u * cdf[:, -1:]).clamp_(max=V - 1)
        tok.copy_(pick.view(B))
        out.index_copy_(1, pos, pick)

    def decode(run):
        tok.zero_()
        K.zero_()
        Vc.zero_()
        t0 = torch.cuda.Event(enable_timing=True)
        t1 = torch.cuda.Event(enable_timing=True)
        t0.record()
        for t in range(T):
            run(t)
        t1.record()
        t1.synchronize()
        return T * B / (t0.elapsed_time(t1) / 1000)

    def eager(t):
        pos.fill_(t)
        step()

    with torch.no_grad():
        decode(eager)
        eager_rate = decode(eager)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()

        def replay(t):
            pos.fill_(t)
            g.replay()

        decode(replay)
        graph_rate = decode(replay)
    print(json.dumps({"tokens": T, "width": d, "batch": B,
                      "torch_eager": eager_rate, "torch_graph": graph_rate,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
