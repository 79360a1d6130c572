"""deep_gemm: DeepGEMM-compatible FP8 and BF16 tensor-core GEMMs for NVIDIA Hopper."""

import sys as _sys

from ._version import __version__
from . import _variant


def _doctor_is_running() -> bool:
    # `python -m deep_gemm[.doctor]` imports this package first: a broken install
    # (two variants, a missing or mismatched extension) must reach the doctor as a
    # finding to explain, not kill it with the ImportError it is there to diagnose.
    argv = list(getattr(_sys, "orig_argv", []))
    for i, arg in enumerate(argv):
        mod = argv[i + 1] if arg == "-m" and i + 1 < len(argv) else arg[2:] if arg.startswith("-m") else ""
        if mod:
            return mod in ("deep_gemm", "deep_gemm.doctor")
    return False


_import_error = None  # what stopped the import, under the doctor only
try:
    _variant.refuse_two_variants()
    from . import _C
except ImportError as _e:
    if not _doctor_is_running():
        raise
    _import_error = _e
    __all__ = ["__version__", "check_jit"]
else:
    from ._C import *  # noqa: F401,F403  (the public op surface, API.md)
    from . import testing, utils  # noqa: F401

    __all__ = ["__version__", "check_jit", "testing", "utils", *_C.__all__]

from ._doctor import check_jit  # noqa: E402


def __getattr__(name: str):
    # deep_gemm.legacy (Triton kernels for SM80+) is imported on first access only.
    if name == "legacy":
        import importlib

        return importlib.import_module(".legacy", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
