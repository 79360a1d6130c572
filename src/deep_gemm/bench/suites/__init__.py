"""The registry of suites: each is one module here that defines ``SUITE``
(:class:`~deep_gemm.bench.protocol.Suite`); listing it in ``REGISTRY`` below makes it a
``--suite`` choice, part of ``--suite all`` (in this order) and of the JSON summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

from ..protocol import LaunchTimer, describe_error, measure_case, short_status
from . import bf16, bf16_grouped, einsum, fp8, fp8_backward, grouped, hc, indexer

REGISTRY = {suite.name: suite for suite in (fp8.SUITE, fp8_backward.SUITE, grouped.SUITE, bf16.SUITE,
                                             bf16_grouped.SUITE, einsum.SUITE, indexer.SUITE, hc.SUITE)}

SUITES = tuple(REGISTRY)  # the --suite choices, in the order of --suite all
# Each suite's calc_diff threshold.
MAX_DIFF = {name: suite.max_diff for name, suite in REGISTRY.items()}


def suite_cases(dg: Any, suite: str, seed: int):
    """Yield (builder description, zero-argument case builder) for one suite."""
    if suite not in REGISTRY:
        raise ValueError(f"unknown suite {suite!r}")
    yield from REGISTRY[suite].cases(dg, seed)


def run_suite(
    dg: Any,
    suite: str,
    timer: LaunchTimer,
    seed: int,
    with_peers: bool,
    log: Callable[[str], None],
    interleaved: bool = True,
    only: re.Pattern[str] | None = None,
) -> list[dict[str, Any]]:
    """Measure each row of ``suite`` (those whose label ``only`` matches, when given)."""
    records = []
    for label, build in suite_cases(dg, suite, seed):
        if only is not None and not only.search(label):
            continue
        torch.manual_seed(seed)
        try:
            case = build()
        except Exception as exc:  # noqa: BLE001  (recorded in the results)
            records.append(
                {
                    "suite": suite,
                    "label": label,
                    "status": "error",
                    "peers": {},
                    "us": None,
                    "tflops": None,
                    "diff": None,
                    "reason": f"building inputs failed: {describe_error(exc)}",
                }
            )
            continue
        records.append(measure_case(case, timer, with_peers, interleaved))
        log(f"{label}: {short_status(records[-1])}")
        del case
        torch.cuda.empty_cache()
    return records
