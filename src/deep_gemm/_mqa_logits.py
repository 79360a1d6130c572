"""The V3.2 indexer's dense (prefill) MQA logits on SM90 (API.md: ``fp8_mqa_logits``,
``fp8_fp4_mqa_logits``): the facade over ``torch.ops.deep_gemm.fp8_mqa_logits``.

``logits[i, j] = sum_h relu(q[i, h] . kv[j] * kv_sf[j]) * weights[i, h]`` for ``j`` in
``[cu_seq_len_k_start[i], cu_seq_len_k_end[i])`` (clamped to ``[0, S_kv]``). The result is
upstream's layout: a view of a buffer whose rows are padded to a 1024-byte aligned pitch
(``S_kv + 256`` columns or ``max_seqlen_k`` rounded up to 256, then to 1024 bytes) and whose row
count is rounded up to ``128 // H``, so callers that slice or re-view it as upstream's see the
same strides. The KV scales are per key; a negative scale is handled exactly (slower path).
"""

from __future__ import annotations

from typing import Any

import torch

from . import _args
from ._sm100 import check_not_fp4

_op = torch.ops.deep_gemm.fp8_mqa_logits.default
_BLOCK_KV = 256  # upstream's SM90 block_kv: the row padding past S_kv
_LOGITS_DTYPES = (torch.float32, torch.bfloat16)


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _logits_buffer(fn: str, q: torch.Tensor, seq_len_kv: int, max_seqlen_k: int, dtype: torch.dtype) -> torch.Tensor:
    seq_len, heads = q.shape[0], q.shape[1]
    block_q = 128 // heads if 0 < heads <= 128 else 1
    per_1k = 1024 // torch.empty((), dtype=dtype).element_size()
    cols = max_seqlen_k if max_seqlen_k > 0 else seq_len_kv
    pitch = _align(_align(max_seqlen_k, _BLOCK_KV), per_1k) if max_seqlen_k > 0 else _align(seq_len_kv + _BLOCK_KV, per_1k)
    buf = torch.empty((_align(seq_len, block_q), pitch), dtype=dtype, device=q.device)
    return buf[:seq_len, :cols]


def _mqa_logits(fn: str, q: Any, kv: Any, weights: Any, cu_seq_len_k_start: Any, cu_seq_len_k_end: Any,
                clean_logits: Any, max_seqlen_k: Any, logits_dtype: Any) -> torch.Tensor:
    # q: a tensor, or upstream's (q, q_sf) pair whose q_sf (MX scales) only SM100 takes.
    if isinstance(q, (tuple, list)):
        if len(q) != 2:
            raise TypeError(f"deep_gemm.{fn}: q must be a tensor or a (tensor, None) pair, got {len(q)} items")
        q, q_sf = q
        if q_sf is not None:
            raise RuntimeError(f"deep_gemm.{fn}: q scale factors (MX-format Q) require an SM100 (Blackwell) GPU; "
                               "on SM90 q is plain torch.float8_e4m3fn")
    q = _args.tensor(fn, "q", q)
    kv, kv_sf = _args.pair(fn, "kv", kv)
    weights = _args.tensor(fn, "weights", weights)
    ks = _args.tensor(fn, "cu_seq_len_k_start", cu_seq_len_k_start, "an int32 tensor")
    ke = _args.tensor(fn, "cu_seq_len_k_end", cu_seq_len_k_end, "an int32 tensor")
    clean_logits = _args.bool_(fn, "clean_logits", clean_logits)
    max_seqlen_k = _args.int_(fn, "max_seqlen_k", max_seqlen_k, min=0, max=(1 << 31) - 1)
    check_not_fp4(fn, q=q, kv=kv)
    if kv_sf.dtype == torch.int32:
        raise RuntimeError(f"deep_gemm.{fn}: int32 (packed UE8M0) kv scales require an SM100 (Blackwell) GPU; "
                           "on SM90 kv scales are torch.float32")
    if weights.dtype in (torch.float16, torch.bfloat16):
        raise RuntimeError(f"deep_gemm.{fn}: {weights.dtype} weights require an SM100 (Blackwell) GPU; on SM90 "
                           "weights are torch.float32")
    if not isinstance(logits_dtype, torch.dtype) or logits_dtype not in _LOGITS_DTYPES:
        raise ValueError(f"deep_gemm.{fn}: logits_dtype must be torch.float32 or torch.bfloat16, got {logits_dtype!r}")
    if clean_logits and max_seqlen_k > 0:
        raise ValueError(f"deep_gemm.{fn}: clean_logits must be False with max_seqlen_k > 0 (the compressed form "
                         "has no cells outside the windows to clean)")
    _args.dims(fn, "q", q, 3, "[S, H, D]")
    _args.dims(fn, "kv", kv, 2, "[S_kv, D]")
    # The TMA reads the scales from a 16-byte aligned base: a sliced view is copied (S_kv floats).
    if kv_sf.device.type == "cuda" and kv_sf.dim() == 1 and (kv_sf.data_ptr() % 16 != 0 or
                                                             (kv_sf.stride(0) != 1 and kv_sf.numel() > 1)):
        kv_sf = kv_sf.clone()
    logits = _logits_buffer(fn, q, kv.shape[0], max_seqlen_k, logits_dtype)
    _op(q, kv, kv_sf, weights, ks, ke, logits, clean_logits, max_seqlen_k)
    return logits


def fp8_mqa_logits(q: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor,
                   cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor, clean_logits: bool = True,
                   max_seqlen_k: int = 0) -> torch.Tensor:
    """MQA logits of the V3.2 indexer, FP32: ``q`` ``[S, H, D]`` float8_e4m3fn contiguous (H in
    {8, 16, 32, 64}, D in {32, 64, 128}); ``kv = (kv [S_kv, D] float8_e4m3fn, kv_sf [S_kv]
    float32)``; ``weights`` ``[S, H]`` float32; ``cu_seq_len_k_start`` / ``cu_seq_len_k_end``
    ``[S]`` int32 (the key window of each query). Returns ``[S, S_kv]`` (``clean_logits``: -inf
    outside the windows; otherwise those cells are unspecified), or with ``max_seqlen_k > 0``
    the compressed ``[S, max_seqlen_k]`` form (column ``c`` is key ``start[i] + c``; cells past
    the window unspecified; needs ``clean_logits=False``)."""
    return _mqa_logits("fp8_mqa_logits", q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                       max_seqlen_k, torch.float32)


def fp8_fp4_mqa_logits(q: Any, kv: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor,
                       cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor, clean_logits: bool = True,
                       max_seqlen_k: int = 0, logits_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """:func:`fp8_mqa_logits` with the logits in ``logits_dtype`` (torch.float32 or
    torch.bfloat16); ``q`` may also be upstream's ``(q, None)`` pair. FP4 operands (int8/uint8
    or float4 dtypes) and MX scale factors need SM100 and raise."""
    return _mqa_logits("fp8_fp4_mqa_logits", q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                       max_seqlen_k, logits_dtype)


__all__ = ["fp8_mqa_logits", "fp8_fp4_mqa_logits"]
