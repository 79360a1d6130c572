"""The measurements besides the rows: host overhead per call, first-call time with an empty
and with a warm JIT cache, and ``import deep_gemm`` time (the last two in fresh processes)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..utils.math import per_block_cast_to_fp8, per_token_cast_to_fp8
from .peers import bf16_peer, cublaslt_peer
from .protocol import PEER_BF16, PEER_CUBLASLT, describe_error, get_op, log, randn

TINY_SHAPE = (16, 256, 512)
HOST_OVERHEAD_CALLS = 3000
HOST_OVERHEAD_WARMUPS = 50
# Runs of HOST_OVERHEAD_CALLS calls; their median is reported. A single run read 16 to 24 us
# for the same op in two processes of one device session (2026-11-30): one run is too few.
HOST_OVERHEAD_RUNS = 5
JIT_SHAPES = ((128, 2112, 7168), (4096, 7168, 2048), (4096, 24576, 1536))
IMPORT_RUNS = 3
CHILD_TIMEOUT_S = 900
RESULT_TAG = "DG_BENCH_RESULT "
# deep_gemm/ (this file is deep_gemm/bench/extras.py).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
    # The BF16 entry points on the same tiny shape: bf16_gemm_nt and the cuBLASLt wrapper,
    # whose host path is the one thing it adds to torch.matmul's (BENCH.md: no more host time).
    bf16_op, bf16_reason = get_op(dg, "bf16_gemm_nt")
    lt_op, lt_reason = get_op(dg, "cublaslt_gemm_nt")
    d_bf16 = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    return {
        "deep_gemm": ((lambda: op(a_q, b_q, d)) if op else None, reason),
        "deep_gemm_prepared_sf": (prepared, reason if op is None else None),
        "deep_gemm_bf16": ((lambda: bf16_op(a, b, d_bf16)) if bf16_op else None, bf16_reason),
        "deep_gemm_cublaslt": ((lambda: lt_op(a, b, d_bf16)) if lt_op else None, lt_reason),
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
    return os.path.dirname(_PACKAGE_DIR)


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
