"""Compile kernels into the JIT cache ahead of time, without a GPU.

    python -m deep_gemm.warmup --num-sms 132 --suite fp8
    python -m deep_gemm.warmup --num-sms 132 --suite grouped
    python -m deep_gemm.warmup --num-sms 132 --shape 4096,7168,16384 --shape 128,2112,7168:fp32

For deployment images and CI: the kernels land in DG_JIT_CACHE_DIR exactly as
the first call on a GPU with that many SMs would compile them.
"""

from __future__ import annotations

import argparse
import sys
import time

# The nine dense FP8 shapes of BENCH.md (M, N, K).
FP8_SUITE = [(m, n, k) for m in (128, 4096) for (n, k) in ((2112, 7168), (24576, 1536), (7168, 16384), (4096, 7168))]
FP8_SUITE.append((4096, 7168, 2048))

# The grouped sets of BENCH.md. Contiguous: (layout, groups, rows per group, N, K), costed
# as M_sum = groups * rows (the kernel choice is stable around it); masked: (layout, groups,
# expected rows per group, max rows per group, N, K); k-grouped (the bench's wgrad sets):
# (layout, groups, tokens per group, M, N), costed with the mean tokens per group (the choice
# is the same for means from 0.71x to 1.41x of it); also compiles the tn form's layout kernel.
GROUPED_SUITE = [
    ("contiguous", 4, 8192, 4096, 7168),
    ("contiguous", 8, 4096, 7168, 2048),
    ("masked", 32, 192, 4096, 4096, 7168),
    ("masked", 6, 1024, 4096, 7168, 3072),
    ("k_grouped", 4, 4096, 7168, 4096),
    ("k_grouped", 8, 4096, 7168, 2048),
]


def _parse_shape(text: str) -> tuple[int, int, int, bool]:
    spec, _, kind = text.partition(":")
    try:
        m, n, k = (int(x) for x in spec.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be M,N,K or M,N,K:fp32, got {text!r}") from None
    if kind not in ("", "bf16", "fp32"):
        raise argparse.ArgumentTypeError(f"output kind must be bf16 or fp32, got {kind!r}")
    return m, n, k, kind == "fp32"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deep_gemm.warmup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="sm_90a", help="target architecture (only sm_90a is supported)")
    ap.add_argument("--num-sms", type=int, required=True, help="SM count of the target GPU (132 on H100/H200 SXM)")
    ap.add_argument("--suite", choices=["fp8", "grouped"], action="append", default=[], help="a benchmark suite's shapes")
    ap.add_argument("--shape", type=_parse_shape, action="append", default=[], help="M,N,K[:fp32]")
    ap.add_argument("--compiled-dims", default="nk")
    ap.add_argument("--k-grouped-compiled-dims", default="mn",
                    help="compiled_dims of the k-grouped kernels (their API default is 'mn')")
    args = ap.parse_args(argv)
    if args.arch != "sm_90a":
        ap.error(f"only sm_90a kernels exist in this release, got --arch {args.arch}")
    shapes = list(args.shape)
    if "fp8" in args.suite:
        shapes += [(m, n, k, False) for (m, n, k) in FP8_SUITE]
    grouped = GROUPED_SUITE if "grouped" in args.suite else []
    if not shapes and not grouped:
        ap.error("nothing to compile: give --suite and/or --shape")

    import torch

    import deep_gemm  # noqa: F401  (loads the ops)

    seen = set()
    t_all = time.perf_counter()
    for m, n, k, fp32 in shapes:
        t0 = time.perf_counter()
        # One line per kernel: the one for prepared scales, then (small M) the one that
        # reads per-token scales as given.
        built = torch.ops.deep_gemm.fp8_gemm_build(m, n, k, fp32, args.num_sms, args.compiled_dims)
        for line in built.splitlines():
            name, path = line.split("\t")
            status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
            seen.add(name)
            print(f"{m:>6} x {n:>6} x {k:>6} {'fp32' if fp32 else 'bf16'}  {status}  {name}  {path}", flush=True)
    for entry in grouped:
        t0 = time.perf_counter()
        if entry[0] == "k_grouped":
            _, g, tokens, m, n = entry
            name, path = torch.ops.deep_gemm.k_grouped_fp8_gemm_build(
                m, n, tokens, g, args.num_sms, args.k_grouped_compiled_dims, True).split("\t")
            status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
            seen.add(name)
            print(f"{f'k_grouped {g} x ~{tokens}':>24} x {m:>6} x {n:>6} fp32  {status}  {name}  {path}", flush=True)
            continue
        if entry[0] == "masked":
            _, g, expected_m, max_m, n, k = entry
            m, label = max_m, f"masked {g} x ~{expected_m}/{max_m}"
        else:
            _, g, expected_m, n, k = entry
            m, expected_m, label = g * expected_m, 0, f"contiguous {g} x ~{entry[2]}"
        name, path = torch.ops.deep_gemm.m_grouped_fp8_gemm_build(
            entry[0], m, n, k, g, expected_m, args.num_sms, args.compiled_dims).split("\t")
        status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
        seen.add(name)
        print(f"{label:>24} x {n:>6} x {k:>6} bf16  {status}  {name}  {path}", flush=True)
    total = len(shapes) + len(grouped)
    print(f"warmup: {len(seen)} kernels for {total} shapes in {time.perf_counter() - t_all:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
