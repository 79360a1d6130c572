"""_C.pyi is generated from the live schemas and facade; a stale stub fails here."""

from __future__ import annotations

from pathlib import Path

import deep_gemm
from deep_gemm import _stubgen

REPO_STUB = Path(__file__).resolve().parent.parent / "src" / "deep_gemm" / "_C.pyi"


def test_installed_stub_is_current():
    installed = Path(deep_gemm.__file__).with_name("_C.pyi")
    assert installed.read_text() == _stubgen.generate(), "stale _C.pyi in the wheel: run `nox -s stubs` and rebuild"


def test_repository_stub_is_current():
    if REPO_STUB.exists():
        assert REPO_STUB.read_text() == _stubgen.generate(), "stale src/deep_gemm/_C.pyi: run `nox -s stubs`"


def test_stub_lists_every_facade_name_and_schema():
    text = _stubgen.generate()
    for name in deep_gemm._C.__all__:
        assert f"def {name}(" in text or f"class {name}:" in text, name
    assert "deep_gemm::set_num_sms(int num_sms) -> ()" in text
