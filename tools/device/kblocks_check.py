"""Dense bf16-out GEMM at BLOCK_M 256 (forced) over K = 1..9 blocks of 128 and M tails,
against a float reference with the output poisoned first (GPU host). For K-loop changes that
treat the number of K blocks per tile modulo the pipeline depth.

  DG_DEV_SM90_FP8_BLOCK_M=256 python tools/device/kblocks_check.py
"""

import sys

import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

sys.path.insert(0, "tests")  # run from the repository root
from fp8_reference import dequant_blocks, dequant_rows  # noqa: E402


def main():
    torch.manual_seed(1)
    bad = 0
    for k in range(128, 128 * 10, 128):
        for m, n in ((65, 384), (300, 2112), (4097, 1024)):
            a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
            b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
            ref = dequant_rows(*a) @ dequant_blocks(*b).t()
            diffs = []
            for _ in range(2):  # the second call reuses the cached kernel
                d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                deep_gemm.fp8_gemm_nt(a, b, d)
                torch.cuda.synchronize()
                diffs.append(float("inf") if d.isnan().any().item() else calc_diff(d, ref).item())
            ok = max(diffs) < 1e-3
            bad += not ok
            print(f"m={m} n={n} k={k}: diff {max(diffs):.2e} {'OK' if ok else 'FAIL'}", flush=True)
    print(f"kblocks_check: {bad} failures")


if __name__ == "__main__":
    main()
