"""deep_gemm._C: the public op surface, a pure-Python facade over the extension.

The compiled ``_C_extension.abi3.so`` registers ``torch.ops.deep_gemm.*`` through
the LibTorch stable ABI. Schemas cannot say everything upstream's pybind module
said (``(tensor, scale)`` pairs, ``None`` defaults, ``x or (x, y)`` arguments,
aliases, objects); the family modules restore those conveniences and nothing else:
every function there validates Python-level types (``_args``) and forwards to one op.

This module only loads the extension and gathers the families' names:

* ``_runtime``: runtime knobs, layout arithmetic, ``get_jit``;
* ``_sf_layout``: scale-factor layouts;
* ``_fp8_gemm``: dense FP8 GEMMs;
* ``_grouped`` / ``_k_grouped``: m-grouped and k-grouped FP8 GEMMs (MoE);
* ``_bf16_gemm``: BF16 GEMMs (dense, m-grouped, k-grouped);
* ``_cublaslt``: cuBLASLt GEMMs;
* ``_einsum``: einsum and fp8_einsum;
* ``_mqa_logits``: the V3.2 indexer's dense MQA logits;
* ``_paged_mqa_logits``: the V3.2 indexer's paged (decode) MQA logits and their schedule;
* ``_hyperconnection``: the TF32 HyperConnection prenorm GEMM;
* ``_sm100``: SM100-only upstream names, present and raising a clear error.

A new family is one module with an ``__all__``, imported below and added to
``_FAMILIES`` (``python -m deep_gemm._stubgen`` then regenerates ``_C.pyi``).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import torch


_LIB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_C_extension.abi3.so")


def _extension_state(path: str = _LIB_PATH) -> dict[str, str]:
    """What the extension at ``path`` (loaded) says about itself: its path, build id,
    ``state`` (``registered``: it registered torch.ops.deep_gemm; ``same_build`` /
    ``other_build``: another copy had, so it registered nothing) and that other copy's
    ``other_path`` / ``other_build_id``."""
    ident = ctypes.CDLL(path).deep_gemm_extension_identity_v1
    ident.restype = ctypes.c_char_p
    fields = ident().decode("utf-8", "replace").split("\t")
    return dict(zip(("path", "build_id", "state", "other_path", "other_build_id"), fields, strict=False))


def _load_extension() -> Any:
    if not os.path.exists(_LIB_PATH):
        raise ImportError(
            f"deep_gemm: the compiled extension is missing ({_LIB_PATH}); "
            "reinstall the wheel or build it with `nox -s build`."
        )
    torch.ops.load_library(_LIB_PATH)
    # A copy of the extension loaded earlier in this process (another venv's, a vendored
    # one) owns torch.ops.deep_gemm; ours then registered nothing (extension.cpp). The same
    # build serves this facade as well as our own would; another build does not.
    state = _extension_state()
    if state.get("state") == "other_build":
        raise ImportError(
            f"deep_gemm: torch.ops.deep_gemm is already registered in this process by {state['other_path']} "
            f"(build {state['other_build_id']}), a different build than this package's {state['path']} "
            f"(build {state['build_id']}); two deep_gemm builds cannot share one process: import one of them only"
        )
    return torch.ops.deep_gemm


_ops = _load_extension()

# The families bind their ops at import (torch.ops.deep_gemm.<op>.default), so they come
# after the extension is loaded.
from . import _fake, _jit  # noqa: E402

_jit.configure()
_fake.register()

from . import (  # noqa: E402
    _bf16_gemm, _cublaslt, _einsum, _fp8_gemm, _grouped, _hyperconnection, _k_grouped, _mqa_logits, _paged_mqa_logits,
    _runtime, _sf_layout, _sm100,
)
from ._runtime import *  # noqa: E402,F401,F403
from ._sf_layout import *  # noqa: E402,F401,F403
from ._fp8_gemm import *  # noqa: E402,F401,F403
from ._grouped import *  # noqa: E402,F401,F403
from ._k_grouped import *  # noqa: E402,F401,F403
from ._bf16_gemm import *  # noqa: E402,F401,F403
from ._cublaslt import *  # noqa: E402,F401,F403
from ._einsum import *  # noqa: E402,F401,F403
from ._mqa_logits import *  # noqa: E402,F401,F403
from ._paged_mqa_logits import *  # noqa: E402,F401,F403
from ._hyperconnection import *  # noqa: E402,F401,F403
from ._sm100 import *  # noqa: E402,F401,F403

# In this order in __all__ (the stub sorts them).
_FAMILIES = (_runtime, _sf_layout, _fp8_gemm, _grouped, _k_grouped, _bf16_gemm, _cublaslt, _einsum, _mqa_logits,
             _paged_mqa_logits, _hyperconnection, _sm100)
__all__ = [name for family in _FAMILIES for name in family.__all__]
