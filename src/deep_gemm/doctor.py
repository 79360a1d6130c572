"""Will deep_gemm work here, and why not?

    python -m deep_gemm.doctor            (or python -m deep_gemm)
    python -m deep_gemm.doctor --json     one JSON object, for tools

Prints the driver and GPUs, torch and the stable-ABI target, the installed
variant, the JIT backend it would use and why, the header roots, the cache
roots; compiles a tiny kernel into a scratch cache and, on an SM90 GPU, runs it.
Each problem comes with its fix. Exit status 0 when everything needed is
there, 1 otherwise. From code: ``deep_gemm.check_jit()`` (nothing compiled).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from . import _doctor


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deep_gemm.doctor", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    ap.add_argument("--no-compile", action="store_true", help="skip the self-test kernel (nothing is compiled)")
    args = ap.parse_args(argv)

    f = _doctor.collect(gpu=True, deep=True)
    if not args.no_compile and f.backend:
        _doctor.selftest(f)
    v = f.verdict()
    if args.json:
        out = {"ok": v.ok, "backend": v.backend, "compiler": v.compiler, "facts": v.facts,
               "gpus": [dataclasses.asdict(g) for g in v.gpus],
               "problems": [dataclasses.asdict(p) for p in v.problems],
               "warnings": [dataclasses.asdict(p) for p in v.warnings]}
        print(json.dumps(out, indent=2))
        return 0 if v.ok else 1
    width = max(len(k) for k in v.facts) + 2
    print("deep_gemm doctor")
    for label, value in v.facts.items():
        print(f"  {label:<{width}}{value}")
    for title, items in (("warnings", v.warnings), ("problems", v.problems)):
        if items:
            print(f"\n{title} ({len(items)}):")
            for p in items:
                print(f"  - {p.what}")
                if p.fix:
                    print(f"    fix: {p.fix}")
    if v.ok:
        print(f"\nverdict: OK, deep_gemm can compile and run its kernels here ({v.backend} {v.compiler})")
    else:
        print(f"\nverdict: NOT OK, {len(v.problems)} problem(s) above stop deep_gemm here", file=sys.stdout)
    return 0 if v.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
