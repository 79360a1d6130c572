"""The hc suite: ``tf32_hc_prenorm_gemm`` (N = 24, DeepSeek's HyperConnection mixing width) on
upstream's K values over M from decode to prefill sizes, against the torch reference
(``a.float() @ b.t()`` and ``a.float().square().sum(-1)``) on the same data.

The kernel is memory-bound: each record carries ``a_bytes`` (M * K * 2, what it must read);
``a_bytes / us`` over the run's ``copy_tb_s`` (the GPU's copy bandwidth, measured in the same
run) is the fraction of copy bandwidth reached (BENCH.md: >= 0.7). The protocol's L2 flush (a 256 MB
memset) leaves up to the whole L2 dirty, written back while the kernel reads, so this figure
is below the kernel's streaming rate, most where ``a`` is not much larger than the L2. The
floor ``read_a`` (a torch sum over ``a``, timed beside ours) is reading ``a`` once under the
same protocol: its ``of_ours`` is the share of that read rate the kernel reaches."""

from __future__ import annotations

from typing import Any

import torch

from ..protocol import Case, Peer, Suite, gemm_flops, get_op, row_meta

NAME = "hc"
PEER_TORCH = "torch_reference"
# Both outputs, each scaled by its reference's norm, in one calc_diff: TF32 products give
# about 3e-7 on d, FP32 sums far less on sqr_sum.
MAX_DIFF = 1e-5
N = 24
SHAPES = tuple((m, N, k) for k in (7168, 28672) for m in (1, 128, 1024, 4096, 8192))


def _joined(d: torch.Tensor, s: torch.Tensor, d_norm: torch.Tensor, s_norm: torch.Tensor) -> torch.Tensor:
    return torch.cat([(d / d_norm).flatten(), (s / s_norm).flatten()])


def hc_case(dg: Any, m: int, n: int, k: int) -> Case:
    a_bytes = m * k * 2
    meta = row_meta(NAME, "tf32_hc_prenorm_gemm", m, n, k, a_bytes=a_bytes)
    case = Case(meta=meta, flops=gemm_flops(m, n, k), max_diff=MAX_DIFF)
    a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, k, dtype=torch.float32, device="cuda")
    ref_d = (a.double() @ b.double().t()).float()
    ref_s = a.double().square().sum(-1).float()
    d_norm, s_norm = ref_d.norm(), ref_s.norm()
    case.reference = _joined(ref_d, ref_s, d_norm, s_norm)
    case.peers = {PEER_TORCH: Peer(run=lambda: _joined(a.float() @ b.t(), a.float().square().sum(-1), d_norm, s_norm))}
    op, case.skip_reason = get_op(dg, "tf32_hc_prenorm_gemm")
    if op is not None:
        d = torch.full((m, n), float("nan"), device="cuda")
        s = torch.full((m,), float("nan"), device="cuda")
        case.ours = lambda: op(a, b, d, s)
        case.read_ours = lambda: _joined(d, s, d_norm, s_norm)
        case.floors = {"read_a": lambda: a.sum(dtype=torch.float32)}
    return case


def cases(dg: Any, seed: int):
    for m, n, k in SHAPES:
        yield f"{NAME} {m}x{n}x{k}", (lambda m=m, n=n, k=k: hc_case(dg, m, n, k))


SUITE = Suite(NAME, MAX_DIFF, cases)
