"""deep_gemm: DeepGEMM-compatible FP8 tensor-core GEMMs for NVIDIA Hopper."""

from ._version import __version__
from . import _C
from ._C import *  # noqa: F401,F403  (the public op surface, API.md)
from . import testing, utils  # noqa: F401

__all__ = ["__version__", "testing", "utils", *_C.__all__]
