"""Python side of the JIT runtime: hands deep_jit what only Python can find
cheaply (the wheel's include root, NVRTC and CUDA headers from the nvidia-*
wheels) and builds :func:`get_jit`'s report from plain ops."""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import os

import torch

INCLUDE_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")

# Where the nvidia-* wheels put NVRTC and the CUDA headers, per CUDA major,
# relative to site-packages/nvidia: (library glob, ((include dir, marker), ...)).
# A dir counts only where its marker exists: several wheels share cu13/include.
_WHEEL_LAYOUTS = (
    ("cu13/lib/libnvrtc.so.13*", (("cu13/include", "cuda_bf16.h"), ("cu13/include/cccl", "cuda/std"))),
    ("cuda_nvrtc/lib/libnvrtc.so.12*", (("cuda_runtime/include", "cuda_bf16.h"), ("cuda_cccl/include", "cuda/std"))),
)


def _nvidia_roots() -> list[str]:
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _find_lib(roots: list[str], pattern: str) -> str:
    for root in roots:
        hits = sorted(p for p in glob.glob(os.path.join(root, pattern)) if "builtins" not in p)
        if hits:
            return hits[0]
    return ""


def _find_dir(roots: list[str], rel: str, marker: str) -> str:
    for root in roots:
        path = os.path.join(root, rel)
        if os.path.exists(os.path.join(path, marker)):
            return path
    return ""


def find_wheel_nvrtc() -> tuple[str, list[str]]:
    """(libnvrtc path, header dirs) from the nvidia-* wheels, or ("", []).

    ``nvidia`` is a namespace package: NVRTC and the header wheels may sit in
    different site-packages directories, so each piece is looked up on its own.
    The header dirs found are returned even when one is missing (no CCCL wheel):
    the runtime then names the missing wheel before compiling, instead of NVRTC
    failing on ``cuda/std/cstdint``.
    """
    roots = _nvidia_roots()
    for lib_glob, include_dirs in _WHEEL_LAYOUTS:
        lib = _find_lib(roots, lib_glob)
        if lib:
            return lib, [d for d in (_find_dir(roots, rel, marker) for rel, marker in include_dirs) if d]
    return "", []


def configure(backend: str = "") -> None:
    """(Re)configures the runtime from the environment; ``backend`` "nvcc" or
    "nvrtc" overrides the automatic choice (warmup compiles for the runtime's)."""
    nvrtc_library, nvrtc_include_dirs = find_wheel_nvrtc()
    torch.ops.deep_gemm.jit_configure(INCLUDE_ROOT, nvrtc_library, nvrtc_include_dirs, backend)


@dataclasses.dataclass(frozen=True)
class JitInfo:
    """What the JIT runtime is doing in this process."""

    cache_roots: list[str]
    backend: str
    compiler_path: str
    compiler_version: str  # "unavailable: <why and the fix>" when no compiler can be used
    include_root: str
    loaded_kernels: list[str]
    num_loaded_kernels: int
    compiles: int
    compile_failures: int
    disk_cache_hits: int
    repaired_entries: int
    selection: str = ""  # why this backend, and where its compiler was found
    system_include_dirs: list[str] = dataclasses.field(default_factory=list)  # NVRTC's header dirs


def get_jit() -> JitInfo:
    roots, backend, path, version, names, counters, selection, system_dirs = torch.ops.deep_gemm.jit_info()
    loaded, compiles, failures, hits, repaired = counters
    return JitInfo(list(roots), backend, path, version, INCLUDE_ROOT, list(names), loaded, compiles, failures, hits,
                   repaired, selection, list(system_dirs))
