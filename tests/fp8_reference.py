"""Test helper: float dequantisation of FP8 operands, for the references the GPU tests and
the bench's reference ops compare against."""

from __future__ import annotations

import torch


def dequant_rows(x: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """Per-row (1x128) scales: x [..., rows, K], sf [..., rows, ceil(K / 128)]."""
    return x.float() * sf.repeat_interleave(128, dim=-1)[..., : x.shape[-1]]


def dequant_blocks(x: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """Per-block (128x128) scales: x [..., N, K], sf [..., ceil(N / 128), ceil(K / 128)]."""
    full = sf.repeat_interleave(128, dim=-2).repeat_interleave(128, dim=-1)
    return x.float() * full[..., : x.shape[-2], : x.shape[-1]]
