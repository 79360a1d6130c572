"""M-grouped FP8 GEMMs for MoE (API.md P1): the facade over
``torch.ops.deep_gemm.m_grouped_fp8_gemm_nt_{contiguous,masked}``.

It restores what the schemas cannot say (``(tensor, scale)`` pairs, recipes, the nn view,
aliases); the ops do every shape, dtype, device and alignment check.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import _args

_ops = torch.ops.deep_gemm
_contiguous_op = _ops.m_grouped_fp8_gemm_nt_contiguous.default
_masked_op = _ops.m_grouped_fp8_gemm_nt_masked.default
_RECIPE = (1, 128, 128)


_pair = _args.pair


def _check_common(fn: str, d: Any, recipe: Any, recipe_a: Any, recipe_b: Any, compiled_dims: Any,
                  disable_ue8m0_cast: Any) -> None:
    _args.tensor(fn, "d", d)
    _args.str_(fn, "compiled_dims", compiled_dims, "'nk'")
    _args.bool_(fn, "disable_ue8m0_cast", disable_ue8m0_cast)
    recipe = _args.one_recipe(fn, recipe, recipe_a, recipe_b)
    if recipe is not None and recipe != _RECIPE:
        raise ValueError(f"deep_gemm.{fn}: recipe: the SM90 grouped GEMMs support recipe (1, 128, 128) (per-token SFA, "
                         f"128x128-block SFB, bf16 d), got {recipe}")


def _contiguous(fn: str, a: Any, b: Any, d: Any, grouped_layout: Any, recipe: Any, recipe_a: Any, recipe_b: Any,
                compiled_dims: Any, disable_ue8m0_cast: Any, use_psum_layout: Any, ensure_zero_padding: Any,
                expected_m_for_psum_layout: Any, transpose_b: bool) -> None:
    a_t, sfa = _pair(fn, "a", a)
    b_t, sfb = _pair(fn, "b", b)
    _check_common(fn, d, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast)
    _args.tensor(fn, "grouped_layout", grouped_layout, "an int32 tensor")
    _args.bool_(fn, "use_psum_layout", use_psum_layout)
    _args.bool_(fn, "ensure_zero_padding", ensure_zero_padding)
    _args.opt_int(fn, "expected_m_for_psum_layout", expected_m_for_psum_layout)
    if transpose_b:
        if b_t.dim() != 3 or sfb.dim() != 3:
            _args.dims(fn, "b", b_t, 3, "[G, K, N]")
            _args.dims(fn, "b's scale factors", sfb, 3, "[G, ceil(K / 128), ceil(N / 128)]")
        b_t, sfb = b_t.transpose(1, 2), sfb.transpose(1, 2)
    _contiguous_op(a_t, sfa, b_t, sfb, d, grouped_layout, compiled_dims, use_psum_layout, expected_m_for_psum_layout,
                   ensure_zero_padding)


def m_grouped_fp8_fp4_gemm_nt_contiguous(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                                         d: torch.Tensor, grouped_layout: Optional[torch.Tensor] = None,
                                         recipe: Optional[tuple[int, int, int]] = None,
                                         recipe_a: Optional[tuple[int, int]] = None,
                                         recipe_b: Optional[tuple[int, int]] = None, compiled_dims: str = "nk",
                                         disable_ue8m0_cast: bool = False, use_psum_layout: bool = False,
                                         ensure_zero_padding: bool = True,
                                         expected_m_for_psum_layout: Optional[int] = None, *,
                                         m_indices: Optional[torch.Tensor] = None) -> None:
    """MoE grouped GEMM, groups back to back along M: ``d[rows of g] = A[rows of g] @ B[g]^T``.

    ``a = (A, SFA)``: A ``[M_sum, K]`` FP8 e4m3 K-major, SFA fp32 ``[M_sum, ceil(K/128)]``
    (per token). ``b = (B, SFB)``: B ``[G, N, K]`` FP8, SFB fp32 ``[G, ceil(N/128), ceil(K/128)]``
    (per 128x128 block). ``d``: bf16 ``[M_sum, N]``. ``recipe`` (or ``recipe_a`` /
    ``recipe_b``) must be ``(1, 128, 128)`` on SM90, or None.

    ``grouped_layout`` (int32, on the GPU; the host never reads it, so calls are
    CUDA-graph safe and cause no device-to-host sync; ``m_indices`` is its older name):

    * ``use_psum_layout=False``: ``[M_sum]``, the group index of every row, ``-1`` for
      padding rows. Each group's rows are one contiguous run starting at a multiple of
      :func:`get_mk_alignment_for_contiguous_layout`, followed by its ``-1`` padding up to
      the next multiple (so ``M_sum`` is a multiple of it). Output rows of padding rows are
      not written, and whole tiles of padding are skipped. (The kernels rely on this shape:
      ``-1`` rows inside a group's run, or a group split into several runs, are not
      supported.)
    * ``use_psum_layout=True``: ``[G]``, cumulative row ends: group ``g`` owns rows
      ``[align(ends[g-1], alignment), ends[g])`` (``ends[-1] = 0``, alignment as above),
      i.e. ``ends[g] = start[g] + rows[g]`` with the starts of the padded layout; an empty
      group has ``ends[g] == align(ends[g-1], alignment)``. ``expected_m_for_psum_layout``
      (rows per group) only steers the configuration choice; without it ``M_sum`` is costed
      as one GEMM. With ``ensure_zero_padding=True`` (the default) every row outside the
      groups is zero in ``d`` afterwards: ``d`` is cleared first (one extra write of ``d``);
      with False those rows are left untouched.

    SFA may come in any layout (converted to MN-major on the GPU when it is not already,
    see :func:`get_mn_major_tma_aligned_tensor`). ``disable_ue8m0_cast`` has no effect on
    SM90 (fp32 scales). ``ensure_zero_padding`` has no effect on the index layout.
    """
    fn = "m_grouped_fp8_fp4_gemm_nt_contiguous"
    _contiguous(fn, a, b, d, _args.layout_alias(fn, grouped_layout, m_indices), recipe, recipe_a, recipe_b, compiled_dims,
                disable_ue8m0_cast, use_psum_layout, ensure_zero_padding, expected_m_for_psum_layout, False)


def m_grouped_fp8_fp4_gemm_nn_contiguous(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                                         d: torch.Tensor, grouped_layout: Optional[torch.Tensor] = None,
                                         recipe: Optional[tuple[int, int, int]] = None,
                                         recipe_a: Optional[tuple[int, int]] = None,
                                         recipe_b: Optional[tuple[int, int]] = None, compiled_dims: str = "nk",
                                         disable_ue8m0_cast: bool = False, use_psum_layout: bool = False,
                                         ensure_zero_padding: bool = True, *,
                                         m_indices: Optional[torch.Tensor] = None) -> None:
    """:func:`m_grouped_fp8_fp4_gemm_nt_contiguous` with B given as ``[G, K, N]`` and SFB as
    ``[G, ceil(K/128), ceil(N/128)]``. SM90 needs K-major B, so B must be a transposed view
    (``.transpose(1, 2)``) of a K-major ``[G, N, K]`` tensor."""
    fn = "m_grouped_fp8_fp4_gemm_nn_contiguous"
    _contiguous(fn, a, b, d, _args.layout_alias(fn, grouped_layout, m_indices), recipe, recipe_a, recipe_b, compiled_dims,
                disable_ue8m0_cast, use_psum_layout, ensure_zero_padding, None, True)


def m_grouped_fp8_fp4_gemm_nt_masked(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                                     d: torch.Tensor, masked_m: torch.Tensor, expected_m: int,
                                     recipe: Optional[tuple[int, int, int]] = None,
                                     recipe_a: Optional[tuple[int, int]] = None,
                                     recipe_b: Optional[tuple[int, int]] = None, compiled_dims: str = "nk",
                                     disable_ue8m0_cast: bool = False) -> None:
    """MoE grouped GEMM with a fixed slot per group: ``d[g, :masked_m[g]] = A[g, :masked_m[g]] @ B[g]^T``.

    ``a = (A, SFA)``: A ``[G, max_m, K]`` FP8 e4m3, SFA fp32 ``[G, max_m, ceil(K/128)]``.
    ``b = (B, SFB)``: B ``[G, N, K]``, SFB fp32 ``[G, ceil(N/128), ceil(K/128)]``. ``d``: bf16
    ``[G, max_m, N]``; A's and d's groups may lie at any stride that is a multiple of 16 bytes
    and keeps them apart (e.g. ``x.transpose(0, 1)`` of a ``[max_m, G, K]`` tensor).
    ``masked_m``: int32 ``[G]`` on the GPU, the valid rows of each group
    (values above ``max_m`` are clamped); rows ``>= masked_m[g]`` are neither computed nor
    written. The host never reads ``masked_m``: one captured CUDA graph serves every
    distribution. ``expected_m`` (> 0, typical valid rows per group) only steers the
    configuration choice. ``recipe`` (or ``recipe_a`` / ``recipe_b``) must be
    ``(1, 128, 128)`` or None; ``disable_ue8m0_cast`` has no effect on SM90.

    SFA rows ``>= masked_m[g]`` do not affect the result (they may hold anything, NaN
    included). When SFA is not already in the kernels' layout, the conversion on the GPU
    copies only the rows below ``masked_m[g]``; prepared scales
    (:func:`get_mn_major_tma_aligned_tensor`) skip that pass.
    """
    fn = "m_grouped_fp8_fp4_gemm_nt_masked"
    a_t, sfa = _pair(fn, "a", a)
    b_t, sfb = _pair(fn, "b", b)
    _check_common(fn, d, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast)
    _args.tensor(fn, "masked_m", masked_m, "an int32 tensor on the GPU")
    _args.int_(fn, "expected_m", expected_m)
    _masked_op(a_t, sfa, b_t, sfb, d, masked_m, expected_m, compiled_dims)


# Upstream's FP8 names are aliases of the FP8xFP4 ones (on SM90 only FP8 x FP8 runs).
m_grouped_fp8_gemm_nt_contiguous = m_grouped_fp8_fp4_gemm_nt_contiguous
m_grouped_fp8_gemm_nn_contiguous = m_grouped_fp8_fp4_gemm_nn_contiguous
m_grouped_fp8_gemm_nt_masked = m_grouped_fp8_fp4_gemm_nt_masked

# Upstream's older name.
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked

__all__ = [
    "m_grouped_fp8_fp4_gemm_nt_contiguous",
    "m_grouped_fp8_fp4_gemm_nn_contiguous",
    "m_grouped_fp8_fp4_gemm_nt_masked",
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nn_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
    "fp8_m_grouped_gemm_nt_masked",
]
