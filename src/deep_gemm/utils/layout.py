"""Scale-factor layout helpers, re-exported lazily from the compiled ops.

These functions are C++ ops (``torch.ops.deep_gemm.*``) exposed through the
``deep_gemm._C`` facade. They are looked up only when first used, so that
``import deep_gemm.utils`` works without the compiled extension (and without a
GPU); using one of them without the extension raises ImportError naming it.
"""

import importlib
from typing import Any

LAZY_NAMES = (
    "get_tma_aligned_size",
    "get_mn_major_tma_aligned_tensor",
    "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
    "transform_sf_into_required_layout",
    "get_mk_alignment_for_contiguous_layout",
    "set_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout",
    "get_k_alignment_for_contiguous_layout",
)

# Upstream names that are aliases of another op when the facade lacks them.
_ALIASES = {
    "get_m_alignment_for_contiguous_layout": "get_mk_alignment_for_contiguous_layout",
    "get_k_alignment_for_contiguous_layout": "get_mk_alignment_for_contiguous_layout",
}


def _load_facade():
    try:
        return importlib.import_module("deep_gemm._C")
    except ImportError as exc:
        raise ImportError(
            f"deep_gemm.utils layout helpers need the compiled extension (deep_gemm._C could not be imported: {exc})"
        ) from exc


def resolve(name: str) -> Any:
    """Return the facade's function ``name`` (one of LAZY_NAMES)."""
    if name not in LAZY_NAMES:
        raise AttributeError(f"module 'deep_gemm.utils' has no attribute {name!r}")
    facade = _load_facade()
    for candidate in (name, _ALIASES.get(name)):
        if candidate is not None and hasattr(facade, candidate):
            return getattr(facade, candidate)
    raise AttributeError(f"deep_gemm._C does not provide {name!r} (yet)")


def __getattr__(name: str) -> Any:
    if name in LAZY_NAMES:
        return resolve(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(LAZY_NAMES))
