"""The bench's timing variants against each other on its rows, in one process (GPU host).

For each row: the bench's own measure_case, interleaved or sequential, with the launches
queued behind a GPU spin or not (LaunchTimer.queue_ahead), the variants in mirrored order
per round; each implementation's median and quartiles; then, per implementation, the host
time per flushed launch (enqueue only, no sync) against the GPU time per flushed launch:
when the host is the slower, the GPU waits between the start event and the kernel and the
event time includes host time (a row timed that way says more about the host).

  python tools/device/timing_probe.py [rounds] [rows: all | small]
"""

import sys
import time

import torch

import deep_gemm as dg
from deep_gemm import bench

SMALL = [s for s in bench.FP8_SHAPES if s[0] == 128]


def fmt(stats: dict) -> str:
    return f"{stats['us']:.1f} [{stats['us_q1']:.1f} {stats['us_q3']:.1f}]" if stats.get("us") else "-"


def host_and_gpu_us(fn, flush: torch.Tensor, calls: int = 60) -> tuple[float, float]:
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(calls):
        flush.zero_()
        fn()
    end.record()
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return host, start.elapsed_time(end) * 1e3 / calls


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    shapes = SMALL if len(sys.argv) > 2 and sys.argv[2] == "small" else bench.FP8_SHAPES
    timers = {True: bench.LaunchTimer(30, 3), False: bench.LaunchTimer(30, 3, queue_ahead=False)}
    timer = timers[True]
    variants = [(i, q) for q in (True, False) for i in (True, False)]
    for m, n, k in shapes:
        torch.manual_seed(0)
        case = bench.fp8_case(dg, m, n, k)
        for rnd in range(rounds):
            for interleaved, queued in variants if rnd % 2 == 0 else variants[::-1]:
                rec = bench.measure_case(case, timers[queued], True, interleaved)
                peers = "  ".join(f"{name} {fmt(p)}" for name, p in rec["peers"].items())
                label = ("interleaved" if interleaved else "sequential ") + (" queued" if queued else " direct")
                print(f"{m}x{n}x{k} {label} ours {fmt(rec)}  {peers}", flush=True)
        fns = {"ours": case.ours, **{name: p.run for name, p in case.peers.items()}}
        for name, fn in fns.items():
            host, gpu = host_and_gpu_us(fn, timer.flush_buffer)
            print(f"{m}x{n}x{k} {name}: host {host:.1f} us per flushed launch, GPU {gpu:.1f} us", flush=True)
        del case
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
