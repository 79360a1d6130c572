"""Upstream names whose kernels need Blackwell (SM100): FP4 operands and Mega MoE.

They exist so that code written for upstream imports and fails with a clear
message where it calls them, instead of an AttributeError (API.md, "SM100-only").
"""

from __future__ import annotations

from typing import Any, NoReturn


def _requires_sm100(name: str) -> NoReturn:
    raise RuntimeError(f"deep_gemm.{name}: requires an SM100 (Blackwell) GPU; this build implements the SM90 "
                       "(Hopper) kernels only")


class SymmBuffer:
    """Mega MoE's symmetric-memory buffer (SM100 only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _requires_sm100("SymmBuffer")


def get_symm_buffer_for_mega_moe(*args: Any, **kwargs: Any) -> NoReturn:
    """SM100 only."""
    _requires_sm100("get_symm_buffer_for_mega_moe")


def transform_weights_for_mega_moe(*args: Any, **kwargs: Any) -> NoReturn:
    """SM100 only."""
    _requires_sm100("transform_weights_for_mega_moe")


def fp8_fp4_mega_moe(*args: Any, **kwargs: Any) -> NoReturn:
    """SM100 only."""
    _requires_sm100("fp8_fp4_mega_moe")


def bf16_mega_moe(*args: Any, **kwargs: Any) -> NoReturn:
    """SM100 only."""
    _requires_sm100("bf16_mega_moe")


def check_not_fp4(fn: str, *tensors: Any, **named: Any) -> None:
    """FP4 operands arrive packed two per byte (int8/uint8) or as float4 dtypes. Tensors
    passed by keyword are named in the message (``check_not_fp4(fn, a=a, b=b)``)."""
    import torch

    fp4_like = {torch.int8, torch.uint8}
    fp4_like.update(getattr(torch, n) for n in ("float4_e2m1fn_x2",) if hasattr(torch, n))
    for name, t in [("", t) for t in tensors] + list(named.items()):
        if isinstance(t, torch.Tensor) and t.dtype in fp4_like:
            which = f"{name}: " if name else ""
            raise RuntimeError(f"deep_gemm.{fn}: {which}FP4 operands ({t.dtype}) require an SM100 (Blackwell) GPU; "
                               "on SM90 both operands are torch.float8_e4m3fn")


__all__ = ["SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe", "fp8_fp4_mega_moe",
           "bf16_mega_moe"]
