"""Warm-cache deploys, on the CPU: the cache key does not depend on where deep_gemm
or the compiler is installed, entries are readable by other users whatever the
umask, a read-only cache hits without writing, DG_JIT_RECORD + warmup
--from-record compile exactly the kernels a process used, and a cache warmed
with the other backend is reported instead of silently recompiled."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch

from deep_gemm import _jit

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")
needs_nvrtc = pytest.mark.skipif(not _jit.find_wheel_nvrtc()[0], reason="needs the nvidia-cuda-nvrtc wheel")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files away and drop capabilities")

# A kernel that reaches deep_gemm's headers (so their content and names are in the key).
KERNEL = textwrap.dedent("""\
    #include <deep_gemm/common/utils.cuh>
    extern "C" __global__ void k%d(uint32_t* x) { x[threadIdx.x] = deep_gemm::ceil_div(threadIdx.x, %du); }
    """)


def kernel(i: int) -> tuple[str, str, str]:
    return f"deploy_k{i}", KERNEL % (i, i + 1), f"k{i}"


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DG_")}
    env.update(extra)
    return env


def run_python(code: str, env: dict, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


BUILD = """
    import json, sys, torch, deep_gemm
    from deep_gemm import _jit
    paths = [torch.ops.deep_gemm.jit_build(n, c, e) for n, c, e in json.loads(sys.argv[1])]
    info = deep_gemm.get_jit()
    print(json.dumps({"paths": paths, "compiles": info.compiles, "hits": info.disk_cache_hits,
                      "backend": info.backend}))
"""


def build(kernels: list, env: dict, *, expect_ok: bool = True, **kw):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(BUILD), json.dumps(kernels)], env=env,
                         capture_output=True, text=True, timeout=300, **kw)
    if not expect_ok:
        return out
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.fixture
def public_tmp():
    """A scratch directory another user can traverse (pytest's tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix="dg-deploy-", dir="/tmp")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def reconfigure(monkeypatch):
    """Tests that re-configure the in-process runtime get it back as it was."""
    yield monkeypatch
    monkeypatch.undo()
    _jit.configure()


# ---------------------------------------------------------------- the key


@needs_nvcc
def test_two_install_paths_with_identical_headers_share_the_key(tmp_path, reconfigure):
    a, b = tmp_path / "venv-a" / "include", tmp_path / "second venv" / "include"
    shutil.copytree(_jit.INCLUDE_ROOT, a)
    shutil.copytree(_jit.INCLUDE_ROOT, b)
    reconfigure.setenv("DG_JIT_CACHE_DIR", str(tmp_path / "cache"))
    reconfigure.delenv("DG_JIT_USE_NVRTC", raising=False)
    lib, dirs = _jit.find_wheel_nvrtc()
    torch.ops.deep_gemm.jit_configure(str(a), lib, dirs)
    first = torch.ops.deep_gemm.jit_build(*kernel(0))
    compiles = _jit.get_jit().compiles
    torch.ops.deep_gemm.jit_configure(str(b), lib, dirs)
    assert torch.ops.deep_gemm.jit_build(*kernel(0)) == first
    assert _jit.get_jit().compiles == compiles, "a second install path with identical headers recompiled"
    # ... but what the headers say is in the key: an edited header is another kernel.
    utils = b / "deep_gemm" / "common" / "utils.cuh"
    utils.write_text(utils.read_text() + "\n// edited\n")
    assert torch.ops.deep_gemm.jit_build(*kernel(0)) != first
    assert _jit.get_jit().compiles == compiles + 1


def _toolkit_bin() -> str:
    """The folder of the real nvcc binary (nvcc on PATH may be a wrapper script or a link)."""
    out = subprocess.run([NVCC, "--dryrun", "-cubin", "x.cu"], capture_output=True, text=True).stderr
    m = re.search(r"^#\$ _HERE_=(.+)$", out, re.M)
    return m.group(1).strip() if m else os.path.dirname(os.path.realpath(NVCC))


@needs_nvcc
def test_nvcc_spelling_and_symlinks_do_not_change_the_key(tmp_path, reconfigure):
    real_bin = _toolkit_bin()
    toolkit_link = tmp_path / "cuda"  # like /usr/local/cuda -> /usr/local/cuda-13.0
    toolkit_link.symlink_to(os.path.dirname(real_bin))
    nvcc_link = tmp_path / "bin" / "nvcc"  # like /usr/bin/nvcc -> .../bin/nvcc
    nvcc_link.parent.mkdir()
    nvcc_link.symlink_to(os.path.join(real_bin, "nvcc"))
    reconfigure.setenv("DG_JIT_CACHE_DIR", str(tmp_path / "cache"))
    reconfigure.delenv("DG_JIT_USE_NVRTC", raising=False)
    paths = set()
    for spelling in (os.path.join(real_bin, "nvcc"), str(toolkit_link / "bin" / "nvcc"), str(nvcc_link), NVCC):
        reconfigure.setenv("DG_JIT_NVCC_COMPILER", spelling)
        _jit.configure()
        info = _jit.get_jit()
        assert info.backend == "nvcc"
        if os.path.islink(spelling) or toolkit_link.name in spelling:
            assert info.compiler_path == os.path.realpath(spelling), "nvcc is not run through its real path"
        paths.add(torch.ops.deep_gemm.jit_build(*kernel(1)))
    assert len(paths) == 1, paths


# ---------------------------------------------------------------- modes and read-only roots


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]}


@needs_nvcc
def test_entries_are_readable_by_others_under_umask_077(public_tmp):
    root = public_tmp / "new" / "cache root"
    record = public_tmp / "kernels.jsonl"
    build([kernel(2)], clean_env(DG_JIT_CACHE_DIR=str(root), DG_JIT_RECORD=str(record)),
          preexec_fn=lambda: os.umask(0o077))
    modes = _modes(root)
    entries = [p for p in modes if p.startswith("cache/") and p.count("/") == 1]
    assert entries, modes
    for path, mode in modes.items():
        want = 0o755 if (root / path).is_dir() else 0o644
        assert mode == want, f"{path} has mode {mode:o} under umask 077, want {want:o}: {modes}"
    assert stat.S_IMODE((public_tmp / "new").stat().st_mode) == 0o755  # created parents too
    assert stat.S_IMODE(record.stat().st_mode) == 0o644


OTHER_UID = 4242  # owns the warmed cache in these tests; no such user needs to exist


def _as_other_user():
    """In the child (before exec): drop the capabilities that let root ignore file modes
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER) from the bounding set, so that the
    exec'd process is bound by the modes of files it does not own, as any other user is."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _give_away(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        os.lchown(p, OTHER_UID, OTHER_UID)


def _other_user_is_bound_by_modes(public_tmp: Path) -> bool:
    probe = public_tmp / "probe"
    probe.write_text("x")
    probe.chmod(0o600)
    os.chown(probe, OTHER_UID, OTHER_UID)
    try:
        out = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}).read()"], preexec_fn=_as_other_user,
                             capture_output=True, timeout=60)
    except OSError:
        return False
    finally:
        probe.unlink()
    return out.returncode != 0 and b"PermissionError" in out.stderr


@needs_nvcc
@needs_root
def test_cache_warmed_under_umask_077_hits_read_only_as_another_user(public_tmp):
    if not _other_user_is_bound_by_modes(public_tmp):
        pytest.skip("cannot drop root's file-mode capabilities here")
    root = public_tmp / "image cache"
    first, _ = build([kernel(3)], clean_env(DG_JIT_CACHE_DIR=str(root)), preexec_fn=lambda: os.umask(0o077))
    for p in [root, *root.rglob("*")]:  # the image's cache: read-only, and another user's
        p.chmod(stat.S_IMODE(p.stat().st_mode) & 0o555)
    _give_away(root)
    before = {p: p.stat().st_mtime_ns for p in [root, *root.rglob("*")]}
    env = clean_env(DG_JIT_CACHE_DIR=str(root), HOME="/nonexistent")
    hit, _ = build([kernel(3)], env, preexec_fn=_as_other_user)
    assert hit["paths"] == first["paths"] and hit["compiles"] == 0 and hit["hits"] == 1, hit
    after = {p: p.stat().st_mtime_ns for p in [root, *root.rglob("*")]}
    assert after == before, "a hit in a read-only cache wrote to it"
    # A kernel missing from the read-only cache fails, saying how to keep it read-only.
    miss = build([kernel(4)], env, expect_ok=False, preexec_fn=_as_other_user)
    assert miss.returncode != 0 and "put a writable directory first" in miss.stderr, miss.stderr[-2000:]
    assert "DG_JIT_CACHE_DIR=/writable/dir:" in miss.stderr
    # With a writable root first: the miss goes there, the hit still comes from the image's cache.
    scratch = public_tmp / "scratch"
    scratch.mkdir()
    both, _ = build([kernel(3), kernel(4)], dict(env, DG_JIT_CACHE_DIR=f"{scratch}:{root}"), preexec_fn=_as_other_user)
    assert both["paths"][0] == first["paths"][0] and both["paths"][1].startswith(str(scratch)), both
    assert both["compiles"] == 1 and {p: p.stat().st_mtime_ns for p in [root, *root.rglob("*")]} == before


@needs_nvcc
@needs_root
def test_unreadable_entry_of_another_user_is_a_clear_error(public_tmp):
    if not _other_user_is_bound_by_modes(public_tmp):
        pytest.skip("cannot drop root's file-mode capabilities here")
    root = public_tmp / "old cache"
    first, _ = build([kernel(5)], clean_env(DG_JIT_CACHE_DIR=str(root)))
    entry = Path(first["paths"][0]).parent
    entry.chmod(0o700)  # as an older deep_gemm left it
    for sub in ("", "cache", "tmp", "locks", "failed"):
        os.chmod(root / sub, 0o777)
    _give_away(root)
    out = build([kernel(5)], clean_env(DG_JIT_CACHE_DIR=str(root), HOME="/nonexistent"), expect_ok=False,
                preexec_fn=_as_other_user)
    assert out.returncode != 0 and "cannot read it" in out.stderr and "chmod -R a+rX" in out.stderr, out.stderr[-2000:]


# ---------------------------------------------------------------- record and replay


WARMUP = [sys.executable, "-m", "deep_gemm.warmup"]


@needs_nvcc
def test_record_then_warm_from_record_compiles_exactly_those_kernels(tmp_path):
    record = tmp_path / "kernels.jsonl"
    used = [kernel(6), kernel(7), kernel(6)]
    rec_env = clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "recording cache"), DG_JIT_RECORD=str(record))
    first, _ = build(used, rec_env)
    lines = record.read_text().splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["deploy_k6", "deploy_k7"], lines
    build(used, rec_env)  # a second recording process adds nothing already recorded
    assert len(record.read_text().splitlines()) == 2
    warm = tmp_path / "image cache"
    out = subprocess.run([*WARMUP, "--from-record", str(record)], env=clean_env(DG_JIT_CACHE_DIR=str(warm)),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    progress = out.stdout.strip().splitlines()
    assert len(progress) == 2 and progress[0].startswith("[1/2]") and progress[1].startswith("[2/2]"), progress
    assert all(line.endswith("key=recorded") for line in progress), progress
    assert "compiling with nvcc" in out.stderr and "as recorded" in out.stderr, out.stderr
    assert sorted(p.name for p in (warm / "cache").iterdir()) == sorted(Path(p).parent.name for p in first["paths"][:2])
    # The serving process against the warmed cache compiles nothing.
    served, _ = build(used, clean_env(DG_JIT_CACHE_DIR=str(warm)))
    assert served["compiles"] == 0 and served["hits"] == 3, served
    again = subprocess.run([*WARMUP, "--from-record", str(record)], env=clean_env(DG_JIT_CACHE_DIR=str(warm)),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.count(" cached ") == 2, again.stdout


@needs_nvcc
def test_warm_from_record_reports_a_key_that_differs(tmp_path):
    record = tmp_path / "kernels.jsonl"
    build([kernel(8)], clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "c1"), DG_JIT_RECORD=str(record)))
    rec = json.loads(record.read_text())
    rec.update(key="0" * 64, key_compiler="0" * 64, compiler="release 12.4, V12.4.131")  # as from another toolkit
    record.write_text(json.dumps(rec) + "\n")
    out = subprocess.run([*WARMUP, "--from-record", str(record)], env=clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "c2")),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "KEY DIFFERS (compiler: recorded nvcc release 12.4, V12.4.131, here nvcc" in out.stdout, out.stdout
    assert "would compile them again" in out.stderr


@needs_nvcc
@needs_nvrtc
def test_record_keeps_the_backend_and_a_cache_of_the_other_backend_is_reported(tmp_path):
    record = tmp_path / "kernels.jsonl"
    nvrtc_env = clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "c1"), DG_JIT_RECORD=str(record), DG_JIT_USE_NVRTC="1")
    build([kernel(9)], nvrtc_env)
    assert json.loads(record.read_text())["backend"] == "nvrtc"
    warm = tmp_path / "image cache"
    out = subprocess.run([*WARMUP, "--from-record", str(record)], env=clean_env(DG_JIT_CACHE_DIR=str(warm)),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "compiling with nvrtc" in out.stderr and "key=recorded" in out.stdout, out.stderr
    # A runtime that finds nvcc misses those entries, and says so.
    served, err = build([kernel(9)], clean_env(DG_JIT_CACHE_DIR=str(warm)))
    assert served["backend"] == "nvcc" and served["compiles"] == 1
    assert "missed the JIT cache: it holds this kernel built with nvrtc" in err and "DG_JIT_USE_NVRTC=1" in err, err
    # ... and one told to use NVRTC hits them.
    hit, _ = build([kernel(9)], clean_env(DG_JIT_CACHE_DIR=str(warm), DG_JIT_USE_NVRTC="1"))
    assert hit["compiles"] == 0 and hit["hits"] == 1, hit


# ---------------------------------------------------------------- warmup's arguments


@pytest.mark.parametrize("args,words", [
    (["--num-sms", "132", "--shape", "0,4096,7168"], "must be in [1, 2^31)"),
    (["--num-sms", "132", "--shape", "128,4096"], "shape must be M,N,K"),
    (["--num-sms", "132", "--shape", "128,4096,7168:fp16"], "output kind must be bf16 or fp32"),
    (["--num-sms", "0", "--suite", "fp8"], "must be in [1, 1024]"),
    (["--num-sms", "many", "--suite", "fp8"], "must be an integer"),
    (["--shape", "128,4096,7168"], "need --num-sms"),
    (["--num-sms", "132", "--suite", "fp8", "--arch", "sm_100a"], "only sm_90a"),
    (["--from-record", "/nonexistent/kernels.jsonl"], "No such file"),
    (["--backend", "clang"], "invalid choice"),
    ([], "nothing to compile"),
])
def test_bad_warmup_arguments_are_usage_errors(args, words, capsys):
    from deep_gemm import warmup

    with pytest.raises(SystemExit) as exit_:
        warmup.main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "usage: python -m deep_gemm.warmup" in err and words in err, err


def test_a_file_that_is_not_a_record_is_a_usage_error(tmp_path, capsys):
    from deep_gemm import warmup

    bad = tmp_path / "notes.txt"
    bad.write_text('{"v": 1, "name": "x"}\n')
    with pytest.raises(SystemExit) as exit_:
        warmup.main(["--from-record", str(bad)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "line 1 is not a deep_gemm kernel record" in err, err
    bad.write_text("")
    with pytest.raises(SystemExit):
        warmup.main(["--from-record", str(bad)])
    assert "holds no kernels" in capsys.readouterr().err
