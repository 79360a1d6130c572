"""deep_gemm.testing: calc_diff, count_bytes, timing helpers and test decorators."""

import os

import pytest
import torch

from deep_gemm import testing
from deep_gemm.testing import (
    bench,
    bench_kineto,
    calc_diff,
    count_bytes,
    get_arch_major,
    ignore_env,
    suppress_stdout_stderr,
    test_filter,
)


def _cuda_or_skip():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


# ---------------------------------------------------------------------------- calc_diff


def test_calc_diff_identity_negation_and_scaling():
    x = torch.randn(64, 32)
    assert abs(float(calc_diff(x, x))) < 1e-12
    assert float(calc_diff(x, -x)) == pytest.approx(2.0, abs=1e-12)
    # y = 2x: 1 - 2*2/(1+4) = 0.2, whatever x is
    assert float(calc_diff(x, 2 * x)) == pytest.approx(0.2, abs=1e-12)


def test_calc_diff_orthogonal_is_one_and_matches_squared_error_form():
    x = torch.tensor([1.0, 0.0, 2.0, 0.0])
    y = torch.tensor([0.0, 3.0, 0.0, -1.0])
    assert float(calc_diff(x, y)) == pytest.approx(1.0)
    a, b = torch.randn(100), torch.randn(100)
    expected = ((a.double() - b.double()) ** 2).sum() / (a.double() ** 2 + b.double() ** 2).sum()
    assert float(calc_diff(a, b)) == pytest.approx(float(expected), rel=1e-12)


def test_calc_diff_is_float64_and_accepts_low_precision_inputs():
    x = torch.randn(16, 16, dtype=torch.bfloat16)
    d = calc_diff(x, x.float() * 1.001)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float64 and d.dim() == 0
    assert 0 <= float(d) < 1e-5
    assert f"{d:.3f}" == "0.000"  # usable in f-strings as upstream's tests do


def test_calc_diff_small_perturbation_scales_quadratically():
    x = torch.randn(1000, dtype=torch.float64)
    noise = torch.randn(1000, dtype=torch.float64)
    d1, d2 = float(calc_diff(x, x + 1e-3 * noise)), float(calc_diff(x, x + 2e-3 * noise))
    assert d2 / d1 == pytest.approx(4.0, rel=1e-2)


# ---------------------------------------------------------------------------- count_bytes


def test_count_bytes_sums_and_flattens():
    a = torch.empty(10, 20, dtype=torch.float8_e4m3fn)  # 200
    sfa = torch.empty(10, 2, dtype=torch.float32)  # 80
    d = torch.empty(10, 5, dtype=torch.bfloat16)  # 100
    assert count_bytes(a) == 200
    assert count_bytes(a, sfa, d) == 380
    assert count_bytes((a, sfa), None, [d, (None, sfa)]) == 460
    assert count_bytes() == 0 and count_bytes(None) == 0


def test_count_bytes_counts_views_by_their_own_size():
    x = torch.empty(100, dtype=torch.float32)
    assert count_bytes(x[:10]) == 40


def test_count_bytes_rejects_non_tensors():
    with pytest.raises(TypeError):
        count_bytes(3)


# ---------------------------------------------------------------------------- CUDA-only helpers


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("DG_USE_NVIDIA_TOOLS", raising=False)


@pytest.mark.parametrize(
    "call",
    [
        lambda: bench(lambda: None),
        lambda: bench_kineto(lambda: None, "gemm"),
        lambda: get_arch_major(),
    ],
    ids=["bench", "bench_kineto", "get_arch_major"],
)
def test_cuda_helpers_raise_clear_error_without_cuda(no_cuda, call):
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        call()


def test_bench_kineto_with_nvidia_tools_returns_ones(monkeypatch):
    monkeypatch.setenv("DG_USE_NVIDIA_TOOLS", "1")
    calls = []
    assert bench_kineto(lambda: calls.append(1), "gemm") == 1
    assert bench_kineto(lambda: calls.append(1), ("a", "b")) == (1, 1)
    assert calls == []  # profiling skipped entirely


def test_bench_kineto_rejects_list_of_names():
    with pytest.raises(TypeError):
        bench_kineto(lambda: None, ["gemm"])


# ---------------------------------------------------------------------------- decorators, suppression


def test_test_filter_runs_or_reports(capsys):
    ran = []

    @test_filter(lambda: True)
    def yes():
        ran.append("yes")
        return 7

    @test_filter(lambda: False)
    def no():
        ran.append("no")

    assert yes() == 7 and no() is None and ran == ["yes"]
    assert "Filtered by" in capsys.readouterr().out


def test_ignore_env_unsets_then_restores(monkeypatch):
    monkeypatch.setenv("DG_TEST_KNOB", "1")
    seen = []

    @ignore_env("DG_TEST_KNOB", lambda: True)
    def inside():
        seen.append(os.environ.get("DG_TEST_KNOB"))

    @ignore_env("DG_TEST_KNOB", lambda: False)
    def untouched():
        seen.append(os.environ.get("DG_TEST_KNOB"))

    inside()
    untouched()
    assert seen == [None, "1"] and os.environ["DG_TEST_KNOB"] == "1"


def test_suppress_stdout_stderr_silences_file_descriptors(capfd):
    print("before")
    with suppress_stdout_stderr():
        print("hidden-python")
        os.write(1, b"hidden-fd1\n")
        os.write(2, b"hidden-fd2\n")
    print("after")
    out, err = capfd.readouterr()
    assert "before" in out and "after" in out
    assert "hidden" not in out and "hidden" not in err


def test_public_names():
    for name in ("calc_diff", "count_bytes", "bench", "bench_kineto", "get_arch_major"):
        assert name in testing.__all__ and callable(getattr(testing, name))


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_bench_times_a_matmul():
    _cuda_or_skip()
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    small = bench(lambda: x @ x, num_warmups=2, num_tests=5)
    large = bench(lambda: [x @ x for _ in range(4)], num_warmups=2, num_tests=5)
    assert 0 < small < 1 and large > 2 * small


@pytest.mark.gpu
def test_bench_kineto_finds_named_kernels():
    _cuda_or_skip()
    x = torch.randn(1 << 24, device="cuda")
    t = bench_kineto(lambda: x.exp(), "exp_kernel", num_tests=5)
    assert 0 < t < 1
    t_exp, t_missing = bench_kineto(lambda: x.exp(), ("exp_kernel", "no_such_kernel_name"), num_tests=5, flush_l2=False)
    assert t_exp > 0 and t_missing == 0
    # two launches per call: per-kernel average vs summed time per call
    per_kernel = bench_kineto(lambda: (x.exp(), x.exp()), "exp_kernel", num_tests=5)
    per_call = bench_kineto(lambda: (x.exp(), x.exp()), "exp_kernel", num_tests=5, with_multiple_kernels=True)
    assert per_call == pytest.approx(2 * per_kernel, rel=0.5)


@pytest.mark.gpu
def test_get_arch_major_on_gpu():
    _cuda_or_skip()
    assert get_arch_major() == torch.cuda.get_device_capability()[0] >= 7
