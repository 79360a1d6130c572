"""The grouped suite (MoE): m-grouped contiguous and masked FP8 GEMMs, and the k-grouped
weight-gradient GEMM against one cuBLASLt GEMM per group and our dense GEMM per group."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from ...utils.math import align, per_block_cast_to_fp8, per_channel_cast_to_fp8, per_token_cast_to_fp8
from ..peers import scaled_mm_api
from ..protocol import PEER_CUBLASLT, PEER_DENSE_LOOP, Case, Peer, Suite, gemm_flops, get_op, nan_output, randn, row_meta

NAME = "grouped"
# calc_diff threshold; it includes the quantisation error (as upstream's tests).
MAX_DIFF = 1e-3

# M-grouped contiguous: (groups, expected rows per group, N, K).
CONTIGUOUS_SETS = ((4, 8192, 4096, 7168), (8, 4096, 7168, 2048))
# M-grouped masked: (groups, expected valid rows per group, max rows per group, N, K).
MASKED_SETS = ((32, 192, 4096, 4096, 7168), (6, 1024, 4096, 7168, 3072))
# K-grouped (MoE weight gradients, DeepSeek-V3 expert shapes): (groups, M, N, expected tokens
# per group). d[g] = c[g] + A_g @ B_g^T with A_g [M, k_g], B_g [N, k_g]; M x N is the expert's
# gate/up ([4096, 7168] read as 7168 x 4096 here) or down ([7168, 2048]) weight.
K_GROUPED_SETS = ((4, 7168, 4096, 4096), (8, 7168, 2048, 4096))


def quantize_grouped_b(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-block cast of every group of ``b`` ``[G, N, K]``."""
    parts = [per_block_cast_to_fp8(b[g], use_ue8m0=False) for g in range(b.size(0))]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def contiguous_layout(rows: Sequence[int], alignment: int, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """Group index per row (-1 on padding rows) and the mask of valid rows."""
    layout, valid = [], []
    for group, count in enumerate(rows):
        padding = align(count, alignment) - count
        layout += [group] * count + [-1] * padding
        valid += [True] * count + [False] * padding
    return (
        torch.tensor(layout, dtype=torch.int32, device=device),
        torch.tensor(valid, dtype=torch.bool, device=device),
    )


def contiguous_case(dg: Any, num_groups: int, expected_m: int, n: int, k: int, seed: int) -> Case:
    rng = random.Random(seed)
    rows = [int(expected_m * rng.uniform(0.7, 1.3)) for _ in range(num_groups)]
    case = Case(
        meta=row_meta(
            NAME,
            "m_grouped_fp8_gemm_nt_contiguous",
            sum(rows),
            n,
            k,
            groups=num_groups,
            expected_m_per_group=expected_m,
        ),
        flops=gemm_flops(sum(rows), n, k),
        max_diff=MAX_DIFF,
    )
    op, case.skip_reason = get_op(dg, "m_grouped_fp8_gemm_nt_contiguous")
    get_alignment, reason = get_op(dg, "get_mk_alignment_for_contiguous_layout")
    if op is None or get_alignment is None:
        case.skip_reason = case.skip_reason or reason
        return case
    layout, valid = contiguous_layout(rows, int(get_alignment()))
    a, b = randn(layout.numel(), k), randn(num_groups, n, k)
    a[~valid] = 0
    case.meta["m_padded"] = layout.numel()
    case.reference = torch.cat([a[layout == g].float() @ b[g].float().t() for g in range(num_groups)])
    a_q, b_q = per_token_cast_to_fp8(a, use_ue8m0=False), quantize_grouped_b(b)
    d = nan_output(layout.numel(), n)
    case.ours, case.read_ours = (lambda: op(a_q, b_q, d, layout)), (lambda: d[valid])
    return case


def masked_case(dg: Any, num_groups: int, expected_m: int, max_m: int, n: int, k: int, seed: int) -> Case:
    rng = random.Random(seed)
    rows = [min(max_m, int(expected_m * rng.uniform(0.7, 1.3))) for _ in range(num_groups)]
    case = Case(
        meta=row_meta(
            NAME,
            "m_grouped_fp8_gemm_nt_masked",
            sum(rows),
            n,
            k,
            groups=num_groups,
            expected_m_per_group=expected_m,
            max_m=max_m,
        ),
        flops=gemm_flops(sum(rows), n, k),
        max_diff=MAX_DIFF,
    )
    op, case.skip_reason = get_op(dg, "m_grouped_fp8_gemm_nt_masked")
    if op is None:
        return case
    a, b = randn(num_groups, max_m, k), randn(num_groups, n, k)
    masked_m = torch.tensor(rows, dtype=torch.int32, device="cuda")
    valid = torch.arange(max_m, device="cuda")[None, :] < masked_m[:, None]
    case.reference = torch.cat([a[g, : rows[g]].float() @ b[g].float().t() for g in range(num_groups)])
    a_fp8, sfa = per_token_cast_to_fp8(a.view(-1, k), use_ue8m0=False)
    a_q = (a_fp8.view(num_groups, max_m, k), sfa.view(num_groups, max_m, -1))
    b_q = quantize_grouped_b(b)
    d = nan_output(num_groups, max_m, n)
    case.ours = lambda: op(a_q, b_q, d, masked_m, expected_m)
    case.read_ours = lambda: d[valid]
    return case


def k_grouped_tokens(num_groups: int, expected_k: int, seed: int) -> list[int]:
    """Tokens per group drawn at 0.7x to 1.3x of ``expected_k``, each a multiple of 128."""
    rng = random.Random(seed)
    return [align(int(expected_k * rng.uniform(0.7, 1.3)), 128) for _ in range(num_groups)]


def k_grouped_nt_operand(x_fp8: torch.Tensor, ks: Sequence[int]) -> torch.Tensor:
    """``[sum_k, mn]`` (tokens as rows) into the nt layout: each group's ``[mn, k_g]`` K-major, flat."""
    parts, start = [], 0
    for k in ks:
        parts.append(x_fp8[start: start + k].view(torch.uint8).t().contiguous().flatten())
        start += k
    return torch.cat(parts).view(x_fp8.dtype)


def cublaslt_k_grouped_peer(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                            c: torch.Tensor, ks: Sequence[int]) -> Peer:
    """One cuBLASLt blockwise FP8 GEMM per group (1x128 scales on both operands, through
    torch's scaled_mm; bf16 out), then ``c[g] +`` in fp32: what a caller without a grouped
    kernel would run. ``a``/``b``: the ``[sum_k, mn]`` MN-major operands and their scales."""
    scaled_mm, scaling_type, reason = scaled_mm_api()
    if scaled_mm is None:
        return Peer(reason=reason)
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    groups, start = [], 0
    for k in ks:
        kb0, kb1 = start // 128, (start + k) // 128
        a_g = a_fp8[start: start + k].t().contiguous()  # [M, k_g] K-major
        b_g = b_fp8[start: start + k].t().contiguous()  # [N, k_g] K-major
        sfa_g = sfa[kb0:kb1].t()  # [M, kb] column-major
        sfb_g = sfb[kb0:kb1].t()  # [N, kb] column-major (torch wants scale_b as [N, kb])
        groups.append((a_g, b_g.t(), sfa_g, sfb_g))
        start += k

    def run() -> torch.Tensor:
        out = c.clone()
        for g, (a_g, b_t, sfa_g, sfb_t) in enumerate(groups):
            out[g] += scaled_mm(a_g, b_t, sfa_g, scaling_type.BlockWise1x128, sfb_t, scaling_type.BlockWise1x128,
                                output_dtype=torch.bfloat16).float()
        return out

    return Peer(run=run)


def dense_loop_k_grouped_peer(dg: Any, a_nt: torch.Tensor, sfa: torch.Tensor, b_nt: torch.Tensor,
                              sfb: torch.Tensor, c: torch.Tensor, ks: Sequence[int]) -> Peer:
    """Our dense 1D1D GEMM (fp32, accumulating into c) once per group."""
    op, reason = get_op(dg, "fp8_gemm_nt")
    if op is None:
        return Peer(reason=reason)
    num_groups, m, n = c.shape
    out = torch.empty_like(c)
    groups, start = [], 0
    for g, k in enumerate(ks):
        kb0, kb1 = start // 128, (start + k) // 128
        a_g = a_nt[start * m: (start + k) * m].view(m, k)
        b_g = b_nt[start * n: (start + k) * n].view(n, k)
        # [mn, kb] views with strides (1, mn): already the kernel's layout when mn % 4 == 0.
        groups.append(((a_g, sfa[kb0:kb1].t()), (b_g, sfb[kb0:kb1].t()), c[g], out[g], k))
        start += k

    def run() -> torch.Tensor:
        for a_g, b_g, c_g, d_g, k in groups:
            if k == 0:
                d_g.copy_(c_g)  # the dense op needs K > 0
            else:
                op(a_g, b_g, d_g, c=c_g, recipe=(1, 1, 128))
        return out

    return Peer(run=run)


def k_grouped_case(dg: Any, num_groups: int, m: int, n: int, expected_k: int, seed: int) -> Case:
    ks = k_grouped_tokens(num_groups, expected_k, seed)
    sum_k = sum(ks)
    case = Case(
        meta=row_meta(NAME, "k_grouped_fp8_gemm_nt_contiguous", m, n, sum_k, groups=num_groups,
                      expected_k_per_group=expected_k, ks=ks),
        flops=gemm_flops(m, n, sum_k),
        max_diff=MAX_DIFF,
    )
    op, case.skip_reason = get_op(dg, "k_grouped_fp8_gemm_nt_contiguous")
    x_a, x_b = randn(sum_k, m), randn(sum_k, n)
    c = torch.randn(num_groups, m, n, device="cuda")
    ref, start = c.clone(), 0
    for g, k in enumerate(ks):
        ref[g] += x_a[start: start + k].float().t() @ x_b[start: start + k].float()
        start += k
    case.reference = ref
    a_q, b_q = per_channel_cast_to_fp8(x_a, use_ue8m0=False), per_channel_cast_to_fp8(x_b, use_ue8m0=False)
    a_nt, b_nt = k_grouped_nt_operand(a_q[0], ks), k_grouped_nt_operand(b_q[0], ks)
    case.peers = {
        PEER_CUBLASLT: cublaslt_k_grouped_peer(a_q, b_q, c, ks),
        PEER_DENSE_LOOP: dense_loop_k_grouped_peer(dg, a_nt, a_q[1], b_nt, b_q[1], c, ks),
    }
    if op is not None:
        ks_tensor = torch.tensor(ks, dtype=torch.int32, device="cuda")
        d = torch.full((num_groups, m, n), float("nan"), device="cuda")
        case.ours = lambda: op((a_nt, a_q[1]), (b_nt, b_q[1]), d, ks, ks_tensor, c=c)
        case.read_ours = lambda: d
    return case


def cases(dg: Any, seed: int):
    for g, em, n, k in CONTIGUOUS_SETS:
        yield (
            f"contiguous {g}x~{em} n={n} k={k}",
            lambda g=g, em=em, n=n, k=k: contiguous_case(dg, g, em, n, k, seed),
        )
    for g, em, mm, n, k in MASKED_SETS:
        yield (
            f"masked {g}x~{em}/{mm} n={n} k={k}",
            lambda g=g, em=em, mm=mm, n=n, k=k: masked_case(dg, g, em, mm, n, k, seed),
        )
    for g, m, n, ek in K_GROUPED_SETS:
        yield (
            f"k_grouped {g}x~{ek} m={m} n={n}",
            lambda g=g, m=m, n=n, ek=ek: k_grouped_case(dg, g, m, n, ek, seed),
        )


SUITE = Suite(NAME, MAX_DIFF, cases)
