"""Bench-protocol A/B of the persistent grid size on the dense fp8 bench shapes (GPU host).

For each shape, the default grid (all 132 SMs) and a "balanced" one (the fewest CTAs that
keep the same number of tile waves: ceil(tiles / waves)), through set_num_sms, interleaved
launch batch by batch (L2 flushed before each launch, median of 30, per-token scales).
DG_PRINT_CONFIGS shows whether the tile stayed the same.

  DG_PRINT_CONFIGS=1 python tools/device/grid_ab.py [rounds]
"""

import math
import sys

import torch

import deep_gemm as dg
from deep_gemm import bench

# shape -> tile the heuristics pick on 132 SMs (bench shapes, NOTES.md)
SHAPES = {
    (4096, 2112, 7168): (128, 192),
    (4096, 24576, 1536): (256, 128),
    (4096, 7168, 16384): (256, 128),
    (4096, 4096, 7168): (256, 128),
    (4096, 7168, 2048): (256, 128),
}


def balanced(m: int, n: int, tile: tuple[int, int], sms: int = 132) -> int:
    tiles = math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    return math.ceil(tiles / math.ceil(tiles / sms))


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    timer = bench.LaunchTimer(30, 3)
    for (m, n, k), tile in SHAPES.items():
        torch.manual_seed(0)
        case = bench.fp8_case(dg, m, n, k)
        counts = [132, balanced(m, n, tile)]
        for sms in counts:
            dg.set_num_sms(sms)
            problem = bench.ours_problem(case)
            if problem:
                raise SystemExit(f"{m}x{n}x{k} on {sms} SMs: {problem}")
        times = {s: [] for s in counts}
        for rnd in range(rounds):
            for sms in counts if rnd % 2 == 0 else counts[::-1]:
                dg.set_num_sms(sms)
                times[sms].append(timer.measure(case.ours)["us"])
        print(f"{m}x{n}x{k}: " + "  |  ".join(f"{s} SMs " + " ".join(f"{t:.1f}" for t in times[s]) for s in counts),
              flush=True)
    dg.set_num_sms(132)


if __name__ == "__main__":
    main()
