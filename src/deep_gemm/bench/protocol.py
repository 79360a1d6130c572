"""The measurement protocol of BENCH.md: inputs, correctness before timing, CUDA-event
timing with an L2 flush before every launch, interleaved or sequential order, and the
fields of a record.

A suite (``suites/``) builds :class:`Case` objects; :func:`measure_case` turns one into a
record (a dict, one row of the JSON's ``records`` and of the table).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..testing.numeric import calc_diff

# ---------------------------------------------------------------------------- constants

FLUSH_BYTES = int(256e6)
PROTOCOL_MIN_REPEATS = 30

PEER_CUBLASLT = "cublaslt_blockwise"
PEER_BF16 = "torch_bf16"
PEER_DENSE_LOOP = "deep_gemm_dense_loop"
PEER_ORDER = (PEER_CUBLASLT, PEER_BF16, PEER_DENSE_LOOP)
PEER_LABELS = {PEER_CUBLASLT: "cuBLASLt", PEER_BF16: "bf16", PEER_DENSE_LOOP: "dense loop"}

OURS = "deep_gemm"  # key of our op among the implementations a row times
FLOOR_PREFIX = "floor:"  # keys of a row's floors (Case.floors) among them

# ---------------------------------------------------------------------------- small helpers


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


def log(message: str) -> None:
    print(f"[deep_gemm.bench] {message}", file=sys.stderr, flush=True)


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
    # Launches timed beside ours and the peers, not checked: operations that do part of our
    # op's work (reading its inputs once, say), so their time is a floor for ours under the
    # same protocol (the L2 flush leaves dirty lines whose write-back a read also pays).
    floors: dict[str, Callable[[], Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    """A shape set: ``name`` (``--suite``, the records' ``suite``), the ``calc_diff`` its rows
    may reach (``max_diff``) and ``cases(dg, seed)``, which yields ``(label, build)`` pairs:
    ``build()`` makes one row's :class:`Case` (inputs on the GPU), the label names it in the log.
    Registered in ``suites/__init__.py``."""

    name: str
    max_diff: float
    cases: Callable[[Any, int], Iterable[tuple[str, Callable[[], Case]]]]


def row_meta(suite: str, op: str, m: int, n: int, k: int, groups: int | None = None, **extra: Any) -> dict[str, Any]:
    """The identifying fields of a record (for grouped rows, ``m`` counts valid rows only)."""
    return {"suite": suite, "op": op, "m": m, "n": n, "k": k, "groups": groups, **extra}


def get_op(dg: Any, name: str) -> tuple[Callable | None, str | None]:
    """Our op ``name`` from the package, or None with the reason it is missing."""
    try:
        return getattr(dg, name), None
    except AttributeError as exc:
        return None, f"deep_gemm.{name} does not exist yet ({type(exc).__name__})"


def shape_cases(label: str, shapes: Iterable[tuple[int, int, int]],
                build: Callable[[int, int, int], Case]) -> Iterator[tuple[str, Callable[[], Case]]]:
    """A dense suite's ``cases``: ``(f"{label} MxNxK", build for that shape)`` per (M, N, K)."""
    for m, n, k in shapes:
        yield f"{label} {m}x{n}x{k}", (lambda m=m, n=n, k=k: build(m, n, k))


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
    floors = case.floors if record["status"] == "ok" else {}
    fns.update({FLOOR_PREFIX + name: fn for name, fn in floors.items()})
    timed = time_launchers(fns, timer, interleaved)
    for name, stats in timed.items():
        if name.startswith(FLOOR_PREFIX):
            continue
        target = record if name == OURS else record["peers"][name]
        target.update(stats)
        target["tflops"] = tflops(case.flops, stats["us"])
    if floors:
        # of_ours: the floor's time over ours (1: ours takes no longer than the floor).
        record["floors"] = {name: dict(timed[FLOOR_PREFIX + name], of_ours=timed[FLOOR_PREFIX + name]["us"] / record["us"])
                            for name in floors}
    add_speedups(record)
    return record


def short_status(record: dict[str, Any]) -> str:
    if record.get("status") != "ok":
        return f"{record.get('status')} ({record.get('reason')})"
    line = f"{record['us']:.1f} us, {record['tflops']:.0f} TFLOP/s, diff {record['diff']:.2g}"
    for name, floor in record.get("floors", {}).items():
        line += f", floor {name} {floor['us']:.1f} us ({floor['of_ours']:.2f} of ours)"
    return line
