"""A second copy of the extension in one process (another venv's, a vendored one).

Same build: loading it is a no-op. Another build: it registers nothing, says so on
stderr in one line naming both files, and the process goes on; a deep_gemm facade whose
own copy was skipped that way raises ImportError naming both files. Each case runs in a
subprocess (a failure used to be a SIGABRT inside dlopen). "Another build" is this very
file with the 20 bytes of its GNU build-id note changed (the id the guard compares), so
the code that runs is the same and only the identity differs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import deep_gemm

SO = os.path.join(os.path.dirname(os.path.realpath(deep_gemm.__file__)), "_C_extension.abi3.so")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def _copy(tmp_path, other_build: bool) -> str:
    dst = tmp_path / ("other" if other_build else "same") / "_C_extension.abi3.so"
    dst.parent.mkdir()
    shutil.copy(SO, dst)
    if other_build:
        build_id = deep_gemm._C._extension_state()["build_id"]
        data = dst.read_bytes()
        if build_id.startswith("gnu:"):
            raw = bytes.fromhex(build_id[4:])
            assert data.count(raw) == 1, "the build-id bytes must occur once (in the note)"
            data = data.replace(raw, bytes(b ^ 0xFF for b in raw))
        else:  # no note: the id is a hash of the file
            data += b"\0"
        dst.write_bytes(data)
    return os.path.realpath(dst)


def _assert_clean_exit(out: subprocess.CompletedProcess) -> None:
    assert out.returncode == 0, f"exit status {out.returncode} (negative: a signal)\n{out.stdout}\n{out.stderr}"


def test_same_build_copy_after_import_is_a_no_op(tmp_path):
    copy = _copy(tmp_path, other_build=False)
    out = _run(f"""
        import torch, deep_gemm
        torch.ops.load_library({copy!r})
        print(torch.ops.deep_gemm._extension_info()[0])
        print(deep_gemm._C._extension_state({copy!r})["state"])
        print(deep_gemm.get_tc_util())
    """)
    _assert_clean_exit(out)
    assert out.stdout.split() == [SO, "same_build", "100"], out.stdout
    assert out.stderr == "", out.stderr


def test_same_build_copy_before_import_serves_the_facade(tmp_path):
    copy = _copy(tmp_path, other_build=False)
    out = _run(f"""
        import torch
        torch.ops.load_library({copy!r})
        import deep_gemm
        print(torch.ops.deep_gemm._extension_info()[0])
        print(deep_gemm._C._extension_state()["state"])
        print(deep_gemm.get_tc_util())
    """)
    _assert_clean_exit(out)
    assert out.stdout.split() == [copy, "same_build", "100"], out.stdout
    assert out.stderr == "", out.stderr


def test_other_build_copy_after_import_registers_nothing_and_says_so(tmp_path):
    copy = _copy(tmp_path, other_build=True)
    out = _run(f"""
        import torch, deep_gemm
        torch.ops.load_library({copy!r})
        print(torch.ops.deep_gemm._extension_info()[0])
        print(deep_gemm._C._extension_state({copy!r})["state"])
        print(deep_gemm.get_tc_util())
    """)
    _assert_clean_exit(out)
    assert out.stdout.split() == [SO, "other_build", "100"], out.stdout
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"deep_gemm: {copy} (build ") and "registers no ops" in lines[0], lines[0]
    assert f"already registered in this process by {SO} (build " in lines[0], lines[0]


def test_other_build_copy_before_import_makes_the_import_fail_clearly(tmp_path):
    copy = _copy(tmp_path, other_build=True)
    out = _run(f"""
        import torch
        torch.ops.load_library({copy!r})
        try:
            import deep_gemm
        except ImportError as exc:
            print("ImportError:", exc)
        else:
            print("imported")
    """)
    _assert_clean_exit(out)
    assert out.stdout.startswith("ImportError: deep_gemm: torch.ops.deep_gemm is already registered in this process "
                                 f"by {copy} (build "), out.stdout
    assert f"a different build than this package's {SO} (build " in out.stdout, out.stdout
    assert len(out.stderr.splitlines()) == 1 and "registers no ops" in out.stderr, out.stderr


def test_loading_the_same_file_twice_is_a_no_op():
    out = _run(f"""
        import torch, deep_gemm
        torch.ops.load_library({SO!r})
        import deep_gemm._C_extension
        print(deep_gemm._C._extension_state()["state"], torch.ops.deep_gemm._extension_info()[0])
    """)
    _assert_clean_exit(out)
    assert out.stdout.split() == ["registered", SO], out.stdout


def test_state_of_the_registering_copy():
    state = deep_gemm._C._extension_state()
    assert state["state"] == "registered" and state["path"] == SO
    assert tuple(deep_gemm._C._ops._extension_info()) == (SO, state["build_id"])
