"""The dense FP8 suite: ``fp8_gemm_nt`` on BENCH.md's nine shapes (A per token, B per
128x128 block), against cuBLASLt blockwise FP8 and bf16 matmul."""

from __future__ import annotations

from typing import Any

from ...utils.math import per_block_cast_to_fp8, per_token_cast_to_fp8
from ..peers import bf16_peer, cublaslt_peer
from ..protocol import PEER_BF16, PEER_CUBLASLT, Case, Suite, gemm_flops, get_op, nan_output, randn, row_meta, shape_cases

NAME = "fp8"
# calc_diff threshold; it includes the quantisation error (as upstream's tests).
MAX_DIFF = 1e-3

# BENCH.md's nine dense shapes, (M, N, K); the bf16 suite reuses them.
FP8_SHAPES = (
    (128, 2112, 7168),
    (128, 24576, 1536),
    (128, 7168, 16384),
    (128, 4096, 7168),
    (4096, 2112, 7168),
    (4096, 24576, 1536),
    (4096, 7168, 16384),
    (4096, 4096, 7168),
    (4096, 7168, 2048),
)


def fp8_case(dg: Any, m: int, n: int, k: int, suite: str = NAME) -> Case:
    case = Case(meta=row_meta(suite, "fp8_gemm_nt", m, n, k), flops=gemm_flops(m, n, k), max_diff=MAX_DIFF)
    a, b = randn(m, k), randn(n, k)
    case.reference = a.float() @ b.float().t()
    a_q = per_token_cast_to_fp8(a, use_ue8m0=False)
    b_q = per_block_cast_to_fp8(b, use_ue8m0=False)
    case.peers = {PEER_CUBLASLT: cublaslt_peer(a_q, b_q), PEER_BF16: bf16_peer(a, b)}
    op, case.skip_reason = get_op(dg, "fp8_gemm_nt")
    if op is not None:
        d = nan_output(m, n)
        case.ours, case.read_ours = (lambda: op(a_q, b_q, d)), (lambda: d)
    return case


def cases(dg: Any, seed: int):
    return shape_cases(NAME, FP8_SHAPES, lambda m, n, k: fp8_case(dg, m, n, k))


SUITE = Suite(NAME, MAX_DIFF, cases)
