"""deep_gemm: DeepGEMM-compatible FP8 tensor-core GEMMs for NVIDIA Hopper."""

from ._version import __version__
from . import _C
from ._C import *  # noqa: F401,F403  (the public op surface, API.md)
from . import testing, utils  # noqa: F401

__all__ = ["__version__", "testing", "utils", *_C.__all__]


def __getattr__(name: str):
    # deep_gemm.legacy (Triton kernels for SM80+) is imported on first access only.
    if name == "legacy":
        import importlib

        return importlib.import_module(".legacy", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
