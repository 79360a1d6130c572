"""How does a GEMM's time scale with the number of SMs it may use? (GPU host)

At the H200's power cap, time should follow the energy of the work more than the number
of waves: idle SMs leave power to the busy ones. This probe times dense bench shapes with
`set_num_sms(n)` for several n, interleaved over rounds, after ~1 s of sustained load so
that every figure is taken in the steady (capped) state (NOTES.md, session 15, run 6).
Bench protocol otherwise (L2 flushed before each launch, median of 30 launches), per-token
scales as in the bench.

  python tools/device/sm_count_probe.py [rounds]
"""

import sys
import time

import torch

import deep_gemm as dg
from deep_gemm import bench

SHAPES = [(4096, 7168, 16384), (4096, 4096, 7168), (4096, 7168, 2048)]
SM_COUNTS = [132, 128, 120, 112, 100, 88, 66]


def heat(case: bench.Case, seconds: float = 1.0) -> None:
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            case.ours()
        torch.cuda.synchronize()


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    timer = bench.LaunchTimer(30, 3)
    cases = {}
    for m, n, k in SHAPES:
        torch.manual_seed(0)
        cases[(m, n, k)] = case = bench.fp8_case(dg, m, n, k)
        for sms in SM_COUNTS:  # compile and check every variant first
            dg.set_num_sms(sms)
            problem = bench.ours_problem(case)
            if problem:
                raise SystemExit(f"{m}x{n}x{k} on {sms} SMs: {problem}")
        case.reference = None
    for rnd in range(rounds):
        for shape, case in cases.items():
            dg.set_num_sms(132)
            heat(case)
            times = {}
            for sms in SM_COUNTS if rnd % 2 == 0 else SM_COUNTS[::-1]:
                dg.set_num_sms(sms)
                times[sms] = timer.measure(case.ours)["us"]
            flops = 2 * shape[0] * shape[1] * shape[2]
            print(f"round {rnd} {shape[0]}x{shape[1]}x{shape[2]}: "
                  + "  ".join(f"{s} SMs {times[s]:.1f} us ({flops / times[s] / 1e6:.0f})" for s in SM_COUNTS), flush=True)
    dg.set_num_sms(132)


if __name__ == "__main__":
    main()
