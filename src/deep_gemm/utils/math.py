"""Integer helpers, UE8M0 scale rounding and the FP8 casts used by callers and tests.

Plain PyTorch only: every function here works on CPU and CUDA tensors alike and
needs neither the compiled extension nor a GPU.

FP8 means ``torch.float8_e4m3fn`` (largest finite value 448). A cast splits its
input into groups of ``gran_k`` elements, takes each group's absolute maximum
(floored at 1e-4 so an all-zero group still gets a finite, non-zero scale), and
uses ``scale = amax / 448`` so that ``x ≈ fp8 * scale``. With ``use_ue8m0`` the
scale is rounded up to a power of two first (the UE8M0 format keeps only an
exponent), which can only shrink the scaled values, never overflow them.
Inputs whose sizes are not multiples of the group size are padded with zeros
for the statistics; the padding never appears in the returned FP8 tensor.
"""

from collections.abc import Sequence

import torch

__all__ = [
    "align",
    "ceil_div",
    "ceil_to_ue8m0",
    "pack_ue8m0_to_int",
    "per_block_cast_to_fp8",
    "per_channel_cast_to_fp8",
    "per_custom_dims_cast_to_fp8",
    "per_token_cast_to_fp8",
    "unpack_ue8m0_from_int",
]

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4

_MANTISSA_MASK = (1 << 23) - 1


def ceil_div(x: int, y: int) -> int:
    """Smallest integer ``q`` with ``q * y >= x`` (for positive ``y``)."""
    return (x + y - 1) // y


def align(x: int, y: int) -> int:
    """``x`` rounded up to a multiple of ``y``."""
    return ceil_div(x, y) * y


def ceil_to_ue8m0(x: torch.Tensor) -> torch.Tensor:
    """Round ``|x|`` up to the nearest power of two, as FP32.

    Exact powers of two are kept. The result is limited to the normal FP32
    exponents ``2**-126 .. 2**127``: zero and subnormal inputs give ``2**-126``,
    infinities and NaNs give ``2**127``. Works element-wise on any shape.
    """
    bits = x.abs().float().view(torch.int32)
    exponent = torch.bitwise_right_shift(bits, 23) & 0xFF
    round_up = (bits & _MANTISSA_MASK) != 0
    exponent = (exponent + round_up.to(torch.int32)).clamp(1, 254)
    return torch.bitwise_left_shift(exponent, 23).view(torch.float32)


def pack_ue8m0_to_int(x: torch.Tensor) -> torch.Tensor:
    """Pack power-of-two FP32 scales, four to an int32 (first one in the low byte).

    ``x`` must be FP32 with a last dimension divisible by 4 whose values are all
    powers of two (for example the output of :func:`ceil_to_ue8m0`).
    """
    if x.dtype != torch.float32:
        raise TypeError(f"pack_ue8m0_to_int: expected a float32 tensor, got {x.dtype}")
    if x.dim() == 0 or x.size(-1) % 4 != 0:
        raise ValueError(f"pack_ue8m0_to_int: the last dimension must be a multiple of 4, got shape {tuple(x.shape)}")
    bits = x.contiguous().view(torch.int32)
    if bool(((bits & _MANTISSA_MASK) != 0).any()):
        raise ValueError("pack_ue8m0_to_int: every scale must be a power of two (round them with ceil_to_ue8m0 first)")
    exponents = torch.bitwise_right_shift(bits, 23).to(torch.uint8)
    return exponents.view(torch.int32)


def unpack_ue8m0_from_int(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_ue8m0_to_int`: int32 -> FP32 scales, four per element."""
    exponents = packed.contiguous().view(torch.uint8).to(torch.int32)
    return torch.bitwise_left_shift(exponents, 23).view(torch.float32)


def _check_2d(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected a 2-D tensor, got {shape}")


def _check_gran(gran: int, name: str) -> None:
    if not isinstance(gran, int) or gran <= 0:
        raise ValueError(f"{name}: gran_k must be a positive integer, got {gran!r}")


def _scales_from_amax(amax: torch.Tensor, use_ue8m0: bool) -> torch.Tensor:
    sf = amax.float().clamp(min=AMAX_FLOOR) / FP8_MAX
    return ceil_to_ue8m0(sf) if use_ue8m0 else sf


def _zero_padded(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    if tuple(x.shape) == (rows, cols):
        return x
    padded = torch.zeros((rows, cols), dtype=x.dtype, device=x.device)
    padded[: x.size(0), : x.size(1)] = x
    return padded


def per_token_cast_to_fp8(
    x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128, use_packed_ue8m0: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` ``[M, K]`` with one scale per row per ``gran_k`` columns ("1 x gran_k").

    Returns ``(x_fp8 [M, K] float8_e4m3fn, sf [M, ceil(K / gran_k)] float32)`` with
    ``x ≈ x_fp8 * sf.repeat_interleave(gran_k, 1)[:, :K]``. ``use_packed_ue8m0``
    returns the scales packed four to an int32 (needs ``use_ue8m0``; SM100 layouts).
    """
    _check_2d(x, "per_token_cast_to_fp8")
    _check_gran(gran_k, "per_token_cast_to_fp8")
    if use_packed_ue8m0 and not use_ue8m0:
        raise ValueError("per_token_cast_to_fp8: use_packed_ue8m0 requires use_ue8m0=True")
    m, k = x.shape
    padded_k = align(k, gran_k)
    groups = _zero_padded(x, m, padded_k).view(m, padded_k // gran_k, gran_k)
    sf = _scales_from_amax(groups.abs().amax(dim=2), use_ue8m0)
    x_fp8 = (groups * (1.0 / sf.unsqueeze(2))).to(FP8_DTYPE).view(m, padded_k)
    return x_fp8[:, :k].contiguous(), (pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf)


def per_channel_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` ``[M, N]`` with one scale per column per ``gran_k`` rows ("gran_k x 1").

    Returns ``(x_fp8 [M, N], sf [ceil(M / gran_k), N] float32)``. Upstream requires
    ``M % gran_k == 0``; here other ``M`` are accepted and padded with zero rows.
    """
    _check_2d(x, "per_channel_cast_to_fp8")
    _check_gran(gran_k, "per_channel_cast_to_fp8")
    m, n = x.shape
    padded_m = align(m, gran_k)
    groups = _zero_padded(x, padded_m, n).view(padded_m // gran_k, gran_k, n)
    sf = _scales_from_amax(groups.abs().amax(dim=1), use_ue8m0)
    x_fp8 = (groups * (1.0 / sf.unsqueeze(1))).to(FP8_DTYPE).view(padded_m, n)
    return x_fp8[:m].contiguous(), sf


def per_block_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` ``[M, N]`` with one scale per ``gran_k x gran_k`` block.

    Returns ``(x_fp8 [M, N], sf [ceil(M / gran_k), ceil(N / gran_k)] float32)``; the
    blocks are square, as upstream (the default 128 gives DeepSeek's "128x128").
    """
    _check_2d(x, "per_block_cast_to_fp8")
    _check_gran(gran_k, "per_block_cast_to_fp8")
    m, n = x.shape
    padded_m, padded_n = align(m, gran_k), align(n, gran_k)
    blocks = _zero_padded(x, padded_m, padded_n).view(padded_m // gran_k, gran_k, padded_n // gran_k, gran_k)
    sf = _scales_from_amax(blocks.abs().amax(dim=(1, 3), keepdim=True), use_ue8m0)
    x_fp8 = (blocks * (1.0 / sf)).to(FP8_DTYPE).view(padded_m, padded_n)
    return x_fp8[:m, :n].contiguous(), sf.view(padded_m // gran_k, padded_n // gran_k)


def per_custom_dims_cast_to_fp8(
    x: torch.Tensor, dims: Sequence[int], use_ue8m0: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` with one scale per index along ``dims`` (amax over every other dim).

    Returns ``(x_fp8 (same shape as x), sf)`` where ``sf`` is the keep-dim scale
    tensor with its size-1 dimensions squeezed away (upstream's convention).
    """
    keep = {d % x.dim() for d in dims} if x.dim() else set()
    reduce_dims = tuple(d for d in range(x.dim()) if d not in keep)
    amax = x.abs().amax(dim=reduce_dims, keepdim=True) if reduce_dims else x.abs()
    sf = _scales_from_amax(amax, use_ue8m0)
    return (x * (1.0 / sf)).to(FP8_DTYPE), sf.squeeze()
