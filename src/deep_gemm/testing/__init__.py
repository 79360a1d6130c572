"""Testing and benchmarking helpers with upstream DeepGEMM's names and signatures.

``calc_diff`` and ``count_bytes`` are plain PyTorch (CPU or CUDA). ``bench``,
``bench_kineto`` and ``get_arch_major`` need a CUDA GPU and raise RuntimeError
without one.
"""

from .bench import bench, bench_kineto, empty_suppress, suppress_stdout_stderr
from .numeric import assert_bitwise_equal, calc_diff, count_bytes
from .utils import get_arch_major, ignore_env, require_cuda, test_filter

__all__ = [
    "assert_bitwise_equal",
    "bench",
    "bench_kineto",
    "calc_diff",
    "count_bytes",
    "empty_suppress",
    "get_arch_major",
    "ignore_env",
    "require_cuda",
    "suppress_stdout_stderr",
    "test_filter",
]
