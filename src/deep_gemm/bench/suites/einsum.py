"""The einsum suite: deep_gemm.einsum's expressions on DeepSeek's attention shapes against
torch.einsum (cuBLAS) on the same data."""

from __future__ import annotations

from typing import Any

import torch

from ..protocol import PEER_BF16, Case, Peer, Suite, get_op, nan_output, randn, row_meta

NAME = "einsum"
MAX_DIFF = 1e-4

# (expression, operand shapes, d shape, flops): bmk,bnk->mn with (s, m, n, k); the per-head
# forms with (b, h, r, d).
SETS = (
    ("bmk,bnk->mn", (4096, 256, 256, 256)),
    ("bmk,bnk->mn", (8192, 384, 128, 384)),
    ("bhr,hdr->bhd", (4096, 128, 512, 128)),
    ("bhr,hdr->bhd", (4096, 8, 4096, 1024)),
    ("bhd,hdr->bhr", (4096, 128, 512, 128)),
)


def einsum_case(dg: Any, expr: str, dims: tuple[int, int, int, int]) -> Case:
    if expr == "bmk,bnk->mn":
        s, m, n, k = dims
        a, b, d_shape = randn(s, m, k), randn(s, n, k), (m, n)
        flops, meta = 2.0 * s * m * n * k, row_meta(NAME, expr, m, n, k, groups=s)
    else:
        bsz, h, r, dd = dims
        a = randn(bsz, h, r) if expr == "bhr,hdr->bhd" else randn(bsz, h, dd)
        b = randn(h, dd, r)
        d_shape = (bsz, h, dd) if expr == "bhr,hdr->bhd" else (bsz, h, r)
        flops, meta = 2.0 * bsz * h * r * dd, row_meta(NAME, expr, bsz, dd, r, groups=h)
    case = Case(meta=meta, flops=flops, max_diff=MAX_DIFF)
    case.reference = torch.einsum(expr, a.float(), b.float())
    case.peers = {PEER_BF16: Peer(run=lambda: torch.einsum(expr, a, b))}
    op, case.skip_reason = get_op(dg, "einsum")
    if op is not None:
        d = nan_output(*d_shape)
        case.ours, case.read_ours = (lambda: op(expr, a, b, d)), (lambda: d)
    return case


def cases(dg: Any, seed: int):
    for expr, dims in SETS:
        yield f"{NAME} {expr} {dims}", (lambda expr=expr, dims=dims: einsum_case(dg, expr, dims))


SUITE = Suite(NAME, MAX_DIFF, cases)
