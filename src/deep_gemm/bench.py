"""Benchmark deep_gemm against cuBLASLt and torch on one GPU: ``python -m deep_gemm.bench``.

Implements the protocol of the project's BENCH.md:

* inputs are fresh ``torch.randn`` data quantised with ``deep_gemm.utils``
  (A per token, 1x128; B per 128x128 block);
* every result is checked against a float32 reference with ``calc_diff`` before
  it is timed; a row whose error is too large is reported as a failure, not a speed;
* warm-up runs outside the timed region; before each timed launch a 256 MB buffer
  is written to flush L2; each launch is timed with its own pair of CUDA events;
  the median over ``--repeats`` (at least 30 for the protocol) launches is reported;
  a row's implementations are timed launch by launch in turn (ours, each peer, ours,
  ...), so the GPU's clock drift at its power cap affects all of them alike
  (``--sequential``: all launches of one implementation, then the next), and the
  launches are queued behind a GPU spin so that no host launch path lands in an event
  time (a record's ``queued`` says so; see ``LaunchTimer``);
* peers run in the same process on the same data: cuBLASLt blockwise FP8 through
  ``torch.nn.functional.scaled_mm`` and bf16 ``A @ B.t()``; for the k-grouped (wgrad)
  rows, one scaled_mm (1x128 scales on both operands) per group plus the fp32 add of ``c``,
  and our dense 1D1D ``fp8_gemm_nt`` once per group;
* also measured: host overhead per call (3000 back-to-back launches of a
  16x256x512 GEMM, the median of 5 such runs), first-call time with an empty JIT cache and with a warm one
  (each in a fresh process), and ``import deep_gemm`` time after ``import torch``.

Results are written as JSON (``--json``) and a table is printed last. The exit
status is 0 when every row ran and passed (skipped rows included), 1 when a row
failed its correctness check or raised, and 2 when no usable GPU is present.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .testing.numeric import calc_diff
from .utils.math import align, per_block_cast_to_fp8, per_channel_cast_to_fp8, per_token_cast_to_fp8

# ---------------------------------------------------------------------------- constants

SUITES = ("fp8", "grouped", "bf16")

# BENCH.md's nine dense shapes, (M, N, K); the bf16 suite reuses them.
FP8_SHAPES = (
    (128, 2112, 7168),
    (128, 24576, 1536),
    (128, 7168, 16384),
    (128, 4096, 7168),
    (4096, 2112, 7168),
    (4096, 24576, 1536),
    (4096, 7168, 16384),
    (4096, 4096, 7168),
    (4096, 7168, 2048),
)
BF16_SHAPES = FP8_SHAPES
# M-grouped contiguous: (groups, expected rows per group, N, K).
CONTIGUOUS_SETS = ((4, 8192, 4096, 7168), (8, 4096, 7168, 2048))
# M-grouped masked: (groups, expected valid rows per group, max rows per group, N, K).
MASKED_SETS = ((32, 192, 4096, 4096, 7168), (6, 1024, 4096, 7168, 3072))
# K-grouped (MoE weight gradients, DeepSeek-V3 expert shapes): (groups, M, N, expected tokens
# per group). d[g] = c[g] + A_g @ B_g^T with A_g [M, k_g], B_g [N, k_g]; M x N is the expert's
# gate/up ([4096, 7168] read as 7168 x 4096 here) or down ([7168, 2048]) weight.
K_GROUPED_SETS = ((4, 7168, 4096, 4096), (8, 7168, 2048, 4096))

TINY_SHAPE = (16, 256, 512)
HOST_OVERHEAD_CALLS = 3000
HOST_OVERHEAD_WARMUPS = 50
# Runs of HOST_OVERHEAD_CALLS calls; their median is reported. A single run read 16 to 24 us
# for the same op in two processes of one device session (2026-11-30): one run is too few.
HOST_OVERHEAD_RUNS = 5
FLUSH_BYTES = int(256e6)
PROTOCOL_MIN_REPEATS = 30
JIT_SHAPES = ((128, 2112, 7168), (4096, 7168, 2048), (4096, 24576, 1536))
IMPORT_RUNS = 3
CHILD_TIMEOUT_S = 900
RESULT_TAG = "DG_BENCH_RESULT "

# calc_diff thresholds; FP8 values include the quantisation error (as upstream's tests).
MAX_DIFF = {"fp8": 1e-3, "grouped": 1e-3, "bf16": 1e-4}

PEER_CUBLASLT = "cublaslt_blockwise"
PEER_BF16 = "torch_bf16"
PEER_DENSE_LOOP = "deep_gemm_dense_loop"
PEER_ORDER = (PEER_CUBLASLT, PEER_BF16, PEER_DENSE_LOOP)
PEER_LABELS = {PEER_CUBLASLT: "cuBLASLt", PEER_BF16: "bf16", PEER_DENSE_LOOP: "dense loop"}

# ---------------------------------------------------------------------------- small helpers


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None for an empty sequence."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def tflops(flops: float, us: float | None) -> float | None:
    """TFLOP/s for ``flops`` operations done in ``us`` microseconds."""
    if us is None or us <= 0:
        return None
    return flops / (us * 1e-6) / 1e12


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def spread(samples_us: Sequence[float]) -> dict[str, float]:
    """Median and quartiles of the per-launch times."""
    ordered = sorted(samples_us)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4)
    else:
        q1 = q3 = ordered[0]
    return {"us": statistics.median(ordered), "us_q1": q1, "us_q3": q3, "launches": len(ordered)}


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.bfloat16, device="cuda")


def nan_output(*shape: int) -> torch.Tensor:
    """An output buffer whose unwritten rows make the correctness check fail."""
    return torch.full(shape, float("nan"), dtype=torch.bfloat16, device="cuda")


def gemm_flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


# ---------------------------------------------------------------------------- timing


class LaunchTimer:
    """Times single launches with CUDA events, flushing L2 before each one.

    The launches of a measurement are queued behind a GPU spin that outlasts their
    enqueueing, so the GPU runs them back to back and each pair of events times GPU work
    only. Without it, the GPU can reach a start event before the host has launched the
    kernel, and the host's launch path lands in the time: interleaved with ours on the
    H200's host, cuBLASLt's 128x2112x7168 read 32-45 us instead of 25 (measured
    on the H200, 2026-12-01). A launcher that waits for the GPU itself (a host sync inside it) cannot
    be queued ahead; it is timed launch by launch as it comes, and ``last_queued`` says
    which way the last measurement went. ``queue_ahead=False`` never spins (comparisons)."""

    # Initial spin: ~10 ms at the H200's clocks (grown when too short, see _timed).
    SPIN_CYCLES = 20_000_000
    MAX_SPIN_CYCLES = 320_000_000

    def __init__(self, repeats: int, warmups: int, queue_ahead: bool = True):
        self.repeats = repeats
        self.warmups = warmups
        self.queue_ahead = queue_ahead
        self.spin_cycles = self.SPIN_CYCLES
        self.last_queued = False
        self.flush_buffer = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def _spin(self) -> Any:
        """Queues the GPU spin; returns an event that has passed once it is over."""
        torch.cuda.synchronize()
        torch.cuda._sleep(self.spin_cycles)
        spun = torch.cuda.Event()
        spun.record()
        return spun

    def _warm_up(self, fns: Sequence[Callable[[], Any]]) -> bool:
        """Runs the warm-up launches; True when each launcher can be queued ahead (its
        first warm-up, behind a spin, returned while the GPU was still spinning)."""
        queueable = True
        for fn in fns:
            for i in range(max(self.warmups, 1 if self.queue_ahead else 0)):
                spun = self._spin() if self.queue_ahead and i == 0 else None
                fn()
                if spun is not None and spun.query():
                    queueable = False
        torch.cuda.synchronize()
        return self.queue_ahead and queueable

    def _enqueue(self, launches: Sequence[Callable[[], Any]]) -> list[tuple[Any, Any]]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in launches]
        for fn, (start, end) in zip(launches, events, strict=True):
            self.flush_buffer.zero_()
            start.record()
            fn()
            end.record()
        return events

    def _timed(self, launches: Sequence[Callable[[], Any]], queued: bool) -> list[float]:
        """Each launch's time in us, flushed and event-timed (in the order given). Queued:
        when the spin is over before the host has queued everything (a slow moment, or a
        launch queue that fills up and blocks the host), the spin is doubled and, failing
        again, the launches are timed in two halves."""
        for _ in range(2 if queued else 1):
            spun = self._spin() if queued else None
            events = self._enqueue(launches)
            in_time = spun is None or not spun.query()  # still spinning: no launch waited for the host
            torch.cuda.synchronize()
            if in_time:
                return [start.elapsed_time(end) * 1e3 for start, end in events]
            self.spin_cycles = min(2 * self.spin_cycles, self.MAX_SPIN_CYCLES)
        if len(launches) == 1:
            raise RuntimeError("deep_gemm.bench: the host could not queue one launch within a GPU spin of "
                               f"{self.spin_cycles} cycles")
        half = len(launches) // 2
        return self._timed(launches[:half], queued) + self._timed(launches[half:], queued)

    def samples_us(self, fn: Callable[[], Any]) -> list[float]:
        self.last_queued = self._warm_up([fn])
        return self._timed([fn] * self.repeats, self.last_queued)

    def measure(self, fn: Callable[[], Any]) -> dict[str, float]:
        return spread(self.samples_us(fn))

    def samples_us_interleaved(self, fns: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
        """Like ``samples_us`` for several implementations at once, launch by launch in
        turn (a, b, c, a, b, c, ...): each sees the same mix of preceding work, so the
        GPU's clock and power state drift over the run alike for all of them."""
        names = list(fns)
        self.last_queued = self._warm_up(list(fns.values()))
        times = self._timed([fns[name] for _ in range(self.repeats) for name in names], self.last_queued)
        return {name: times[i :: len(names)] for i, name in enumerate(names)}


# ---------------------------------------------------------------------------- cases


@dataclass
class Peer:
    """A peer implementation: ``run()`` returns its output, or it is unavailable."""

    run: Callable[[], torch.Tensor] | None = None
    reason: str | None = None


@dataclass
class Case:
    """One benchmark row: our op, its reference and the peers on the same data."""

    meta: dict[str, Any]
    flops: float
    max_diff: float
    ours: Callable[[], Any] | None = None
    read_ours: Callable[[], torch.Tensor] | None = None
    reference: torch.Tensor | None = None
    skip_reason: str | None = None
    peers: dict[str, Peer] = field(default_factory=dict)


def row_meta(suite: str, op: str, m: int, n: int, k: int, groups: int | None = None, **extra: Any) -> dict[str, Any]:
    """The identifying fields of a record (for grouped rows, ``m`` counts valid rows only)."""
    return {"suite": suite, "op": op, "m": m, "n": n, "k": k, "groups": groups, **extra}


def get_op(dg: Any, name: str) -> tuple[Callable | None, str | None]:
    """Our op ``name`` from the package, or None with the reason it is missing."""
    try:
        return getattr(dg, name), None
    except AttributeError as exc:
        return None, f"deep_gemm.{name} does not exist yet ({type(exc).__name__})"


def scaled_mm_api() -> tuple[Callable | None, Any, str | None]:
    """``(torch.nn.functional.scaled_mm, ScalingType, None)`` or ``(None, None, reason)``."""
    try:
        from torch.nn.functional import scaled_mm
    except ImportError as exc:
        return None, None, f"torch {torch.__version__} has no torch.nn.functional.scaled_mm ({exc})"
    scaling_type = getattr(torch.nn.functional, "ScalingType", None)
    scaling_type = scaling_type or getattr(torch._C, "_ScalingType", None)
    if scaling_type is None:
        return None, None, f"torch {torch.__version__} has no ScalingType enum for scaled_mm"
    return scaled_mm, scaling_type, None


def cublaslt_peer(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> Peer:
    """cuBLASLt blockwise FP8 (1x128 for A, 128x128 for B) through torch's scaled_mm."""
    scaled_mm, scaling_type, reason = scaled_mm_api()
    if scaled_mm is None:
        return Peer(reason=reason)
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    sfa_col_major = sfa.t().contiguous().t()
    sfb_t = sfb.t()
    b_t = b_fp8.t()

    def run() -> torch.Tensor:
        return scaled_mm(
            a_fp8,
            b_t,
            sfa_col_major,
            scaling_type.BlockWise1x128,
            sfb_t,
            scaling_type.BlockWise128x128,
            output_dtype=torch.bfloat16,
        )

    return Peer(run=run)


def bf16_peer(a: torch.Tensor, b: torch.Tensor) -> Peer:
    return Peer(run=lambda: a @ b.t())


def quantize_grouped_b(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-block cast of every group of ``b`` ``[G, N, K]``."""
    parts = [per_block_cast_to_fp8(b[g], use_ue8m0=False) for g in range(b.size(0))]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def fp8_case(dg: Any, m: int, n: int, k: int) -> Case:
    case = Case(meta=row_meta("fp8", "fp8_gemm_nt", m, n, k), flops=gemm_flops(m, n, k), max_diff=MAX_DIFF["fp8"])
    a, b = randn(m, k), randn(n, k)
    case.reference = a.float() @ b.float().t()
    a_q = per_token_cast_to_fp8(a, use_ue8m0=False)
    b_q = per_block_cast_to_fp8(b, use_ue8m0=False)
    case.peers = {PEER_CUBLASLT: cublaslt_peer(a_q, b_q), PEER_BF16: bf16_peer(a, b)}
    op, case.skip_reason = get_op(dg, "fp8_gemm_nt")
    if op is not None:
        d = nan_output(m, n)
        case.ours, case.read_ours = (lambda: op(a_q, b_q, d)), (lambda: d)
    return case


def bf16_case(dg: Any, m: int, n: int, k: int) -> Case:
    case = Case(meta=row_meta("bf16", "bf16_gemm_nt", m, n, k), flops=gemm_flops(m, n, k), max_diff=MAX_DIFF["bf16"])
    a, b = randn(m, k), randn(n, k)
    case.reference = a.float() @ b.float().t()
    case.peers = {PEER_BF16: bf16_peer(a, b)}
    op, case.skip_reason = get_op(dg, "bf16_gemm_nt")
    if op is not None:
        d = nan_output(m, n)
        case.ours, case.read_ours = (lambda: op(a, b, d)), (lambda: d)
    return case


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
            "grouped",
            "m_grouped_fp8_gemm_nt_contiguous",
            sum(rows),
            n,
            k,
            groups=num_groups,
            expected_m_per_group=expected_m,
        ),
        flops=gemm_flops(sum(rows), n, k),
        max_diff=MAX_DIFF["grouped"],
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
            "grouped",
            "m_grouped_fp8_gemm_nt_masked",
            sum(rows),
            n,
            k,
            groups=num_groups,
            expected_m_per_group=expected_m,
            max_m=max_m,
        ),
        flops=gemm_flops(sum(rows), n, k),
        max_diff=MAX_DIFF["grouped"],
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
        meta=row_meta("grouped", "k_grouped_fp8_gemm_nt_contiguous", m, n, sum_k, groups=num_groups,
                      expected_k_per_group=expected_k, ks=ks),
        flops=gemm_flops(m, n, sum_k),
        max_diff=MAX_DIFF["grouped"],
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


def suite_cases(dg: Any, suite: str, seed: int):
    """Yield (builder description, zero-argument case builder) for one suite."""
    if suite == "fp8":
        for m, n, k in FP8_SHAPES:
            yield f"fp8 {m}x{n}x{k}", (lambda m=m, n=n, k=k: fp8_case(dg, m, n, k))
    elif suite == "bf16":
        for m, n, k in BF16_SHAPES:
            yield f"bf16 {m}x{n}x{k}", (lambda m=m, n=n, k=k: bf16_case(dg, m, n, k))
    elif suite == "grouped":
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
    else:
        raise ValueError(f"unknown suite {suite!r}")


# ---------------------------------------------------------------------------- measuring a row


def empty_record(case: Case) -> dict[str, Any]:
    return dict(case.meta, us=None, tflops=None, diff=None, status="ok", peers={})


def checked_diff(output: torch.Tensor, reference: torch.Tensor) -> float:
    return float(calc_diff(output, reference))


def diff_problem(diff: float, max_diff: float) -> str | None:
    if not math.isfinite(diff):
        return f"diff is {diff} (output not written or not finite)"
    if diff > max_diff:
        return f"diff {diff:.3g} > allowed {max_diff:.3g}"
    return None


def ours_problem(case: Case) -> str | None:
    """Runs our op once into the case's (NaN-poisoned) output: None if it matches the
    reference, else what is wrong. For tools that time a case after checking it."""
    case.ours()
    torch.cuda.synchronize()
    return diff_problem(checked_diff(case.read_ours(), case.reference), case.max_diff)


def check_ours(case: Case) -> dict[str, Any]:
    """Runs our op once and checks it: ``{"status": "ok", "diff": ...}`` when it may be
    timed, else the record fields that say why not (skipped, error, fail)."""
    if case.ours is None:
        return {"status": "skipped", "reason": case.skip_reason}
    try:
        case.ours()
        torch.cuda.synchronize()
        diff = checked_diff(case.read_ours(), case.reference)
    except Exception as exc:  # noqa: BLE001  (an op error is a row result, not a crash of the run)
        return {"status": "error", "reason": describe_error(exc)}
    problem = diff_problem(diff, case.max_diff)
    if problem:
        return {"status": "fail", "diff": diff, "reason": problem}
    return {"status": "ok", "diff": diff}


def check_peer(peer: Peer, case: Case) -> dict[str, Any]:
    """Like ``check_ours`` for a peer (``available`` says whether it could run at all)."""
    if peer.run is None:
        return {"available": False, "reason": peer.reason}
    try:
        output = peer.run()
        torch.cuda.synchronize()
        diff = checked_diff(output, case.reference)
    except Exception as exc:  # noqa: BLE001  (recorded in the results)
        return {"available": False, "reason": describe_error(exc)}
    problem = diff_problem(diff, case.max_diff)
    if problem:
        return {"available": True, "status": "fail", "diff": diff, "reason": problem}
    return {"available": True, "status": "ok", "diff": diff}


def add_speedups(record: dict[str, Any]) -> None:
    """``peer['speedup']`` = peer time / our time, where both were timed."""
    for peer in record["peers"].values():
        if record.get("us") and peer.get("us"):
            peer["speedup"] = peer["us"] / record["us"]


OURS = "deep_gemm"  # key of our op among the implementations a row times


def time_launchers(fns: dict[str, Callable[[], Any]], timer: LaunchTimer, interleaved: bool) -> dict[str, dict]:
    """Each launcher's timing statistics: launch by launch in turn when ``interleaved``,
    else one after another (all of one, then all of the next) in the order given;
    ``queued``: whether its launches were queued ahead of the GPU (LaunchTimer)."""
    if interleaved and len(fns) > 1:
        samples = timer.samples_us_interleaved(fns)
        return {name: dict(spread(s), queued=timer.last_queued) for name, s in samples.items()}
    return {name: dict(timer.measure(fn), queued=timer.last_queued) for name, fn in fns.items()}


def measure_case(case: Case, timer: LaunchTimer, with_peers: bool = True, interleaved: bool = True) -> dict[str, Any]:
    """Correctness of every implementation first; then the correct ones are timed, by
    default interleaved (``LaunchTimer.samples_us_interleaved``). Timed one after another,
    a row's ratio to cuBLASLt moved by up to 14% between two passes in one process, as the
    clock drifts at the H200's power cap; interleaved, by at most 4% (measured on
    the H200, 2026-12-01)."""
    record = empty_record(case)
    record.update(check_ours(case))
    peers = case.peers if with_peers else {}
    record["peers"] = {name: check_peer(peer, case) for name, peer in peers.items()}
    fns = {OURS: case.ours} if record["status"] == "ok" else {}
    fns.update({name: peers[name].run for name, r in record["peers"].items() if r.get("status") == "ok"})
    for name, stats in time_launchers(fns, timer, interleaved).items():
        target = record if name == OURS else record["peers"][name]
        target.update(stats)
        target["tflops"] = tflops(case.flops, stats["us"])
    add_speedups(record)
    return record


def run_suite(
    dg: Any,
    suite: str,
    timer: LaunchTimer,
    seed: int,
    with_peers: bool,
    log: Callable[[str], None],
    interleaved: bool = True,
) -> list[dict[str, Any]]:
    records = []
    for label, build in suite_cases(dg, suite, seed):
        torch.manual_seed(seed)
        try:
            case = build()
        except Exception as exc:  # noqa: BLE001  (recorded in the results)
            records.append(
                {
                    "suite": suite,
                    "label": label,
                    "status": "error",
                    "peers": {},
                    "us": None,
                    "tflops": None,
                    "diff": None,
                    "reason": f"building inputs failed: {describe_error(exc)}",
                }
            )
            continue
        records.append(measure_case(case, timer, with_peers, interleaved))
        log(f"{label}: {short_status(records[-1])}")
        del case
        torch.cuda.empty_cache()
    return records


def short_status(record: dict[str, Any]) -> str:
    if record.get("status") != "ok":
        return f"{record.get('status')} ({record.get('reason')})"
    return f"{record['us']:.1f} us, {record['tflops']:.0f} TFLOP/s, diff {record['diff']:.2g}"


# ---------------------------------------------------------------------------- summary


def suite_summary(records: Sequence[dict[str, Any]], suite: str) -> dict[str, Any]:
    rows = [r for r in records if r.get("suite") == suite]
    ok = [r for r in rows if r.get("status") == "ok"]
    speedups: dict[str, list[float]] = {}
    for record in ok:
        for name, peer in record.get("peers", {}).items():
            if peer.get("speedup") is not None:
                speedups.setdefault(name, []).append(peer["speedup"])
    return {
        "rows": len(rows),
        "ok": len(ok),
        "geomean_speedup": {name: geomean(v) for name, v in speedups.items()},
        "min_speedup": {name: min(v) for name, v in speedups.items()},
        "compared_rows": {name: len(v) for name, v in speedups.items()},
    }


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    per_suite = {s: suite_summary(records, s) for s in SUITES if any(r.get("suite") == s for r in records)}
    fp8 = per_suite.get("fp8", {})
    return {
        "geomean_speedup_over_cublaslt": fp8.get("geomean_speedup", {}).get(PEER_CUBLASLT),
        "suites": per_suite,
        "failures": sum(r.get("status") in ("fail", "error") for r in records),
    }


# ---------------------------------------------------------------------------- host overhead


def host_time_per_call_us(
    fn: Callable[[], Any],
    calls: int = HOST_OVERHEAD_CALLS,
    warmups: int = HOST_OVERHEAD_WARMUPS,
    runs: int = HOST_OVERHEAD_RUNS,
) -> float:
    """CPU wall time per call over ``calls`` back-to-back launches (synchronised at the
    end); the median over ``runs`` such runs."""
    for _ in range(warmups):
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(per_call)


def tiny_launchers(dg: Any) -> dict[str, tuple[Callable | None, str | None]]:
    m, n, k = TINY_SHAPE
    a, b = randn(m, k), randn(n, k)
    a_q = per_token_cast_to_fp8(a, use_ue8m0=False)
    b_q = per_block_cast_to_fp8(b, use_ue8m0=False)
    op, reason = get_op(dg, "fp8_gemm_nt")
    d = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    peer = cublaslt_peer(a_q, b_q)
    # Also with SFA already in the kernel's layout (what a serving loop that
    # prepares its scales once pays): no per-call layout kernel.
    prepared = None
    if op and hasattr(dg, "get_mn_major_tma_aligned_tensor"):
        a_prep = (a_q[0], dg.get_mn_major_tma_aligned_tensor(a_q[1]))
        prepared = lambda: op(a_prep, b_q, d)
    return {
        "deep_gemm": ((lambda: op(a_q, b_q, d)) if op else None, reason),
        "deep_gemm_prepared_sf": (prepared, reason if op is None else None),
        PEER_CUBLASLT: (peer.run, peer.reason),
        PEER_BF16: (bf16_peer(a, b).run, None),
    }


def measure_host_overhead(dg: Any) -> tuple[dict[str, float | None], dict[str, str]]:
    results, errors = {}, {}
    for name, (fn, reason) in tiny_launchers(dg).items():
        results[name] = None
        if fn is None:
            errors[name] = reason or "unavailable"
            continue
        try:
            results[name] = host_time_per_call_us(fn)
        except Exception as exc:  # noqa: BLE001  (recorded in the results)
            errors[name] = describe_error(exc)
    return results, errors


# ---------------------------------------------------------------------------- subprocess measurements

# Child programs run in fresh interpreters; each prints one line: RESULT_TAG + JSON.
_JIT_CHILD = """
import json, sys, time
import torch
import deep_gemm
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

def describe_jit():
    try:
        jit = deep_gemm._C.get_jit()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    info = {"repr": repr(jit)[:500]}
    for name in ("backend", "compiler", "compiler_backend", "compiler_version", "num_kernels"):
        value = getattr(jit, name, None)
        if isinstance(value, (str, int, float, bool)):
            info[name] = value
    return info

times = []
for m, n, k in json.loads(sys.argv[1]):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a_q = per_token_cast_to_fp8(a, use_ue8m0=False)
    b_q = per_block_cast_to_fp8(b, use_ue8m0=False)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    start = time.perf_counter()
    deep_gemm.fp8_gemm_nt(a_q, b_q, d)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
print("__TAG__" + json.dumps({"first_call_s": times, "jit": describe_jit()}))
""".replace("__TAG__", RESULT_TAG)

_IMPORT_CHILD = """
import json, time
import torch
start = time.perf_counter()
import deep_gemm
elapsed_ms = (time.perf_counter() - start) * 1e3
print("__TAG__" + json.dumps({"import_ms": elapsed_ms}))
""".replace("__TAG__", RESULT_TAG)


def package_parent() -> str:
    """The folder holding this deep_gemm package (so children import the same copy)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [package_parent()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra or {})
    return env


def run_child(code: str, args: Sequence[str], env: dict[str, str], timeout: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; return its tagged JSON line or {'error': ...}."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, *args], env=env, capture_output=True, check=False, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"exit status {proc.returncode}: {tail}"}


def jit_backend(info: dict[str, Any]) -> str:
    for name in ("backend", "compiler_backend", "compiler"):
        if isinstance(info.get(name), str):
            return info[name]
    if os.environ.get("DG_JIT_USE_NVRTC", "0") not in ("", "0"):
        return "nvrtc"
    return "unknown"


def measure_jit(shapes: Sequence[tuple[int, int, int]] = JIT_SHAPES) -> dict[str, Any]:
    """First-call seconds per shape with an empty cache, then with the warm cache (new process)."""
    result: dict[str, Any] = {"shapes": [list(s) for s in shapes]}
    with tempfile.TemporaryDirectory(prefix="deep_gemm_bench_jit_") as cache_dir:
        env = child_env({"DG_JIT_CACHE_DIR": cache_dir})
        cold = run_child(_JIT_CHILD, [json.dumps(shapes)], env)
        if "error" in cold:
            return dict(
                result,
                backend="unknown",
                cold_compile_s=None,
                warm_first_call_ms=None,
                error=f"cold run: {cold['error']}",
            )
        warm = run_child(_JIT_CHILD, [json.dumps(shapes[:1])], env)
    result.update(
        backend=jit_backend(cold.get("jit", {})), cold_compile_s=cold["first_call_s"], details=cold.get("jit")
    )
    if "error" in warm:
        return dict(result, warm_first_call_ms=None, error=f"warm run: {warm['error']}")
    return dict(result, warm_first_call_ms=warm["first_call_s"][0] * 1e3)


def measure_import(runs: int = IMPORT_RUNS) -> tuple[float | None, dict[str, Any]]:
    """Median ``import deep_gemm`` milliseconds after ``import torch``, over fresh processes."""
    samples, errors = [], []
    for _ in range(runs):
        out = run_child(_IMPORT_CHILD, [], child_env())
        if "error" in out:
            errors.append(out["error"])
        else:
            samples.append(out["import_ms"])
    median = statistics.median(samples) if samples else None
    return median, {"import_ms_samples": samples, **({"import_errors": errors} if errors else {})}


# ---------------------------------------------------------------------------- environment


def detect_commit() -> str:
    """git HEAD of the checkout this package lives in, else $DG_COMMIT, else 'unknown'."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        top = git_output(here, "rev-parse", "--show-toplevel")
        if top and os.path.samefile(os.path.join(top, "src", "deep_gemm"), here):
            sha = git_output(top, "rev-parse", "HEAD")
            if sha:
                return sha
    except OSError:
        pass
    return os.environ.get("DG_COMMIT") or "unknown"


def git_output(cwd: str, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def package_version(dg: Any) -> str:
    version = getattr(dg, "__version__", None)
    if version:
        return str(version)
    from importlib import metadata

    for dist in ("deep-gemm-cu13", "deep-gemm-cu12", "deep-gemm", "deep_gemm"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def num_sms(dg: Any) -> int:
    try:
        return int(dg.get_num_sms())
    except Exception:  # noqa: BLE001  (any failure: fall back to the device properties)
        return torch.cuda.get_device_properties(0).multi_processor_count


def environment(dg: Any) -> dict[str, Any]:
    major, minor = torch.cuda.get_device_capability()
    return {
        "gpu": torch.cuda.get_device_name(),
        "num_sms": num_sms(dg),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "deep_gemm": package_version(dg),
        "commit": detect_commit(),
        "date": datetime.date.today().isoformat(),
        "compute_capability": f"{major}.{minor}",
        "python": sys.version.split()[0],
    }


def gpu_problem() -> str | None:
    """Why this machine cannot run the benchmark, or None."""
    if not torch.cuda.is_available():
        return (
            f"no CUDA GPU is available (torch.cuda.is_available() is False; torch "
            f"{torch.__version__}, CUDA {torch.version.cuda}). Run the benchmark on an "
            f"NVIDIA Hopper (SM90) GPU host."
        )
    return None


# ---------------------------------------------------------------------------- report


def fmt(value: Any, spec: str = ".1f", width: int = 8) -> str:
    text = "-" if value is None else format(value, spec)
    return text.rjust(width)


def table_header(peers: Sequence[str]) -> str:
    head = f"{'suite':<8}{'op':<34}{'M':>7}{'N':>7}{'K':>7}{'G':>4}{'us':>9}{'TFLOP/s':>9}{'diff':>10}  {'status':<8}"
    return head + "".join(f" | {PEER_LABELS.get(name, name)[:12] + ' us':>15}{'TF/s':>7}{'x':>6}" for name in peers)


def table_row(record: dict[str, Any], peers: Sequence[str]) -> str:
    row = (
        f"{record.get('suite', ''):<8}{record.get('op', record.get('label', ''))[:33]:<34}"
        f"{fmt(record.get('m'), 'd', 7)}{fmt(record.get('n'), 'd', 7)}{fmt(record.get('k'), 'd', 7)}"
        f"{fmt(record.get('groups'), 'd', 4)}{fmt(record.get('us'), '.1f', 9)}"
        f"{fmt(record.get('tflops'), '.0f', 9)}{fmt(record.get('diff'), '.2e', 10)}"
        f"  {record.get('status', ''):<8}"
    )
    for name in peers:
        peer = record.get("peers", {}).get(name, {})
        row += (
            f" | {fmt(peer.get('us'), '.1f', 15)}{fmt(peer.get('tflops'), '.0f', 7)}"
            f"{fmt(peer.get('speedup'), '.2f', 6)}"
        )
    return row.rstrip()


def notes_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """One line per distinct (what, status, reason), with the shapes it applies to."""
    groups: dict[tuple[str, str], list[str]] = {}
    for record in records:
        op = record.get("op", record.get("label"))
        shape = "x".join(str(record.get(d)) for d in ("m", "n", "k"))
        if record.get("status") != "ok":
            key = (str(op), f"{record.get('status')}: {record.get('reason')}")
            groups.setdefault(key, []).append(shape)
        for name, peer in record.get("peers", {}).items():
            if peer.get("reason"):
                groups.setdefault((f"{op} peer {name}", str(peer["reason"])), []).append(shape)
    return [
        f"  {what} ({len(shapes)} row{'s' if len(shapes) > 1 else ''}: {', '.join(shapes)}): {why}"
        for (what, why), shapes in groups.items()
    ]


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for suite, info in result.get("summary", {}).get("suites", {}).items():
        for name, value in info.get("geomean_speedup", {}).items():
            lines.append(
                f"{suite}: geomean speedup over {name}: {value:.3f}x over "
                f"{info['compared_rows'][name]} rows (min {info['min_speedup'][name]:.3f}x); "
                f"{info['ok']}/{info['rows']} rows ok"
            )
    host = result.get("host_overhead_us")
    if host:
        shape = "x".join(map(str, TINY_SHAPE))
        parts = ", ".join(f"{name} {fmt(v, '.1f', 0)} us" for name, v in host.items())
        lines.append(
            f"host overhead per call ({shape}, median of {HOST_OVERHEAD_RUNS} x {HOST_OVERHEAD_CALLS} calls): {parts}"
        )
    jit = result.get("jit")
    if jit:
        cold = ", ".join(f"{s:.2f} s" for s in (jit.get("cold_compile_s") or [])) or "-"
        lines.append(
            f"JIT ({jit.get('backend')}): cold first call per kernel: {cold}; "
            f"warm-cache first call: {fmt(jit.get('warm_first_call_ms'), '.1f', 0)} ms"
            + (f"; error: {jit['error']}" if jit.get("error") else "")
        )
    if "import_ms" in result:
        lines.append(f"import deep_gemm after torch: {fmt(result.get('import_ms'), '.1f', 0)} ms")
    return lines


def format_report(result: dict[str, Any]) -> str:
    records = result.get("records", [])
    peers = [p for p in PEER_ORDER if any(p in r.get("peers", {}) for r in records)]
    env = ", ".join(
        f"{key} {result.get(key)}" for key in ("gpu", "num_sms", "torch", "cuda", "deep_gemm", "commit", "date")
    )
    lines = [f"deep_gemm.bench: {env}", table_header(peers)]
    lines += [table_row(r, peers) for r in records]
    if peers:
        lines.append("x = peer time / deep_gemm time (above 1: deep_gemm is faster)")
    notes = notes_lines(records)
    if notes:
        lines += ["notes:"] + notes
    lines += summary_lines(result)
    return "\n".join(lines)


# ---------------------------------------------------------------------------- driver


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m deep_gemm.bench",
        description="Benchmark deep_gemm against cuBLASLt blockwise FP8 and torch bf16 matmul "
        "on this GPU (protocol: BENCH.md). Prints a table last and writes JSON.",
    )
    parser.add_argument(
        "--suite", choices=SUITES + ("all",), default="all", help="which shape set to run (default: all)"
    )
    parser.add_argument(
        "--json",
        default="deep_gemm_bench.json",
        metavar="PATH",
        help="where to write the JSON results ('-' for stdout; default: %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=PROTOCOL_MIN_REPEATS,
        metavar="N",
        help="timed launches per measurement, median reported "
        f"(protocol: at least {PROTOCOL_MIN_REPEATS}; default: %(default)s)",
    )
    parser.add_argument(
        "--warmups",
        type=int,
        default=3,
        metavar="N",
        help="untimed launches before each measurement (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument("--no-peers", action="store_true", help="do not measure the peers")
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="time a row's implementations one after another (all launches of ours, then of each peer) "
        "instead of launch by launch in turn",
    )
    parser.add_argument(
        "--skip-extras", action="store_true", help="skip host overhead, JIT compile and import time measurements"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.warmups < 0:
        parser.error("--repeats must be >= 1 and --warmups >= 0")
    return args


def log(message: str) -> None:
    print(f"[deep_gemm.bench] {message}", file=sys.stderr, flush=True)


def run_benchmark(dg: Any, args: argparse.Namespace) -> dict[str, Any]:
    result = environment(dg)
    result["protocol"] = {
        "repeats": args.repeats,
        "warmups": args.warmups,
        "flush_bytes": FLUSH_BYTES,
        "statistic": "median",
        "order": "sequential" if args.sequential else "interleaved",
        "meets_min_repeats": args.repeats >= PROTOCOL_MIN_REPEATS,
    }
    if args.repeats < PROTOCOL_MIN_REPEATS:
        log(f"warning: --repeats {args.repeats} is below the protocol minimum of {PROTOCOL_MIN_REPEATS}")
    timer = LaunchTimer(args.repeats, args.warmups)
    suites = SUITES if args.suite == "all" else (args.suite,)
    records = []
    for suite in suites:
        records += run_suite(dg, suite, timer, args.seed, not args.no_peers, log, interleaved=not args.sequential)
    result["records"] = records
    result["summary"] = summarize(records)
    if not args.skip_extras:
        result.update(measure_extras(dg))
    return result


def measure_extras(dg: Any) -> dict[str, Any]:
    log("host overhead ...")
    host, host_errors = measure_host_overhead(dg)
    log("JIT cold/warm first calls (subprocesses) ...")
    jit = measure_jit()
    log("import time (subprocesses) ...")
    import_ms, import_extra = measure_import()
    extras = {"host_overhead_us": host, "jit": jit, "import_ms": import_ms, **import_extra}
    if host_errors:
        extras["host_overhead_errors"] = host_errors
    return extras


def write_json(result: dict[str, Any], path: str) -> None:
    text = json.dumps(result, indent=2, default=str)
    if path == "-":
        print(text)
        return
    with open(path, "w") as f:
        f.write(text + "\n")
    log(f"wrote {path}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    problem = gpu_problem()
    if problem:
        print(f"deep_gemm.bench: {problem}", file=sys.stderr)
        return 2
    dg = importlib.import_module(__package__ or "deep_gemm")
    result = run_benchmark(dg, args)
    write_json(result, args.json)
    print(format_report(result))
    return 1 if result["summary"]["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
