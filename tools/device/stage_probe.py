"""Pipeline depth against cluster size on dense bench cases (GPU host).

The stage cap, cluster size and BLOCK_M are read once per process (DG_SM90_FP8_STAGES,
DG_SM90_FP8_CLUSTER, DG_SM90_FP8_BLOCK_M), so each variant runs in its own child process;
the variants alternate, round after round, so clock drift hits them alike. A child checks
its kernel against the float reference (NaN-poisoned output) before timing it with the
bench protocol (256 MB L2 flush before each launch, CUDA events, median of 30), and names
the configuration the heuristics took (DG_PRINT_CONFIGS), so a variant that could not be
built as asked shows up.

  PROBE_VARIANTS="256x128:c1:s3 256x128:c2:s3" PROBE_SHAPES="4096,7168,16384" \
      python tools/device/stage_probe.py [rounds]

A variant may end in ":wNAME" to run the wheel installed in /tmp/site_NAME (as
tools/device/wheel_ab.sh installs them) with its own JIT cache, e.g. "256x128:c2:s3:wr0".
"""

import json
import os
import statistics
import subprocess
import sys

DEFAULT_VARIANTS = "256x128:c1:s3 256x128:c2:s3 128x128:c1:s3 128x128:c2:s3 128x128:c1:s6 128x128:c2:s6"


def child(bm: int, bn: int, shapes: list[tuple[int, int, int]]) -> None:
    import torch

    import deep_gemm as dg
    from deep_gemm import bench

    dg.set_block_size_multiple_of((bm, bn))
    timer = bench.LaunchTimer(30, 3)
    for m, n, k in shapes:
        torch.manual_seed(0)
        case = bench.fp8_case(dg, m, n, k)
        problem = bench.ours_problem(case)
        us = None if problem else timer.measure(case.ours)["us"]
        print(json.dumps({"shape": f"{m}x{n}x{k}", "us": us, "problem": problem}), flush=True)


def run_variant(variant: str, shapes: str) -> dict:
    tile, cluster, stages, *build = variant.split(":")
    bm, bn = tile.split("x")
    env = dict(
        os.environ, DG_SM90_FP8_BLOCK_M=bm, DG_SM90_FP8_CLUSTER=cluster[1:], DG_SM90_FP8_STAGES=stages[1:], DG_PRINT_CONFIGS="1"
    )
    if build:  # ":wNAME": the wheel installed in /tmp/site_NAME, with its own JIT cache
        name = build[0][1:]
        env.update(PYTHONPATH=f"/tmp/site_{name}", DG_JIT_CACHE_DIR=f"/tmp/cache_{name}")
    out = subprocess.run(
        [sys.executable, __file__, "--child", bm, bn, shapes], env=env, capture_output=True, text=True, timeout=300
    )
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            rows[r["shape"]] = r
    configs = sorted({line.split("->", 1)[1].strip()[:130] for line in out.stderr.splitlines() if "->" in line})
    if out.returncode != 0:
        print(f"  {variant}: exit {out.returncode}: {out.stderr[-400:]}", flush=True)
    return {"rows": rows, "configs": configs}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    variants = os.environ.get("PROBE_VARIANTS", DEFAULT_VARIANTS).split()
    shapes = os.environ.get("PROBE_SHAPES", "4096,7168,16384")
    times: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        for v in variants if r % 2 == 0 else reversed(variants):
            res = run_variant(v, shapes)
            if r == 0:
                print(f"  {v}: {'; '.join(res['configs'])}", flush=True)
            for shape, row in res["rows"].items():
                if row["problem"]:
                    print(f"  {v} {shape}: {row['problem']}", flush=True)
                else:
                    times.setdefault((v, shape), []).append(row["us"])
    for shape in shapes.split(";"):
        name = shape.replace(",", "x")
        print(f"{name}:")
        for v in variants:
            t = times.get((v, name), [])
            if t:
                print(f"  {v:>16}: " + " / ".join(f"{x:.1f}" for x in t) + f"  (median {statistics.median(t):.1f} us)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        shape_list = [tuple(int(x) for x in s.split(",")) for s in sys.argv[4].split(";")]
        child(int(sys.argv[2]), int(sys.argv[3]), shape_list)
    else:
        main()
