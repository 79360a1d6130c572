"""Runtime knobs and layout arithmetic (API.md P0): round trips, and a clear
Python exception, never a crash, for every bad value."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import deep_gemm


def test_tc_util_round_trip_and_range():
    deep_gemm.set_tc_util(75)
    assert deep_gemm.get_tc_util() == 75
    for bad in (0, -5, 101):
        with pytest.raises(RuntimeError, match=r"set_tc_util: tc_util is a percentage in \[1, 100\], got"):
            deep_gemm.set_tc_util(bad)
    assert deep_gemm.get_tc_util() == 75


def test_pdl_round_trip_and_type():
    deep_gemm.set_pdl(True)
    assert deep_gemm.get_pdl() is True
    deep_gemm.set_pdl(False)
    assert deep_gemm.get_pdl() is False
    with pytest.raises(TypeError, match="new_enable_pdl must be a bool"):
        deep_gemm.set_pdl(1)


def test_ignore_compile_dims():
    deep_gemm.set_ignore_compile_dims(True)
    assert torch.ops.deep_gemm.get_ignore_compile_dims() is True
    with pytest.raises(TypeError):
        deep_gemm.set_ignore_compile_dims("yes")


def test_block_size_multiple_of_int_or_pair():
    deep_gemm.set_block_size_multiple_of(16)
    assert torch.ops.deep_gemm.get_block_size_multiple_of() == [16, 16]
    deep_gemm.set_block_size_multiple_of((32, 8))
    assert torch.ops.deep_gemm.get_block_size_multiple_of() == [32, 8]
    with pytest.raises(RuntimeError, match=r"each multiple must be in \[1, 256\]"):
        deep_gemm.set_block_size_multiple_of((0, 8))
    with pytest.raises(ValueError, match="pair"):
        deep_gemm.set_block_size_multiple_of((1, 2, 3))
    with pytest.raises(TypeError):
        deep_gemm.set_block_size_multiple_of(2.0)


def test_mk_alignment():
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 128
    deep_gemm.set_mk_alignment_for_contiguous_layout(64)
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 64
    for bad in (-1, 0, 96, 32, 8192):
        with pytest.raises(RuntimeError, match="alignment must be a power of two"):
            deep_gemm.set_mk_alignment_for_contiguous_layout(bad)
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 64


def test_theoretical_mk_alignment():
    assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout() == 128
    assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(16) == 64
    assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(4096) == 128
    with pytest.raises(RuntimeError, match="expected_m must be non-negative"):
        deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(-1)


@pytest.mark.parametrize("x,size,expected", [(0, 4, 0), (1, 4, 4), (5, 4, 8), (8, 4, 8), (17, 1, 32), (3, 2, 8), (3, 8, 4)])
def test_tma_aligned_size(x, size, expected):
    assert deep_gemm.get_tma_aligned_size(x, size) == expected
    assert expected * size % 16 == 0


def test_tma_aligned_size_errors():
    with pytest.raises(RuntimeError, match="element_size must be 1, 2, 4 or 8"):
        deep_gemm.get_tma_aligned_size(8, 3)
    with pytest.raises(RuntimeError, match="x must be non-negative"):
        deep_gemm.get_tma_aligned_size(-8, 4)
    with pytest.raises(TypeError, match="x must be an int"):
        deep_gemm.get_tma_aligned_size(8.0, 4)


def test_num_sms_rejects_bad_values_before_asking_the_gpu():
    for bad in (0, -3):
        with pytest.raises(RuntimeError, match="num_sms must be positive"):
            deep_gemm.set_num_sms(bad)
    with pytest.raises(TypeError, match="num_sms must be an int"):
        deep_gemm.set_num_sms(True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error path")
def test_gpu_queries_without_gpu_raise_clearly():
    with pytest.raises(RuntimeError, match="CUDA driver|no CUDA device|No CUDA"):
        deep_gemm.get_num_sms()
    with pytest.raises(RuntimeError, match="CUDA driver|no CUDA device|No CUDA"):
        deep_gemm.set_num_sms(8)


@pytest.mark.gpu
def test_num_sms_on_gpu():
    total = torch.cuda.get_device_properties(0).multi_processor_count
    assert deep_gemm.get_num_sms() == total
    deep_gemm.set_num_sms(total // 2)
    try:
        assert deep_gemm.get_num_sms() == total // 2
        with pytest.raises(RuntimeError, match="at most the device's SM count"):
            deep_gemm.set_num_sms(total + 1)
    finally:
        deep_gemm.set_num_sms(total)


@pytest.mark.parametrize("old,new", [("DG_SM90_FP8_BLOCK_M", "DG_DEV_SM90_FP8_BLOCK_M"),
                                     ("DG_SM90_FP8_DYNAMIC_TILES", "DG_DEV_SM90_FP8_DYNAMIC_TILES"),
                                     ("DG_TRACE_TILES", "DG_DEV_TRACE_TILES")])
def test_developer_knobs_under_their_old_names_fail_loudly(old, new):
    """The tuning knobs carry a DG_DEV_ prefix; one set under its old name would do nothing."""

    env = dict(os.environ, **{old: "1"})
    code = ("import torch, deep_gemm\n"
            "ops = torch.ops.deep_gemm\n"
            "ops.fp8_gemm_build(128, 256, 512, False, 132, 'nk') if 'DYNAMIC' not in %r else "
            "ops.m_grouped_fp8_gemm_build('masked', 128, 256, 512, 4, 64, 132, 'nk')\n" % old)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and f"{old} is now named {new}" in out.stderr, out.stderr[-2000:]
