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
    if not isinstance(sf, torch.Tensor):
        raise TypeError(f"deep_gemm.get_mn_major_tma_aligned_tensor: sf must be a tensor, got {type(sf).__name__}")
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
    recipe = tuple(recipe)
    if len(recipe) == 2:
        return recipe[0], recipe[1]
    if len(recipe) == 3:
        if is_sfa is None:
            raise ValueError("deep_gemm.transform_sf_into_required_layout: a 3-element recipe needs is_sfa=True/False")
        return (recipe[0] if is_sfa else recipe[1]), recipe[2]
    raise ValueError(f"deep_gemm.transform_sf_into_required_layout: recipe must have 2 or 3 elements, got {recipe!r}")


def transform_sf_into_required_layout(sf: torch.Tensor, mn: int, k: int, recipe: Sequence[int],
                                      num_groups: Optional[int] = None, is_sfa: Optional[bool] = None,
                                      disable_ue8m0_cast: bool = False,
                                      psum_layout: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Scales as the SM90 kernels want them.

    ``recipe`` is ``(gran_mn, gran_k)`` of this tensor, or the GEMM's
    ``(gran_m_a, gran_n_b, gran_k)`` with ``is_sfa`` picking the operand. On SM90
    scales are fp32 (``disable_ue8m0_cast`` has no effect: there is no UE8M0
    packing). Per-row scales (gran_mn 1) become MN-major TMA-aligned; per-block
    scales (gran_mn 128) become contiguous. The input is returned unchanged when
    it already has that layout.
    """
    gran_mn, gran_k = _granularity(recipe, is_sfa)
    if gran_k != 128 or gran_mn not in (1, 128):
        raise ValueError(f"deep_gemm.transform_sf_into_required_layout: SM90 supports scale granularity (1, 128) or "
                         f"(128, 128), got ({gran_mn}, {gran_k})")
    if sf.dtype != torch.float32:
        raise ValueError(f"deep_gemm.transform_sf_into_required_layout: SM90 scales are torch.float32, got {sf.dtype}")
    expected = (-(-mn // gran_mn), -(-k // gran_k))
    if num_groups is not None:
        expected = (num_groups, *expected)
    if tuple(sf.shape) != expected:
        raise ValueError(f"deep_gemm.transform_sf_into_required_layout: sf must have shape {list(expected)} for "
                         f"mn={mn}, k={k}, granularity ({gran_mn}, {gran_k}), got {list(sf.shape)}")
    if gran_mn == 1:
        return get_mn_major_tma_aligned_tensor(sf)
    return sf.contiguous()
