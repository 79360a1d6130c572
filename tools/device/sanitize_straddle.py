"""Dense FP8 GEMMs whose tiles straddle two 128-wide SFB blocks, for compute-sanitizer (GPU host).

Forces BLOCK_N 96, 160 and 192 tiles through set_block_size_multiple_of and runs shapes
with N and M tails, each against a float reference with the output poisoned (NaN) first.
Prints one line per case; raises on a wrong result.

  compute-sanitizer --tool memcheck python tools/device/sanitize_straddle.py
"""

import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

# (mult_m, mult_n): the tiles the heuristics may then take (BLOCK_N <= 192).
TILES = [(256, 96), (128, 96), (128, 160), (128, 192), (64, 96)]
SHAPES = [(300, 2112, 512), (129, 1000, 384), (64, 576, 256)]


def run(m: int, n: int, k: int) -> float:
    a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
    a_q, b_q = per_token_cast_to_fp8(a, use_ue8m0=False), per_block_cast_to_fp8(b, use_ue8m0=False)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a_q, b_q, d)
    torch.cuda.synchronize()
    ref = (a_q[0].float() * a_q[1].repeat_interleave(128, dim=1)[:, :k]) @ (
        b_q[0].float() * b_q[1].repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:n, :k]
    ).t()
    return float(calc_diff(d.float(), ref))


def main() -> None:
    torch.manual_seed(0)
    for tile in TILES:
        deep_gemm.set_block_size_multiple_of(tile)
        for m, n, k in SHAPES:
            diff = run(m, n, k)
            assert diff < 1e-3, (tile, m, n, k, diff)
            print(f"CASE tile multiple of {tile} {m}x{n}x{k} OK (diff {diff:.2e})", flush=True)
    deep_gemm.set_block_size_multiple_of((1, 1))


if __name__ == "__main__":
    main()
