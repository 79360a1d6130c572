"""The PEP 517 backend of this tree: scikit-build-core, with the distribution
variant (tools/variant.py) picked from the environment for every frontend:

    DG_CUDA_MAJOR=12 pip install .              -> deep-gemm-cu12
    DG_CUDA_MAJOR=13 DG_PIN_TORCH=2.12 python -m build   -> deep-gemm-cu13 0.1.0+torch2.12
    DG_REPO_URL=https://host/org/repo ...       -> the project URLs

A distribution's name cannot be dynamic metadata (PEP 621), so when the
variables ask for another variant than pyproject.toml holds, each hook runs on
a scratch copy of the tree with the rewritten pyproject.toml: the source tree is
never modified, and an sdist built so carries its variant.

Build requirements added here: torch==X.Y.* for a pinned build, and the
variant's nvidia-cuda-runtime wheel when no CUDA toolkit provides cuda.h (the
extension uses its declarations only; CMakeLists finds it in that wheel).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import scikit_build_core.build as _skb

_IGNORE = shutil.ignore_patterns(".git", ".nox", ".ci-venv", "dist", "build", "__pycache__", "*.egg-info", "wheelhouse")


def _variant_module():
    path = Path(__file__).resolve().parent.parent / "variant.py"
    spec = importlib.util.spec_from_file_location("_dg_variant", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _requested() -> tuple[int, tuple[int, int] | None, str | None] | None:
    """(CUDA major, pinned torch, repository URL) from DG_CUDA_MAJOR / DG_PIN_TORCH / DG_REPO_URL,
    or None when none is set."""
    major, pin, url = (os.environ.get(v, "") for v in ("DG_CUDA_MAJOR", "DG_PIN_TORCH", "DG_REPO_URL"))
    if not major and not pin and not url:
        return None
    variant = _variant_module()
    if major and (not major.isdigit() or int(major) not in variant.CUDA_VARIANTS):
        raise ValueError(f"DG_CUDA_MAJOR must be one of {sorted(variant.CUDA_VARIANTS)}, got {major!r}")
    return int(major or _current_major()), variant.parse_torch(pin) if pin else None, url or None


def _current_major() -> int:
    text = Path("pyproject.toml").read_text()
    for major, (name, _) in _variant_module().CUDA_VARIANTS.items():
        if f'name = "{name}"' in text:
            return major
    return 13


def _rendered() -> tuple[str, str]:
    """(pyproject.toml as it is, as the environment asks for it)."""
    text = Path("pyproject.toml").read_text()
    wanted = _requested()
    return text, _variant_module().render(text, *wanted) if wanted else text


@contextlib.contextmanager
def _variant_tree():
    """The directory to build in: this one, or a scratch copy rewritten for the requested variant."""
    text, rendered = _rendered()
    if rendered == text:
        yield
        return
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="dg-variant-") as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(here, copy, ignore=_IGNORE, symlinks=True)
        (copy / "pyproject.toml").write_text(rendered)
        os.chdir(copy)
        try:
            yield
        finally:
            os.chdir(here)


def _toolkit_has_cuda_h() -> bool:
    roots = [os.environ.get(v, "") for v in ("CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT")] + ["/usr/local/cuda"]
    subs = ["include", "targets/x86_64-linux/include", "targets/sbsa-linux/include"]
    return any(r and os.path.isfile(os.path.join(r, s, "cuda.h")) for r in roots for s in subs)


def _extra_requires() -> list[str]:
    wanted = _requested()
    major, pin, _ = wanted if wanted else (_current_major(), None, None)
    extra = [f"torch=={pin[0]}.{pin[1]}.*"] if pin else []
    if not _toolkit_has_cuda_h():
        extra += [d for d in _variant_module().CUDA_VARIANTS[major][1] if d.startswith("nvidia-cuda-runtime")]
    return extra


def get_requires_for_build_wheel(config_settings=None):
    with _variant_tree():
        return [*_skb.get_requires_for_build_wheel(config_settings), *_extra_requires()]


def get_requires_for_build_sdist(config_settings=None):
    with _variant_tree():
        return list(_skb.get_requires_for_build_sdist(config_settings))


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    with _variant_tree():
        return _skb.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with _variant_tree():
        return _skb.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    with _variant_tree():
        return _skb.build_sdist(sdist_directory, config_settings)


def _no_variant_for_editable():
    text, rendered = _rendered()
    if rendered != text:
        raise ValueError("an editable install builds from this tree itself: run `python tools/variant.py --cuda N "
                         "[--pin-torch X.Y]` first instead of setting DG_CUDA_MAJOR / DG_PIN_TORCH")


def get_requires_for_build_editable(config_settings=None):
    _no_variant_for_editable()
    return [*_skb.get_requires_for_build_editable(config_settings), *_extra_requires()]


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    _no_variant_for_editable()
    return _skb.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _no_variant_for_editable()
    return _skb.build_editable(wheel_directory, config_settings, metadata_directory)
