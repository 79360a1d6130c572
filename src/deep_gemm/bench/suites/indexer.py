"""The indexer suite: the V3.2 indexer's prefill MQA logits (here) and its paged decode
(``indexer_paged``). Prefill: the MQA logits (``fp8_mqa_logits``, clean logits)
at H = 64, D = 128 with causal-like windows (query i sees keys [0, S_kv - S + i), as upstream's bench) and with the
context-parallel windows of upstream's bench (two chunks of a rank's queries, each ending at
its own offset), against a torch implementation of the same function in the same run.

FLOPs count 2 * H * D per (query, key) pair inside a window. The peer computes the scores of
8 heads at a time with one FP8 cuBLASLt GEMM (``torch._scaled_mm``, FP32 out), then relu, the
key scales, the weights and the head sum in torch; the reference does the same from FP32
upcasts with FP32 matmuls. Outside the windows both compare as 0 (ours writes -inf there)."""

from __future__ import annotations

from typing import Any

import torch

from ..protocol import Case, Peer, Suite, get_op, row_meta
from . import indexer_paged

NAME = "indexer"
MAX_DIFF = 1e-5
PEER_TORCH = "torch_reference"
HEADS, HEAD_DIM = 64, 128
_HEAD_CHUNK = 8

# (S, S_kv, windows): "causal" or "cp" (upstream's context-parallel windows).
SETS = (
    (2048, 4096, "causal"),
    (2048, 32768, "causal"),
    (4096, 16384, "causal"),
    (4096, 16384, "cp"),
    (4096, 32768, "causal"),
    (4096, 65536, "causal"),
)


def windows(seq_len: int, seq_len_kv: int, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    ks = torch.zeros(seq_len, dtype=torch.int32, device="cuda")
    if kind == "causal":
        ke = torch.arange(seq_len, dtype=torch.int32, device="cuda") + (seq_len_kv - seq_len)
        return ks, ke
    # Context parallelism: the first half of the queries are chunk `rank` of 2 * cp chunks,
    # the second half chunk 2 * cp - 1 - rank (upstream's bench takes rank = cp // 3).
    chunk, cp = seq_len // 2, seq_len_kv // seq_len
    rank = cp // 3
    i = torch.arange(chunk, dtype=torch.int32, device="cuda")
    ke = torch.cat([rank * chunk + i, (2 * cp - 1 - rank) * chunk + i])
    return ks, ke


def torch_logits(q: torch.Tensor, kv: torch.Tensor, sf: torch.Tensor, w: torch.Tensor, inside: torch.Tensor,
                 fp8: bool) -> torch.Tensor:
    """sum_h relu(q . kv * sf) * w, 0 outside the windows, _HEAD_CHUNK heads per matmul."""
    s, h, d = q.shape
    out = torch.zeros(s, kv.shape[0], device=q.device)
    one = torch.ones((), device=q.device)
    kv_t = kv.t() if fp8 else kv.float().t()
    for h0 in range(0, h, _HEAD_CHUNK):
        qh = q[:, h0:h0 + _HEAD_CHUNK].reshape(-1, d)
        if fp8:
            score = torch._scaled_mm(qh, kv_t, scale_a=one, scale_b=one, out_dtype=torch.float32)
        else:
            score = qh.float() @ kv_t
        score = (score * sf[None, :]).relu_().view(s, -1, kv.shape[0])
        out += (score * w[:, h0:h0 + _HEAD_CHUNK, None]).sum(1)
        del score
    return out.masked_fill_(~inside, 0)


def indexer_case(dg: Any, seq_len: int, seq_len_kv: int, kind: str) -> Case:
    q = torch.randn(seq_len, HEADS, HEAD_DIM, device="cuda").to(torch.float8_e4m3fn)
    kv = torch.randn(seq_len_kv, HEAD_DIM, device="cuda")
    sf = kv.abs().amax(1).clamp(min=1e-4) / 448.0
    kv = (kv / sf[:, None]).to(torch.float8_e4m3fn)
    w = torch.randn(seq_len, HEADS, device="cuda")
    ks, ke = windows(seq_len, seq_len_kv, kind)
    cols = torch.arange(seq_len_kv, device="cuda")[None, :]
    inside = (cols >= ks[:, None]) & (cols < ke[:, None])
    pairs = int(inside.sum())
    case = Case(meta=row_meta(NAME, "fp8_mqa_logits", seq_len, seq_len_kv, HEAD_DIM, heads=HEADS, windows=kind,
                              pairs=pairs),
                flops=2.0 * pairs * HEADS * HEAD_DIM, max_diff=MAX_DIFF)
    with torch.no_grad():
        case.reference = torch_logits(q, kv, sf, w, inside, fp8=False)
    case.peers = {PEER_TORCH: Peer(run=lambda: torch_logits(q, kv, sf, w, inside, fp8=True))}
    op, case.skip_reason = get_op(dg, "fp8_mqa_logits")
    if op is not None:
        holder: dict[str, torch.Tensor] = {}

        def ours() -> None:
            holder["out"] = op(q, (kv, sf), w, ks, ke)

        case.ours = ours
        case.read_ours = lambda: holder["out"].masked_fill(~inside, 0)
    return case


def cases(dg: Any, seed: int):
    for s, skv, kind in SETS:
        yield f"{NAME} S={s} S_kv={skv} {kind}", (lambda s=s, skv=skv, kind=kind: indexer_case(dg, s, skv, kind))
    # The decode half: paged MQA logits (indexer_paged.py).
    yield from indexer_paged.cases(dg, seed)


SUITE = Suite(NAME, MAX_DIFF, cases)
