"""Does the order in which the bench times a row's implementations move their figures? (GPU host)

The bench times each fp8 row as: ours (30 flushed launches), then cuBLASLt, then torch
bf16; so ours always follows the previous row's bf16 launches. At the H200's power cap
the clock depends on the recent load, so the order may favour one implementation. This
runs the nine fp8 rows in three orders, in one process, mirrored (ABC CBA) against drift:

  bench        ours, cuBLASLt, bf16 per row (the bench today)
  ours_last    bf16, cuBLASLt, ours
  interleaved  launch by launch in turn (LaunchTimer.samples_us_interleaved)

and prints each implementation's median per row and order, and ours over cuBLASLt.

  python tools/device/order_probe.py [rounds]
"""

import math
import sys

import torch

import deep_gemm as dg
from deep_gemm import bench

IMPLS = ("ours", bench.PEER_CUBLASLT, bench.PEER_BF16)


def launchers(case: bench.Case) -> dict:
    return {"ours": case.ours, **{name: case.peers[name].run for name in IMPLS[1:]}}


def run_order(order: str, cases: list, timer: bench.LaunchTimer) -> list[dict[str, float]]:
    rows = []
    for case in cases:
        fns = launchers(case)
        if order == "interleaved":
            samples = timer.samples_us_interleaved(fns)
            rows.append({name: bench.spread(s)["us"] for name, s in samples.items()})
            continue
        names = IMPLS if order == "bench" else IMPLS[::-1]
        rows.append({name: timer.measure(fns[name])["us"] for name in names})
    return rows


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    timer = bench.LaunchTimer(30, 3)
    cases = []
    for m, n, k in bench.FP8_SHAPES:
        torch.manual_seed(0)
        case = bench.fp8_case(dg, m, n, k)
        problem = bench.ours_problem(case)
        if problem:
            raise SystemExit(f"{m}x{n}x{k}: {problem}")
        for name in IMPLS[1:]:
            out = case.peers[name].run()
            torch.cuda.synchronize()
            diff = bench.checked_diff(out, case.reference)
            if bench.diff_problem(diff, case.max_diff):
                raise SystemExit(f"{m}x{n}x{k} {name}: diff {diff}")
        cases.append(case)
    orders = ("bench", "ours_last", "interleaved")
    results = {o: [] for o in orders}
    for rnd in range(rounds):
        for order in orders + orders[::-1]:
            results[order].append(run_order(order, cases, timer))
            print(f"round {rnd} {order} done", flush=True)
    for order in orders:
        print(f"\n== {order}: us per run (ours / cuBLASLt / bf16), ours over cuBLASLt")
        ratios = []
        for i, (m, n, k) in enumerate(bench.FP8_SHAPES):
            runs = [r[i] for r in results[order]]
            cells = "  ".join(f"{r['ours']:.1f}/{r[bench.PEER_CUBLASLT]:.1f}/{r[bench.PEER_BF16]:.1f}" for r in runs)
            ratio = [r[bench.PEER_CUBLASLT] / r["ours"] for r in runs]
            ratios.append(ratio)
            tf = [2 * m * n * k / r["ours"] / 1e6 for r in runs]
            print(f"{m}x{n}x{k}: {cells}  x{' '.join(f'{x:.3f}' for x in ratio)}  ours TFLOP/s "
                  + " ".join(f"{t:.0f}" for t in tf))
        for j in range(len(ratios[0])):
            gm = math.exp(sum(math.log(r[j]) for r in ratios) / len(ratios))
            print(f"run {j}: geomean ours over cuBLASLt {gm:.3f}x, min {min(r[j] for r in ratios):.3f}x")


if __name__ == "__main__":
    main()
