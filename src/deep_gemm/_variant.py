"""Which distribution of deep_gemm is installed (``deep-gemm-cu12`` or ``-cu13``,
see tools/variant.py), read from its metadata; and the refusal to import when
both are: they ship the same ``deep_gemm/`` files, so one overwrote the other
and uninstalling either one removes the package while pip reports nothing wrong.

Stdlib only (torch only to word the error): it runs before the extension is loaded.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re

# Distribution name -> CUDA major (tools/variant.py's CUDA_VARIANTS).
VARIANTS = {"deep-gemm-cu12": 12, "deep-gemm-cu13": 13}


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str  # distribution name
    version: str
    cuda_major: int
    pinned_torch: str  # "X.Y" for a +torchX.Y wheel, "" for the portable one
    location: str  # the site directory holding its metadata

    def describe(self) -> str:
        torch_part = f"pinned to torch {self.pinned_torch}" if self.pinned_torch else "portable (torch >= 2.11)"
        return f"{self.name} {self.version} (CUDA {self.cuda_major}, {torch_part})"


def _pinned_torch(dist: importlib.metadata.Distribution) -> str:
    m = re.search(r"\+torch(\d+\.\d+)$", dist.version or "")
    if m:
        return m.group(1)
    for req in dist.requires or []:
        m = re.match(r"torch\s*==\s*(\d+\.\d+)\.\*", req)
        if m:
            return m.group(1)
    return ""


def installed() -> list[Variant]:
    """Every deep-gemm-cu* distribution on sys.path (one per name: the first, as pip sees it)."""
    found = []
    for name, major in VARIANTS.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        try:
            location = os.fspath(dist.locate_file(""))
        except Exception:  # pragma: no cover - exotic finders
            location = "?"
        found.append(Variant(name, dist.version, major, _pinned_torch(dist), location))
    return found


def conflict_message(variants: list[Variant], torch_cuda: str | None = None) -> str:
    """The error for two variants installed side by side (``torch_cuda``: torch.version.cuda, if known)."""
    names = " and ".join(f"{v.name} {v.version} ({v.location})" for v in variants)
    keep = "deep-gemm-cu13"
    if torch_cuda and torch_cuda.split(".")[0] == "12":
        keep = "deep-gemm-cu12"
    why = f"this torch is built for CUDA {torch_cuda}" if torch_cuda else "pick the one matching torch.version.cuda"
    return (
        f"deep_gemm: both {names} are installed. They ship the same deep_gemm package, so one overwrote the "
        f"other's files, and uninstalling either removes deep_gemm for both. Keep exactly one: "
        f"pip uninstall -y {' '.join(v.name for v in variants)} && pip install {keep} ({why})."
    )


def refuse_two_variants() -> None:
    variants = installed()
    if len(variants) > 1:
        raise ImportError(conflict_message(variants, _torch_cuda()))


def _torch_cuda() -> str | None:
    try:
        import torch
    except Exception:
        return None
    return torch.version.cuda
