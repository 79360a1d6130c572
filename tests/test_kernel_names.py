"""Every JIT kernel's entry symbol is its name (family and configuration), so profilers and
deep_gemm.testing.bench_kineto tell the kernels apart."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

import deep_gemm

HAS_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")


def _symbols(cubin_path: str) -> bytes:
    with open(cubin_path, "rb") as f:
        return f.read()


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_built_kernels_export_their_names(tmp_path):
    code = (
        "import torch, deep_gemm\n"
        "ops = torch.ops.deep_gemm\n"
        "print(ops.fp8_gemm_build(4096, 7168, 2048, False, 132, 'nk'))\n"
        "print(ops.fp8_gemm_build(4096, 7168, 2048, True, 132, 'nk'))\n"
        "print(ops.m_grouped_fp8_gemm_build('masked', 1024, 4096, 7168, 4, 512, 132, 'nk'))\n"
        "print(ops.k_grouped_fp8_gemm_build(256, 512, 1024, 4, 132, 'mn', False))\n"
    )
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line.split("\t") for line in out.stdout.splitlines() if "\t" in line]
    prefixes = ("sm90_fp8_gemm_1d2d_m", "sm90_fp8_gemm_1d1d_m", "sm90_fp8_gemm_1d2d_mgm_", "sm90_fp8_gemm_1d1d_kg_")
    assert [name for name, _ in lines if name.startswith(prefixes)] == [name for name, _ in lines]
    assert {p for p in prefixes if any(name.startswith(p) for name, _ in lines)} == set(prefixes)
    for name, path in lines:
        image = _symbols(path)
        assert image[:4] == b"\x7fELF"
        assert name.encode() + b"\0" in image, f"{name} is not a symbol of its cubin"
        assert b"dg_entry" not in image


@pytest.mark.gpu
def test_profiler_and_bench_kineto_see_the_gemm_by_name():
    from deep_gemm.testing import bench_kineto
    from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

    a = per_token_cast_to_fp8(torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    d = torch.empty(256, 512, device="cuda", dtype=torch.bfloat16)

    def fn():
        deep_gemm.fp8_gemm_nt(a, b, d)

    fn()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}
    assert any(n.startswith("sm90_fp8_gemm_1d2d_") for n in names), sorted(names)
    assert not any("dg_entry" in n for n in names)
    t = bench_kineto(fn, "gemm", num_tests=5, suppress_kineto_output=True)
    assert 0 < t < 1e-2, t
    # The scale layout kernel is no GEMM: a name that matches only it reads as no GEMM time.
    assert bench_kineto(fn, "fp8_gemm_1d1d", num_tests=3, suppress_kineto_output=True) == 0
