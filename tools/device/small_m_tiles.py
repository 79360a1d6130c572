"""Dense FP8 GEMMs at M just above a BLOCK_M (GPU host): which tile height wins.

Where M is not a multiple of BLOCK_M the last m-block loads only the rows that exist
("_tm" kernels; before, its TMA box reached past M, which cost as much as real rows). Run
once per forced BLOCK_M (read once per process) and once unforced:

  DG_SM90_FP8_BLOCK_M=64 python tools/device/small_m_tiles.py

Per shape: GPU µs per call (50 calls in a CUDA graph, replayed; prepared scales); with
DG_PRINT_CONFIGS=1 the chosen tiles go to stderr. DG_SHAPES="m,n,k m,n,k ..." replaces the
shape list.
"""
import os

import torch
from small_m_sfa import gpu_us  # this script's folder is on sys.path when run as a script

import deep_gemm
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

SHAPES = [tuple(map(int, s.split(","))) for s in os.environ["DG_SHAPES"].split()] if os.environ.get("DG_SHAPES") else [
    (m, n, k) for m in (48, 65, 96, 127, 129, 192) for (n, k) in ((2112, 7168), (7168, 2048), (4096, 7168))]


def main():
    tag = os.environ.get("DG_SM90_FP8_BLOCK_M", "auto")
    for m, n, k in SHAPES:
        a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
        prep = (a, deep_gemm.get_mn_major_tma_aligned_tensor(sfa))
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        us = gpu_us(lambda p=prep, b=b, d=d: deep_gemm.fp8_gemm_nt(p, b, d))
        print(f"block_m={tag:4s} {m:>4} x {n:>5} x {k:>5}  {us:7.2f}", flush=True)


if __name__ == "__main__":
    main()
