"""cuBLASLt GEMMs (API.md: ``cublaslt_gemm_{nt,nn,tn,tt}``): the facade over
``torch.ops.deep_gemm.cublaslt_gemm_nt``.

``D = C + A @ B^T`` through cuBLASLt, on torch's current stream, for callers that want
cuBLAS's kernels behind deep_gemm's call forms (upstream exports the same four names). The
library is loaded at first use, never linked: the one torch already loaded, else the
``nvidia-cublas`` wheel's (found here), else the toolkit's on the loader path.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from typing import Any, Optional

import torch

from . import _args

_ops = torch.ops.deep_gemm
_op = _ops.cublaslt_gemm_nt.default
_preloaded = False


def _preload_wheel_library() -> None:
    """Load the nvidia-cublas wheel's libcublasLt (RTLD_GLOBAL) when the process has none
    yet, so that the extension's dlopen by soname finds it; a no-op where torch loaded it."""
    global _preloaded
    if _preloaded:
        return
    _preloaded = True
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for pattern in ("cu13/lib/libcublasLt.so.13", "cublas/lib/libcublasLt.so.1[23]"):
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    return
                except OSError:
                    continue


def _gemm(fn: str, a: Any, b: Any, d: Any, c: Any, transpose_a: bool, transpose_b: bool) -> None:
    a = _args.tensor(fn, "a", a)
    b = _args.tensor(fn, "b", b)
    _args.tensor(fn, "d", d)
    _args.opt_tensor(fn, "c", c)
    if transpose_a:
        _args.dims(fn, "a", a, 2, "[K, M]")
        a = a.transpose(0, 1)
    if transpose_b:
        _args.dims(fn, "b", b, 2, "[K, N]")
        b = b.transpose(0, 1)
    _preload_wheel_library()
    _op(a, b, d, c)  # on d's device whatever the current one (the op switches for the call)


def cublaslt_gemm_nt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None) -> None:
    """``d = c + a @ b.T`` with cuBLASLt: ``a`` ``[M, K]``, ``b`` ``[N, K]``, each K-major or
    MN-major (any strides with one of them 1), bf16 (FP32 accumulation) or FP8 e4m3 (both
    K-major; unscaled). ``d`` bf16 or fp32 ``[M, N]`` row-major; ``c`` None or of ``d``'s dtype
    and shape (``c`` may be ``d``: in-place accumulation). Launched on torch's current
    stream with a workspace per device and stream, so it runs inside CUDA graphs and on side
    streams; cuBLASLt targets :func:`get_num_sms` SMs. K = 0 writes ``c`` (or zeros)."""
    _gemm("cublaslt_gemm_nt", a, b, d, c, False, False)


def cublaslt_gemm_nn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None) -> None:
    """:func:`cublaslt_gemm_nt` with ``b`` given as ``[K, N]`` (``d = c + a @ b``)."""
    _gemm("cublaslt_gemm_nn", a, b, d, c, False, True)


def cublaslt_gemm_tn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None) -> None:
    """:func:`cublaslt_gemm_nt` with ``a`` given as ``[K, M]`` and ``b`` as ``[K, N]``
    (``d = c + a.T @ b``)."""
    _gemm("cublaslt_gemm_tn", a, b, d, c, True, True)


def cublaslt_gemm_tt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None) -> None:
    """:func:`cublaslt_gemm_nt` with ``a`` given as ``[K, M]`` (``d = c + a.T @ b.T``)."""
    _gemm("cublaslt_gemm_tt", a, b, d, c, True, False)


__all__ = ["cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt"]
