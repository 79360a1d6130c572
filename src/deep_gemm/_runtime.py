"""Runtime knobs, layout arithmetic and the JIT report (API.md P0): the facade over
``torch.ops.deep_gemm.{set,get}_*`` and ``jit_info``.

Each function checks its Python-level argument types (``_args``) and forwards to one op;
the ops keep the state (per process) and do the range checks.
"""

from __future__ import annotations

import torch

from . import _args, _jit

_ops = torch.ops.deep_gemm


_int = _args.int_
_bool = _args.bool_


# ---- runtime knobs -----------------------------------------------------------


def set_num_sms(new_num_sms: int) -> None:
    """Cap the number of SMs the kernels use (1 .. the device's SM count)."""
    _ops.set_num_sms(_int("set_num_sms", "new_num_sms", new_num_sms))


def get_num_sms() -> int:
    """The SM cap set by :func:`set_num_sms`, else the current device's SM count."""
    return _ops.get_num_sms()


def set_tc_util(new_tc_util: int) -> None:
    """Approximate tensor-core utilisation (percent, 1..100) the heuristics assume."""
    _ops.set_tc_util(_int("set_tc_util", "new_tc_util", new_tc_util))


def get_tc_util() -> int:
    return _ops.get_tc_util()


def set_pdl(new_enable_pdl: bool) -> None:
    """Enable programmatic dependent launch for the kernels launched afterwards."""
    _ops.set_pdl(_bool("set_pdl", "new_enable_pdl", new_enable_pdl))


def get_pdl() -> bool:
    return _ops.get_pdl()


def set_ignore_compile_dims(new_value: bool) -> None:
    """When True, no shape dimension is baked into JIT kernels (fewer compiles)."""
    _ops.set_ignore_compile_dims(_bool("set_ignore_compile_dims", "new_value", new_value))


def set_block_size_multiple_of(new_value: int | tuple[int, int]) -> None:
    """Constrain BLOCK_M/BLOCK_N to multiples of ``x`` (both) or ``(x, y)``."""
    v = new_value
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(
                f"deep_gemm.set_block_size_multiple_of: expected an int or a pair (block_m, block_n), got {v!r}"
            )
        m, n = (_int("set_block_size_multiple_of", "new_value", x) for x in v)
    else:
        m = n = _int("set_block_size_multiple_of", "new_value", v)
    if not (1 <= m <= 256 and 1 <= n <= 256):
        # RuntimeError, as the op raised it before (callers and tests match it); here the
        # message also names the argument.
        raise RuntimeError(f"deep_gemm.set_block_size_multiple_of: new_value: each multiple must be in "
                           f"[1, 256], got {(m, n)}")
    _ops.set_block_size_multiple_of(m, n)


# ---- layout arithmetic -------------------------------------------------------


def set_mk_alignment_for_contiguous_layout(new_value: int) -> None:
    """Row (M or K) alignment of each group in the contiguous grouped layouts."""
    _ops.set_mk_alignment_for_contiguous_layout(_int("set_mk_alignment_for_contiguous_layout", "new_value", new_value))


def get_mk_alignment_for_contiguous_layout() -> int:
    return _ops.get_mk_alignment_for_contiguous_layout()


# Upstream's names for the M-grouped and K-grouped uses of the same alignment.
get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m: int | None = None,
                                                       num_groups: int | None = None) -> int:
    """Smallest group alignment the SM90 grouped kernels accept for groups of
    about ``expected_m`` rows (64 for ``expected_m <= 64``, else 128). ``num_groups`` is
    accepted for callers written against an older upstream (vLLM passes it); it does not
    change the answer on SM90."""
    fn = "get_theoretical_mk_alignment_for_contiguous_layout"
    if num_groups is not None:
        _int(fn, "num_groups", num_groups)
    e = 0 if expected_m is None else _int(fn, "expected_m", expected_m)
    return _ops.get_theoretical_mk_alignment_for_contiguous_layout(e)


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """``x`` rounded up so ``x * element_size`` is a multiple of 16 bytes (TMA strides)."""
    x = _int("get_tma_aligned_size", "x", x)
    return _ops.get_tma_aligned_size(x, _int("get_tma_aligned_size", "element_size", element_size))


# ---- JIT runtime -------------------------------------------------------------


def get_jit() -> _jit.JitInfo:
    """Cache roots, compiler backend and version, and the kernels loaded so far."""
    return _jit.get_jit()


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
    "get_m_alignment_for_contiguous_layout",
    "get_k_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_tma_aligned_size",
    "get_jit",
]
