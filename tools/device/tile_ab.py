"""A/B of tile shapes on the bench's own cases, in one process, interleaved (GPU host).

Each variant restricts the heuristics with set_block_size_multiple_of((mult_m, mult_n)),
e.g. (128, 192) leaves only 128x192 for the FP8 kernels. Per case: every variant is first
checked against the float reference (output poisoned), then the variants alternate launch
by launch (256 MB L2 flush before each, CUDA events), so clock drift hits them alike.
Prints the median µs and TFLOP/s of each variant; DG_PRINT_CONFIGS=1 shows the tiles.

  python tools/device/tile_ab.py [reps]    (TILE_AB_VARIANTS="1x1 256x128 128x192")

TILE_AB_DENSE="m,n,k m,n,k ..." replaces the dense shapes.
"""
import os
import statistics
import sys


import deep_gemm as dg
from deep_gemm import bench

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
VARIANTS = [tuple(int(x) for x in v.split("x")) for v in os.environ.get("TILE_AB_VARIANTS", "1x1 256x128 128x192").split()]
CASES = os.environ.get("TILE_AB_CASES", "dense contiguous masked").split()
DENSE = [tuple(int(x) for x in v.split(",")) for v in os.environ.get(
    "TILE_AB_DENSE", "4096,7168,16384 4096,2112,7168 4096,4096,7168 4096,7168,2048 4096,24576,1536").split()]


def builders():
    if "dense" in CASES:
        for m, n, k in DENSE:
            yield f"{m}x{n}x{k}", lambda m=m, n=n, k=k: bench.fp8_case(dg, m, n, k)
    if "contiguous" in CASES:
        for g, em, n, k in bench.CONTIGUOUS_SETS:
            yield f"contig {g}x{em} n{n} k{k}", lambda g=g, em=em, n=n, k=k: bench.contiguous_case(dg, g, em, n, k, 0)
    if "masked" in CASES:
        for g, em, mm, n, k in bench.MASKED_SETS:
            yield f"masked {g}x{em} n{n} k{k}", lambda g=g, em=em, mm=mm, n=n, k=k: bench.masked_case(
                dg, g, em, mm, n, k, 0)


def check(build, v):
    """A fresh case (NaN-poisoned output) computed with variant v: None if right, else why not."""
    dg.set_block_size_multiple_of(v)
    try:
        case = build()
        return bench.ours_problem(case)
    except Exception as exc:  # noqa: BLE001  (a variant with no legal tile)
        return bench.describe_error(exc)[:80]


def main():
    one_launch = bench.LaunchTimer(1, 0, queue_ahead=False)  # one flushed, event-timed launch per call (no 10 ms spin each)
    print(f"{'case':>28} " + " ".join(f"{f'{a}x{b}':>16}" for a, b in VARIANTS) + "   (median us / TFLOP/s)")
    for name, build in builders():
        good = []
        for v in VARIANTS:
            problem = check(build, v)
            if problem:
                print(f"  {name} {v}: {problem}", flush=True)
            else:
                good.append(v)
        case = build()
        times = {v: [] for v in good}
        for v in good:  # warm (JIT, first load)
            dg.set_block_size_multiple_of(v)
            case.ours()
        for _ in range(REPS):
            for v in good:
                dg.set_block_size_multiple_of(v)
                times[v].extend(one_launch.samples_us(case.ours))
        cols = []
        for v in VARIANTS:
            if v in times:
                us = statistics.median(times[v])
                cols.append(f"{us:8.1f}/{case.flops / us / 1e6:6.0f}")
            else:
                cols.append(f"{'-':>16}")
        print(f"{name:>28} " + " ".join(cols), flush=True)
    dg.set_block_size_multiple_of((1, 1))


if __name__ == "__main__":
    main()
