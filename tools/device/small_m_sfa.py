"""Small-M FP8 GEMMs with per-token scales: read as given against converted per call.

Run once as is and once with DG_SM90_FP8_SFA_FROM_GLOBAL=0 (the knob is read once per
process); SFA_MS and SFA_NKS pick the rows. Per shape, µs per call: GPU time (50 calls
captured in a CUDA graph, replayed and timed with events: the kernels and the gaps
between them, no host), and host time (3000 back-to-back calls, synchronised at the end,
median of 3 runs: the bench's host_time_per_call_us), for per-token and prepared scales.
"""
import os
import statistics

import torch

import deep_gemm
from deep_gemm.bench import host_time_per_call_us
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

# SFA_MS / SFA_NKS (space-separated, "N,K" pairs) replace the default rows.
MS = [int(x) for x in os.environ.get("SFA_MS", "1 16 64").split()]
NKS = [tuple(int(v) for v in x.split(",")) for x in
       os.environ.get("SFA_NKS", "2112,7168 24576,1536 7168,16384 4096,7168 7168,2048 256,512").split()]
SHAPES = [(m, n, k) for m in MS for (n, k) in NKS]


def gpu_us(fn, calls=50, reps=20):
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(calls):
                fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(times)


def main():
    tag = "converted" if os.environ.get("DG_SM90_FP8_SFA_FROM_GLOBAL") == "0" else "as-given"
    print(f"per-token scales {tag}; columns: per-token gpu, prepared gpu, per-token host, prepared host (µs)")
    for m, n, k in SHAPES:
        a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
        prep = (a[0], deep_gemm.get_mn_major_tma_aligned_tensor(a[1]))
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        per_token = lambda a=a, b=b, d=d: deep_gemm.fp8_gemm_nt(a, b, d)  # noqa: E731
        prepared = lambda p=prep, b=b, d=d: deep_gemm.fp8_gemm_nt(p, b, d)  # noqa: E731
        row = [gpu_us(per_token), gpu_us(prepared)]
        if (n, k) == (256, 512) or m == 16:
            row += [host_time_per_call_us(per_token, runs=3), host_time_per_call_us(prepared, runs=3)]
        print(f"{tag:9s} {m:>3} x {n:>5} x {k:>5}  " + "  ".join(f"{v:7.2f}" for v in row), flush=True)


if __name__ == "__main__":
    main()
