"""Timing helpers with upstream DeepGEMM's signatures: CUDA events and the kineto profiler.

Both need a CUDA GPU and raise RuntimeError without one. Times are in seconds.
Environment knobs (upstream's names): ``DG_USE_NVIDIA_TOOLS=1`` skips profiling
(it conflicts with Nsight tools and the sanitizer) and returns 1 per kernel;
``DG_BENCH_FLUSH_L2_BYTES`` sets the size of the buffer that ``bench_kineto``
writes before each call to flush the L2 cache (default 8e9 bytes, as upstream).
"""

import inspect
import os
import sys
from collections.abc import Callable

import torch

from .utils import require_cuda

__all__ = ["bench", "bench_kineto", "empty_suppress", "suppress_stdout_stderr"]

_BENCH_FLUSH_BYTES = int(256e6)
_KINETO_FLUSH_BYTES_DEFAULT = int(8e9)


def bench(fn: Callable[[], object], num_warmups: int = 5, num_tests: int = 10, high_precision: bool = False) -> float:
    """Average seconds per ``fn()`` call over ``num_tests`` back-to-back calls.

    The L2 cache is flushed once (256 MB written) before the warm-up calls; the
    timed calls run between two CUDA events. ``high_precision`` queues a large
    matmul first so that the GPU is busy while the CPU launches the timed calls.
    """
    require_cuda("bench")
    torch.cuda.synchronize()
    torch.empty(_BENCH_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda").zero_()
    for _ in range(num_warmups):
        fn()
    if high_precision:
        lhs = torch.randn((8192, 8192), dtype=torch.float, device="cuda")
        rhs = torch.randn((8192, 8192), dtype=torch.float, device="cuda")
        lhs @ rhs
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(num_tests):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / num_tests / 1e3


class empty_suppress:
    """A context manager that does nothing (the counterpart of suppress_stdout_stderr)."""

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False


def _output_fds() -> tuple[int, ...]:
    """File descriptors 1 and 2, plus those behind sys.stdout/sys.stderr if they differ."""
    fds = [1, 2]
    for stream in (sys.stdout, sys.stderr):
        try:
            fds.append(stream.fileno())
        except (AttributeError, OSError, ValueError):
            continue
    return tuple(dict.fromkeys(fds))


class suppress_stdout_stderr:
    """Silence stdout and stderr, at the file-descriptor level too (C and CUDA libraries)."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self._devnull = open(os.devnull, "w")
        self._fds = _output_fds()
        self._saved_fds = tuple(os.dup(fd) for fd in self._fds)
        self._saved_streams = (sys.stdout, sys.stderr)
        for fd in self._fds:
            os.dup2(self._devnull.fileno(), fd)
        sys.stdout = sys.stderr = self._devnull
        return self

    def __exit__(self, *_):
        sys.stdout, sys.stderr = self._saved_streams
        for fd, saved in zip(self._fds, self._saved_fds, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
        self._devnull.close()
        return False


def _kineto_flush_elems() -> int:
    flush_bytes = int(os.environ.get("DG_BENCH_FLUSH_L2_BYTES", str(_KINETO_FLUSH_BYTES_DEFAULT)))
    return max(0, flush_bytes // 4)


def _profiler_takes(argument: str) -> bool:
    try:
        return argument in inspect.signature(torch.profiler.profile.__init__).parameters
    except (TypeError, ValueError):
        return False


def _profile(fn, num_tests: int, flush_l2: bool, barrier: Callable | None):
    """Run two rounds of ``num_tests`` calls; the profiler records only the second."""
    flush_elems = _kineto_flush_elems() if flush_l2 else 0
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    extra = {"acc_events": True} if _profiler_takes("acc_events") else {}
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA], schedule=schedule, **extra)
    with profiler:
        for _round in range(2):
            for _ in range(num_tests):
                if flush_elems:
                    torch.empty(flush_elems, dtype=torch.int32, device="cuda").zero_()
                if barrier is not None:
                    torch.cuda._sleep(int(2e7))  # hide unbalanced launch overhead across ranks
                    barrier()
                fn()
            torch.cuda.synchronize()
            profiler.step()
    return profiler


def _device_kernel_totals(profiler) -> dict[str, tuple[float, int]]:
    """Kernel name -> (total device microseconds, launch count), GPU-side events only."""
    totals = {}
    for evt in profiler.key_averages():
        if evt.device_type == torch.autograd.DeviceType.CPU:
            continue
        time_us = float(getattr(evt, "self_device_time_total", 0.0) or 0.0)
        prev_time, prev_count = totals.get(evt.key, (0.0, 0))
        totals[evt.key] = (prev_time + time_us, prev_count + int(evt.count))
    return totals


def _kernel_seconds(
    totals: dict[str, tuple[float, int]], name: str, num_tests: int, with_multiple_kernels: bool
) -> float:
    matches = [key for key in totals if name in key]
    if not with_multiple_kernels and len(matches) > 1:
        raise RuntimeError(
            f"bench_kineto: {name!r} matches {len(matches)} different kernels "
            f"({matches}); pass a more specific name or with_multiple_kernels=True"
        )
    total_us = sum(totals[key][0] for key in matches)
    count = sum(totals[key][1] for key in matches)
    if count == 0:
        return 0.0
    return total_us / 1e6 / (num_tests if with_multiple_kernels else count)


def bench_kineto(
    fn: Callable[[], object],
    kernel_names: str | tuple[str, ...],
    num_tests: int = 30,
    suppress_kineto_output: bool = False,
    trace_path: str | None = None,
    flush_l2: bool = True,
    with_multiple_kernels: bool = False,
    barrier: Callable[[], object] | None = None,
):
    """Seconds spent in the GPU kernels whose names contain ``kernel_names``.

    ``fn`` runs once untimed, then ``num_tests`` times under the profiler (each call
    preceded by an L2 flush when ``flush_l2``). For each name the result is the
    average time of one matching kernel launch; with ``with_multiple_kernels``
    several kernels may match and the result is their summed time per ``fn()``
    call. A name that matches nothing gives 0. Returns a float for a string and a
    tuple of floats, in order, for a tuple of names. ``trace_path`` saves a
    Chrome trace; ``barrier`` (multi-process runs) is called before each call.
    """
    if not isinstance(kernel_names, (str, tuple)):
        raise TypeError(
            f"bench_kineto: kernel_names must be a str or a tuple of str, got {type(kernel_names).__name__}"
        )
    is_tuple = isinstance(kernel_names, tuple)
    names = kernel_names if is_tuple else (kernel_names,)
    if not all(isinstance(name, str) for name in names):
        raise TypeError("bench_kineto: every kernel name must be a str")
    if int(os.environ.get("DG_USE_NVIDIA_TOOLS", "0")):
        return (1,) * len(names) if is_tuple else 1
    require_cuda("bench_kineto")

    fn()  # untimed first call: JIT compilation, autotuning prints, lazy loads
    suppress = suppress_stdout_stderr if suppress_kineto_output else empty_suppress
    with suppress():
        profiler = _profile(fn, num_tests, flush_l2, barrier)
    if trace_path is not None:
        profiler.export_chrome_trace(trace_path)

    totals = _device_kernel_totals(profiler)
    times = tuple(_kernel_seconds(totals, name, num_tests, with_multiple_kernels) for name in names)
    return times if is_tuple else times[0]
