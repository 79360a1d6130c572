"""The m-grouped GEMMs over several token distributions (GPU host).

Times the bench's grouped sets (BENCH.md) with seeds 0..N-1 (seed 0 is the bench's row):
masked, contiguous with the index layout, and the same contiguous rows in the psum layout
(not in the bench). Each case is checked against the float reference first; bench
protocol (flushed L2, median of 30). Knobs read once per process
(DG_SM90_FP8_DYNAMIC_TILES) are compared by running this once per value:

  DG_SM90_FP8_DYNAMIC_TILES=0 python tools/device/grouped_seeds.py 4
"""

import random
import sys

import torch

import deep_gemm as dg
from deep_gemm import bench

MASKED = ((32, 192, 4096, 4096, 7168), (6, 1024, 4096, 7168, 3072))
CONTIGUOUS = ((4, 8192, 4096, 7168), (8, 4096, 7168, 2048))


def psum_case(num_groups: int, expected_m: int, n: int, k: int, seed: int) -> bench.Case:
    """The contiguous set's rows, each group starting at a multiple of the alignment,
    given as cumulative end rows (use_psum_layout=True)."""
    rng = random.Random(seed)
    rows = [int(expected_m * rng.uniform(0.7, 1.3)) for _ in range(num_groups)]
    align = dg.get_mk_alignment_for_contiguous_layout()
    starts, ends, start = [], [], 0
    for r in rows:
        starts.append(start)
        ends.append(start + r)
        start = bench.align(start + r, align)
    m_sum = ends[-1]
    a, b = bench.randn(m_sum, k), bench.randn(num_groups, n, k)
    valid = torch.zeros(m_sum, dtype=torch.bool, device="cuda")
    for s, e in zip(starts, ends, strict=True):
        valid[s:e] = True
    a[~valid] = 0
    case = bench.Case(meta={"rows": rows}, flops=bench.gemm_flops(sum(rows), n, k), max_diff=bench.MAX_DIFF["grouped"])
    case.reference = torch.cat([a[s:e].float() @ b[g].float().t() for g, (s, e) in enumerate(zip(starts, ends, strict=True))])
    a_q, b_q = bench.per_token_cast_to_fp8(a, use_ue8m0=False), bench.quantize_grouped_b(b)
    layout = torch.tensor(ends, dtype=torch.int32, device="cuda")
    d = bench.nan_output(m_sum, n)
    case.ours = lambda: dg.m_grouped_fp8_gemm_nt_contiguous(a_q, b_q, d, layout, use_psum_layout=True)
    case.read_ours = lambda: d[valid]
    return case


def row(label, build, seeds, timer):
    cells = []
    for seed in range(seeds):
        torch.manual_seed(seed)
        case = build(seed)
        problem = bench.ours_problem(case)
        if problem:
            raise SystemExit(f"{label} seed {seed}: {problem}")
        us = timer.measure(case.ours)["us"]
        cells.append(f"s{seed} {us:.1f} us {case.flops / us / 1e6:.0f}")
    print(f"{label}: " + " | ".join(cells), flush=True)


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    timer = bench.LaunchTimer(30, 3)
    for g, em, max_m, n, k in MASKED:
        row(f"masked {g}x~{em}", lambda s, a=(g, em, max_m, n, k): bench.masked_case(dg, *a, s), seeds, timer)
    for g, em, n, k in CONTIGUOUS:
        row(f"contiguous {g}x~{em}", lambda s, a=(g, em, n, k): bench.contiguous_case(dg, *a, s), min(seeds, 2), timer)
        row(f"psum {g}x~{em}", lambda s, a=(g, em, n, k): psum_case(*a, s), min(seeds, 2), timer)
    print("kernels:", ", ".join(k for k in dg.get_jit().loaded_kernels if "_mg" in k))


if __name__ == "__main__":
    main()
