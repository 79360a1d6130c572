"""Scale-factor layouts the SM90 kernels read (API.md P0 layout helpers).

The FP8 kernels load per-token (1x128) scales with TMA, so they want them
MN-major with each column padded to 16 bytes: shape ``[..., mn, k_blocks]``,
strides ``(..., 1, align(mn, 4))``. On CUDA tensors the conversion is our layout
kernel (op ``get_mn_major_tma_aligned_tensor``); CPU tensors use a torch copy.
The input itself is returned when it already has the required layout, so passing
prepared scales costs nothing.
"""

from __future__ import annotations

from typing import Optional
from collections.abc import Sequence

import torch

from . import _args


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _is_mn_major_tma_aligned(sf: torch.Tensor) -> bool:
    mn, kb = sf.shape[-2], sf.shape[-1]
    pad = _align(mn, 4)
    if sf.stride(-2) != 1 and mn > 1:
        return False
    if sf.stride(-1) != pad and kb > 1:
        return False
    return sf.dim() == 2 or sf.shape[0] <= 1 or sf.stride(0) == pad * kb


def get_mn_major_tma_aligned_tensor(sf: torch.Tensor) -> torch.Tensor:
    """``sf`` ([mn, k] or [groups, mn, k], fp32) in MN-major, TMA-aligned layout."""
    _args.tensor("get_mn_major_tma_aligned_tensor", "sf", sf)
    if sf.dim() not in (2, 3):
        raise ValueError(f"deep_gemm.get_mn_major_tma_aligned_tensor: sf must be 2-D or 3-D, got shape {tuple(sf.shape)}")
    if sf.dtype != torch.float32:
        raise ValueError(f"deep_gemm.get_mn_major_tma_aligned_tensor: sf must be torch.float32 on SM90, got {sf.dtype}")
    if _is_mn_major_tma_aligned(sf):
        return sf
    if sf.device.type != "cpu":  # CUDA (the layout kernel) and meta (shapes only)
        return torch.ops.deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    *batch, mn, kb = sf.shape
    storage = torch.empty((*batch, kb, _align(mn, 4)), dtype=sf.dtype, device=sf.device)
    out = storage.transpose(-1, -2)[..., :mn, :]
    out.copy_(sf)
    return out


def _granularity(recipe: Sequence[int], is_sfa: Optional[bool]) -> tuple[int, int]:
    fn = "transform_sf_into_required_layout"
    if isinstance(recipe, (tuple, list)) and len(recipe) == 2:
        gran_mn, gran_k = _args.recipe(fn, "recipe", recipe, 2)
        return gran_mn, gran_k
    if isinstance(recipe, (tuple, list)) and len(recipe) != 3:
        raise ValueError(f"deep_gemm.{fn}: recipe must have 2 elements (gran_mn, gran_k) or 3 (gran_m, gran_n, "
                         f"gran_k), got {tuple(recipe)!r}")
    recipe = _args.recipe(fn, "recipe", recipe, 3)
    if is_sfa is None:
        raise ValueError(f"deep_gemm.{fn}: is_sfa: a 3-element recipe needs is_sfa=True/False")
    return (recipe[0] if is_sfa else recipe[1]), recipe[2]


def transform_sf_into_required_layout(sf: torch.Tensor, mn: int, k: int, recipe: Sequence[int],
                                      num_groups: Optional[int] = None, is_sfa: Optional[bool] = None,
                                      disable_ue8m0_cast: bool = False,
                                      psum_layout: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Scales as the SM90 kernels want them.

    ``recipe`` is ``(gran_mn, gran_k)`` of this tensor, or the GEMM's
    ``(gran_m_a, gran_n_b, gran_k)`` with ``is_sfa`` picking the operand. On SM90
    scales are fp32 (``disable_ue8m0_cast`` has no effect: there is no UE8M0
    packing; ``psum_layout``, an SM100 grouped layout, is not used either). Per-row
    scales (gran_mn 1) become MN-major TMA-aligned; per-block scales (gran_mn 128)
    become contiguous. The input is returned unchanged when it already has that layout.
    ``mn`` and ``k`` are the operand's sizes (>= 0), ``num_groups`` (> 0) its groups.
    """
    fn = "transform_sf_into_required_layout"
    _args.tensor(fn, "sf", sf, "a torch.float32 tensor of scale factors")
    mn = _args.int_(fn, "mn", mn, min=0)
    k = _args.int_(fn, "k", k, min=0)
    num_groups = _args.opt_int(fn, "num_groups", num_groups, min=1)
    is_sfa = _args.opt_bool(fn, "is_sfa", is_sfa)
    _args.bool_(fn, "disable_ue8m0_cast", disable_ue8m0_cast)
    _args.opt_tensor(fn, "psum_layout", psum_layout)
    gran_mn, gran_k = _granularity(recipe, is_sfa)
    if gran_k != 128 or gran_mn not in (1, 128):
        raise ValueError(f"deep_gemm.{fn}: recipe: SM90 supports scale granularity (1, 128) or "
                         f"(128, 128), got ({gran_mn}, {gran_k})")
    if sf.dtype != torch.float32:
        raise ValueError(f"deep_gemm.{fn}: sf: SM90 scales are torch.float32, got {sf.dtype}")
    expected = (-(-mn // gran_mn), -(-k // gran_k))
    if num_groups is not None:
        expected = (num_groups, *expected)
    if tuple(sf.shape) != expected:
        raise ValueError(f"deep_gemm.{fn}: sf must have shape {list(expected)} for "
                         f"mn={mn}, k={k}, granularity ({gran_mn}, {gran_k}), got {list(sf.shape)}")
    if gran_mn == 1:
        return get_mn_major_tma_aligned_tensor(sf)
    return sf.contiguous()


__all__ = ["get_mn_major_tma_aligned_tensor", "transform_sf_into_required_layout"]
