"""Argument checks for ``deep_gemm.legacy``: all of them run on the host, before Triton is
imported or anything is launched, so they work on CPU and meta tensors too.

Every rejection names the function and the argument: ``deep_gemm.legacy.<fn>: <arg> ...``;
``TypeError`` for a value of the wrong type (not a tensor, not a tuple, not a bool),
``ValueError`` for a tensor of the wrong dtype, rank, shape, layout or device.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

_MAX = (1 << 31) - 1
_INSTALL_HINT = ("install it with `pip install triton`, or install a CUDA build of torch "
                 "(https://pytorch.org/get-started/locally/), which brings a matching Triton")


def _what(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} ({text[:57] + '...' if len(text) > 60 else text})"


class Checker:
    """The checks of one call of the public function ``fn``."""

    def __init__(self, fn: str):
        self.fn = fn

    def fail(self, msg: str, exc: type = ValueError):
        raise exc(f"deep_gemm.legacy.{self.fn}: {msg}")

    def tensor(self, name: str, value: Any, dtypes: Sequence[torch.dtype], dims: int, what: str) -> torch.Tensor:
        """A tensor of one of ``dtypes`` with ``dims`` dimensions (``what`` names them)."""
        if not isinstance(value, torch.Tensor):
            self.fail(f"{name} must be a tensor ({what}), got {_what(value)}", TypeError)
        if value.dtype not in dtypes:
            want = " or ".join(str(d) for d in dtypes)
            self.fail(f"{name} must be {want}, got {value.dtype}")
        if value.dim() != dims:
            self.fail(f"{name} must be {dims}-D ({what}), got shape {tuple(value.shape)}")
        for size in value.shape:
            if size > _MAX:
                self.fail(f"{name}: every size must be below 2^31, got shape {tuple(value.shape)}")
        return value

    def contiguous(self, name: str, value: torch.Tensor, what: str) -> None:
        if not value.is_contiguous():
            self.fail(f"{name} must be contiguous ({what}), got shape {tuple(value.shape)} "
                      f"with strides {value.stride()}; pass .contiguous()")

    def index(self, name: str, value: Any, dims: str, length: int | None, length_what: str = "") -> torch.Tensor:
        """A contiguous 1-D int32 index tensor (``dims`` names its size), of ``length``
        elements when given."""
        self.tensor(name, value, (torch.int32,), 1, f"int32 {dims}")
        self.contiguous(name, value, dims)
        if length is not None and value.numel() != length:
            self.fail(f"{name} must have {length} elements ({length_what}), got {value.numel()}")
        return value

    def shape(self, name: str, value: torch.Tensor, want: tuple, what: str) -> None:
        if tuple(value.shape) != tuple(want):
            self.fail(f"{name} must have shape {what} = {tuple(want)}, got {tuple(value.shape)}")

    def tuple_of_tensors(self, name: str, value: Any, names: Sequence[str]) -> tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(names):
            got = f"a {type(value).__name__} of {len(value)}" if isinstance(value, (tuple, list)) else _what(value)
            self.fail(f"{name} must be a tuple ({', '.join(names)}) of {len(names)} int32 tensors, got {got}", TypeError)
        return tuple(value)

    def bool_(self, name: str, value: Any) -> bool:
        if value is not True and value is not False:
            self.fail(f"{name} must be a bool, got {_what(value)}", TypeError)
        return value

    def aligned(self, dim: str, size: int, alignment: int, fix: str) -> None:
        if size % alignment:
            self.fail(f"{dim} must be a multiple of get_mk_alignment_for_contiguous_layout() (= {alignment}), "
                      f"got {size}; {fix}")

    # ---- device, memory ----------------------------------------------------------------

    def devices(self, tensors: dict) -> torch.device:
        """All tensors on one CUDA device of SM80 or newer (CPU under ``TRITON_INTERPRET=1``)."""
        interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
        for name, t in tensors.items():
            if t.device.type != "cuda" and not (interpret and t.device.type == "cpu"):
                hint = ("" if torch.cuda.is_available() else
                        "; this torch sees no CUDA device" + ("" if torch.version.cuda else " (a CPU-only build)"))
                self.fail(f"{name} must be a CUDA tensor, got one on {t.device}: these are Triton kernels for "
                          f"NVIDIA GPUs (SM80 / A100 or newer){hint}")
        placed = {t.device for t in tensors.values()}
        if len(placed) > 1:
            where = ", ".join(f"{name} on {t.device}" for name, t in tensors.items())
            self.fail(f"all tensors must be on one device, got {where}")
        device = next(iter(placed))
        if device.type == "cuda":
            major, minor = torch.cuda.get_device_capability(device)
            if major < 8:
                self.fail(f"needs an SM80 (A100) or newer GPU for BF16 tensor cores, got sm_{major}{minor} "
                          f"on {device}", RuntimeError)
        return device

    def no_overlap(self, out_name: str, out: torch.Tensor, inputs: dict) -> None:
        """``out`` (written) shares no memory with any of ``inputs``."""
        lo, hi = _span(out)
        for name, t in inputs.items():
            if t.numel() == 0 or out.numel() == 0 or t.device != out.device:
                continue
            t_lo, t_hi = _span(t)
            if lo < t_hi and t_lo < hi:
                self.fail(f"{out_name} overlaps {name} in memory; the output must be a separate buffer")


def _span(t: torch.Tensor) -> tuple:
    start = t.data_ptr()
    last = sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True) if s > 0)
    return start, start + (last + 1) * t.element_size()


def load_kernels(fn: str):
    """The Triton side (``_kernels``), imported on first use; a missing or broken Triton
    becomes an ImportError that says how to get one."""
    try:
        from . import _kernels
    except ImportError as e:
        raise ImportError(f"deep_gemm.legacy.{fn}: these kernels need Triton, which could not be imported ({e}); "
                          f"{_INSTALL_HINT}") from e
    except Exception as e:  # a Triton that imports but fails (version or driver mismatch)
        raise RuntimeError(f"deep_gemm.legacy.{fn}: importing Triton failed ({type(e).__name__}: {e}); "
                           f"reinstall it, e.g. {_INSTALL_HINT}") from e
    return _kernels
