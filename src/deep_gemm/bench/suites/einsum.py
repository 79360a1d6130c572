"""The einsum suite: deep_gemm.einsum's expressions on DeepSeek's attention shapes against
torch.einsum (cuBLAS) on the same data.

For the per-head forms torch.einsum hands back a permuted view of a ``[h, b, .]`` result, while
deep_gemm writes the caller's ``[b, h, .]`` tensor ``d``; the second peer, ``torch_into_d``, is
what a caller who needs the result in such a ``d`` pays with torch: the einsum, then its copy
into ``d``."""

from __future__ import annotations

from typing import Any

import torch

from ...utils.math import per_block_cast_to_fp8, per_token_cast_to_fp8
from ..protocol import PEER_BF16, Case, Peer, Suite, get_op, nan_output, randn, row_meta

NAME = "einsum"
MAX_DIFF = 1e-4
PEER_INTO_D = "torch_into_d"

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
    if expr != "bmk,bnk->mn":
        into = torch.empty(d_shape, dtype=torch.bfloat16, device="cuda")
        case.peers[PEER_INTO_D] = Peer(run=lambda: into.copy_(torch.einsum(expr, a, b)))
    op, case.skip_reason = get_op(dg, "einsum")
    if op is not None:
        d = nan_output(*d_shape)
        case.ours, case.read_ours = (lambda: op(expr, a, b, d)), (lambda: d)
    return case


# fp8_einsum("bhr,hdr->bhd") (recipe (1, 128, 128)) on the per-head shapes, against the BF16
# torch.einsum of the same values.
FP8_SETS = ((4096, 128, 512, 128), (4096, 8, 4096, 1024))


def fp8_einsum_case(dg: Any, dims: tuple[int, int, int, int]) -> Case:
    bsz, h, r, dd = dims
    expr = "bhr,hdr->bhd"
    a, b = randn(bsz, h, r), randn(h, dd, r)
    case = Case(meta=row_meta(NAME, "fp8_einsum " + expr, bsz, dd, r, groups=h), flops=2.0 * bsz * h * r * dd,
                max_diff=1e-3)
    x, sfx = per_token_cast_to_fp8(a.view(bsz * h, r), use_ue8m0=False)
    ys = [per_block_cast_to_fp8(b[i], use_ue8m0=False) for i in range(h)]
    x, sfx = x.view(bsz, h, r), sfx.view(bsz, h, -1)
    y, sfy = torch.stack([t[0] for t in ys]), torch.stack([t[1] for t in ys])
    case.reference = torch.einsum(expr, a.float(), b.float())
    case.peers = {PEER_BF16: Peer(run=lambda: torch.einsum(expr, a, b))}
    op, case.skip_reason = get_op(dg, "fp8_einsum")
    if op is not None:
        d = nan_output(bsz, h, dd)
        case.ours, case.read_ours = (lambda: op(expr, (x, sfx), (y, sfy), d)), (lambda: d)
    return case


def cases(dg: Any, seed: int):
    for expr, dims in SETS:
        yield f"{NAME} {expr} {dims}", (lambda expr=expr, dims=dims: einsum_case(dg, expr, dims))
    for dims in FP8_SETS:
        yield f"{NAME} fp8_einsum {dims}", (lambda dims=dims: fp8_einsum_case(dg, dims))


SUITE = Suite(NAME, MAX_DIFF, cases)
