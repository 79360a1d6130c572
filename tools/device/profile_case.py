"""Runs one bench case repeatedly, for profilers and clock probes (GPU host).

  DG_CASE=dense:4096,7168,16384 | contig:0 | contig:1 | masked:0 | masked:1
  [DG_TILE=128x192] python tools/device/profile_case.py [launches] [--steady SECONDS]

Checks the case against its float reference first (output poisoned by the bench's
builder), then makes `launches` launches (default 8). With --steady S it instead launches
back to back for about S seconds and prints the mean µs per launch: the sustained clock
and power of that kernel can then be sampled alongside (nvidia-smi). DG_TILE=MxN asks for
block sizes that are multiples of (M, N) (set_block_size_multiple_of), e.g. a tile the
heuristics would not take for that shape.
"""

import os
import sys
import time

import torch

import deep_gemm as dg
from deep_gemm import bench


def build():
    kind, _, arg = os.environ.get("DG_CASE", "dense:4096,7168,16384").partition(":")
    if kind == "dense":
        m, n, k = (int(x) for x in arg.split(","))
        return bench.fp8_case(dg, m, n, k)
    if kind == "contig":
        g, em, n, k = bench.CONTIGUOUS_SETS[int(arg)]
        return bench.contiguous_case(dg, g, em, n, k, 0)
    if kind == "masked":
        g, em, mm, n, k = bench.MASKED_SETS[int(arg)]
        return bench.masked_case(dg, g, em, mm, n, k, 0)
    raise SystemExit(f"unknown DG_CASE {kind!r}")


def main():
    tile = os.environ.get("DG_TILE")
    if tile:
        dg.set_block_size_multiple_of(tuple(int(x) for x in tile.split("x")))
    case = build()
    problem = bench.ours_problem(case)
    if problem:
        raise SystemExit(f"wrong result: {problem}")
    if "--steady" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--steady") + 1])
        n = 0
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(20):
                case.ours()
            n += 20
            torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / n * 1e6
        print(
            f"{os.environ.get('DG_CASE')}: steady {n} launches, {us:.1f} us each, {case.flops / us / 1e6:.0f} TFLOP/s", flush=True
        )
        return
    launches = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    for _ in range(launches):
        case.ours()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
