"""What a run writes: the environment fields, the summary (geomean speedups per suite),
the JSON file and the table printed last."""

from __future__ import annotations

import datetime
import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import torch

from .extras import HOST_OVERHEAD_CALLS, HOST_OVERHEAD_RUNS, TINY_SHAPE
from .protocol import PEER_CUBLASLT, PEER_LABELS, PEER_ORDER, log
from .suites import SUITES

# ---------------------------------------------------------------------------- summary


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None for an empty sequence."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


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


# ---------------------------------------------------------------------------- environment


def detect_commit() -> str:
    """git HEAD of the checkout this package lives in, else $DG_COMMIT, else 'unknown'."""
    # git_output as the package exports it (deep_gemm.bench.git_output), so that a caller
    # that replaces it there (a test without git) replaces it here too.
    from . import git_output

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # deep_gemm/, not deep_gemm/bench/
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


COPY_PROBE_BYTES = 1 << 30
COPY_PROBE_LAUNCHES = 10


def copy_bandwidth_tb_s() -> float | None:
    """This GPU's copy bandwidth in TB/s (bytes read plus bytes written), the yardstick of the
    memory-bound rows, measured in the same run: the median of COPY_PROBE_LAUNCHES
    device-to-device copies of up to 1 GiB. None where two such buffers do not fit."""
    free, _ = torch.cuda.mem_get_info()
    nbytes = min(COPY_PROBE_BYTES, free // 4) & ~0xFFFF
    if nbytes < (64 << 20):
        return None
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times_ms = []
    for _ in range(COPY_PROBE_LAUNCHES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times_ms.append(start.elapsed_time(end))
    del src, dst
    return round(2 * nbytes / (statistics.median(times_ms) * 1e-3) / 1e12, 3)


def copy_bandwidth_or_none() -> float | None:
    try:
        return copy_bandwidth_tb_s()
    except RuntimeError as exc:  # out of memory, or a CUDA error: the rows still run
        log(f"warning: copy bandwidth not measured: {exc}")
        return None


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
        "copy_tb_s": copy_bandwidth_or_none(),
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


def table_peers(records: Sequence[dict[str, Any]]) -> list[str]:
    """The peer columns of the table: the protocol's peers in their order, then any other peer a
    suite names (the indexer's and HC's torch references, say) in the order the rows first name it."""
    named = [name for r in records for name in r.get("peers", {})]
    return [p for p in PEER_ORDER if p in named] + [p for p in dict.fromkeys(named) if p not in PEER_ORDER]


def format_report(result: dict[str, Any]) -> str:
    records = result.get("records", [])
    peers = table_peers(records)
    env = ", ".join(
        f"{key} {result.get(key)}" for key in ("gpu", "num_sms", "copy_tb_s", "torch", "cuda", "deep_gemm", "commit", "date")
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


def write_json(result: dict[str, Any], path: str) -> None:
    text = json.dumps(result, indent=2, default=str)
    if path == "-":
        print(text)
        return
    with open(path, "w") as f:
        f.write(text + "\n")
    log(f"wrote {path}")
