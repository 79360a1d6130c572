"""A/B of the SFA paths of fp8_gemm_nt in one process, interleaved (run on the GPU host).

Per BENCH.md shape: per-token SFA as quantisation leaves it ([M, K/128], converted on the
GPU each call), the same with programmatic dependent launch on (set_pdl(True): the GEMM's
setup overlaps the conversion), and prepared SFA (MN-major, TMA-aligned: no conversion).
Each launch is timed with CUDA events after a 256 MB L2 flush; the variants alternate
launch by launch so clock and thermal drift hit them alike. Prints medians (µs).
(Run 8 used this script with a third variant, per-token SFA read by the math threads,
since removed: it was the slowest.)
"""
import statistics
import sys

import torch

import deep_gemm as dg
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

SHAPES = [(128, 2112, 7168), (128, 24576, 1536), (128, 7168, 16384), (128, 4096, 7168), (4096, 2112, 7168),
          (4096, 24576, 1536), (4096, 7168, 16384), (4096, 4096, 7168), (4096, 7168, 2048)]
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def main():
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"{'shape':>18} {'per-token':>10} {'+pdl':>10} {'prepared':>10}   (median us, {REPS} launches each)")
    for m, n, k in SHAPES:
        a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
        prepared = dg.get_mn_major_tma_aligned_tensor(sfa)
        variants = {"per-token": (sfa, False), "+pdl": (sfa, True), "prepared": (prepared, False)}
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        times = {name: [] for name in variants}
        for s, _ in variants.values():  # warm up (JIT) outside the timing
            dg.fp8_gemm_nt((a, s), b, d)
        for _ in range(REPS):
            for name, (s, pdl) in variants.items():
                dg.set_pdl(pdl)
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                dg.fp8_gemm_nt((a, s), b, d)
                end.record()
                end.synchronize()
                times[name].append(start.elapsed_time(end) * 1e3)
        dg.set_pdl(False)
        med = {name: statistics.median(t) for name, t in times.items()}
        print(f"{m:>5}x{n:>5}x{k:>5} " + " ".join(f"{med[v]:10.1f}" for v in variants), flush=True)


if __name__ == "__main__":
    main()
