"""Where the per-call host time of fp8_gemm_nt goes (run on the GPU host).

Times, per call over many back-to-back calls: the facade and the op on meta tensors
(argument checks and dispatch only: the op returns before any CUDA work), the op and the
facade on CUDA tensors with prepared scales (the full path), and two torch references.
"""
import time

import torch

import deep_gemm as dg
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

M, N, K = 16, 256, 512
CALLS = 5000


def per_call_us(fn, calls=CALLS):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    a = per_token_cast_to_fp8(torch.randn(M, K, device="cuda"), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(N, K, device="cuda"), use_ue8m0=False)
    sfa = dg.get_mn_major_tma_aligned_tensor(a[1])
    d = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    op = torch.ops.deep_gemm.fp8_gemm_nt.default
    meta = [t.to("meta") for t in (a[0], sfa, b[0], b[1], d)]
    x = torch.randn(16, device="cuda")
    rows = {
        "facade, meta tensors (checks + dispatch)": lambda: dg.fp8_gemm_nt((meta[0], meta[1]), (meta[2], meta[3]), meta[4]),
        "op, meta tensors (checks + dispatch)": lambda: op(*meta, None, "nk"),
        "op, cuda, prepared sfa (full path)": lambda: op(a[0], sfa, b[0], b[1], d, None, "nk"),
        "facade, cuda, prepared sfa (full path)": lambda: dg.fp8_gemm_nt((a[0], sfa), b, d),
        "torch.add (16 floats)": lambda: torch.add(x, x),
        "torch.empty (16 floats, cuda)": lambda: torch.empty(16, device="cuda"),
    }
    for name, fn in rows.items():
        print(f"{name:45s} {per_call_us(fn):7.2f} us")


if __name__ == "__main__":
    main()
