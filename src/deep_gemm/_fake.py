"""Fake (and meta) implementations of the tensor ops, for FakeTensorMode and torch.compile.

Without them, fake mode runs the C++ kernels on meta tensors, where the device checks
are skipped: fake CPU tensors would pass where eager rejects them. Each fake impl
checks the devices as the C++ ops do (same wording: ``deep_gemm.<op>: <arg> must be a
CUDA tensor, got a tensor on the CPU``), then runs the C++ op itself on meta copies of
the operands, so that every shape, dtype and layout check stays in one place (C++).

``torch.library.register_fake`` also makes the impl the op's Meta kernel, so eager calls
on meta tensors come here too; they go straight to the C++ kernel (which checks them all,
devices included).
CUDA calls never reach this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

_NS = "deep_gemm"
# op -> its tensor arguments, in the order of the C++ device checks.
_TENSOR_OPS: dict[str, tuple[str, ...]] = {
    "fp8_gemm_nt": ("a", "sfa", "b", "sfb", "d", "c"),
    "fp8_gemm_nt_skip_head_mid": ("a", "sfa", "b", "sfb", "d"),
    "m_grouped_fp8_gemm_nt_contiguous": ("a", "sfa", "b", "sfb", "d", "grouped_layout"),
    "m_grouped_fp8_gemm_nt_masked": ("a", "sfa", "b", "sfb", "d", "masked_m"),
    "k_grouped_fp8_gemm_nt_contiguous": ("a", "sfa", "b", "sfb", "d", "ks_tensor", "c"),
    "k_grouped_fp8_gemm_tn_contiguous": ("a", "sfa", "b", "sfb", "d", "ks_tensor", "c"),
    "get_mn_major_tma_aligned_tensor": ("sf",),
    "cublaslt_gemm_nt": ("a", "b", "d", "c"),
    "bf16_gemm_nt": ("a", "b", "d", "c"),
    "bf16_bmk_bnk_mn": ("a", "b", "d", "c"),
    "cublaslt_bmm_nt": ("a", "b", "d", "c"),
    "m_grouped_bf16_gemm_nt_contiguous": ("a", "b", "d", "grouped_layout"),
    "m_grouped_bf16_gemm_nt_masked": ("a", "b", "d", "masked_m"),
    "tf32_hc_prenorm_gemm": ("a", "b", "d", "sqr_sum"),
    "get_mn_major_tma_aligned_packed_ue8m0_tensor": ("sf", "psum_layout"),
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor": ("sf", "grouped_layout"),
    "fp8_mqa_logits": ("q", "kv", "kv_sf", "weights", "cu_seq_len_k_start", "cu_seq_len_k_end", "logits"),
    "get_paged_mqa_logits_metadata": ("context_lens",),
    "fp8_paged_mqa_logits": ("q", "kv_cache", "weights", "context_lens", "block_table", "schedule_meta"),
}
# The ops that return a fresh tensor (the GEMMs write into d and return nothing).
_RETURNS_TENSOR = ("get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
                   "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor", "get_paged_mqa_logits_metadata",
                   "fp8_paged_mqa_logits")
# The C++ kernels do not depend on the dispatch key they are reached through: CPU's
# entry is the CompositeExplicitAutograd kernel (Meta's is the Python impl below).
_CPP_KEYSET = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_lib: Any = None


def check_devices(op: str, tensors: list[tuple[str, torch.Tensor]]) -> None:
    """All CUDA tensors on one device, or all meta (shape-only runs), as the C++ ops require."""
    first_name, first = tensors[0]
    first_dev = first.device
    if first_dev.type == "meta":
        for name, t in tensors:
            if t.device.type != "meta":
                raise RuntimeError(f"deep_gemm.{op}: {name} is not a meta tensor while {first_name} is")
        return
    for name, t in tensors:
        dev = t.device
        if dev.type != "cuda":
            where = "the CPU" if dev.type == "cpu" else "a non-CUDA device"
            raise RuntimeError(f"deep_gemm.{op}: {name} must be a CUDA tensor, got a tensor on {where}")
        if dev.index != first_dev.index:
            raise RuntimeError(f"deep_gemm.{op}: {name} is on cuda:{dev.index} but {first_name} is on "
                               f"cuda:{first_dev.index}")


def _meta_copy(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _make_fake(name: str, tensor_names: tuple[str, ...]) -> Callable[..., Any]:
    op = getattr(getattr(torch.ops, _NS), name).default
    arg_names = [a.name for a in op._schema.arguments]
    positions = {n: arg_names.index(n) for n in tensor_names}

    def fake(*args: Any, **kwargs: Any) -> Any:
        tensors = []
        for n in tensor_names:
            i = positions[n]
            t = args[i] if i < len(args) else kwargs.get(n)
            if t is not None:
                tensors.append((n, t))
        if not any(isinstance(t, FakeTensor) for _, t in tensors):
            # Eager meta tensors: the C++ op checks everything, devices included.
            return op.redispatch(_CPP_KEYSET, *args, **kwargs)
        check_devices(name, tensors)
        if any(isinstance(s, torch.SymInt) for _, t in tensors for s in (*t.shape, *t.stride())):
            return _fake_result(name, args, kwargs, None)  # symbolic shapes: the C++ checks need ints
        with unset_fake_temporarily():
            meta_args = [_meta_copy(v) if isinstance(v, torch.Tensor) else v for v in args]
            meta_kwargs = {k: _meta_copy(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
            out = op.redispatch(_CPP_KEYSET, *meta_args, **meta_kwargs)
        return _fake_result(name, args, kwargs, out)

    fake.__name__ = f"{name}_fake"
    fake.__qualname__ = fake.__name__
    return fake


def _arg(args: tuple, kwargs: dict, op: Any, name: str) -> Any:
    names = [a.name for a in op._schema.arguments]
    i = names.index(name)
    return args[i] if i < len(args) else kwargs.get(name, op._schema.arguments[i].default_value)


def _fake_result(name: str, args: tuple, kwargs: dict, meta_out: Any) -> Any:
    if name not in _RETURNS_TENSOR:
        return None  # the GEMMs write into d and return nothing
    sf = args[0] if args else kwargs[_TENSOR_OPS[name][0]]  # the first tensor: the result's device
    if meta_out is not None:
        return torch.empty_strided(meta_out.shape, meta_out.stride(), dtype=meta_out.dtype, device=sf.device)
    # Symbolic shapes: the layouts the C++ ops build.
    if name == "get_paged_mqa_logits_metadata":
        op = getattr(torch.ops, _NS).get_paged_mqa_logits_metadata.default
        return sf.new_empty((_arg(args, kwargs, op, "num_sms") + 1, 2), dtype=torch.int32)
    if name == "fp8_paged_mqa_logits":
        op = getattr(torch.ops, _NS).fp8_paged_mqa_logits.default
        width, bf16 = _arg(args, kwargs, op, "max_context_len"), _arg(args, kwargs, op, "bf16_logits")
        per_kb = 512 if bf16 else 256  # rows: whole 256-token splits, then whole 1024 bytes
        pitch = -(-(-(-width // 256) * 256) // per_kb) * per_kb
        out = sf.new_empty((sf.shape[0] * sf.shape[1], pitch), dtype=torch.bfloat16 if bf16 else torch.float32)
        return out[:, :width]
    if name == "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor":
        op = getattr(torch.ops, _NS).get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor.default
        ks, gran_k = _arg(args, kwargs, op, "ks_cpu"), _arg(args, kwargs, op, "gran_k")
        groups = _arg(args, kwargs, op, "grouped_layout").shape[0]
        rows = sum((-(-k // gran_k) + 3) // 4 for k in ks) if ks else (sf.shape[0] + 3 * groups) // 4
        return sf.new_empty((rows, sf.shape[1]), dtype=torch.int32)
    # [.., mn, kb] over [.., kb, align(mn, 4)] (fp32), or [.., mn, ceil(kb / 4)] over
    # [.., ceil(kb / 4), align(mn, 4)] (packed int32).
    *batch, mn, kb = sf.shape
    pad = (mn + 3) // 4 * 4
    if name == "get_mn_major_tma_aligned_tensor":
        out = sf.new_empty((*batch, kb, pad))
    else:
        out = sf.new_empty((*batch, (kb + 3) // 4, pad), dtype=torch.int32)
    return out.transpose(-1, -2)[..., :mn, :]


def register() -> None:
    """Register the fake impls (once per process; called by deep_gemm._C at import)."""
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library(_NS, "FRAGMENT")
    for name, tensor_names in _TENSOR_OPS.items():
        qualname = f"{_NS}::{name}"
        try:
            torch.library.register_fake(qualname, _make_fake(name, tensor_names), lib=_lib)
        except RuntimeError as exc:
            # Another import of this facade (a vendored copy of the package, same build:
            # see _C._load_extension) registered one already; torch versions that refuse an
            # override say so, and that impl does the same job.
            if "already has a fake impl" not in str(exc):
                raise


__all__ = ["check_devices", "register"]
