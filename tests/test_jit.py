"""deep_jit through the ops, on the CPU (no GPU): both backends compile a real
SM90 kernel (the FP8 GEMM: wgmma, TMA, mbarrier, setmaxnreg), the disk cache is
hit without a compiler, survives concurrency, killed compilers and corruption,
and every misconfiguration is a clear error."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

import deep_gemm
from deep_gemm import _jit

HAS_NVCC = any(os.path.exists(p) for p in ("/usr/local/cuda/bin/nvcc",)) or bool(
    subprocess.run(["which", "nvcc"], capture_output=True).stdout)
HAS_NVRTC = bool(_jit.find_wheel_nvrtc()[0])
needs_nvcc = pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
needs_nvrtc = pytest.mark.skipif(not HAS_NVRTC, reason="needs the nvidia-cuda-nvrtc wheel")

GEMM = (4096, 7168, 2048, False, 132, "nk")
TINY = 'extern "C" __global__ void tiny(float* x) { x[threadIdx.x] = 2.0f * threadIdx.x; }\n'


@pytest.fixture
def jit_env(tmp_path, monkeypatch):
    """A private cache root for this test; the runtime is re-configured from the environment."""
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(tmp_path / "cache root"))  # a space on purpose
    monkeypatch.delenv("DG_JIT_USE_NVRTC", raising=False)
    _jit.configure()
    yield tmp_path
    monkeypatch.undo()
    _jit.configure()


def run_python(code: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)


def published_cubins(root: Path) -> list[Path]:
    return sorted((root / "cache").glob("*/kernel.cubin")) if (root / "cache").exists() else []


@needs_nvcc
def test_nvcc_compiles_gemm_kernel_then_hits_cache(jit_env):
    before = deep_gemm.get_jit()
    assert before.backend == "nvcc"
    name, path = torch.ops.deep_gemm.fp8_gemm_build(*GEMM).split("\t")
    assert Path(path).read_bytes()[:4] == b"\x7fELF" and " " in path
    mid = deep_gemm.get_jit()
    assert mid.compiles == before.compiles + 1
    assert torch.ops.deep_gemm.fp8_gemm_build(*GEMM).split("\t")[1] == path
    after = deep_gemm.get_jit()
    assert after.compiles == mid.compiles, "a cache hit must not start a compiler"


@needs_nvrtc
def test_nvrtc_compiles_gemm_kernel(jit_env, monkeypatch):
    monkeypatch.setenv("DG_JIT_USE_NVRTC", "1")
    _jit.configure()
    info = deep_gemm.get_jit()
    assert info.backend == "nvrtc" and "nvrtc" in info.compiler_path.lower()
    path = torch.ops.deep_gemm.fp8_gemm_build(*GEMM).split("\t")[1]
    assert Path(path).read_bytes()[:4] == b"\x7fELF"


@needs_nvcc
def test_eight_processes_compile_one_key(jit_env):
    env = {"DG_JIT_CACHE_DIR": str(jit_env / "shared")}
    code = "import torch, deep_gemm; print(torch.ops.deep_gemm.fp8_gemm_build(%d, %d, %d, %s, %d, %r).split('\\t')[1])" % GEMM
    procs = [subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    paths = {o[0].strip() for o in outs}
    assert len(paths) == 1
    cubins = published_cubins(jit_env / "shared")
    assert len(cubins) == 1 and cubins[0].read_bytes()[:4] == b"\x7fELF"


@needs_nvcc
def test_killed_compile_publishes_nothing(jit_env):
    env = {"DG_JIT_CACHE_DIR": str(jit_env / "killed")}
    code = "import torch, deep_gemm; torch.ops.deep_gemm.fp8_gemm_build(%d, %d, %d, %s, %d, %r)" % GEMM
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env}, start_new_session=True)
    # Wait until the compiler has started (its private temp dir exists), then SIGKILL the whole group.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any((jit_env / "killed").glob("tmp/*")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert published_cubins(jit_env / "killed") == []
    out = run_python(code + "; print('ok')", env)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
    assert len(published_cubins(jit_env / "killed")) == 1


@needs_nvcc
def test_corrupted_cubin_is_rebuilt(jit_env):
    path = Path(torch.ops.deep_gemm.jit_build("tiny", TINY, "tiny"))
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # truncated
    before = deep_gemm.get_jit()
    again = Path(torch.ops.deep_gemm.jit_build("tiny", TINY, "tiny"))
    after = deep_gemm.get_jit()
    assert after.repaired_entries == before.repaired_entries + 1
    assert after.compiles == before.compiles + 1
    assert again.read_bytes() == good
    again.write_bytes(b"\x7fELF" + b"\0" * (len(good) - 4))  # same size, wrong content
    torch.ops.deep_gemm.jit_build("tiny", TINY, "tiny")
    assert deep_gemm.get_jit().repaired_entries == after.repaired_entries + 1


@needs_nvcc
def test_syntax_error_reports_compiler_message_and_keeps_source(jit_env):
    with pytest.raises(RuntimeError) as err:
        torch.ops.deep_gemm.jit_build("broken_kernel", 'extern "C" __global__ void k() { this is not C++; }', "k")
    msg = str(err.value)
    assert "broken_kernel" in msg and "error" in msg.lower()
    kept = re.search(r"kept at (.+?/kernel\.cu)", msg)
    assert kept and Path(kept.group(1)).exists() and "failed" in kept.group(1), msg


def test_bad_cuda_home_is_an_error():
    out = run_python("""
        import torch, deep_gemm
        torch.ops.deep_gemm.jit_build('tiny', %r, 'tiny')
    """ % TINY, {"CUDA_HOME": "/nonexistent/cuda", "DG_JIT_NVCC_COMPILER": "", "DG_JIT_USE_NVRTC": "0"})
    assert out.returncode != 0
    assert "/nonexistent/cuda" in out.stderr and "Traceback" in out.stderr


def test_bad_nvcc_compiler_path_is_an_error():
    out = run_python("import torch, deep_gemm; torch.ops.deep_gemm.jit_build('tiny', %r, 'tiny')" % TINY,
                     {"DG_JIT_NVCC_COMPILER": "/no/such/nvcc"})
    assert out.returncode != 0 and "/no/such/nvcc" in out.stderr


def test_missing_include_root_is_an_error(jit_env):
    saved = _jit.INCLUDE_ROOT
    try:
        torch.ops.deep_gemm.jit_configure(str(jit_env / "does-not-exist"), "", [])
        with pytest.raises(RuntimeError, match="does-not-exist"):
            torch.ops.deep_gemm.jit_build("tiny", TINY, "tiny")
    finally:
        torch.ops.deep_gemm.jit_configure(saved, *_jit.find_wheel_nvrtc())


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_cache_root_is_an_error(jit_env, monkeypatch):
    root = jit_env / "ro"
    root.mkdir()
    root.chmod(0o500)
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(root))
    _jit.configure()
    with pytest.raises(RuntimeError, match=str(root)):
        torch.ops.deep_gemm.jit_build("tiny", TINY, "tiny")


def test_read_only_cache_root_is_an_error_as_root(jit_env, monkeypatch):
    # As root, permissions do not stop writes; a root below a regular file cannot be created by anyone.
    blocker = jit_env / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(blocker / "cache"))
    _jit.configure()
    with pytest.raises(RuntimeError, match=str(blocker)):
        torch.ops.deep_gemm.jit_build("tiny", TINY, "tiny")


@needs_nvcc
def test_compile_does_not_hold_the_gil(jit_env):
    done = threading.Event()
    errors = []

    def compile_kernel():
        try:
            torch.ops.deep_gemm.fp8_gemm_build(*GEMM)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        done.set()

    worker = threading.Thread(target=compile_kernel)
    t0 = time.monotonic()
    worker.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    elapsed = time.monotonic() - t0
    assert not errors, errors
    assert elapsed > 0.1, "the compile finished too fast to tell"
    # With the GIL held for the whole compile this loop could not tick at all; free, it
    # ticks up to ~1000/s (far fewer on a loaded 2-core CI machine, hence the low bar).
    assert ticks > max(5.0, elapsed * 20), (ticks, elapsed)


def test_get_jit_reports_runtime():
    info = deep_gemm.get_jit()
    assert info.backend in ("nvcc", "nvrtc")
    assert info.cache_roots and all(os.path.isabs(r) for r in info.cache_roots)
    assert os.path.isdir(os.path.join(info.include_root, "deep_gemm", "impls"))
