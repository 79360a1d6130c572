"""Dense FP8 GEMMs (API.md P0): the facade over ``torch.ops.deep_gemm.fp8_gemm_nt``.

It restores what the schema cannot say (``(tensor, scale)`` pairs, the recipe choice, the
nn/tn/tt views, upstream's FP8xFP4 aliases); the op does every shape, dtype, device and
layout check. This runs on every GEMM call: the op is bound once, below, and the checks
take their ``_args`` path only when the common ``isinstance`` test fails.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import _args
from ._sm100 import check_not_fp4

_ops = torch.ops.deep_gemm
# The resolved overload: calling it skips the packet's overload lookup (~2 µs a call).
_fp8_gemm_op = _ops.fp8_gemm_nt.default
_RECIPE_1D2D = (1, 128, 128)
_RECIPE_1D1D = (1, 1, 128)


def _choose_recipe(fn: str, d: torch.Tensor, recipe: Any, recipe_a: Any, recipe_b: Any) -> tuple[int, int, int]:
    if recipe is None and recipe_a is None and recipe_b is None:
        # As upstream: FP32 output means the 1D1D (wgrad) kernel, BF16 the 1D2D one.
        return _RECIPE_1D1D if d.dtype == torch.float32 else _RECIPE_1D2D
    recipe = _args.one_recipe(fn, recipe, recipe_a, recipe_b)
    if recipe != _RECIPE_1D2D and recipe != _RECIPE_1D1D:
        raise ValueError(f"deep_gemm.{fn}: recipe: SM90 supports recipe (1, 128, 128) or (1, 1, 128), got {recipe}")
    return recipe


_pair = _args.pair


def _fp8_gemm(fn: str, a: Any, b: Any, d: Any, c: Any, recipe: Any, recipe_a: Any, recipe_b: Any,
              compiled_dims: Any, disable_ue8m0_cast: Any, alpha: Any, transpose_a: bool, transpose_b: bool) -> None:
    a_t, sfa = _pair(fn, "a", a)
    b_t, sfb = _pair(fn, "b", b)
    if alpha is not None:
        raise RuntimeError(f"deep_gemm.{fn}: alpha (an output scale) requires an SM100 (Blackwell) GPU; on SM90 pass "
                           "alpha=None and scale the operands' scale factors instead")
    if not isinstance(d, torch.Tensor):
        _args.tensor(fn, "d", d)
    if c is not None and not isinstance(c, torch.Tensor):
        _args.opt_tensor(fn, "c", c)
    if compiled_dims.__class__ is not str:
        _args.str_(fn, "compiled_dims", compiled_dims, "'nk'")
    if disable_ue8m0_cast is not False and disable_ue8m0_cast is not True:
        _args.bool_(fn, "disable_ue8m0_cast", disable_ue8m0_cast)
    if a_t.dtype is not torch.float8_e4m3fn or b_t.dtype is not torch.float8_e4m3fn:
        check_not_fp4(fn, a=a_t, b=b_t)  # a clear "needs SM100" for FP4; other dtypes fail in the op
    # nn/tn/tt are views of nt: the same kernel sees transposed operands.
    if transpose_a:
        if a_t.dim() != 2 or sfa.dim() != 2:
            _args.dims(fn, "a", a_t, 2, "[K, M]")
            _args.dims(fn, "a's scale factors", sfa, 2, "[ceil(K / 128), M]")
        a_t, sfa = a_t.transpose(0, 1), sfa.transpose(0, 1)
    if transpose_b:
        if b_t.dim() != 2 or sfb.dim() != 2:
            _args.dims(fn, "b", b_t, 2, "[K, N]")
            _args.dims(fn, "b's scale factors", sfb, 2, "[ceil(K / 128), N or ceil(N / 128)]")
        b_t, sfb = b_t.transpose(0, 1), sfb.transpose(0, 1)
    recipe = _choose_recipe(fn, d, recipe, recipe_a, recipe_b)
    if recipe == _RECIPE_1D2D and d.dtype == torch.float32:
        raise ValueError(f"deep_gemm.{fn}: recipe (1, 128, 128) writes torch.bfloat16 d; fp32 d is the 1D1D recipe "
                         "(1, 1, 128)")
    # recipe (1, 1, 128): the 1D1D kernel, into an fp32 d (c accumulates) or a bf16 d (no c).
    _fp8_gemm_op(a_t, sfa, b_t, sfb, d, c, compiled_dims, recipe == _RECIPE_1D1D)


def fp8_gemm_nt(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None,
                compiled_dims: str = "nk", disable_ue8m0_cast: bool = False, *,
                alpha: Optional[float] = None) -> None:
    """``d = (A * SFA) @ (B * SFB)^T (+ c)``: A ``[M, K]`` and B ``[N, K]`` FP8 e4m3, K-major.

    ``a = (A, SFA)`` with SFA fp32 ``[M, ceil(K/128)]`` (per token); ``b = (B, SFB)`` with
    SFB fp32 ``[ceil(N/128), ceil(K/128)]`` (per 128x128 block) and ``d`` bf16 ``[M, N]``;
    or, with ``recipe=(1, 1, 128)`` / an fp32 ``d`` (the 1D1D kernel, weight gradients), SFB
    ``[N, ceil(K/128)]`` and ``d = c + A @ B^T`` in fp32 (``c`` may be ``d``), or a bf16 ``d``
    (``recipe=(1, 1, 128)``, no ``c``) written as ``A @ B^T``. K need not be a multiple of 128. Scales may come in any layout:
    per-row scales not already MN-major and TMA-aligned (see
    :func:`get_mn_major_tma_aligned_tensor`) are read as given by the bf16 kernel at
    M <= 384 (where its tiles have at most 128 rows) and otherwise converted on the GPU on
    every call, so pass prepared ones on hot paths. ``disable_ue8m0_cast`` has no effect on SM90
    (fp32 scales, no UE8M0 packing). ``recipe_a`` / ``recipe_b`` (``(gran_mn, gran_k)`` of each
    operand) are the two-part spelling of ``recipe``. ``alpha`` is SM100-only: it must be None.
    """
    _fp8_gemm("fp8_gemm_nt", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha,
              False, False)


def fp8_gemm_nn(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None,
                compiled_dims: str = "nk", disable_ue8m0_cast: bool = False, *,
                alpha: Optional[float] = None) -> None:
    """:func:`fp8_gemm_nt` with B given as ``[K, N]`` (and its scales transposed alike).
    SM90 needs K-major operands, so B must be a transposed view of a K-major tensor."""
    _fp8_gemm("fp8_gemm_nn", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha,
              False, True)


def fp8_gemm_tn(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None,
                compiled_dims: str = "mn", disable_ue8m0_cast: bool = False, *,
                alpha: Optional[float] = None) -> None:
    """:func:`fp8_gemm_nt` with A given as ``[K, M]`` and B as ``[K, N]``... see fp8_gemm_nt;
    A must be a transposed view of a K-major tensor on SM90."""
    _fp8_gemm("fp8_gemm_tn", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha,
              True, True)


def fp8_gemm_tt(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None,
                compiled_dims: str = "mn", disable_ue8m0_cast: bool = False, *,
                alpha: Optional[float] = None) -> None:
    """:func:`fp8_gemm_nt` with A given as ``[K, M]`` (B as in nt); A must be a transposed
    view of a K-major tensor on SM90."""
    _fp8_gemm("fp8_gemm_tt", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha,
              True, False)


_skip_op = _ops.fp8_gemm_nt_skip_head_mid.default


def fp8_gemm_nt_skip_head_mid(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                              d: torch.Tensor, head_splits: tuple[int, int, int],
                              recipe: Optional[tuple[int, int, int]] = None, compiled_dims: str = "nk",
                              disable_ue8m0_cast: bool = False) -> None:
    """:func:`fp8_gemm_nt` (the 1D2D kernel, bf16 ``d``) whose output skips the middle of every head.

    ``head_splits = (left, mid, right)``: the product ``A @ B^T`` (``[M, N]``, N a multiple of
    ``left + right``) is a row of heads of ``left + right`` columns; ``d`` is ``[M, N + N /
    (left + right) * mid]`` and head h of the product lands in ``d[:, h * (left + mid +
    right):]`` as ``[left | mid columns left untouched | right]`` (the skipped columns keep
    whatever ``d`` held). left and right are multiples of 16, mid of 8. ``recipe`` must be
    None or ``(1, 128, 128)``; ``disable_ue8m0_cast`` has no effect on SM90.
    """
    fn = "fp8_gemm_nt_skip_head_mid"
    a_t, sfa = _pair(fn, "a", a)
    b_t, sfb = _pair(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.str_(fn, "compiled_dims", compiled_dims, "'nk'")
    _args.bool_(fn, "disable_ue8m0_cast", disable_ue8m0_cast)
    splits = _args.ints(fn, "head_splits", head_splits, length=3, what="ints (left, mid, right)")
    if recipe is not None and _args.recipe(fn, "recipe", recipe) != _RECIPE_1D2D:
        raise ValueError(f"deep_gemm.{fn}: recipe: skip-head-mid runs the 1D2D kernel, recipe (1, 128, 128); got "
                         f"{tuple(recipe)}")
    if a_t.dtype is not torch.float8_e4m3fn or b_t.dtype is not torch.float8_e4m3fn:
        check_not_fp4(fn, a=a_t, b=b_t)
    _skip_op(a_t, sfa, b_t, sfb, d, list(splits), compiled_dims)


# Upstream's FP8xFP4 entry points: on SM90 only the FP8 x FP8 path exists.
fp8_fp4_gemm_nt = fp8_gemm_nt
fp8_fp4_gemm_nn = fp8_gemm_nn
fp8_fp4_gemm_tn = fp8_gemm_tn
fp8_fp4_gemm_tt = fp8_gemm_tt


__all__ = [
    "fp8_gemm_nt",
    "fp8_gemm_nn",
    "fp8_gemm_tn",
    "fp8_gemm_tt",
    "fp8_fp4_gemm_nt",
    "fp8_fp4_gemm_nn",
    "fp8_fp4_gemm_tn",
    "fp8_fp4_gemm_tt",
    "fp8_gemm_nt_skip_head_mid",
]
