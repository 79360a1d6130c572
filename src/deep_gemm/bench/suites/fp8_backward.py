"""The FP8 backward suite: the data-gradient GEMMs whose K is not a multiple of 128
(``fp8_gemm_nt`` with K = 2112 and 576: the dgrad of 2112 x 7168 and 576 x 7168 weights),
against cuBLASLt blockwise FP8 and bf16 matmul, as the dense suite measures them."""

from __future__ import annotations

from typing import Any

from ..protocol import Suite, shape_cases
from .fp8 import MAX_DIFF, fp8_case

NAME = "fp8_backward"

# (M, N, K): tokens x hidden x the weight's output width.
BACKWARD_SHAPES = (
    (4096, 7168, 2112),
    (4096, 7168, 576),
)


def cases(dg: Any, seed: int):
    return shape_cases(NAME, BACKWARD_SHAPES, lambda m, n, k: fp8_case(dg, m, n, k, suite=NAME))


SUITE = Suite(NAME, MAX_DIFF, cases)
