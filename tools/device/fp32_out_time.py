"""Dense FP8 GEMMs with an FP32 output accumulated in place (d = d + A @ B^T, the 1D1D
kernel), timed with the bench's LaunchTimer (L2 flushed before each launch), and checked
against a float reference first. For A/B runs of the 1D1D epilogue (run once per build).

  python tools/device/fp32_out_time.py [reps]     (FP32_SHAPES="m,n,k m,n,k")
"""
import os
import statistics
import sys

import torch

import deep_gemm
from deep_gemm.bench import LaunchTimer, checked_diff
from deep_gemm.utils import per_token_cast_to_fp8

SHAPES = [tuple(int(v) for v in x.split(",")) for x in
          os.environ.get("FP32_SHAPES", "4096,7168,2048 4096,7168,16384 4096,2112,7168 128,7168,2048").split()]
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def main():
    timer = LaunchTimer(repeats=REPS, warmups=2)
    for m, n, k in SHAPES:
        a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
        b = per_token_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
        c = torch.randn(m, n, device="cuda")
        d = c.clone()
        deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))
        ref = c + (a[0].float() * a[1].repeat_interleave(128, 1)) @ (b[0].float() * b[1].repeat_interleave(128, 1)).t()
        diff = checked_diff(d, ref)
        us = statistics.median(timer.samples_us(lambda a=a, b=b, d=d: deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))))
        print(f"{m:>5} x {n:>5} x {k:>5} fp32 += : {us:8.1f} us  {2 * m * n * k / us / 1e6:6.0f} TFLOP/s  diff {diff:.1e}",
              flush=True)


if __name__ == "__main__":
    main()
