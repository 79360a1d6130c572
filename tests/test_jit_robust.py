"""deep_jit under hostile conditions, on the CPU: forking while a kernel
compiles, a damaged or hostile cache directory, a caller SIGKILLed mid-compile,
and junk values of the DG_JIT_* switches. Every case that could hang or
exhaust memory runs in a subprocess bounded by a timeout, so a regression fails
instead of hanging the suite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

NVCC = "/usr/local/cuda/bin/nvcc"
needs_nvcc = pytest.mark.skipif(not os.path.exists(NVCC), reason="needs nvcc at /usr/local/cuda/bin")

TINY = 'extern "C" __global__ void tiny(float* x) { x[threadIdx.x] = 2.0f * threadIdx.x; }\n'

# Every boolean DG_JIT_* switch deep_jit reads (runtime.hpp, env.hpp, cache.hpp).
BOOLEAN_SWITCHES = (
    "DG_JIT_USE_NVRTC", "DG_JIT_QUIET", "DG_JIT_DEBUG", "DG_JIT_PRINT_COMPILER_COMMAND", "DG_JIT_PTXAS_VERBOSE",
    "DG_JIT_PTXAS_CHECK", "DG_JIT_WITH_LINEINFO", "DG_JIT_DUMP_PTX", "DG_JIT_DUMP_SASS", "DG_JIT_DISABLE_LOCKS",
)


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DG_")}
    env.update(extra)
    return env


def run_python(code: str, env: dict, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter; a hang raises TimeoutExpired (the child is killed)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


def fake_nvcc(tmp_path: Path) -> Path:
    """An nvcc that can be slowed down: DG_TEST_SLOW_VERSION / DG_TEST_SLOW_COMPILE seconds of sleep before
    `--version` / a compile, DG_TEST_MARK touched when it starts, DG_TEST_PIDS gets its pid and its sleep's."""
    path = tmp_path / "fake nvcc"
    path.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        [ -n "$DG_TEST_MARK" ] && : > "$DG_TEST_MARK"
        if [ "$1" = "--version" ]; then
          [ -n "$DG_TEST_SLOW_VERSION" ] && sleep "$DG_TEST_SLOW_VERSION"
        elif [ -n "$DG_TEST_SLOW_COMPILE" ]; then
          sleep "$DG_TEST_SLOW_COMPILE" &
          [ -n "$DG_TEST_PIDS" ] && echo "$$ $!" > "$DG_TEST_PIDS"
          wait
        fi
        exec '{NVCC}' "$@"
        """))
    path.chmod(0o755)
    return path


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


# ---------------------------------------------------------------- fork

FORK_CHILD = """
    import glob, os, sys, threading, time
    import torch, deep_gemm
    TINY = %r
    root = os.environ["DG_JIT_CACHE_DIR"]
    mark = os.environ.get("DG_TEST_MARK", "")
    %s
    result = {}
    def parent_build():
        result["parent"] = torch.ops.deep_gemm.jit_build("forked", TINY, "tiny")
    thread = threading.Thread(target=parent_build)
    thread.start()
    deadline = time.monotonic() + 60
    while not started() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not started():
        print("the parent's build never reached the point under test"); sys.exit(4)
    time.sleep(0.3)
    pid = os.fork()
    if pid == 0:
        try:
            path = torch.ops.deep_gemm.jit_build("forked", TINY, "tiny")
            os.write(1, ("child built " + path + "\\n").encode())
            os._exit(0)
        except BaseException as e:
            os.write(1, ("child failed: %%r\\n" %% e).encode())
            os._exit(1)
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("the forked child did not finish building the kernel within 60 s (hung)"); sys.exit(3)
    thread.join()
    print("parent built", result.get("parent"))
    sys.exit(os.waitstatus_to_exitcode(status))
"""


@needs_nvcc
def test_fork_while_compiling_child_builds_same_kernel(tmp_path):
    # The parent's thread holds the key's flock (and is compiling, slowly) when the process forks; the
    # child shares that open file description, so before the fix its own flock on the key waited forever.
    started = "def started(): return bool(glob.glob(os.path.join(root, 'tmp', '*')))\n    deep_gemm.get_jit()"
    env = clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "cache"), DG_JIT_NVCC_COMPILER=str(fake_nvcc(tmp_path)),
                    DG_TEST_SLOW_COMPILE="3")
    out = run_python(FORK_CHILD % (TINY, started), env, timeout=150)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    child = [line for line in out.stdout.splitlines() if line.startswith("child built ")]
    parent = [line for line in out.stdout.splitlines() if line.startswith("parent built ")]
    assert child and parent and child[0].split(" ", 2)[2] == parent[0].split(" ", 2)[2], out.stdout
    assert Path(child[0].split(" ", 2)[2]).read_bytes()[:4] == b"\x7fELF"


@needs_nvcc
def test_fork_while_detecting_compiler_child_builds(tmp_path):
    # The parent's thread is inside compiler detection (a slow `nvcc --version`) when the process forks:
    # an in-process mutex held across that detection was held forever in the child.
    started = "def started(): return os.path.exists(mark)"
    env = clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "cache"), DG_JIT_NVCC_COMPILER=str(fake_nvcc(tmp_path)),
                    DG_TEST_SLOW_VERSION="3", DG_TEST_MARK=str(tmp_path / "version-started"))
    out = run_python(FORK_CHILD % (TINY, started), env, timeout=150)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "child built " in out.stdout and "parent built " in out.stdout, out.stdout


# ---------------------------------------------------------------- hostile cache

BUILD_AND_REPORT = """
    import json, torch, deep_gemm
    path = torch.ops.deep_gemm.jit_build("hostile", %r, "tiny")
    info = deep_gemm.get_jit()
    print(json.dumps({"path": path, "repaired": info.repaired_entries, "compiles": info.compiles}))
"""


def build_tiny(root: Path, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return run_python(BUILD_AND_REPORT % TINY, clean_env(DG_JIT_CACHE_DIR=str(root)), timeout=timeout, **kw)


def report(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def built_entry(tmp_path):
    """(cache root, entry directory, good cubin bytes) of one freshly built kernel."""
    root = tmp_path / "cache"
    first = report(build_tiny(root))
    cubin = Path(first["path"])
    return root, cubin.parent, cubin.read_bytes()


def assert_rebuilt(root: Path, entry: Path, good: bytes, out: subprocess.CompletedProcess):
    r = report(out)
    assert r["repaired"] == 1 and r["compiles"] == 1, r
    assert Path(r["path"]).parent == entry
    assert entry.is_dir() and not entry.is_symlink()
    for name in ("manifest", "kernel.cubin"):
        p = entry / name
        assert p.is_file() and not p.is_symlink(), p
    assert (entry / "kernel.cubin").read_bytes() == good


@needs_nvcc
def test_fifo_in_place_of_manifest_does_not_hang(built_entry):
    root, entry, good = built_entry
    (entry / "manifest").unlink()
    os.mkfifo(entry / "manifest")
    try:
        out = build_tiny(root, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a FIFO in place of the manifest hung the build (no result within 60 s)")
    assert_rebuilt(root, entry, good, out)


def _limit_memory():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


@needs_nvcc
def test_cubin_linked_to_dev_zero_is_not_read(built_entry):
    root, entry, good = built_entry
    (entry / "kernel.cubin").unlink()
    (entry / "kernel.cubin").symlink_to("/dev/zero")
    try:  # bounded in time and address space: before the fix this read /dev/zero until memory ran out
        out = build_tiny(root, timeout=60, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("a cubin linked to /dev/zero kept the build reading for 60 s")
    assert_rebuilt(root, entry, good, out)


@needs_nvcc
def test_manifest_linked_elsewhere_is_not_followed(built_entry, tmp_path):
    root, entry, good = built_entry
    outside = tmp_path / "outside manifest"
    (entry / "manifest").rename(outside)
    (entry / "manifest").symlink_to(outside)  # a valid manifest, but reached through a link
    assert_rebuilt(root, entry, good, build_tiny(root))
    assert outside.exists(), "repairing must not delete the target of a link"


@needs_nvcc
def test_file_in_place_of_entry_directory_is_repaired(built_entry):
    root, entry, good = built_entry
    import shutil
    shutil.rmtree(entry)
    entry.write_text("not a directory")
    assert_rebuilt(root, entry, good, build_tiny(root))
    # and it stays repaired: a further build is a plain hit
    again = report(build_tiny(root))
    assert again["compiles"] == 0 and again["repaired"] == 0, again


@needs_nvcc
def test_file_in_place_of_a_cache_subdirectory_is_repaired(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    (root / "tmp").write_text("in the way")
    (root / "locks").symlink_to("/dev/null")
    r = report(build_tiny(root))
    assert (root / "tmp").is_dir() and (root / "locks").is_dir() and not (root / "locks").is_symlink()
    assert Path(r["path"]).read_bytes()[:4] == b"\x7fELF"


@needs_nvcc
def test_lock_file_that_is_a_directory_is_replaced(tmp_path):
    root = tmp_path / "cache"
    first = report(build_tiny(root))
    entry = Path(first["path"]).parent
    lock = root / "locks" / (entry.name + ".lock")
    import shutil
    shutil.rmtree(entry)
    lock.unlink()
    lock.mkdir()
    r = report(build_tiny(root))
    assert r["compiles"] == 1 and lock.is_file()


# ---------------------------------------------------------------- killed caller

SLOW_BUILD = """
    import torch, deep_gemm
    torch.ops.deep_gemm.jit_build("reaped", %r, "tiny")
""" % TINY


@needs_nvcc
def test_compiler_of_a_killed_caller_is_reaped(tmp_path):
    root = tmp_path / "cache"
    pids_file = tmp_path / "pids"
    nvcc = fake_nvcc(tmp_path)
    env = clean_env(DG_JIT_CACHE_DIR=str(root), DG_JIT_NVCC_COMPILER=str(nvcc))
    caller = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SLOW_BUILD)],
                              env={**env, "DG_TEST_SLOW_COMPILE": "120", "DG_TEST_PIDS": str(pids_file)})
    orphans: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (pids_file.exists() and pids_file.read_text().strip()):
            time.sleep(0.05)
        orphans = [int(p) for p in pids_file.read_text().split()]
        caller.send_signal(signal.SIGKILL)  # the caller only, like the OOM killer: not its process group
        caller.wait()
        time.sleep(0.2)
        assert all(alive(p) for p in orphans), "the fake compiler should outlive its caller here"
        stale = [p.name for p in (root / "tmp").iterdir()]
        assert stale, "the killed caller's build directory should be left behind"
        # A later build in the same cache (any process) reaps both at once, not a day later.
        out = run_python(textwrap.dedent(SLOW_BUILD) + "print('built')\n", env, timeout=120)
        assert out.returncode == 0 and "built" in out.stdout, out.stderr[-3000:]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(p) for p in orphans):
            time.sleep(0.05)
        assert not any(alive(p) for p in orphans), f"the killed caller's compiler {orphans} is still running"
        left = [n for n in stale if (root / "tmp" / n).exists()]
        assert not left, f"the killed caller's build directories {left} were not removed"
    finally:
        if caller.poll() is None:
            caller.kill()
        for p in orphans:
            if alive(p):
                os.kill(p, signal.SIGKILL)


# ---------------------------------------------------------------- environment

REFUSE = """
    import json, os, torch
    results = {}
    try:
        import deep_gemm
        from deep_gemm import _jit
    except RuntimeError as e:
        print(json.dumps({"import": str(e)})); raise SystemExit(0)
    for i, (var, value) in enumerate(json.loads(os.environ["DG_TEST_CASES"])):
        os.environ[var] = value
        try:
            _jit.configure()
            torch.ops.deep_gemm.jit_build("env_case_%%d" %% i, %r, "tiny")
            results[var + "=" + value] = "accepted"
        except RuntimeError as e:
            results[var + "=" + value] = "refused: " + str(e)
        del os.environ[var]
        _jit.configure()
    print(json.dumps(results))
""" % TINY


def run_env_cases(tmp_path: Path, cases: list[tuple[str, str]]) -> dict:
    env = clean_env(DG_JIT_CACHE_DIR=str(tmp_path / "cache"), DG_TEST_CASES=json.dumps(cases))
    out = run_python(REFUSE, env, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_nvcc
def test_junk_switch_values_are_refused(tmp_path):
    results = run_env_cases(tmp_path, [(var, "maybe") for var in BOOLEAN_SWITCHES] + [("DG_JIT_QUIET", "abc")])
    for case, result in results.items():
        var, value = case.split("=", 1)
        assert result.startswith("refused: "), f"{case} was {result}"
        msg = result
        assert var in msg and f"'{value}'" in msg and "true/false" in msg and "on/off" in msg, f"{case}: {msg}"


@needs_nvcc
def test_switch_spellings_are_accepted(tmp_path):
    cases = [("DG_JIT_QUIET", v) for v in ("1", "0", "TRUE", "False", "On", "off", "YES", "no", "")]
    cases += [("DG_JIT_DEBUG", "Yes"), ("DG_JIT_DISABLE_LOCKS", "ON")]
    results = run_env_cases(tmp_path, cases)
    assert all(r == "accepted" for r in results.values()), results


@pytest.mark.parametrize("value", ["::::", ":"])
def test_cache_dir_naming_no_directory_is_refused(tmp_path, value):
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(DG_JIT_CACHE_DIR=value, HOME=str(home))
    out = run_python("import torch, deep_gemm; torch.ops.deep_gemm.jit_build('tiny', %r, 'tiny'); print('built')"
                     % TINY, env)
    assert out.returncode != 0 and "built" not in out.stdout, "a DG_JIT_CACHE_DIR naming no directory was accepted"
    assert "DG_JIT_CACHE_DIR" in out.stderr and f"'{value}'" in out.stderr, out.stderr[-2000:]
    assert not (home / ".deep_gemm").exists(), "it silently fell back to ~/.deep_gemm"
