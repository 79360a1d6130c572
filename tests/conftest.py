"""Shared test setup: GPU tests carry @pytest.mark.gpu and skip unless an SM90
GPU is present; `--strict-gpu` (nox -s gpu) turns such a skip into a failure."""

from __future__ import annotations

import pytest
import torch


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--strict-gpu", action="store_true", help="fail instead of skipping GPU tests")


def has_sm90_gpu() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if has_sm90_gpu():
        return
    if config.getoption("--strict-gpu"):
        raise pytest.UsageError("--strict-gpu: GPU tests requested but no SM90 GPU is visible")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs an SM90 (Hopper) GPU"))


@pytest.fixture(autouse=True)
def _restore_knobs():
    """Knobs are process-wide; put them back after each test."""
    import deep_gemm

    saved = (deep_gemm.get_tc_util(), deep_gemm.get_pdl(), deep_gemm.get_mk_alignment_for_contiguous_layout())
    yield
    deep_gemm.set_tc_util(saved[0])
    deep_gemm.set_pdl(saved[1])
    deep_gemm.set_mk_alignment_for_contiguous_layout(saved[2])
    deep_gemm.set_ignore_compile_dims(False)
    deep_gemm.set_block_size_multiple_of(1)
