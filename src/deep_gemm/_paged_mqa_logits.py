"""The DeepSeek V3.2 indexer's paged (decode) MQA logits on SM90 (API.md): the facade over
``torch.ops.deep_gemm.get_paged_mqa_logits_metadata`` and ``fp8_paged_mqa_logits``.

For query token ``t`` of batch ``b`` and each cached token ``j`` it may see::

    logits[b * next_n + t, j] = sum_h relu(q[b, t, h] . k_j * s_j) * weights[b * next_n + t, h]

``k_j`` / ``s_j`` are token ``j``'s FP8 row and FP32 scale, found through ``block_table``
(page ``block_table[b, j // block_kv]``, row ``j % block_kv``). Token ``t`` sees
``j < context_lens[b] - next_n + t + 1`` with 1-D ``context_lens`` (the batch's last token's
length), ``j < context_lens[b, t]`` with 2-D ones (one length per token). Other cells of the
logits are unspecified, or ``-inf`` with ``clean_logits=True``.

The schedule (:func:`get_paged_mqa_logits_metadata`) and the logits are computed on the GPU
from ``context_lens`` without the host reading it: both can be captured in one CUDA graph
and replayed with new lengths.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import _args
from ._sm100 import check_not_fp4

_ops = torch.ops.deep_gemm
_metadata_op = _ops.get_paged_mqa_logits_metadata.default
_logits_op = _ops.fp8_paged_mqa_logits.default
_LOGITS_DTYPES = (torch.float32, torch.bfloat16)


def _no_indices(fn: str, indices: Any) -> None:
    if indices is not None:
        raise RuntimeError(f"deep_gemm.{fn}: indices (the varlen layout, one entry per query token) requires an SM100 "
                           "(Blackwell) or SM120 GPU; on SM90 pass indices=None and one row per batch")


def get_paged_mqa_logits_metadata(context_lens: torch.Tensor, block_kv: int, num_sms: int,
                                  indices: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The schedule of :func:`fp8_paged_mqa_logits`: int32 ``[num_sms + 1, 2]`` on the GPU.

    ``context_lens`` int32 ``[B]`` or ``[B, next_n]`` (as passed to the logits op),
    ``block_kv`` the cache's page size (32 or 64), ``num_sms`` the CTAs the logits op runs
    (usually :func:`get_num_sms`). Row ``i`` is ``(batch, tile)``, where CTA ``i``'s work
    starts: the cached tokens of all batches, in tiles of 64, are spread evenly over the
    CTAs; row ``num_sms`` is ``(B, 0)``. ``indices`` (varlen) is SM100-only.
    """
    fn = "get_paged_mqa_logits_metadata"
    _args.tensor(fn, "context_lens", context_lens, "an int32 tensor on the GPU")
    _args.int_(fn, "block_kv", block_kv)
    _args.int_(fn, "num_sms", num_sms)
    _no_indices(fn, indices)
    return _metadata_op(context_lens, block_kv, num_sms)


def _paged(fn: str, q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any, schedule_meta: Any,
           max_context_len: Any, clean_logits: Any, logits_dtype: Any, indices: Any) -> torch.Tensor:
    if isinstance(q, (tuple, list)):
        if len(q) != 2:
            raise TypeError(f"deep_gemm.{fn}: q must be a tensor or a pair (q, q_scales), got a {type(q).__name__} "
                            f"of {len(q)} elements")
        q, q_sf = q
        if q_sf is not None:
            raise RuntimeError(f"deep_gemm.{fn}: q with scale factors (MX FP8 / FP4 q) requires an SM100 (Blackwell) "
                               "GPU; on SM90 pass (q, None) with q torch.float8_e4m3fn")
    q = _args.tensor(fn, "q", q)
    kv_cache = _args.tensor(fn, "kv_cache", kv_cache, "a uint8 tensor")
    _args.tensor(fn, "weights", weights)
    _args.tensor(fn, "context_lens", context_lens, "an int32 tensor on the GPU")
    _args.tensor(fn, "block_table", block_table, "an int32 tensor")
    _args.tensor(fn, "schedule_meta", schedule_meta, "the tensor get_paged_mqa_logits_metadata returns")
    _args.int_(fn, "max_context_len", max_context_len)
    _args.bool_(fn, "clean_logits", clean_logits)
    if not isinstance(logits_dtype, torch.dtype) or logits_dtype not in _LOGITS_DTYPES:
        raise ValueError(f"deep_gemm.{fn}: logits_dtype must be torch.float32 or torch.bfloat16, got {logits_dtype!r}")
    _no_indices(fn, indices)
    check_not_fp4(fn, q=q)
    # An FP4 cache holds D / 2 bytes per row (plus the scale): the same uint8 dtype as FP8's.
    if q.dim() == 4 and kv_cache.dim() == 4 and kv_cache.shape[3] == q.shape[3] // 2 + 4 != q.shape[3] + 4:
        raise RuntimeError(f"deep_gemm.{fn}: kv_cache rows of D / 2 + 4 bytes (FP4 keys) require an SM100 (Blackwell) "
                           "GPU; on SM90 the cache holds FP8 rows of D bytes and their FP32 scales (D + 4)")
    return _logits_op(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                      logits_dtype == torch.bfloat16)


def fp8_fp4_paged_mqa_logits(q: Any, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                             block_table: torch.Tensor, schedule_meta: torch.Tensor, max_context_len: int,
                             clean_logits: bool = False, logits_dtype: torch.dtype = torch.float32,
                             indices: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Paged MQA logits (see the module doc): returns ``[B * next_n, max_context_len]`` of
    ``logits_dtype`` (float32 or bfloat16), a view whose rows are padded to a multiple of 256
    tokens and of 1024 bytes.

    ``q`` e4m3 ``[B, next_n, H, D]`` contiguous (or the pair ``(q, None)``), next_n 1 to 4, H
    32 or 64, D 32, 64 or 128; ``kv_cache`` uint8 ``[num_blocks, block_kv, 1, D + 4]``
    (block_kv 32 or 64; each block: its block_kv FP8 rows of D bytes, then their FP32
    scales; blocks 16-byte aligned apart); ``weights`` fp32 ``[B * next_n, H]``;
    ``context_lens`` int32 ``[B]`` or ``[B, next_n]``; ``block_table`` int32 ``[B, max_blocks]``
    (an entry outside the cache reads as zero keys); ``schedule_meta`` from
    :func:`get_paged_mqa_logits_metadata` on the same ``context_lens``. FP4 or MX-scaled
    operands and ``indices`` (varlen) are SM100-only.
    """
    return _paged("fp8_fp4_paged_mqa_logits", q, kv_cache, weights, context_lens, block_table, schedule_meta,
                  max_context_len, clean_logits, logits_dtype, indices)


def fp8_paged_mqa_logits(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                         block_table: torch.Tensor, schedule_meta: torch.Tensor, max_context_len: int,
                         clean_logits: bool = False, indices: Optional[torch.Tensor] = None) -> torch.Tensor:
    """:func:`fp8_fp4_paged_mqa_logits` with FP8 ``q`` and float32 logits (upstream's older name)."""
    return _paged("fp8_paged_mqa_logits", q, kv_cache, weights, context_lens, block_table, schedule_meta,
                  max_context_len, clean_logits, torch.float32, indices)


__all__ = ["get_paged_mqa_logits_metadata", "fp8_fp4_paged_mqa_logits", "fp8_paged_mqa_logits"]
