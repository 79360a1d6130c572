"""The bf16 suite: ``bf16_gemm_nt`` and ``cublaslt_gemm_nt`` on the dense FP8 suite's shapes,
against torch.matmul (cuBLAS) on the same data. Memory-bound rows (M = 128) also time the read
floor ``read_b``, a torch sum over B under the same L2 flush (design-notes: "Memory-bound rows
carry a measured read floor")."""

from __future__ import annotations

from typing import Any

import torch

from ..._einsum import _memory_bound  # 2MNK against the H200's BF16 FLOPs per byte moved
from ..peers import bf16_peer
from ..protocol import PEER_BF16, Case, Suite, gemm_flops, get_op, nan_output, randn, row_meta, shape_cases
from .fp8 import FP8_SHAPES

NAME = "bf16"
MAX_DIFF = 1e-4

# The dense FP8 shapes, (M, N, K).
BF16_SHAPES = FP8_SHAPES


def bf16_case(dg: Any, m: int, n: int, k: int, op_name: str = "bf16_gemm_nt") -> Case:
    case = Case(meta=row_meta(NAME, op_name, m, n, k), flops=gemm_flops(m, n, k), max_diff=MAX_DIFF)
    a, b = randn(m, k), randn(n, k)
    case.reference = a.float() @ b.float().t()
    case.peers = {PEER_BF16: bf16_peer(a, b)}
    if _memory_bound(m, n, k):
        case.floors = {"read_b": lambda: b.sum(dtype=torch.float32)}
    op, case.skip_reason = get_op(dg, op_name)
    if op is not None:
        d = nan_output(m, n)
        case.ours, case.read_ours = (lambda: op(a, b, d)), (lambda: d)
    return case


def cases(dg: Any, seed: int):
    yield from shape_cases(NAME, BF16_SHAPES, lambda m, n, k: bf16_case(dg, m, n, k))
    # The cuBLASLt wrapper against torch.matmul: the same library, so the gap is our host path.
    yield from shape_cases(f"{NAME} cublaslt", BF16_SHAPES, lambda m, n, k: bf16_case(dg, m, n, k, "cublaslt_gemm_nt"))


SUITE = Suite(NAME, MAX_DIFF, cases)
