"""einsum and fp8_einsum (API.md): the fixed expressions DeepSeek's models use, on SM90.

* ``bmk,bnk->mn``: ``d = (c +) sum_b a[b] @ b[b].T`` (fp32 ``d`` with ``c is d``, or bf16 ``d``
  and no ``c``), one BF16 kernel whose K loop walks every batch; where the output has too few
  tiles to fill the SMs, the batches are split over CTAs whose FP32 partial sums a fixed-order
  ``torch.sum`` reduces (deterministic).
* ``bhr,hdr->bhd``, ``bhd,hdr->bhr`` (bf16 ``d``, no ``c``): per-head GEMMs. Where each head's
  GEMM is memory-bound (DeepSeek's 128 heads of 512 x 128), they run as one BF16 masked grouped
  GEMM with every head a full group, head h's rows of ``a`` and ``d`` read and written in place
  through rank-3 tensor maps; that needs a contraction length that is a multiple of 64, an
  output width that is a multiple of 8, ``b``'s heads back to back and 16-byte aligned
  pointers and row strides. Otherwise (compute-bound heads, where cuBLASLt's clustered
  kernels are faster than our grouped one, or other layouts), and with ``use_cublaslt=True``,
  one cuBLASLt strided-batched GEMM on torch's current stream.
* ``bhd,bhr->hdr`` (fp32 ``d``, ``c`` None or ``d``): per-head GEMMs contracting over the
  batch, one cuBLASLt strided-batched GEMM (``use_cublaslt`` accepted; cuBLASLt either way).
* ``fp8_einsum("bhr,hdr->bhd", (x, sfx), (y, sfy), d)``: one masked grouped FP8 GEMM over
  the heads (recipe ``(1, 128, 128)``: x per-token scales ``[b, h, ceil(r/128)]``, y
  per-block scales ``[h, ceil(d/128), ceil(r/128)]``): head h is group h with all b rows,
  its rows of x and d read and written in place through rank-3 tensor maps.
Other expressions raise ValueError naming the supported ones.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import _args
from ._cublaslt import _preload_wheel_library

_ops = torch.ops.deep_gemm
_bmk_op = _ops.bf16_bmk_bnk_mn.default
_bmm_op = _ops.cublaslt_bmm_nt.default
_heads_op = _ops.bf16_hmk_hnk_hmn.default
_masked_op = _ops.m_grouped_fp8_gemm_nt_masked.default

EINSUM_EXPRESSIONS = ("bmk,bnk->mn", "bhr,hdr->bhd", "bhd,hdr->bhr", "bhd,bhr->hdr")
FP8_EINSUM_EXPRESSIONS = ("bhr,hdr->bhd",)


def _expr(fn: str, expr: Any, supported: tuple[str, ...]) -> str:
    _args.str_(fn, "expr", expr, "'bhr,hdr->bhd'")
    e = expr.replace(" ", "")
    if e not in supported:
        raise ValueError(f"deep_gemm.{fn}: expr: unsupported expression {expr!r} on SM90; supported: "
                         f"{', '.join(supported)}")
    return e


def _dims(fn: str, name: str, t: torch.Tensor, n: int, form: str) -> None:
    if t.dim() != n:
        raise ValueError(f"deep_gemm.{fn}: {name} must be {form} ({n}-D), got shape {list(t.shape)}")


def _bmm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor]) -> None:
    _preload_wheel_library()
    _bmm_op(a, b, d, c)  # on d's device whatever the current one (the op switches for the call)


# FLOPs per byte above which a GEMM is compute-bound on the H200 (989 TFLOP/s dense BF16 over
# about 4.3 TB/s of copy bandwidth).
_COMPUTE_BOUND_FLOPS_PER_BYTE = 230.0


def _memory_bound(m: int, n: int, k: int) -> bool:
    return 2.0 * m * n * k < _COMPUTE_BOUND_FLOPS_PER_BYTE * 2.0 * (m * k + n * k + m * n)


def _tma_fits(t: torch.Tensor) -> bool:
    # Innermost dimension contiguous, the others 16-byte multiples, the data 16-byte aligned.
    return (t.stride(-1) == 1 and all(s % 8 == 0 for s in t.stride()[:-1])
            and t.data_ptr() % 16 == 0)


def _heads(fn: str, e: str, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, use_cublaslt: bool) -> None:
    # Per head h: d[:, h] = a[:, h] @ B_h^T with B_h = b[h] (bhr,hdr->bhd) or b[h].T (bhd,hdr->bhr).
    rows, heads, k = a.shape
    bk, bn = (2, 1) if e == "bhr,hdr->bhd" else (1, 2)
    n = b.shape[bn]
    if b.shape[0] != heads:
        raise ValueError(f"deep_gemm.{fn}: {e}: the head counts differ: a {list(a.shape)} has {heads} "
                         f"(a.shape[1]), b {list(b.shape)} has {b.shape[0]} (b.shape[0])")
    if b.shape[bk] != k:
        raise ValueError(f"deep_gemm.{fn}: {e}: the contracted lengths differ: a.shape[2] = {k}, "
                         f"b.shape[{bk}] = {b.shape[bk]}")
    if tuple(d.shape) != (rows, heads, n):
        raise ValueError(f"deep_gemm.{fn}: {e}: d must be {[rows, heads, n]} for a {list(a.shape)} and "
                         f"b {list(b.shape)}, got {list(d.shape)}")
    bt = b if e == "bhr,hdr->bhd" else b.transpose(1, 2)  # [H, N, K]
    av, dv = a.transpose(0, 1), d.transpose(0, 1)  # [H, B, K], [H, B, N]
    # b's heads back to back (a column slice of a wider [H, D, R'] buffer is fine).
    b_packed = heads <= 1 or b.stride(0) == b.shape[1] * b.stride(1)
    # (No heads: nothing to compute; the grouped kernel takes at least one group.)
    if (not use_cublaslt and heads > 0 and _memory_bound(rows, n, k) and a.dtype == b.dtype == d.dtype == torch.bfloat16
            and k % 64 == 0 and n % 8 == 0 and b_packed and _tma_fits(b) and _tma_fits(av) and _tma_fits(dv)):
        _heads_op(av, bt, dv)
    else:
        _bmm(av, bt, dv, None)


def einsum(expr: str, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None,
           use_cublaslt: bool = False) -> None:
    """``d = einsum(expr, a, b)`` (``+ c`` where the expression accumulates) for bf16 ``a``, ``b``.

    ``bmk,bnk->mn``: a ``[B, M, K]``, b ``[B, N, K]`` (K-major), d ``[M, N]`` fp32 with ``c is d``
    (accumulate) or bf16 without ``c``. ``bhr,hdr->bhd``: a ``[B, H, R]``, b ``[H, D, R]``, d bf16
    ``[B, H, D]``. ``bhd,hdr->bhr``: a ``[B, H, D]``, b ``[H, D, R]``, d bf16 ``[B, H, R]``.
    ``bhd,bhr->hdr``: a ``[B, H, D]``, b ``[B, H, R]``, d fp32 ``[H, D, R]``, ``c`` None or ``d``.
    Operands may be views (the innermost dimension contiguous). See the module docstring for
    what runs each expression.
    """
    fn = "einsum"
    e = _expr(fn, expr, EINSUM_EXPRESSIONS)
    a = _args.tensor(fn, "a", a)
    b = _args.tensor(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.opt_tensor(fn, "c", c)
    _args.bool_(fn, "use_cublaslt", use_cublaslt)
    if e == "bmk,bnk->mn":
        if c is not None and c is not d:
            raise ValueError(f"deep_gemm.{fn}: {e}: c must be None or d itself (fp32, accumulated in place)")
        _bmk_op(a, b, d, c)
        return
    _dims(fn, "a", a, 3, e.split(",")[0])
    _dims(fn, "b", b, 3, e.split(",")[1].split("-")[0])
    _dims(fn, "d", d, 3, e.split(">")[1])
    if e == "bhd,bhr->hdr":
        if c is not None and c is not d:
            raise ValueError(f"deep_gemm.{fn}: {e}: c must be None or d itself (accumulated in place)")
        if d.dtype != torch.float32:
            raise ValueError(f"deep_gemm.{fn}: {e}: d must be torch.float32, got {d.dtype}")
        # per head h: D[h] = X[:, h].T @ Y[:, h]: A [H, D, B] and B [H, R, B], both MN-major.
        _bmm(a.permute(1, 2, 0), b.permute(1, 2, 0), d, c)
        return
    if c is not None:
        raise ValueError(f"deep_gemm.{fn}: {e} does not accumulate: c must be None")
    if d.dtype != torch.bfloat16:
        raise ValueError(f"deep_gemm.{fn}: {e}: d must be torch.bfloat16, got {d.dtype}")
    _heads(fn, e, a, b, d, use_cublaslt)


def fp8_einsum(expr: str, a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
               c: Optional[torch.Tensor] = None, recipe: tuple[int, int, int] = (1, 128, 128)) -> None:
    """``d = einsum("bhr,hdr->bhd", A, B)`` with FP8 operands: ``a = (x, sfx)``, x e4m3 ``[B, H, R]``
    with per-token scales fp32 ``[B, H, ceil(R/128)]``; ``b = (y, sfy)``, y e4m3 ``[H, D, R]`` with
    128x128-block scales ``[H, ceil(D/128), ceil(R/128)]``; d bf16 ``[B, H, D]``; ``c`` must be
    None and ``recipe`` ``(1, 128, 128)`` on SM90. The heads run as the groups of one masked
    grouped GEMM (every group with all B rows); x's, sfx's and d's head slices are views."""
    fn = "fp8_einsum"
    e = _expr(fn, expr, FP8_EINSUM_EXPRESSIONS)
    x, sfx = _args.pair(fn, "a", a)
    y, sfy = _args.pair(fn, "b", b)
    _args.tensor(fn, "d", d)
    if c is not None:
        raise ValueError(f"deep_gemm.{fn}: {e} does not accumulate on SM90: c must be None")
    if _args.recipe(fn, "recipe", recipe) != (1, 128, 128):
        raise ValueError(f"deep_gemm.{fn}: recipe: SM90 runs {e} with recipe (1, 128, 128), got {tuple(recipe)}")
    _dims(fn, "a", x, 3, "[B, H, R]")
    _dims(fn, "a's scale factors", sfx, 3, "[B, H, ceil(R / 128)]")
    _dims(fn, "b", y, 3, "[H, D, R]")
    _dims(fn, "b's scale factors", sfy, 3, "[H, ceil(D / 128), ceil(R / 128)]")
    _dims(fn, "d", d, 3, "[B, H, D]")
    heads = x.shape[1]
    if y.shape[0] != heads or d.shape[1] != heads or sfx.shape[1] != heads or sfy.shape[0] != heads:
        raise ValueError(f"deep_gemm.{fn}: the head counts differ: a {list(x.shape)}, b {list(y.shape)}, "
                         f"d {list(d.shape)}, scales {list(sfx.shape)} and {list(sfy.shape)}")
    rows = x.shape[0]
    if rows == 0 or heads == 0:
        return
    # Every group computes all `rows` rows: masked_m is a constant the GPU fills (no host read).
    masked_m = torch.full((heads,), rows, dtype=torch.int32, device=d.device)
    _masked_op(x.transpose(0, 1), sfx.transpose(0, 1), y, sfy, d.transpose(0, 1), masked_m, rows, "nk")


__all__ = ["einsum", "fp8_einsum"]
