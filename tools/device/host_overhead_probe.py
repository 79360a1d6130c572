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
        "op, cuda, per-token sfa (full path)": lambda: op(a[0], a[1], b[0], b[1], d, None, "nk"),
        "facade, cuda, per-token sfa (full path)": lambda: dg.fp8_gemm_nt(a, b, d),
        "get_mn_major_tma_aligned_tensor (per token)": lambda: dg.get_mn_major_tma_aligned_tensor(a[1]),
        "torch.add (16 floats)": lambda: torch.add(x, x),
        "torch.empty (16 floats, cuda)": lambda: torch.empty(16, device="cuda"),
    }
    for name, fn in rows.items():
        print(f"{name:45s} {per_call_us(fn):7.2f} us")
    # Enqueue time alone (100 calls, below the launch queue's depth, no sync): the CPU side.
    # Where the synchronised figure above is higher, the GPU (kernels and the gaps between
    # them) is what limits back-to-back calls of this tiny GEMM, not the host.
    for name in ("facade, cuda, prepared sfa (full path)", "facade, cuda, per-token sfa (full path)"):
        print(f"{name + ', enqueue only':60s} {enqueue_us(rows[name]):7.2f} us")
    print(f"{'cuTensorMapEncodeTiled (2-D, 128B swizzle)':45s} {encode_us(a[0]):7.2f} us")


def enqueue_us(fn, calls: int = 100, rounds: int = 20) -> float:
    best = float("inf")
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return best


def encode_us(t: torch.Tensor, calls: int = 20000) -> float:
    """Driver time of one 2-D tensor-map encode (the launcher encodes four per call)."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    tmap = (ctypes.c_uint8 * 128)()
    u64x2 = ctypes.c_uint64 * 2
    dims, strides = u64x2(t.shape[1], t.shape[0]), u64x2(t.stride(0), 0)
    box, elem = (ctypes.c_uint32 * 2)(128, 16), (ctypes.c_uint32 * 2)(1, 1)
    ptr = ctypes.c_void_p(t.data_ptr())
    # dtype UINT8 (0), rank 2, interleave none (0), swizzle 128B (3), L2 promotion 256B (3), no OOB fill (0)
    args = (tmap, 0, 2, ptr, dims, strides, box, elem, 0, 3, 3, 0)
    if cuda.cuTensorMapEncodeTiled(*args) != 0:
        return float("nan")
    t0 = time.perf_counter()
    for _ in range(calls):
        cuda.cuTensorMapEncodeTiled(*args)
    return (time.perf_counter() - t0) / calls * 1e6


if __name__ == "__main__":
    main()
