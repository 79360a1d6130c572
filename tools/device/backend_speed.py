"""Kernel time of one large FP8 GEMM (DG_SHAPE="m,n,k", default 4096,7168,16384) with the
backend chosen by DG_JIT_USE_NVRTC (run once per backend in separate processes; prints
one line)."""

import os

import torch

import deep_gemm
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

m, n, k = (int(x) for x in os.environ.get("DG_SHAPE", "4096,7168,16384").split(","))
a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
a = (a[0], deep_gemm.get_mn_major_tma_aligned_tensor(a[1]))
d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
deep_gemm.fp8_gemm_nt(a, b, d)
times = []
for _ in range(30):
    flush.zero_()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    deep_gemm.fp8_gemm_nt(a, b, d)
    e.record()
    e.synchronize()
    times.append(s.elapsed_time(e) * 1e3)
us = sorted(times)[len(times) // 2]
print(f"backend {deep_gemm.get_jit().backend:6s} ({os.environ.get('DG_JIT_USE_NVRTC', '0')}): "
      f"{m}x{n}x{k} median {us:.1f} us, {2 * m * n * k / us / 1e6:.0f} TFLOP/s")
