"""Write docs/PERFORMANCE.md from the bench JSON committed in docs/benchmarks/.

    python tools/perf_table.py            # rewrite docs/PERFORMANCE.md
    python tools/perf_table.py --check    # exit 1 if docs/PERFORMANCE.md is not up to date

Standard library only. Each JSON is one run of `python -m deep_gemm.bench` (its --json).
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "docs" / "benchmarks"
OUTPUT = ROOT / "docs" / "PERFORMANCE.md"

PEERS = {  # JSON peer name -> column heading
    "cublaslt_blockwise": "x cuBLASLt",
    "torch_bf16": "x torch bf16",
    "deep_gemm_dense_loop": "x dense loop",
    "torch_reference": "x torch reference",
    "torch_paged": "x torch paged",
    "torch_into_d": "x torch into d",
}
KINDS = {
    "fp8_gemm_nt": "dense",
    "m_grouped_fp8_gemm_nt_contiguous": "contiguous",
    "m_grouped_fp8_gemm_nt_masked": "masked",
    "k_grouped_fp8_gemm_nt_contiguous": "k-grouped",
    "bf16_gemm_nt": "bf16 dense",
    "cublaslt_gemm_nt": "cublaslt dense",
    "m_grouped_bf16_gemm_nt_contiguous": "bf16 contiguous",
    "m_grouped_bf16_gemm_nt_masked": "bf16 masked",
}


def read_floor(r):
    """The row's floors (a torch read of the same bytes, timed beside ours): their time over ours."""
    return "".join(f", {f['of_ours']:.0%} of the rate of {name} (torch, same run)"
                   for name, f in r.get("floors", {}).items())


# For runs whose JSON predates the bench's own copy measurement (`copy_tb_s`): the
# device-to-device copy bandwidth (2 GiB, read + write) measured on the GPUs they name, the H200
# about 4.3 TB/s (2026-12-02), the H100 80GB HBM3 3.01 TB/s (2026-12-07, twice).
COPY_TB_S = {"H200": 4.3, "H100": 3.0}


def copy_tb_s(run):
    """The run's own measurement (bench JSON from 2026-12-07 on), else its GPU's figure above."""
    if run.get("copy_tb_s"):
        return run["copy_tb_s"]
    return next((bw for name, bw in COPY_TB_S.items() if name in run.get("gpu", "")), 4.3)


def copy_note(run):
    return f", copy {run['copy_tb_s']} TB/s (same run)" if run.get("copy_tb_s") else ""


def shape(r, run):
    kind = KINDS.get(r["op"], r["op"])
    if "->" in r["op"]:  # an einsum expression
        return f"einsum {r['op']} (dims {r['m']}, {r['n']}, {r['k']}; batch {r['groups']})"
    if kind in ("dense", "bf16 dense"):
        return f"dense {r['m']}x{r['n']}x{r['k']}{read_floor(r)}"
    bw_tb = copy_tb_s(run)
    if r["op"] == "tf32_hc_prenorm_gemm":  # memory-bound: a's bytes against the GPU's copy bandwidth
        bw = f", a read at {r['a_bytes'] / r['us'] / 1e6 / bw_tb:.0%} of {bw_tb} TB/s" if r.get("a_bytes") else ""
        return f"hc prenorm {r['m']}x{r['n']}x{r['k']}{bw}{read_floor(r)}"
    if r["op"] == "fp8_mqa_logits":
        return f"mqa logits S={r['m']} S_kv={r['n']} H={r['heads']} D={r['k']} ({r['windows']} windows)"
    if r["op"] == "fp8_paged_mqa_logits":  # decode: the KV cache's bytes against copy bandwidth
        bw = f", KV read at {r['kv_bytes'] / r['us'] / 1e6 / bw_tb:.0%} of {bw_tb} TB/s" if r.get("kv_bytes") else ""
        return (f"paged mqa logits B={r['batch']} next_n={r['next_n']} ctx={r['n']} H={r['heads']}{bw}"
                f"{read_floor(r)}")
    if kind == "cublaslt dense":
        return f"cublaslt_gemm_nt {r['m']}x{r['n']}x{r['k']}{read_floor(r)}"
    if kind == "k-grouped":
        return f"k-grouped {r['groups']} x ~{r['expected_k_per_group']} K, M {r['m']}, N {r['n']}"
    rows = f"{r['groups']} x ~{r['expected_m_per_group']} rows"
    return f"{kind} {rows} ({r['m']}), N {r['n']}, K {r['k']}"


def order(data):
    protocol = data.get("protocol", {})
    return protocol.get("order", "sequential, unqueued (the bench before 2026-12-01)")


def geomean(data):
    parts = []
    for suite in data.get("summary", {}).get("suites", {}).values():
        for peer, value in suite.get("geomean_speedup", {}).items():
            parts.append(f"{PEERS.get(peer, peer)} {value:.3f}")
    return f"; geomean {', '.join(parts)}" if parts else ""


def command(data, path):
    suites = sorted({r["suite"] for r in data["records"]})
    protocol = data.get("protocol", {})
    flags = " --sequential" if protocol.get("order") == "sequential" else ""
    if protocol.get("only"):
        flags += f" --only {shlex.quote(protocol['only'])}"
    return f"python -m deep_gemm.bench --suite {' '.join(suites)}{flags} --json docs/benchmarks/{path.name}"


def ratio(r, peer):
    p = r.get("peers", {}).get(peer)
    if not p:
        return ""
    if p.get("status") != "ok" or not p.get("speedup"):
        return p.get("status", "")
    return f"{p['speedup']:.2f}"


def render(paths):
    runs = [(p, json.loads(p.read_text())) for p in paths]
    runs.sort(key=lambda run: (run[1]["date"], run[0].stem))
    peers = [name for name in PEERS if any(name in r.get("peers", {}) for _, d in runs for r in d["records"])]
    out = [
        "# Performance",
        "",
        "<!-- Generated by `python tools/perf_table.py` from docs/benchmarks/*.json; do not edit. -->",
        "",
        "`python -m deep_gemm.bench` on one GPU: median of 30 launches, L2 flushed before each,",
        "every result checked against a float reference before it is timed. Peers run in the",
        "same process on the same data: cuBLASLt blockwise FP8 (`torch.nn.functional.scaled_mm`)",
        "and torch bf16 matmul; for the k-grouped rows, cuBLASLt and our dense GEMM once per group.",
        "`x peer` is the peer's time over ours (above 1: we are faster). Absolute figures depend",
        "on the timing order and on the GPU: compare them within one run, ratios across runs.",
        "",
        "Runs (to reproduce one, build the wheel at its commit and run its command on an SM90 host):",
        "",
    ]
    for i, (path, d) in enumerate(runs, 1):
        out.append(f"{i}. {d['date']}, commit {d['commit']}: {d['gpu']} ({d['num_sms']} SMs), torch {d['torch']}, "
                   f"CUDA {d['cuda']}, Python {d['python']}{copy_note(d)}; order: {order(d)}{geomean(d)}.")
        out.append(f"   `{command(d, path)}`")
    out += ["", "| run | shape | µs | TFLOP/s | " + " | ".join(PEERS[p] for p in peers) + " |",
            "|---|---|---:|---:|" + "---:|" * len(peers)]
    for i, (_, d) in enumerate(runs, 1):
        for r in d["records"]:
            if r.get("status") != "ok":
                out.append(f"| {i} | {shape(r, d)} | {r.get('status')} | | " + " | " * len(peers))
                continue
            cells = [str(i), shape(r, d), f"{r['us']:.1f}", f"{r['tflops']:.0f}"] + [ratio(r, p) for p in peers]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    text = render(sorted(BENCH_DIR.glob("*.json")))
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python tools/perf_table.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
