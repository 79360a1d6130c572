"""Median time of the bench's masked GEMM cases (seeds 0-2), one process: run it in several
alternating processes per build to A/B builds (process-level placement effects, docs/NOTES.md
session 6). Each case is checked against the float reference first."""
import statistics
import sys


import deep_gemm as dg
from deep_gemm import bench

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
TAG = sys.argv[2] if len(sys.argv) > 2 else ""


def main():
    timer = bench.LaunchTimer(REPS, 2)
    cols = []
    for seed in (0, 1, 2):
        for g, em, mm, n, k in bench.MASKED_SETS:
            case = bench.masked_case(dg, g, em, mm, n, k, seed)
            problem = bench.ours_problem(case)
            assert problem is None, problem
            us = statistics.median(timer.samples_us(case.ours))
            cols.append(f"s{seed} {g}x{em} {us:6.1f} us {case.flops / us / 1e6:5.0f} TF")
    print(f"{TAG:>4} " + " | ".join(cols), flush=True)


if __name__ == "__main__":
    main()
