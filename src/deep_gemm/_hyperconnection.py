"""HyperConnection (API.md: ``tf32_hc_prenorm_gemm``): the facade over
``torch.ops.deep_gemm.tf32_hc_prenorm_gemm``.

The prenorm step of DeepSeek's HyperConnections: the mixing projection ``a @ b.T`` of the
flattened residual streams and, from the same read of ``a``, the row sums of ``a ** 2`` that
its RMS norm needs. Products in TF32 (``a`` is bf16, exact in TF32; ``b`` rounds to TF32),
sums in FP32. Memory-bound: the kernel reads ``a`` once.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import _args

_op = torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default


def tf32_hc_prenorm_gemm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                         num_splits: Optional[int] = None) -> None:
    """``d = a @ b.T`` (TF32 products, FP32 sums) and ``sqr_sum = (a.float() ** 2).sum(-1)``.

    ``a`` ``[M, K]`` bf16 and ``b`` ``[N, K]`` fp32, both K-major; on SM90 N is 8, 16, 24 or 32
    and K a multiple of 64. ``num_splits=None``: ``d`` fp32 ``[M, N]``, ``sqr_sum`` fp32 ``[M]``.
    ``num_splits=S``: ``d`` ``[S, M, N]`` and ``sqr_sum`` ``[S, M]`` get partial sums over S
    balanced ranges of the ``K / 64`` blocks of K (the first ``(K / 64) % S`` ranges one block
    longer, a range with no block zeros); ``d.sum(0)`` and ``sqr_sum.sum(0)`` are the results.
    Every element of ``d`` and ``sqr_sum`` is written (M = 0 is a no-op)."""
    fn = "tf32_hc_prenorm_gemm"
    _args.tensor(fn, "a", a)
    _args.tensor(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.tensor(fn, "sqr_sum", sqr_sum)
    _args.opt_int(fn, "num_splits", num_splits, min=1)
    _op(a, b, d, sqr_sum, num_splits)


__all__ = ["tf32_hc_prenorm_gemm"]
