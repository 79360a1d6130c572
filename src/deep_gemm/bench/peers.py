"""Peers shared by the suites and the host-overhead measurement: cuBLASLt blockwise FP8
(through ``torch.nn.functional.scaled_mm``) and torch's bf16 matmul, on the row's data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .protocol import Peer


def scaled_mm_api() -> tuple[Callable | None, Any, str | None]:
    """``(torch.nn.functional.scaled_mm, ScalingType, None)`` or ``(None, None, reason)``."""
    try:
        from torch.nn.functional import scaled_mm
    except ImportError as exc:
        return None, None, f"torch {torch.__version__} has no torch.nn.functional.scaled_mm ({exc})"
    scaling_type = getattr(torch.nn.functional, "ScalingType", None)
    scaling_type = scaling_type or getattr(torch._C, "_ScalingType", None)
    if scaling_type is None:
        return None, None, f"torch {torch.__version__} has no ScalingType enum for scaled_mm"
    return scaled_mm, scaling_type, None


def cublaslt_peer(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> Peer:
    """cuBLASLt blockwise FP8 (1x128 for A, 128x128 for B) through torch's scaled_mm."""
    scaled_mm, scaling_type, reason = scaled_mm_api()
    if scaled_mm is None:
        return Peer(reason=reason)
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    sfa_col_major = sfa.t().contiguous().t()
    kb = sfb.shape[1]
    if kb % 4:
        # torch's blockwise scaled_mm wants B's 128x128 scales with the K-block count padded
        # to a multiple of 4 (K not a multiple of 512); the padding blocks are never read.
        padded = torch.zeros(sfb.shape[0], (kb + 3) // 4 * 4, dtype=sfb.dtype, device=sfb.device)
        padded[:, :kb] = sfb
        sfb = padded
    sfb_t = sfb.t()
    b_t = b_fp8.t()

    def run() -> torch.Tensor:
        return scaled_mm(
            a_fp8,
            b_t,
            sfa_col_major,
            scaling_type.BlockWise1x128,
            sfb_t,
            scaling_type.BlockWise128x128,
            output_dtype=torch.bfloat16,
        )

    return Peer(run=run)


def bf16_peer(a: torch.Tensor, b: torch.Tensor) -> Peer:
    return Peer(run=lambda: a @ b.t())
