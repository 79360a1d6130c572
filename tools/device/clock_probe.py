"""SM clock, power and cycles per K block of a sustained GEMM, ours beside cuBLASLt (GPU host).

Each implementation runs back to back for a few seconds (no L2 flush: a sustained load, as
in a model's layers) while nvidia-smi samples the SM clock, the board power and the active
clock-event reasons every 50 ms. Printed per implementation: µs per call (CUDA events over
the whole loop), median SM clock and power over the loop, and SM cycles per call. Cycles per
call over (waves x K blocks) of our tile (DG_PRINT_CONFIGS shows it) gives the cycles of one
128-wide K block: set against the tile's floors (tensor: BLOCK_M x BLOCK_N x 128 / 4096 MAC
per clock; shared memory: bytes per K block / 128 B per clock) it says whether a kernel is
short of cycles or of clock.

  python tools/device/clock_probe.py [seconds]      (PROBE_SHAPES="4096,7168,16384")
"""

import math
import os
import statistics
import subprocess
import sys

import torch

import deep_gemm as dg
from deep_gemm import bench

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
FIELDS = "clocks.sm,power.draw,clocks_event_reasons.active"


def sampler() -> subprocess.Popen:
    return subprocess.Popen(
        ["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", "-lms", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def sustained(fn) -> tuple[float, list[str]]:
    """µs per call of fn run back to back for SECONDS, and the nvidia-smi lines meanwhile."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        fn()
    end.record()
    torch.cuda.synchronize()
    calls = max(10, int(SECONDS * 1e3 / (start.elapsed_time(end) / 5)))
    proc = sampler()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    proc.terminate()
    lines = proc.communicate()[0].strip().splitlines()
    return start.elapsed_time(end) * 1e3 / calls, lines


def summarize(lines: list[str]) -> tuple[float, float, str]:
    clocks, powers, reasons = [], [], set()
    for line in lines[2:]:  # the first samples may predate the load
        parts = [p.strip() for p in line.split(",")]
        try:
            clocks.append(float(parts[0]))
            powers.append(float(parts[1]))
            reasons.add(parts[2] if len(parts) > 2 else "?")
        except (ValueError, IndexError):
            reasons.add(line[:60])
    if not clocks:
        return math.nan, math.nan, "; ".join(sorted(reasons)) or "no samples"
    return statistics.median(clocks), statistics.median(powers), ",".join(sorted(reasons))


def main() -> None:
    shapes = [tuple(int(x) for x in s.split(",")) for s in os.environ.get("PROBE_SHAPES", "4096,7168,16384").split(";")]
    os.environ.setdefault("DG_PRINT_CONFIGS", "1")
    for m, n, k in shapes:
        torch.manual_seed(0)
        case = bench.fp8_case(dg, m, n, k)
        problem = bench.ours_problem(case)
        if problem:
            print(f"{m}x{n}x{k}: ours is wrong ({problem}); not timed", flush=True)
            continue
        impls = {"ours": case.ours}
        for name, peer in case.peers.items():
            if peer.run is not None:
                impls[name] = peer.run
        for name, fn in impls.items():
            us, lines = sustained(fn)
            mhz, watts, reasons = summarize(lines)
            cycles = us * mhz
            tflops = bench.gemm_flops(m, n, k) / us / 1e6
            print(
                f"{m}x{n}x{k} {name:>10}: {us:8.1f} us {tflops:6.0f} TFLOP/s  SM {mhz:6.0f} MHz  {watts:5.0f} W"
                f"  {cycles / 1e3:8.1f} kclk/call  reasons {reasons}",
                flush=True,
            )


if __name__ == "__main__":
    main()
