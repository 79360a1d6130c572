"""Helpers for preparing DeepGEMM inputs: integer math, FP8/FP4 casts, layouts.

The casts are plain PyTorch (CPU or CUDA tensors). The layout helpers
(``get_tma_aligned_size``, ``get_mn_major_tma_aligned_tensor``,
``transform_sf_into_required_layout``, ``get_mk_alignment_for_contiguous_layout``
and friends, see ``layout.LAZY_NAMES``) are compiled ops, resolved from
``deep_gemm._C`` on first access; they are left out of ``__all__`` so that a
star import never needs the extension.
"""

from typing import Any

from . import fp4 as fp4  # submodules, as upstream (deep_gemm.utils.math)
from . import layout
from . import math as math
from .fp4 import cast_back_from_fp4, per_token_cast_to_fp4, transpose_packed_fp4
from .math import (
    align,
    ceil_div,
    ceil_to_ue8m0,
    pack_ue8m0_to_int,
    per_block_cast_to_fp8,
    per_channel_cast_to_fp8,
    per_custom_dims_cast_to_fp8,
    per_token_cast_to_fp8,
    unpack_ue8m0_from_int,
)

__all__ = [
    "align",
    "cast_back_from_fp4",
    "ceil_div",
    "ceil_to_ue8m0",
    "pack_ue8m0_to_int",
    "per_block_cast_to_fp8",
    "per_channel_cast_to_fp8",
    "per_custom_dims_cast_to_fp8",
    "per_token_cast_to_fp4",
    "per_token_cast_to_fp8",
    "transpose_packed_fp4",
    "unpack_ue8m0_from_int",
]


def __getattr__(name: str) -> Any:
    if name in layout.LAZY_NAMES:
        return layout.resolve(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(layout.LAZY_NAMES))
