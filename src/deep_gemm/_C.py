"""deep_gemm._C: the public op surface, a pure-Python facade over the extension.

The compiled ``_C_extension.abi3.so`` registers ``torch.ops.deep_gemm.*`` through
the LibTorch stable ABI. Schemas cannot say everything upstream's pybind module
said (``(tensor, scale)`` pairs, ``None`` defaults, ``x or (x, y)`` arguments,
aliases, objects), so this module restores those conveniences and nothing else:
every function here validates Python-level types and forwards to one op.
"""

from __future__ import annotations

import os
from typing import Any

import torch

_LIB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_C_extension.abi3.so")


def _load_extension() -> Any:
    if not os.path.exists(_LIB_PATH):
        raise ImportError(
            f"deep_gemm: the compiled extension is missing ({_LIB_PATH}); "
            "reinstall the wheel or build it with `nox -s build`."
        )
    torch.ops.load_library(_LIB_PATH)
    return torch.ops.deep_gemm


_ops = _load_extension()

from . import _jit  # noqa: E402  (needs the ops loaded)

_jit.configure()

__all__ = [
    "set_num_sms",
    "get_num_sms",
    "set_tc_util",
    "get_tc_util",
    "set_pdl",
    "get_pdl",
    "set_ignore_compile_dims",
    "set_block_size_multiple_of",
    "set_mk_alignment_for_contiguous_layout",
    "get_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_tma_aligned_size",
    "get_jit",
]


def _int(fn: str, name: str, value: Any) -> int:
    # bool is an int subclass; a flag passed where a count belongs is a bug.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"deep_gemm.{fn}: {name} must be an int, got {type(value).__name__} ({value!r})")
    return value


def _bool(fn: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"deep_gemm.{fn}: {name} must be a bool, got {type(value).__name__} ({value!r})")
    return value


# ---- runtime knobs -----------------------------------------------------------


def set_num_sms(num_sms: int) -> None:
    """Cap the number of SMs the kernels use (1 .. the device's SM count)."""
    _ops.set_num_sms(_int("set_num_sms", "num_sms", num_sms))


def get_num_sms() -> int:
    """The SM cap set by :func:`set_num_sms`, else the current device's SM count."""
    return _ops.get_num_sms()


def set_tc_util(tc_util: int) -> None:
    """Approximate tensor-core utilisation (percent, 1..100) the heuristics assume."""
    _ops.set_tc_util(_int("set_tc_util", "tc_util", tc_util))


def get_tc_util() -> int:
    return _ops.get_tc_util()


def set_pdl(enable_pdl: bool) -> None:
    """Enable programmatic dependent launch for the kernels launched afterwards."""
    _ops.set_pdl(_bool("set_pdl", "enable_pdl", enable_pdl))


def get_pdl() -> bool:
    return _ops.get_pdl()


def set_ignore_compile_dims(ignore_compile_dims: bool) -> None:
    """When True, no shape dimension is baked into JIT kernels (fewer compiles)."""
    _ops.set_ignore_compile_dims(_bool("set_ignore_compile_dims", "ignore_compile_dims", ignore_compile_dims))


def set_block_size_multiple_of(block_size_multiple_of: int | tuple[int, int]) -> None:
    """Constrain BLOCK_M/BLOCK_N to multiples of ``x`` (both) or ``(x, y)``."""
    v = block_size_multiple_of
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(
                f"deep_gemm.set_block_size_multiple_of: expected an int or a pair (block_m, block_n), got {v!r}"
            )
        m, n = (_int("set_block_size_multiple_of", "block_size_multiple_of", x) for x in v)
    else:
        m = n = _int("set_block_size_multiple_of", "block_size_multiple_of", v)
    _ops.set_block_size_multiple_of(m, n)


# ---- layout arithmetic -------------------------------------------------------


def set_mk_alignment_for_contiguous_layout(alignment: int) -> None:
    """Row (M or K) alignment of each group in the contiguous grouped layouts."""
    _ops.set_mk_alignment_for_contiguous_layout(_int("set_mk_alignment_for_contiguous_layout", "alignment", alignment))


def get_mk_alignment_for_contiguous_layout() -> int:
    return _ops.get_mk_alignment_for_contiguous_layout()


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m: int | None = None) -> int:
    """Smallest group alignment the SM90 grouped kernels accept for groups of
    about ``expected_m`` rows (64 for ``expected_m <= 64``, else 128)."""
    e = 0 if expected_m is None else _int("get_theoretical_mk_alignment_for_contiguous_layout", "expected_m", expected_m)
    return _ops.get_theoretical_mk_alignment_for_contiguous_layout(e)


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """``x`` rounded up so ``x * element_size`` is a multiple of 16 bytes (TMA strides)."""
    return _ops.get_tma_aligned_size(_int("get_tma_aligned_size", "x", x), _int("get_tma_aligned_size", "element_size", element_size))


# ---- JIT runtime -------------------------------------------------------------


def get_jit() -> _jit.JitInfo:
    """Cache roots, compiler backend and version, and the kernels loaded so far."""
    return _jit.get_jit()
