"""The command line of ``python -m deep_gemm.bench`` (``__main__.py`` runs :func:`main`)."""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

from .extras import measure_extras
from .protocol import FLUSH_BYTES, PROTOCOL_MIN_REPEATS, LaunchTimer, log
from .report import environment, format_report, gpu_problem, summarize, write_json
from .suites import SUITES, run_suite


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
    parser.add_argument(
        "--only",
        metavar="REGEX",
        help="run only the rows whose label (as the log prints it, e.g. 'paged B=64 next_n=1') "
        "the regular expression matches (re.search)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.warmups < 0:
        parser.error("--repeats must be >= 1 and --warmups >= 0")
    if args.only is not None:
        try:
            args.only = re.compile(args.only)
        except re.error as exc:
            parser.error(f"--only: not a regular expression: {exc}")
    return args


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
    if args.only is not None:
        result["protocol"]["only"] = args.only.pattern
    if args.repeats < PROTOCOL_MIN_REPEATS:
        log(f"warning: --repeats {args.repeats} is below the protocol minimum of {PROTOCOL_MIN_REPEATS}")
    timer = LaunchTimer(args.repeats, args.warmups)
    suites = SUITES if args.suite == "all" else (args.suite,)
    records = []
    for suite in suites:
        records += run_suite(
            dg, suite, timer, args.seed, not args.no_peers, log, interleaved=not args.sequential, only=args.only
        )
    if args.only is not None and not records:
        log(f"warning: --only {args.only.pattern!r} matched no row of the chosen suites")
    result["records"] = records
    result["summary"] = summarize(records)
    if not args.skip_extras:
        result.update(measure_extras(dg))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    problem = gpu_problem()
    if problem:
        print(f"deep_gemm.bench: {problem}", file=sys.stderr)
        return 2
    dg = importlib.import_module("..", __package__)  # the deep_gemm package this bench belongs to
    result = run_benchmark(dg, args)
    write_json(result, args.json)
    print(format_report(result))
    return 1 if result["summary"]["failures"] else 0
