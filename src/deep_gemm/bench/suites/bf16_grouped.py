"""The bf16_grouped suite (MoE): m-grouped contiguous and masked BF16 GEMMs against what a
caller would use instead, torch's grouped GEMM (``torch._grouped_mm``) where this torch has it,
else one bf16 matmul per group; both peers compute only the valid rows."""

from __future__ import annotations

import random
from typing import Any

import torch

from ..protocol import PEER_BF16, Case, Peer, Suite, gemm_flops, get_op, nan_output, randn, row_meta
from .grouped import CONTIGUOUS_SETS, MASKED_SETS, contiguous_layout

NAME = "bf16_grouped"
MAX_DIFF = 1e-4


def _grouped_peer(a_rows: list[torch.Tensor], b: torch.Tensor) -> Peer:
    """Per group g: a_rows[g] @ b[g].T, through torch._grouped_mm (one launch) or a loop."""
    loop = Peer(run=lambda: torch.cat([x @ b[g].t() for g, x in enumerate(a_rows)]))
    grouped_mm = getattr(torch, "_grouped_mm", None)
    if grouped_mm is None:
        return loop
    a_cat = torch.cat(a_rows)
    offs = torch.tensor([r.shape[0] for r in a_rows], device="cuda").cumsum(0).to(torch.int32)
    bt = b.transpose(1, 2)
    try:  # this torch's grouped GEMM may refuse the shapes (alignment of the group sizes)
        grouped_mm(a_cat, bt, offs=offs)
    except (RuntimeError, ValueError, TypeError):
        return loop
    return Peer(run=lambda: grouped_mm(a_cat, bt, offs=offs))


def contiguous_case(dg: Any, num_groups: int, expected_m: int, n: int, k: int, seed: int) -> Case:
    rng = random.Random(seed)
    rows = [int(expected_m * rng.uniform(0.7, 1.3)) for _ in range(num_groups)]
    case = Case(meta=row_meta(NAME, "m_grouped_bf16_gemm_nt_contiguous", sum(rows), n, k, groups=num_groups,
                              expected_m_per_group=expected_m), flops=gemm_flops(sum(rows), n, k), max_diff=MAX_DIFF)
    op, case.skip_reason = get_op(dg, "m_grouped_bf16_gemm_nt_contiguous")
    get_alignment, reason = get_op(dg, "get_mk_alignment_for_contiguous_layout")
    if op is None or get_alignment is None:
        case.skip_reason = case.skip_reason or reason
        return case
    layout, valid = contiguous_layout(rows, int(get_alignment()))
    a, b = randn(layout.numel(), k), randn(num_groups, n, k)
    a_rows = [a[layout == g] for g in range(num_groups)]
    case.reference = torch.cat([x.float() @ b[g].float().t() for g, x in enumerate(a_rows)])
    case.peers = {PEER_BF16: _grouped_peer(a_rows, b)}
    d = nan_output(layout.numel(), n)
    case.ours, case.read_ours = (lambda: op(a, b, d, layout)), (lambda: d[valid])
    return case


def masked_case(dg: Any, num_groups: int, expected_m: int, max_m: int, n: int, k: int, seed: int) -> Case:
    rng = random.Random(seed)
    rows = [min(max_m, int(expected_m * rng.uniform(0.7, 1.3))) for _ in range(num_groups)]
    case = Case(meta=row_meta(NAME, "m_grouped_bf16_gemm_nt_masked", sum(rows), n, k, groups=num_groups,
                              expected_m_per_group=expected_m, max_m=max_m),
                flops=gemm_flops(sum(rows), n, k), max_diff=MAX_DIFF)
    op, case.skip_reason = get_op(dg, "m_grouped_bf16_gemm_nt_masked")
    if op is None:
        return case
    a, b = randn(num_groups, max_m, k), randn(num_groups, n, k)
    masked_m = torch.tensor(rows, dtype=torch.int32, device="cuda")
    valid = torch.arange(max_m, device="cuda")[None, :] < masked_m[:, None]
    a_rows = [a[g, : rows[g]] for g in range(num_groups)]
    case.reference = torch.cat([x.float() @ b[g].float().t() for g, x in enumerate(a_rows)])
    case.peers = {PEER_BF16: _grouped_peer(a_rows, b)}
    d = nan_output(num_groups, max_m, n)
    case.ours, case.read_ours = (lambda: op(a, b, d, masked_m, expected_m)), (lambda: d[valid])
    return case


def cases(dg: Any, seed: int):
    for i, (g, em, n, k) in enumerate(CONTIGUOUS_SETS):
        yield (f"{NAME} contiguous {g} x ~{em}, N={n}, K={k}",
               lambda g=g, em=em, n=n, k=k, i=i: contiguous_case(dg, g, em, n, k, seed + i))
    for i, (g, em, mm, n, k) in enumerate(MASKED_SETS):
        yield (f"{NAME} masked {g} x ~{em}, N={n}, K={k}",
               lambda g=g, em=em, mm=mm, n=n, k=k, i=i: masked_case(dg, g, em, mm, n, k, seed + 10 + i))


SUITE = Suite(NAME, MAX_DIFF, cases)
