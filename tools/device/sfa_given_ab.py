"""Per-token scales read as given against converted, in one process (run on the GPU host).

Per shape, three ways into fp8_gemm_nt, timed launch by launch in turn with the bench's
LaunchTimer (256 MB L2 flush before each launch, queued behind a GPU spin):
  given      per-token SFA [M, K/128] as quantisation leaves it: read by the kernel where
             heuristics::sm90_fp8_sfa_from_global_fits allows (the "_sg" kernels), else
             converted;
  converted  the same scales as an MN-major view with an unaligned pitch: always converted
             on the GPU (our layout kernel, then the GEMM);
  prepared   MN-major, TMA-aligned: neither.
Prints medians in µs and given / converted. SFA_MS and SFA_NKS ("N,K" pairs) pick the
rows. Which M reads them as given is the build's (kSm90Fp8SfaFromGlobalMaxM).
"""
import os
import statistics
import sys

import torch

import deep_gemm
from deep_gemm.bench import LaunchTimer
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

MS = [int(x) for x in os.environ.get("SFA_MS", "1 16 64 128 192 256 384 512").split()]
NKS = [tuple(int(v) for v in x.split(",")) for x in
       os.environ.get("SFA_NKS", "2112,7168 24576,1536 7168,16384 4096,7168 7168,2048").split()]
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def main():
    timer = LaunchTimer(repeats=REPS, warmups=2)
    print(f"{'shape':>18} {'given':>8} {'converted':>10} {'prepared':>9} {'g/c':>6}  (median us, {REPS} launches each)")
    for m in MS:
        for n, k in NKS:
            a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
            b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
            unaligned = torch.empty(k // 128, m + 5, device="cuda").t()[:m]
            unaligned.copy_(sfa)
            prepared = deep_gemm.get_mn_major_tma_aligned_tensor(sfa)
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            fns = {name: (lambda a=a, s=s, b=b, d=d: deep_gemm.fp8_gemm_nt((a, s), b, d))
                   for name, s in (("given", sfa), ("converted", unaligned), ("prepared", prepared))}
            us = {name: statistics.median(t) for name, t in timer.samples_us_interleaved(fns).items()}
            print(f"{m:>5} x {n:>5} x {k:>5} {us['given']:8.2f} {us['converted']:10.2f} {us['prepared']:9.2f} "
                  f"{us['given'] / us['converted']:6.3f}", flush=True)


if __name__ == "__main__":
    main()
