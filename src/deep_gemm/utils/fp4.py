"""FP4 (E2M1) helpers kept for source compatibility with upstream test code.

FP4 GEMMs need SM100, which this package does not run; these plain-PyTorch
helpers only produce and read the packed format, so that code importing them
(for example upstream's test generators) keeps working on any machine.

Packed format: int8 tensors holding two 4-bit codes per byte, the element with
the even index in the low nibble. A code is ``sign << 3 | magnitude_index`` with
magnitudes ``0, 0.5, 1, 1.5, 2, 3, 4, 6``; a value exactly half-way between two
magnitudes goes to the smaller one, and zero never carries a sign.
"""

import torch

from .math import align, ceil_to_ue8m0, pack_ue8m0_to_int, unpack_ue8m0_from_int

__all__ = ["cast_back_from_fp4", "per_token_cast_to_fp4", "transpose_packed_fp4"]

FP4_MAX = 6.0
_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    mags = torch.tensor(_MAGNITUDES, dtype=torch.float32, device=x.device)
    midpoints = (mags[1:] + mags[:-1]) / 2
    index = torch.bucketize(x.float().abs().clamp(max=FP4_MAX), midpoints)
    negative = (x < 0) & (index != 0)
    return (index | (negative.to(index.dtype) << 3)).to(torch.int8)


def _decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    mags = torch.tensor(_MAGNITUDES, dtype=torch.float32, device=codes.device)
    value = mags[(codes & 0x7).long()]
    return torch.where((codes & 0x8) != 0, -value, value)


def _pack_pairs(codes: torch.Tensor) -> torch.Tensor:
    low, high = codes[..., 0::2], codes[..., 1::2]
    return ((low & 0x0F) | ((high & 0x0F) << 4)).to(torch.int8)


def _unpack_pairs(packed: torch.Tensor) -> torch.Tensor:
    low, high = packed & 0x0F, (packed >> 4) & 0x0F
    return torch.stack((low, high), dim=-1).flatten(-2)


def per_token_cast_to_fp4(
    x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128, use_packed_ue8m0: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` ``[M, K]`` (K even) to packed E2M1 with one scale per row per ``gran_k``.

    Returns ``(packed int8 [M, K // 2], sf float32 [M, ceil(K / gran_k)])``; scale =
    amax / 6 (amax floored at 1e-4), rounded up to a power of two with ``use_ue8m0``.
    """
    if x.dim() != 2 or x.size(1) % 2 != 0:
        raise ValueError(
            f"per_token_cast_to_fp4: expected a 2-D tensor with an even number of columns, got {tuple(x.shape)}"
        )
    if use_packed_ue8m0 and not use_ue8m0:
        raise ValueError("per_token_cast_to_fp4: use_packed_ue8m0 requires use_ue8m0=True")
    m, k = x.shape
    padded_k = align(k, gran_k)
    padded = torch.zeros((m, padded_k), dtype=x.dtype, device=x.device)
    padded[:, :k] = x
    groups = padded.view(m, padded_k // gran_k, gran_k)
    sf = groups.abs().float().amax(dim=2).clamp(min=1e-4) / FP4_MAX
    sf = ceil_to_ue8m0(sf) if use_ue8m0 else sf
    codes = _encode_e2m1(groups * (1.0 / sf.unsqueeze(2))).view(m, padded_k)
    packed = _pack_pairs(codes)[:, : k // 2].contiguous()
    return packed, (pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf)


def transpose_packed_fp4(a: torch.Tensor) -> torch.Tensor:
    """Transpose a packed FP4 matrix: int8 ``[M, K // 2]`` -> int8 ``[K, M // 2]`` (M even)."""
    if a.dtype != torch.int8 or a.dim() != 2 or a.size(0) % 2 != 0:
        raise ValueError(
            f"transpose_packed_fp4: expected an int8 [M, K/2] tensor with M even, got {a.dtype} {tuple(a.shape)}"
        )
    return _pack_pairs(_unpack_pairs(a).t().contiguous()).contiguous()


def cast_back_from_fp4(
    packed: torch.Tensor, sf: torch.Tensor, gran_k: int = 128, use_packed_ue8m0: bool = False
) -> torch.Tensor:
    """Dequantise :func:`per_token_cast_to_fp4` output back to float32 ``[M, K]``."""
    if use_packed_ue8m0:
        sf = unpack_ue8m0_from_int(sf)
    values = _decode_e2m1(_unpack_pairs(packed))
    k = values.size(1)
    group = torch.arange(k, device=packed.device) // gran_k
    return values * sf[:, group]
