"""The installed package imports on a machine without GPU or CUDA toolkit and
exposes the API.md surface registered so far."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import torch

import deep_gemm
from deep_gemm._stubgen import registered_op_names

KNOB_OPS = {
    "set_num_sms", "get_num_sms", "get_device_sm_count", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl",
    "set_ignore_compile_dims", "get_ignore_compile_dims", "set_block_size_multiple_of", "get_block_size_multiple_of",
    "set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout", "get_tma_aligned_size",
}


def test_version_matches_distribution_metadata():
    dists = [d for d in ("deep-gemm-cu13", "deep-gemm-cu12") if _installed(d)]
    assert len(dists) == 1, dists
    assert importlib.metadata.version(dists[0]).split("+")[0] == deep_gemm.__version__


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def test_installed_package_is_not_the_source_tree():
    assert "site-packages" in deep_gemm.__file__ or "dist-packages" in deep_gemm.__file__, deep_gemm.__file__


def test_every_registered_op_is_reachable():
    registered = set(registered_op_names())
    assert KNOB_OPS <= registered, KNOB_OPS - registered
    for name in registered:
        assert callable(getattr(torch.ops.deep_gemm, name).default)


def test_every_facade_name_is_exported():
    for name in deep_gemm._C.__all__:
        assert callable(getattr(deep_gemm._C, name)), name
        assert getattr(deep_gemm, name) is getattr(deep_gemm._C, name), name


def test_extension_is_abi3_named_and_importable_as_a_module():
    path = os.path.join(os.path.dirname(deep_gemm.__file__), "_C_extension.abi3.so")
    assert os.path.exists(path)
    # Importing the .so as a Python module yields an empty module, not a crash.
    mod = importlib.import_module("deep_gemm._C_extension")
    assert [n for n in dir(mod) if not n.startswith("__")] == []


def test_import_works_without_cuda_toolkit_on_path():
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "cuda" not in p.lower())
    out = subprocess.run([sys.executable, "-c", "import deep_gemm; print(deep_gemm.get_tc_util())"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "100"
