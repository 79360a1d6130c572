"""Where a tile's time goes at its boundaries (GPU host).

The 1D2D kernels built with DG_DEV_TRACE_TILES=1 stamp clock64 per math warpgroup and tile:
0 tile start (tile fetched), 1 first K block's data ready, 2 K loop done, 3 epilogue done.
This times each case with the stamps on (bench protocol), then reads the stamps of one
flushed launch: per tile, the wait for the first stage (1 - 0), the K loop (2 - 1), the
epilogue (3 - 2) and the gap to the next tile (next 0 - 3), in SM clocks. The stamps slow
the kernels down (~10%, measured 2026-12-01): read the figures for the shape of a tile's
time, not for its speed.

  python tools/device/tile_trace.py
"""

import os
import statistics

os.environ["DG_DEV_TRACE_TILES"] = "1"  # before the first kernel is built

import torch  # noqa: E402

import deep_gemm as dg  # noqa: E402
from deep_gemm import bench  # noqa: E402

CTAS, WGS, TILES = 132, 2, 64
CASES = {
    "dense 4096x7168x2048": lambda: bench.fp8_case(dg, 4096, 7168, 2048),
    "dense 4096x7168x16384": lambda: bench.fp8_case(dg, 4096, 7168, 16384),
    "contiguous 8x~4096 k2048": lambda: bench.contiguous_case(dg, 8, 4096, 7168, 2048, 0),
    "masked 6x~1024 k3072": lambda: bench.masked_case(dg, 6, 1024, 4096, 7168, 3072, 0),
}


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def summary(name, values):
    return f"{name} p10/p50/p90 {pct(values, .1):.0f}/{pct(values, .5):.0f}/{pct(values, .9):.0f}"


def main():
    buf = torch.zeros(CTAS * WGS * TILES * 4, dtype=torch.int64, device="cuda")
    os.environ["DG_DEV_TRACE_TILES_PTR"] = str(buf.data_ptr())
    timer = bench.LaunchTimer(30, 3)
    for name, build in CASES.items():
        torch.manual_seed(0)
        case = build()
        problem = bench.ours_problem(case)
        us = timer.measure(case.ours)["us"]
        buf.zero_()
        timer.flush_buffer.zero_()
        case.ours()
        torch.cuda.synchronize()
        t = buf.view(CTAS, WGS, TILES, 4).cpu().tolist()
        wait0, kloop, epi, gap, period, skew, span, ntiles = [], [], [], [], [], [], [], []
        for c in range(CTAS):
            for w in range(WGS):
                tiles = [s for s in t[c][w] if s[0] != 0]
                if w == 0:
                    ntiles.append(len(tiles))
                for i, s in enumerate(tiles):
                    wait0.append(s[1] - s[0])
                    kloop.append(s[2] - s[1])
                    epi.append(s[3] - s[2])
                    if i + 1 < len(tiles):
                        gap.append(tiles[i + 1][0] - s[3])
                        period.append(tiles[i + 1][0] - s[0])
                if tiles:
                    span.append(tiles[-1][3] - tiles[0][0])
            a = [s for s in t[c][0] if s[0] != 0]
            b = [s for s in t[c][1] if s[0] != 0]
            skew += [y[2] - x[2] for x, y in zip(a, b, strict=False)]
        print(f"== {name}: {us:.1f} us with stamps ({problem or 'correct'}); tiles per CTA "
              f"{min(ntiles)}-{max(ntiles)} (mean {statistics.mean(ntiles):.2f})")
        for label, values in (("first-stage wait", wait0), ("K loop", kloop), ("epilogue", epi),
                              ("gap to next tile", gap), ("tile period", period),
                              ("WG1 - WG0 at K-loop end", skew), ("CTA span (first start to last end)", span)):
            print("  " + summary(label, values))
        if kloop and period:
            over = statistics.median(period) - statistics.median(kloop)
            print(f"  median period - median K loop = {over:.0f} clk per tile "
                  f"({100 * over / statistics.median(period):.1f}% of a tile)")
        del case
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
