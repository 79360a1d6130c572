"""BF16 GEMMs on SM90 (API.md: ``bf16_gemm_*``, ``m_grouped_bf16_gemm_*``,
``k_grouped_bf16_gemm_tn_contiguous``): the facade over ``torch.ops.deep_gemm.bf16_gemm_nt``
and the m-grouped BF16 ops.

``D = C + A @ B^T`` with FP32 accumulation. SM90's wgmma reads BF16 operands K-major or
MN-major from shared memory, so every layout (``nt``, ``nn``, ``tn``, ``tt``) runs the same
kernel straight from the given tensors: no transpose pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import torch

from . import _args

_ops = torch.ops.deep_gemm
_dense_op = _ops.bf16_gemm_nt.default
_contiguous_op = _ops.m_grouped_bf16_gemm_nt_contiguous.default
_masked_op = _ops.m_grouped_bf16_gemm_nt_masked.default


def _dense(fn: str, a: Any, b: Any, d: Any, c: Any, compiled_dims: Any, transpose_a: bool, transpose_b: bool) -> None:
    a = _args.tensor(fn, "a", a)
    b = _args.tensor(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.opt_tensor(fn, "c", c)
    _args.str_(fn, "compiled_dims", compiled_dims, "'nk'")
    if transpose_a:
        _args.dims(fn, "a", a, 2, "[K, M]")
        a = a.transpose(0, 1)
    if transpose_b:
        _args.dims(fn, "b", b, 2, "[K, N]")
        b = b.transpose(0, 1)
    _dense_op(a, b, d, c, compiled_dims)


def bf16_gemm_nt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None,
                 compiled_dims: str = "nk") -> None:
    """``d = c + a @ b.T``: ``a`` ``[M, K]`` and ``b`` ``[N, K]`` bf16, each K-major or MN-major
    (either stride 1; 16-byte aligned pitches); ``d`` bf16 or fp32 ``[M, N]`` row-major; ``c``
    None or of ``d``'s dtype and layout (``c`` may be ``d``: accumulate in place). FP32
    accumulation. Any K >= 0 (K = 0 writes ``c``, or zeros). ``compiled_dims`` names the
    dimensions baked into the JIT kernel."""
    _dense("bf16_gemm_nt", a, b, d, c, compiled_dims, False, False)


def bf16_gemm_nn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None,
                 compiled_dims: str = "nk") -> None:
    """:func:`bf16_gemm_nt` with ``b`` given as ``[K, N]`` (``d = c + a @ b``)."""
    _dense("bf16_gemm_nn", a, b, d, c, compiled_dims, False, True)


def bf16_gemm_tn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None,
                 compiled_dims: str = "mn") -> None:
    """:func:`bf16_gemm_nt` with ``a`` given as ``[K, M]`` and ``b`` as ``[K, N]`` (``d = c + a.T @ b``,
    the weight-gradient form)."""
    _dense("bf16_gemm_tn", a, b, d, c, compiled_dims, True, True)


def bf16_gemm_tt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None,
                 compiled_dims: str = "mn") -> None:
    """:func:`bf16_gemm_nt` with ``a`` given as ``[K, M]`` (``d = c + a.T @ b.T``)."""
    _dense("bf16_gemm_tt", a, b, d, c, compiled_dims, True, False)


def _contiguous(fn: str, a: Any, b: Any, d: Any, grouped_layout: Any, compiled_dims: Any, use_psum_layout: Any,
                ensure_zero_padding: Any, expected_m_for_psum_layout: Any, transpose_b: bool) -> None:
    a = _args.tensor(fn, "a", a)
    b = _args.tensor(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.tensor(fn, "grouped_layout", grouped_layout, "an int32 tensor")
    _args.str_(fn, "compiled_dims", compiled_dims, "'nk'")
    _args.bool_(fn, "use_psum_layout", use_psum_layout)
    _args.bool_(fn, "ensure_zero_padding", ensure_zero_padding)
    _args.opt_int(fn, "expected_m_for_psum_layout", expected_m_for_psum_layout)
    if transpose_b:
        _args.dims(fn, "b", b, 3, "[G, K, N]")
        b = b.transpose(1, 2)
    _contiguous_op(a, b, d, grouped_layout, compiled_dims, use_psum_layout, expected_m_for_psum_layout,
                   ensure_zero_padding)


def m_grouped_bf16_gemm_nt_contiguous(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                      grouped_layout: Optional[torch.Tensor] = None, compiled_dims: str = "nk",
                                      use_psum_layout: bool = False, ensure_zero_padding: bool = True,
                                      expected_m_for_psum_layout: Optional[int] = None, *,
                                      m_indices: Optional[torch.Tensor] = None) -> None:
    """MoE grouped BF16 GEMM, groups back to back along M: ``d[rows of g] = a[rows of g] @ b[g].T``.

    ``a`` bf16 ``[M_sum, K]`` K-major; ``b`` bf16 ``[G, N, K]`` (K-major, or a transposed view of
    a contiguous ``[G, K, N]``); ``d`` bf16 ``[M_sum, N]``; K a multiple of 64. ``grouped_layout``
    (``m_indices``: its older name) and ``use_psum_layout`` / ``expected_m_for_psum_layout`` /
    ``ensure_zero_padding`` mean what they mean for :func:`m_grouped_fp8_fp4_gemm_nt_contiguous`:
    the index layout (group of each row, -1 for padding rows, which are not written) or the psum
    layout (each group's end row; with ``ensure_zero_padding`` rows outside the groups are zero
    afterwards). Read on the GPU only: CUDA-graph safe.
    """
    fn = "m_grouped_bf16_gemm_nt_contiguous"
    _contiguous(fn, a, b, d, _args.layout_alias(fn, grouped_layout, m_indices), compiled_dims, use_psum_layout,
                ensure_zero_padding, expected_m_for_psum_layout, False)


def m_grouped_bf16_gemm_nn_contiguous(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                      grouped_layout: Optional[torch.Tensor] = None, compiled_dims: str = "nk",
                                      use_psum_layout: bool = False, ensure_zero_padding: bool = True, *,
                                      m_indices: Optional[torch.Tensor] = None) -> None:
    """:func:`m_grouped_bf16_gemm_nt_contiguous` with ``b`` given as ``[G, K, N]`` (read MN-major)."""
    fn = "m_grouped_bf16_gemm_nn_contiguous"
    _contiguous(fn, a, b, d, _args.layout_alias(fn, grouped_layout, m_indices), compiled_dims, use_psum_layout,
                ensure_zero_padding, None, True)


def m_grouped_bf16_gemm_nt_masked(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, masked_m: torch.Tensor,
                                  expected_m: int, compiled_dims: str = "nk") -> None:
    """MoE grouped BF16 GEMM with a slot per group: ``d[g, :masked_m[g]] = a[g, :masked_m[g]] @ b[g].T``.

    ``a`` bf16 ``[G, max_m, K]``, ``b`` bf16 ``[G, N, K]`` (or a transposed view of ``[G, K, N]``),
    ``d`` bf16 ``[G, max_m, N]``, ``masked_m`` int32 ``[G]`` on the GPU (clamped to max_m; rows
    at or past it are neither computed nor written), ``expected_m`` the typical valid rows per
    group (it only steers the configuration). K a multiple of 64. The host never reads
    ``masked_m``: one captured CUDA graph serves every distribution.
    """
    fn = "m_grouped_bf16_gemm_nt_masked"
    a = _args.tensor(fn, "a", a)
    b = _args.tensor(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.tensor(fn, "masked_m", masked_m, "an int32 tensor on the GPU")
    _args.int_(fn, "expected_m", expected_m)
    _args.str_(fn, "compiled_dims", compiled_dims, "'nk'")
    _masked_op(a, b, d, masked_m, expected_m, compiled_dims)


# Upstream's older name.
bf16_m_grouped_gemm_nt_masked = m_grouped_bf16_gemm_nt_masked


def k_grouped_bf16_gemm_tn_contiguous(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                      ks_cpu: Optional[Sequence[int]] = None,
                                      grouped_layout: Optional[torch.Tensor] = None, c: Optional[torch.Tensor] = None,
                                      compiled_dims: str = "mn", use_psum_layout: bool = False, *,
                                      ks: Optional[Sequence[int]] = None,
                                      ks_tensor: Optional[torch.Tensor] = None) -> None:
    """Weight-gradient BF16 GEMM with groups along K: ``d[g] = c[g] + A_g.T @ B_g`` in fp32.

    ``a`` bf16 ``[sum(ks_cpu), M]`` and ``b`` bf16 ``[sum(ks_cpu), N]`` (tokens as rows, row-major;
    group g's rows ``[o_g, o_g + ks_cpu[g])``), ``d`` fp32 ``[G, M, N]``, ``c`` fp32 ``[G, M, N]``
    or None (``c`` may be ``d``). ``ks_cpu`` (alias ``ks``): the per-group K as Python ints (0 for
    an empty group: ``d[g] = c[g]``, or zeros); ``grouped_layout`` (alias ``ks_tensor``): the same
    sizes as int32 ``[G]`` on the GPU, checked but not read. M and N multiples of 8 (16-byte
    pitches). Each group runs as one :func:`bf16_gemm_tn` launch reading A and B MN-major in
    place (G launches: a captured CUDA graph replays the sizes of its capture);
    ``use_psum_layout=True`` is not supported on SM90.
    """
    fn = "k_grouped_bf16_gemm_tn_contiguous"
    if ks_cpu is not None and ks is not None:
        raise TypeError(f"deep_gemm.{fn}: pass ks_cpu or its alias ks, not both")
    if grouped_layout is not None and ks_tensor is not None:
        raise TypeError(f"deep_gemm.{fn}: pass grouped_layout or its alias ks_tensor, not both")
    ks_v = ks_cpu if ks_cpu is not None else ks
    layout = grouped_layout if grouped_layout is not None else ks_tensor
    if ks_v is None or layout is None:
        raise TypeError(f"deep_gemm.{fn}: missing {'ks_cpu (alias ks)' if ks_v is None else 'grouped_layout (alias ks_tensor)'}")
    if isinstance(ks_v, torch.Tensor):
        raise TypeError(f"deep_gemm.{fn}: ks_cpu must be a Python list of ints (the host builds the launches from it)")
    ks_v = list(_args.ints(fn, "ks_cpu", ks_v, what="ints (one K per group)"))
    a = _args.tensor(fn, "a", a)
    b = _args.tensor(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.opt_tensor(fn, "c", c)
    _args.tensor(fn, "grouped_layout", layout, "an int32 tensor on the GPU")
    _args.str_(fn, "compiled_dims", compiled_dims, "'mn'")
    _args.bool_(fn, "use_psum_layout", use_psum_layout)
    if use_psum_layout:
        raise ValueError(f"deep_gemm.{fn}: use_psum_layout=True is not supported on SM90: pass each group's K in ks_cpu")
    _args.dims(fn, "a", a, 2, "[sum(ks), M]")
    _args.dims(fn, "b", b, 2, "[sum(ks), N]")
    _args.dims(fn, "d", d, 3, "[G, M, N]")
    g, m, n = d.shape
    if len(ks_v) != g:
        raise ValueError(f"deep_gemm.{fn}: ks_cpu has {len(ks_v)} entries but d.shape[0] (the number of groups) is {g}")
    if any(k < 0 for k in ks_v):
        raise ValueError(f"deep_gemm.{fn}: ks_cpu entries must be >= 0, got {ks_v}")
    sum_k = sum(ks_v)
    if tuple(a.shape) != (sum_k, m) or tuple(b.shape) != (sum_k, n):
        raise ValueError(f"deep_gemm.{fn}: a must be [sum(ks), M] = [{sum_k}, {m}] and b [sum(ks), N] = [{sum_k}, {n}], "
                         f"got {list(a.shape)} and {list(b.shape)}")
    if d.dtype != torch.float32 or (c is not None and c.dtype != torch.float32):
        raise ValueError(f"deep_gemm.{fn}: d (and c) must be torch.float32, got {d.dtype}"
                         + (f" and {c.dtype}" if c is not None else ""))
    if c is not None and tuple(c.shape) != tuple(d.shape):
        raise ValueError(f"deep_gemm.{fn}: c must have d's shape {list(d.shape)}, got {list(c.shape)}")
    if layout.dtype != torch.int32 or layout.dim() != 1 or layout.shape[0] != g:
        raise ValueError(f"deep_gemm.{fn}: grouped_layout must be int32 [G] = [{g}], got {layout.dtype} "
                         f"{list(layout.shape)}")
    if layout.device != d.device:
        raise RuntimeError(f"deep_gemm.{fn}: grouped_layout is on {layout.device} but d is on {d.device}")
    start = 0
    for grp, k in enumerate(ks_v):
        a_g, b_g = a[start:start + k], b[start:start + k]
        _dense_op(a_g.transpose(0, 1), b_g.transpose(0, 1), d[grp], None if c is None else c[grp], compiled_dims)
        start += k


__all__ = [
    "bf16_gemm_nt",
    "bf16_gemm_nn",
    "bf16_gemm_tn",
    "bf16_gemm_tt",
    "m_grouped_bf16_gemm_nt_contiguous",
    "m_grouped_bf16_gemm_nn_contiguous",
    "m_grouped_bf16_gemm_nt_masked",
    "bf16_m_grouped_gemm_nt_masked",
    "k_grouped_bf16_gemm_tn_contiguous",
]
