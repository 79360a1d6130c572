"""`python -m deep_gemm.doctor` and deep_gemm.check_jit() on a machine without a GPU:
a clear verdict with each problem's fix and a non-zero exit, missing JIT inputs
named before any compile, and the two-variant install refused at import."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import deep_gemm
from deep_gemm import _jit
from conftest import has_sm90_gpu

no_gpu = pytest.mark.skipif(has_sm90_gpu(), reason="checks the verdict on a machine without a GPU")
needs_nvrtc = pytest.mark.skipif(not _jit.find_wheel_nvrtc()[0], reason="needs the nvidia-cuda-nvrtc wheel")


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DG_")}
    env.update(extra)
    return env


def doctor(*args: str, env: dict, module: str = "deep_gemm.doctor") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True, timeout=300)


@no_gpu
def test_doctor_without_gpu_exits_non_zero_and_says_why(tmp_path):
    out = doctor(env=clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "cache")))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    text = out.stdout
    assert "verdict: NOT OK" in text
    assert "no NVIDIA driver" in text or "sees no" in text or "no SM90" in text, text
    # Every problem is followed by its fix, and the facts a user needs are there.
    lines = text.splitlines()
    problems = [i for i, line in enumerate(lines) if line.startswith("  - ") and i > lines.index(next(
        line for line in lines if line.startswith("problems (")))]
    assert problems and all(lines[i + 1].startswith("    fix: ") for i in problems), text
    for label in ("torch", "JIT backend", "CUDA runtime headers", "CCCL headers", "cache root", "driver", "GPU"):
        assert any(line.startswith(f"  {label} ") for line in lines), (label, text)
    # The JIT half works without a GPU: the self-test kernel compiled.
    assert "self-test compile" in text and "a tiny kernel compiled with" in text, text
    # python -m deep_gemm is the same doctor, and --json says the same thing.
    js = doctor("--json", "--no-compile", env=clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "cache")), module="deep_gemm")
    assert js.returncode == 1, js.stderr
    report = json.loads(js.stdout)
    assert report["ok"] is False and report["problems"] and all(p["fix"] for p in report["problems"])
    assert report["backend"] in ("nvcc", "nvrtc")


def test_check_jit_is_cheap_and_gives_the_same_verdict():
    before = deep_gemm.get_jit().compiles
    verdict = deep_gemm.check_jit(gpu=False)
    assert deep_gemm.get_jit().compiles == before, "check_jit compiled something"
    assert verdict.backend in ("nvcc", "nvrtc") and verdict.compiler
    assert bool(verdict) is verdict.ok
    import torch

    if torch.version.cuda is None:
        assert not verdict.ok and any("CPU build" in p.what for p in verdict.problems), verdict
        assert "cannot run here" in str(verdict)
    with pytest.raises(TypeError, match="check_jit: gpu must be a bool"):
        deep_gemm.check_jit(gpu="no")


@no_gpu
def test_check_jit_reports_the_missing_driver():
    verdict = deep_gemm.check_jit()
    assert not verdict.ok and verdict.gpus == ()
    assert any("driver" in p.what or "GPU" in p.what for p in verdict.problems), verdict.problems


@needs_nvrtc
def test_missing_cccl_is_named_before_nvrtc_runs(tmp_path):
    runtime_headers = next(d for d in _jit.find_wheel_nvrtc()[1] if os.path.isfile(os.path.join(d, "cuda_bf16.h")))
    env = clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "cache"), DG_JIT_USE_NVRTC="1",
                    DG_JIT_NVRTC_INCLUDE_DIRS=runtime_headers)  # as if nvidia-cuda-cccl were not installed
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import torch, deep_gemm
        try:
            torch.ops.deep_gemm.jit_build("k", 'extern "C" __global__ void k() {}', "k")
        except RuntimeError as e:
            print("ERROR", e)
        info = deep_gemm.get_jit()
        print("COUNTS", info.compiles, info.compile_failures)
    """)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "cuda/std/cstdint" in out.stdout and "pip install" in out.stdout and "nvidia-cuda-cccl" in out.stdout
    assert "DG_JIT_NVRTC_INCLUDE_DIRS" in out.stdout and "catastrophic" not in out.stdout, out.stdout
    assert "COUNTS 0 0" in out.stdout, "NVRTC ran before the missing headers were found"
    assert not (tmp_path / "cache" / "failed").exists()
    doc = doctor("--no-compile", env=env)
    assert doc.returncode == 1 and "no usable JIT compiler" in doc.stdout, doc.stdout
    assert "fix: pip install \"nvidia-cuda-cccl" in doc.stdout or "fix: pip install nvidia-cuda-cccl" in doc.stdout


def test_find_wheel_nvrtc_returns_the_headers_it_found(tmp_path, monkeypatch):
    (tmp_path / "cu13" / "lib").mkdir(parents=True)
    (tmp_path / "cu13" / "lib" / "libnvrtc.so.13").write_bytes(b"")
    (tmp_path / "cu13" / "include").mkdir()
    (tmp_path / "cu13" / "include" / "cuda_bf16.h").write_text("")
    monkeypatch.setattr(_jit, "_nvidia_roots", lambda: [str(tmp_path)])
    lib, dirs = _jit.find_wheel_nvrtc()
    # Without the CCCL wheel the library is still reported (the runtime then names the missing wheel).
    assert lib.endswith("libnvrtc.so.13") and dirs == [str(tmp_path / "cu13" / "include")]


def _fake_dist(site: Path, name: str, version: str = "0.1.0") -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_both_variants_installed_is_refused_at_import(tmp_path):
    _fake_dist(tmp_path, "deep-gemm-cu12")
    _fake_dist(tmp_path, "deep-gemm-cu13")
    env = clean_env(PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import deep_gemm"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "ImportError" in out.stderr, out.stderr[-2000:]
    msg = out.stderr.strip().splitlines()[-1]
    assert "deep-gemm-cu12 0.1.0" in msg and "deep-gemm-cu13 0.1.0" in msg and str(tmp_path) in msg, msg
    assert "pip uninstall -y deep-gemm-cu12 deep-gemm-cu13 && pip install deep-gemm-cu" in msg, msg
    # The doctor reports it instead of dying of it.
    doc = doctor("--no-compile", env=env)
    assert doc.returncode == 1 and "Traceback" not in doc.stderr, doc.stderr[-2000:]
    assert "both deep-gemm-cu12" in doc.stdout and "fix: pip uninstall -y deep-gemm-cu12 deep-gemm-cu13" in doc.stdout


def test_doctor_reports_a_broken_install_instead_of_crashing(tmp_path):
    pkg = tmp_path / "deep_gemm"
    shutil.copytree(os.path.dirname(deep_gemm.__file__), pkg,
                    ignore=shutil.ignore_patterns("_C_extension*.so", "__pycache__", "include"))
    env = clean_env(PYTHONPATH=str(tmp_path))
    plain = subprocess.run([sys.executable, "-c", "import deep_gemm"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode != 0 and "the compiled extension is missing" in plain.stderr
    doc = doctor("--no-compile", env=env)
    assert doc.returncode == 1 and "Traceback" not in doc.stderr, doc.stderr[-2000:]
    assert "import deep_gemm fails" in doc.stdout and "the compiled extension is missing" in doc.stdout, doc.stdout
    assert "fix: reinstall the wheel" in doc.stdout
