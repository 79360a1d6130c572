"""The variant switch (tools/variant.py) and the build backend that applies it for
`pip install .` / `python -m build` (tools/build_backend/dg_build.py), without building:
scikit-build-core is replaced by a stand-in that records what it was asked to build."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
needs_tools = pytest.mark.skipif(not (REPO / "tools" / "build_backend" / "dg_build.py").exists(),
                                 reason="needs the source tree's tools/")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def variant():
    return _load(REPO / "tools" / "variant.py", "_test_variant")


@needs_tools
def test_variant_renders_name_dependencies_classifier_and_urls(variant):
    text = (REPO / "pyproject.toml").read_text()
    cu12 = variant.render(text, 12, (2, 12), "https://example.invalid/org/deep-gemm/")
    assert 'name = "deep-gemm-cu12"' in cu12 and '"nvidia-cuda-cccl-cu12>=12.8,<13"' in cu12
    assert '"Environment :: GPU :: NVIDIA CUDA :: 12",' in cu12 and "NVIDIA CUDA :: 13" not in cu12
    assert 'Issues = "https://example.invalid/org/deep-gemm/issues"' in cu12
    assert variant.render(cu12, 12, (2, 12), "https://example.invalid/org/deep-gemm/") == cu12  # idempotent
    back = variant.render(cu12, 13, None)
    assert 'name = "deep-gemm-cu13"' in back and '"Environment :: GPU :: NVIDIA CUDA :: 13",' in back
    assert "Issues" in back, "without --repo-url the URLs are left as they are"
    assert variant.render(text, 13, None) == text, "the committed pyproject.toml is the portable cu13 variant"


@needs_tools
def test_every_classifier_is_known(variant):
    trove = pytest.importorskip("trove_classifiers")
    import tomllib

    for major in (12, 13):
        meta = tomllib.loads(variant.render((REPO / "pyproject.toml").read_text(), major, None))
        unknown = [c for c in meta["project"]["classifiers"] if c not in trove.classifiers]
        assert not unknown, unknown


@pytest.fixture
def backend(tmp_path, monkeypatch):
    """dg_build over a copy of the tree's packaging files, with scikit-build-core stood in for."""
    tree = tmp_path / "tree"
    (tree / "tools").mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", tree / "pyproject.toml")
    shutil.copy(REPO / "tools" / "variant.py", tree / "tools" / "variant.py")
    shutil.copytree(REPO / "tools" / "build_backend", tree / "tools" / "build_backend")
    calls: list[tuple[str, Path, str]] = []

    def hook(name):
        def run(*args, **kwargs):
            text = Path("pyproject.toml").read_text()
            calls.append((name, Path.cwd(), text[text.index('name = "'):].split('"')[1]))
            return [] if name.startswith("get_requires") else f"{name}-result"
        return run

    skb = types.ModuleType("scikit_build_core.build")
    for name in ("build_wheel", "build_sdist", "prepare_metadata_for_build_wheel", "get_requires_for_build_wheel",
                 "get_requires_for_build_sdist", "build_editable", "get_requires_for_build_editable",
                 "prepare_metadata_for_build_editable"):
        setattr(skb, name, hook(name))
    monkeypatch.setitem(sys.modules, "scikit_build_core", types.ModuleType("scikit_build_core"))
    monkeypatch.setitem(sys.modules, "scikit_build_core.build", skb)
    for var in ("DG_CUDA_MAJOR", "DG_PIN_TORCH", "DG_REPO_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tree)
    mod = _load(tree / "tools" / "build_backend" / "dg_build.py", "_test_dg_build")
    return mod, tree, calls


@needs_tools
def test_backend_builds_the_requested_variant_on_a_scratch_copy(backend, monkeypatch):
    dg, tree, calls = backend
    original = (tree / "pyproject.toml").read_text()
    assert dg.build_wheel("/wheels") == "build_wheel-result"
    assert calls[-1] == ("build_wheel", tree, "deep-gemm-cu13"), "no variable set: built in place"
    monkeypatch.setenv("DG_CUDA_MAJOR", "12")
    dg.prepare_metadata_for_build_wheel("/meta")
    dg.build_sdist("/sdists")
    for name, cwd, dist in calls[-2:]:
        assert dist == "deep-gemm-cu12" and cwd != tree, (name, cwd, dist)
    assert (tree / "pyproject.toml").read_text() == original, "the source tree was modified"
    assert Path.cwd() == tree
    with pytest.raises(ValueError, match="editable"):
        dg.build_editable("/wheels")
    monkeypatch.setenv("DG_CUDA_MAJOR", "11")
    with pytest.raises(ValueError, match=r"DG_CUDA_MAJOR must be one of \[12, 13\], got '11'"):
        dg.build_wheel("/wheels")


@needs_tools
def test_backend_asks_for_the_cuda_h_wheel_and_the_pinned_torch(backend, monkeypatch):
    dg, tree, calls = backend
    monkeypatch.setattr(dg, "_toolkit_has_cuda_h", lambda: True)
    assert dg.get_requires_for_build_wheel() == []
    monkeypatch.setattr(dg, "_toolkit_has_cuda_h", lambda: False)
    assert dg.get_requires_for_build_wheel() == ["nvidia-cuda-runtime>=13,<14"]
    monkeypatch.setenv("DG_CUDA_MAJOR", "12")
    monkeypatch.setenv("DG_PIN_TORCH", "2.12")
    assert dg.get_requires_for_build_wheel() == ["torch==2.12.*", "nvidia-cuda-runtime-cu12>=12.8,<13"]
