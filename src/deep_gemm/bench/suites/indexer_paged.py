"""The paged (decode) half of the ``indexer`` suite: ``fp8_paged_mqa_logits`` (the V3.2
indexer's decode step) on B sequences of one context length each, next_n query tokens per
sequence, H = 64, D = 128, 64-token pages in a shuffled block table, against a torch
implementation of the same op (gather the pages, dequantize to bf16, one batched matmul,
relu, weighted head sum) timed as the peer. ``cases(dg, seed)`` yields the rows; the
``indexer`` suite gathers them with the prefill rows.

The records carry the KV bytes read (``kv_bytes`` = B * context * (D + 4)) and the rate
(``kv_tb_s``, filled by :func:`kv_rate`): decode at next_n = 1 is bound by reading the
cache once, at most the run's ``copy_tb_s`` (~4.3 TB/s on the H200). The floor ``read_kv`` (a torch sum over the cache's bytes,
timed beside ours) is that read under the same protocol, the flush's write-back included."""

from __future__ import annotations

from typing import Any

import torch

from ..protocol import Case, Peer, get_op, row_meta

NAME = "indexer"
MAX_DIFF = 1e-3
PEER_TORCH = "torch_paged"
HEADS, HEAD_DIM, BLOCK_KV = 64, 128, 64

# (B, next_n, context): B in {1, 32, 64, 128}, next_n 1, 2 and 4, contexts 8192 to 65536.
PAGED_SHAPES = [(1, 1, 65536), (32, 1, 32768), (64, 1, 32768), (64, 2, 32768), (64, 4, 32768), (128, 1, 8192),
                (128, 1, 65536), (128, 2, 16384), (128, 4, 8192), (32, 4, 65536), (64, 1, 8192), (1, 4, 32768)]


def kv_cache_fp8(kv: torch.Tensor) -> torch.Tensor:
    """[blocks, block_kv, D] float -> the uint8 cache [blocks, block_kv, 1, D + 4]: each page's
    FP8 rows (per-token scale amax / 448), then their FP32 scales."""
    blocks, bkv, d = kv.shape
    sf = kv.abs().float().amax(-1).clamp(min=1e-4) / 448.0
    cache = torch.empty(blocks, bkv * (d + 4), dtype=torch.uint8, device=kv.device)
    cache[:, :bkv * d] = (kv / sf[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).reshape(blocks, -1)
    cache[:, bkv * d:] = sf.view(torch.uint8).reshape(blocks, -1)
    return cache.view(blocks, bkv, 1, d + 4)


def torch_paged_mqa_logits(q: torch.Tensor, cache: torch.Tensor, weights: torch.Tensor, block_table: torch.Tensor,
                           context: int, dtype: torch.dtype) -> torch.Tensor:
    """The logits [B * next_n, context] of sequences of `context` tokens each, every cell kept
    (the causal mask of next_n > 1 is applied by the caller), computed in `dtype`."""
    blocks, bkv, _, row = cache.shape
    d = row - 4
    flat = cache.view(blocks, bkv * row)
    keys = flat[:, :bkv * d].view(torch.float8_e4m3fn).view(blocks, bkv, d)
    sf = flat[:, bkv * d:].contiguous().view(torch.float32).view(blocks, bkv)
    pages = block_table[:, :context // bkv].long()
    k = keys[pages].to(dtype) * sf[pages].to(dtype)[..., None]  # [B, pages, bkv, D]
    b, n, h, _ = q.shape
    k = k.view(b, -1, d)[:, :context]
    scores = torch.bmm(q.to(dtype).view(b, n * h, d), k.transpose(1, 2)).view(b, n, h, context).relu()
    logits = (scores * weights.view(b, n, h, 1).to(dtype)).sum(2, dtype=torch.float32)
    return logits.view(b * n, context)


def paged_case(dg: Any, batch: int, next_n: int, context: int) -> Case:
    pages = context // BLOCK_KV
    kv_bytes = batch * context * (HEAD_DIM + 4)
    case = Case(meta=row_meta(NAME, "fp8_paged_mqa_logits", batch * next_n, context, HEAD_DIM, batch=batch,
                              next_n=next_n, heads=HEADS, block_kv=BLOCK_KV, kv_bytes=kv_bytes),
                flops=2.0 * batch * next_n * context * HEADS * HEAD_DIM, max_diff=MAX_DIFF)
    q = torch.randn(batch, next_n, HEADS, HEAD_DIM, device="cuda").to(torch.float8_e4m3fn)
    num_blocks = batch * pages
    cache = kv_cache_fp8(torch.randn(num_blocks, BLOCK_KV, HEAD_DIM, device="cuda", dtype=torch.bfloat16))
    table = torch.randperm(num_blocks, device="cuda", dtype=torch.int32).view(batch, pages)
    weights = torch.randn(batch * next_n, HEADS, device="cuda")
    lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    # Token t of a sequence sees j <= context - next_n + t: the other cells are compared as 0.
    cols = torch.arange(context, device="cuda")[None, :]
    seen = cols <= (context - next_n + torch.arange(batch * next_n, device="cuda") % next_n)[:, None]
    case.reference = torch_paged_mqa_logits(q, cache, weights, table, context, torch.float32).masked_fill(~seen, 0)
    case.peers = {PEER_TORCH: Peer(run=lambda: torch_paged_mqa_logits(q, cache, weights, table, context,
                                                                        torch.bfloat16).masked_fill(~seen, 0))}
    op, case.skip_reason = get_op(dg, "fp8_paged_mqa_logits")
    meta_op, reason = get_op(dg, "get_paged_mqa_logits_metadata")
    if op is not None and meta_op is not None:
        # One schedule per decode step serves every layer's logits: only the logits are timed.
        meta = meta_op(lens, BLOCK_KV, dg.get_num_sms())
        out: list[torch.Tensor] = []

        def ours() -> None:
            out[:] = [op(q, cache, weights, lens, table, meta, context)]

        case.ours, case.read_ours = ours, (lambda: out[0].masked_fill(~seen, 0))
        # Reading the cache once (a torch sum over its bytes), under the same L2 flush.
        flat = cache.view(-1).view(torch.float32)
        case.floors = {"read_kv": lambda: flat.sum()}
    elif op is not None:
        case.skip_reason = reason
    return case


def kv_rate(record: dict[str, Any]) -> None:
    """Adds ``kv_tb_s`` (KV bytes read per second, TB/s) to a timed paged record."""
    if record.get("us") and record.get("kv_bytes"):
        record["kv_tb_s"] = record["kv_bytes"] / (record["us"] * 1e-6) / 1e12


def cases(dg: Any, seed: int):
    """(label, build) per paged decode row (the ``indexer`` suite's paged half)."""
    for batch, next_n, context in PAGED_SHAPES:
        yield (f"paged B={batch} next_n={next_n} ctx={context}",
               (lambda b=batch, n=next_n, c=context: paged_case(dg, b, n, c)))
