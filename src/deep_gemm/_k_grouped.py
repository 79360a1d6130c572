"""K-grouped FP8 GEMMs for MoE weight gradients (API.md P1): the facade over
``torch.ops.deep_gemm.k_grouped_fp8_gemm_{nt,tn}_contiguous``.

It restores what the schemas cannot say (``(tensor, scale)`` pairs, the recipe, both
spellings of the group arguments, ``use_psum_layout``); the ops do every shape, dtype,
device, alignment and aliasing check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import torch

from . import _args

_ops = torch.ops.deep_gemm
_nt_op = _ops.k_grouped_fp8_gemm_nt_contiguous.default
_tn_op = _ops.k_grouped_fp8_gemm_tn_contiguous.default
_RECIPE = (1, 1, 128)


_pair = _args.pair


def _one_of(fn: str, new_name: str, new: Any, old_name: str, old: Any) -> Any:
    """Upstream spelled the group arguments two ways (``ks_cpu`` / ``ks``, ``grouped_layout`` /
    ``ks_tensor``); either is accepted, not both."""
    if new is not None and old is not None:
        raise TypeError(f"deep_gemm.{fn}: pass {new_name} or its alias {old_name}, not both")
    if new is None and old is None:
        raise TypeError(f"deep_gemm.{fn}: missing {new_name} (alias {old_name})")
    return new if new is not None else old


def _ks_list(fn: str, ks: Any) -> list[int]:
    if isinstance(ks, torch.Tensor):
        raise TypeError(f"deep_gemm.{fn}: ks_cpu must be a Python list of ints (the per-group K the host builds the "
                        "launch from); pass the GPU copy as grouped_layout / ks_tensor")
    return list(_args.ints(fn, "ks_cpu", ks, what="ints (one K per group)"))


def _sf_rows_by_k_block(sf: torch.Tensor, mn: int, sum_kb: int) -> torch.Tensor:
    """The op takes scales as ``[sum(ks)/128, mn]``; upstream's callers pass the transposed
    view ``sf.T`` (shape ``[mn, sum(ks)/128]``, strides ``(1, mn)``) of that tensor. Accept both:
    a square one is read as upstream's form only when its strides say it is that view."""
    if sf.dim() != 2 or tuple(sf.shape) != (mn, sum_kb):
        return sf
    if mn == sum_kb and (sf.stride(1) == 1 or mn <= 1):
        return sf  # square and row-major: already [sum(ks)/128, mn]
    return sf.transpose(0, 1)


def _k_grouped(fn: str, op: Any, a: Any, b: Any, d: Any, ks: Any, ks_tensor: Any, c: Any,
               recipe: Any, compiled_dims: Any, use_psum_layout: Any) -> None:
    a_t, sfa = _pair(fn, "a", a)
    b_t, sfb = _pair(fn, "b", b)
    ks = _ks_list(fn, ks)
    _args.tensor(fn, "d", d)
    _args.opt_tensor(fn, "c", c)
    _args.tensor(fn, "grouped_layout (ks_tensor)", ks_tensor, "an int32 tensor on the GPU")
    _args.str_(fn, "compiled_dims", compiled_dims, "'mn'")
    _args.bool_(fn, "use_psum_layout", use_psum_layout)
    if use_psum_layout:
        raise ValueError(f"deep_gemm.{fn}: use_psum_layout=True is not supported on SM90 (as upstream's SM90 path): "
                         "pass each group's K in ks_cpu and grouped_layout as int32 [G] of the same sizes")
    if recipe is None:
        raise ValueError(f"deep_gemm.{fn}: recipe: the SM90 k-grouped GEMMs support recipe (1, 1, 128) only, got None")
    recipe = _args.recipe(fn, "recipe", recipe)
    if recipe != _RECIPE:
        raise ValueError(f"deep_gemm.{fn}: recipe: the SM90 k-grouped GEMMs support recipe (1, 1, 128) only (1x128 scales "
                         f"along K for both operands, fp32 d), got {recipe}")
    if d.dim() == 3 and all(k >= 0 and k % 128 == 0 for k in ks):
        sum_kb = sum(ks) // 128
        sfa = _sf_rows_by_k_block(sfa, d.shape[1], sum_kb)
        sfb = _sf_rows_by_k_block(sfb, d.shape[2], sum_kb)
    op(a_t, sfa, b_t, sfb, d, ks, ks_tensor, c, compiled_dims)


def k_grouped_fp8_gemm_nt_contiguous(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                                     d: torch.Tensor, ks_cpu: Optional[Sequence[int]] = None,
                                     grouped_layout: Optional[torch.Tensor] = None, c: Optional[torch.Tensor] = None,
                                     recipe: tuple[int, int, int] = _RECIPE, compiled_dims: str = "mn",
                                     use_psum_layout: bool = False, *, ks: Optional[Sequence[int]] = None,
                                     ks_tensor: Optional[torch.Tensor] = None) -> None:
    """Weight-gradient GEMM with groups along K: ``d[g] = c[g] + A_g @ B_g^T`` in fp32, for every group g.

    Group g covers K positions ``[o_g, o_g + ks_cpu[g])`` with ``o_g = sum(ks_cpu[:g])``.
    ``a = (A, SFA)``: A FP8 e4m3, contiguous, ``sum(ks_cpu) * M`` elements holding each group's
    K-major ``[M, k_g]`` matrix back to back (group g at element ``M * o_g``; any shape, upstream
    passes it flat, 1-D); SFA fp32 ``[sum(ks_cpu) / 128, M]``, one scale per row per 128 K (row
    ``o_g / 128 + kb`` for group g's K block kb), or its transposed view ``sf.T`` of shape
    ``[M, sum(ks_cpu) / 128]`` as upstream passes it. ``b = (B, SFB)`` likewise with N. ``d``: fp32 ``[G, M, N]`` contiguous
    (N even). ``c``: fp32 ``[G, M, N]`` or None (then ``d[g]`` is the product alone); ``c``
    may be ``d`` itself (in-place accumulation).

    ``ks_cpu`` (alias ``ks``): the per-group K as Python ints, each a multiple of 128 and
    possibly 0 (an empty group still gets ``d[g] = c[g]``, or zeros). ``grouped_layout``
    (alias ``ks_tensor``): the same sizes as int32 ``[G]`` on the GPU; it is validated but not
    read: the launch is built from ``ks_cpu``, so a captured CUDA graph replays with the
    sizes of its capture. ``recipe`` must be ``(1, 1, 128)``; ``use_psum_layout=True`` is
    not supported on SM90. ``compiled_dims`` may bake M and N into the kernel ('mn').
    SFA / SFB not already TMA-aligned (M or N not a multiple of 4) are converted on the GPU.
    """
    fn = "k_grouped_fp8_gemm_nt_contiguous"
    ks_v = _one_of(fn, "ks_cpu", ks_cpu, "ks", ks)
    layout = _one_of(fn, "grouped_layout", grouped_layout, "ks_tensor", ks_tensor)
    _k_grouped(fn, _nt_op, a, b, d, ks_v, layout, c, recipe, compiled_dims, use_psum_layout)


def k_grouped_fp8_gemm_tn_contiguous(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                                     d: torch.Tensor, ks_cpu: Optional[Sequence[int]] = None,
                                     grouped_layout: Optional[torch.Tensor] = None, c: Optional[torch.Tensor] = None,
                                     recipe: tuple[int, int, int] = _RECIPE, compiled_dims: str = "mn",
                                     use_psum_layout: bool = False, *, ks: Optional[Sequence[int]] = None,
                                     ks_tensor: Optional[torch.Tensor] = None) -> None:
    """:func:`k_grouped_fp8_gemm_nt_contiguous` with A ``[sum(ks_cpu), M]`` and B ``[sum(ks_cpu), N]``
    given MN-major (tokens as rows, row-major contiguous), scales as in the nt form.

    Cost: SM90 FP8 wgmma reads K-major operands only, so every call first transposes A and B
    on the GPU into the nt form's per-group K-major layout (a temporary of
    ``sum(ks_cpu) * (M + N)`` bytes, one extra read and write of both operands), then runs
    the nt kernel. Callers that can produce the nt layout directly should. ``DG_JIT_DEBUG=1``
    logs this once per process.
    """
    fn = "k_grouped_fp8_gemm_tn_contiguous"
    ks_v = _one_of(fn, "ks_cpu", ks_cpu, "ks", ks)
    layout = _one_of(fn, "grouped_layout", grouped_layout, "ks_tensor", ks_tensor)
    _k_grouped(fn, _tn_op, a, b, d, ks_v, layout, c, recipe, compiled_dims, use_psum_layout)


__all__ = ["k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous"]
