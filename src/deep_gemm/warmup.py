"""Compile kernels into the JIT cache ahead of time, without a GPU.

    python -m deep_gemm.warmup --from-record kernels.jsonl
    python -m deep_gemm.warmup --num-sms 132 --suite fp8
    python -m deep_gemm.warmup --num-sms 132 --suite grouped
    python -m deep_gemm.warmup --num-sms 132 --suite bf16
    python -m deep_gemm.warmup --num-sms 132 --suite indexer --suite hc
    python -m deep_gemm.warmup --num-sms 132 --shape 4096,7168,16384 --shape 128,2112,7168:fp32

For deployment images and CI: the kernels land in DG_JIT_CACHE_DIR exactly as
the first call on a GPU would compile them. --from-record replays a file
written by a real workload run with DG_JIT_RECORD=kernels.jsonl: exactly the
kernels it used (any family, shape, SM count), compiled with the backend that
process used, and each key is compared with the recorded one, so a mismatch
(another compiler, other headers) is reported here instead of as a recompile
at boot. Cache entries are per backend (nvcc or NVRTC): --backend picks the
one the serving runtime will use (default: as recorded; for --suite/--shape,
what a runtime on this machine picks).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

# The nine dense FP8 shapes of BENCH.md (M, N, K).
FP8_SUITE = [(m, n, k) for m in (128, 4096) for (n, k) in ((2112, 7168), (24576, 1536), (7168, 16384), (4096, 7168))]
FP8_SUITE.append((4096, 7168, 2048))

# The V3.2 indexer at H = 64, D = 128 (DeepSeek V3.2's): the prefill kernels of every output
# form (fp8_mqa_logits' FP32 logits; "clean" is its default), and the paged decode kernels of
# next_n 1 to 4 (each with the -inf clean kernel and the schedule kernel).
INDEXER_PREFILL_FORMS = ("clean", "plain", "compressed")
INDEXER_NEXT_N = (1, 2, 3, 4)
INDEXER_HEADS, INDEXER_HEAD_DIM = 64, 128

# The hc suite's HyperConnection prenorm shapes (M, N, K): N = 24, K = 7168 and 28672.
HC_SUITE = [(m, 24, k) for k in (7168, 28672) for m in (1, 128, 1024, 4096, 8192)]

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

# einsum's per-head forms in the einsum suite that run on our kernel (expression, batch,
# heads, r, d): each head a [batch, K] x [K, N] GEMM of the masked BF16 kernel with every
# group full; bhr,hdr->bhd contracts over r (B K-major), bhd,hdr->bhr over d (B MN-major).
# (The suite's 8-head row is compute-bound per head and runs on cuBLASLt: deep_gemm.einsum.)
EINSUM_HEADS = [
    ("bhr,hdr->bhd", 4096, 128, 512, 128),
    ("bhd,hdr->bhr", 4096, 128, 512, 128),
]

_MAX_DIM = 2**31 - 1


def _m_grouped_build_args(entry: tuple) -> tuple[int, int, int, int, int, str]:
    """(groups, m, n, k, expected_m, label) of a GROUPED_SUITE masked or contiguous entry, as
    the m_grouped_*_gemm_build ops take them (masked: m = max_m; contiguous: m = M_sum, no
    expected_m)."""
    if entry[0] == "masked":
        _, g, expected_m, max_m, n, k = entry
        return g, max_m, n, k, expected_m, f"masked {g} x ~{expected_m}/{max_m}"
    _, g, expected_m, n, k = entry
    return g, g * expected_m, n, k, 0, f"contiguous {g} x ~{expected_m}"
_RECORD_FIELDS = ("name", "entry", "code", "arch", "cpp_std", "opt_level", "line_info", "defines", "extra_flags")


def _parse_shape(text: str) -> tuple[int, int, int, bool]:
    spec, _, kind = text.partition(":")
    try:
        m, n, k = (int(x) for x in spec.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be M,N,K or M,N,K:fp32, got {text!r}") from None
    if not all(1 <= x <= _MAX_DIM for x in (m, n, k)):
        raise argparse.ArgumentTypeError(f"M, N and K must be in [1, 2^31), got {text!r}")
    if kind not in ("", "bf16", "fp32"):
        raise argparse.ArgumentTypeError(f"output kind must be bf16 or fp32, got {kind!r}")
    return m, n, k, kind == "fp32"


def _parse_num_sms(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"must be in [1, 1024], got {value}")
    return value


def read_record(path: str) -> list[dict]:
    """The distinct kernels of a DG_JIT_RECORD file (first occurrence of each key);
    ValueError naming the line for anything that is not a record."""
    kernels, seen = [], set()
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"line {n} is not JSON ({e.msg}); is this a DG_JIT_RECORD file?") from None
            if not isinstance(rec, dict) or rec.get("v") != 1 or any(f not in rec for f in _RECORD_FIELDS):
                raise ValueError(f"line {n} is not a deep_gemm kernel record (version 1)")
            ident = rec.get("key") or json.dumps([rec[f] for f in _RECORD_FIELDS])
            if ident not in seen:
                seen.add(ident)
                kernels.append(rec)
    return kernels


def _announce(backend_note: str) -> tuple[str, str]:
    """Prints which compiler warms the cache, and where; returns (backend, version)."""
    from . import _jit

    info = _jit.get_jit()
    if info.compiler_version.startswith("unavailable: "):
        raise RuntimeError(info.compiler_version.removeprefix("unavailable: "))
    print(f"warmup: compiling with {info.backend} ({info.compiler_version}, {info.compiler_path}) {backend_note}; "
          f"into {info.cache_roots[0]}", file=sys.stderr, flush=True)
    return info.backend, info.compiler_version


def _mismatch_reason(rec: dict, parts: list[str], compiler: str) -> str:
    _, key_compiler, key_flags, key_includes = parts
    reasons = []
    if rec.get("key_compiler") != key_compiler:
        reasons.append(f"compiler: recorded {rec.get('backend')} {rec.get('compiler')}, here {compiler}")
    if rec.get("key_flags") != key_flags:
        reasons.append("compile flags (DG_JIT_CPP_STANDARD, DG_JIT_WITH_LINEINFO, DG_JIT_PTXAS_* or another "
                       "deep_gemm version)")
    if rec.get("key_includes") != key_includes:
        reasons.append("kernel headers (another deep_gemm version)")
    return "; ".join(reasons) or "source"


def _warm_from_records(ap: argparse.ArgumentParser, records: list[dict], backend: str) -> int:
    import torch

    from . import _jit

    groups: dict[str, list[dict]] = {}
    for rec in records:
        groups.setdefault(backend if backend != "recorded" else rec.get("backend", ""), []).append(rec)
    total, done, compiled, mismatched = len(records), 0, 0, []
    t_all = time.perf_counter()
    for group_backend, recs in groups.items():
        _jit.configure(backend=group_backend)
        recorded = {r.get("backend") for r in recs}
        note = ("as recorded" if backend == "recorded" else
                f"as asked (recorded with {', '.join(sorted(b for b in recorded if b))})")
        try:
            _, version = _announce(note)
        except RuntimeError as e:
            ap.error(f"the recorded kernels were used with {group_backend or 'the automatic backend'}, which is not "
                     f"usable here: {e} Install that compiler, or pass --backend (the runtime must then use the same "
                     "backend, e.g. DG_JIT_USE_NVRTC=1 for nvrtc).")
        for rec in recs:
            done += 1
            t0 = time.perf_counter()
            path, fresh, parts, got_backend, _ = torch.ops.deep_gemm.jit_build_recorded(
                rec["name"], rec["code"], rec["entry"], rec["arch"], rec["cpp_std"], int(rec["opt_level"]),
                bool(rec["line_info"]), list(rec["defines"]), list(rec["extra_flags"]))
            compiled += bool(fresh)
            status = f"{time.perf_counter() - t0:6.2f} s" if fresh else "cached"
            check = ""
            if rec.get("key") and got_backend == rec.get("backend"):
                if parts[0] == rec["key"]:
                    check = "  key=recorded"
                else:
                    why = _mismatch_reason(rec, list(parts), f"{got_backend} {version}")
                    mismatched.append((rec["name"], why))
                    check = f"  KEY DIFFERS ({why})"
            print(f"[{done}/{total}] {status}  {rec['name']}  {path}{check}", flush=True)
    print(f"warmup: {total} recorded kernels ({compiled} compiled, {total - compiled} already cached) in "
          f"{time.perf_counter() - t_all:.1f} s", file=sys.stderr)
    if mismatched:
        print(f"warmup: {len(mismatched)} of {total} kernels got another cache key than in the recording process, so a "
              f"runtime like that one would compile them again: {mismatched[0][1]}. Warm with the runtime's "
              "compiler, headers and DG_JIT_* settings.", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deep_gemm.warmup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from-record", metavar="PATH", action="append", default=[],
                    help="compile the kernels of a DG_JIT_RECORD file (repeatable)")
    ap.add_argument("--backend", choices=["auto", "nvcc", "nvrtc"], default=None,
                    help="compiler backend (default: as recorded; for --suite/--shape, auto: what a runtime on this "
                         "machine picks)")
    ap.add_argument("--arch", default="sm_90a", help="target architecture (only sm_90a is supported)")
    ap.add_argument("--num-sms", type=_parse_num_sms, help="SM count of the target GPU (132 on H100/H200 SXM); "
                    "needed by --suite and --shape")
    ap.add_argument("--suite", choices=["fp8", "grouped", "bf16", "indexer", "hc"], action="append", default=[],
                    help="a benchmark suite's shapes (bf16: the dense BF16 nt kernels of the fp8 suite's shapes and the "
                         "m-grouped BF16 nt kernels of the grouped suite's and einsum's per-head kernels; "
                         "indexer: the V3.2 indexer's prefill and paged decode kernels at H 64, D 128; hc: the "
                         "HyperConnection prenorm GEMM's)")
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
    bf16 = FP8_SUITE if "bf16" in args.suite else []
    bf16_grouped = [e for e in GROUPED_SUITE if e[0] != "k_grouped"] if "bf16" in args.suite else []
    einsum_heads = EINSUM_HEADS if "bf16" in args.suite else []
    indexer = "indexer" in args.suite
    hc = HC_SUITE if "hc" in args.suite else []
    if not shapes and not grouped and not bf16 and not indexer and not hc and not args.from_record:
        ap.error("nothing to compile: give --from-record, --suite and/or --shape")
    if (shapes or grouped or bf16 or indexer or hc) and args.num_sms is None:
        ap.error("--suite and --shape need --num-sms (the SM count of the GPU the kernels are for)")
    records = []
    for path in args.from_record:
        try:
            records += read_record(path)
        except OSError as e:
            ap.error(f"--from-record {path}: {e.strerror}")
        except ValueError as e:
            ap.error(f"--from-record {path}: {e}")
    if args.from_record and not records:
        ap.error(f"--from-record: {', '.join(args.from_record)} holds no kernels (was DG_JIT_RECORD set before the "
                 "workload started?)")

    import torch

    import deep_gemm  # noqa: F401  (loads the ops)
    from . import _jit

    rc = 0
    if records:
        rc = _warm_from_records(ap, records, {None: "recorded", "auto": ""}.get(args.backend, args.backend))
    if not shapes and not grouped and not bf16 and not indexer and not hc:
        return rc
    _jit.configure(backend="" if args.backend in (None, "auto") else args.backend)
    try:
        _announce("(the backend a runtime here picks: it must match the serving runtime's, see --backend)"
                  if args.backend in (None, "auto") else "as asked")
    except RuntimeError as e:
        ap.error(f"no usable {args.backend or ''} compiler: {e}")

    def build(label: str, fn, *op_args):
        try:
            return fn(*op_args)
        except RuntimeError as e:
            if str(e).startswith("deep_gemm."):  # the op refused the shape (ops' argument errors)
                ap.error(f"{label}: {e}")
            raise

    seen = set()
    t_all = time.perf_counter()
    for m, n, k, fp32 in shapes:
        t0 = time.perf_counter()
        # One line per kernel: the one for prepared scales, then (small M) the one that
        # reads per-token scales as given.
        built = build(f"--shape {m},{n},{k}", torch.ops.deep_gemm.fp8_gemm_build, m, n, k, fp32, args.num_sms,
                      args.compiled_dims)
        for line in built.splitlines():
            name, path = line.split("\t")
            status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
            seen.add(name)
            print(f"{m:>6} x {n:>6} x {k:>6} {'fp32' if fp32 else 'bf16'}  {status}  {name}  {path}", flush=True)
    for entry in grouped:
        t0 = time.perf_counter()
        if entry[0] == "k_grouped":
            _, g, tokens, m, n = entry
            name, path = build("--suite grouped", torch.ops.deep_gemm.k_grouped_fp8_gemm_build,
                               m, n, tokens, g, args.num_sms, args.k_grouped_compiled_dims, True).split("\t")
            status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
            seen.add(name)
            print(f"{f'k_grouped {g} x ~{tokens}':>24} x {m:>6} x {n:>6} fp32  {status}  {name}  {path}", flush=True)
            continue
        g, m, n, k, expected_m, label = _m_grouped_build_args(entry)
        name, path = build("--suite grouped", torch.ops.deep_gemm.m_grouped_fp8_gemm_build,
                           entry[0], m, n, k, g, expected_m, args.num_sms, args.compiled_dims).split("\t")
        status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
        seen.add(name)
        print(f"{label:>24} x {n:>6} x {k:>6} bf16  {status}  {name}  {path}", flush=True)
    for m, n, k in bf16:
        t0 = time.perf_counter()
        name, path = build("--suite bf16", torch.ops.deep_gemm.bf16_gemm_build, m, n, k, "nt", "bf16", False,
                           args.num_sms, args.compiled_dims).split("\t")
        status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
        seen.add(name)
        print(f"{m:>6} x {n:>6} x {k:>6} bf16 (BF16 GEMM)  {status}  {name}  {path}", flush=True)
    for entry in bf16_grouped:
        t0 = time.perf_counter()
        g, m, n, k, expected_m, label = _m_grouped_build_args(entry)
        label = "bf16 " + label
        name, path = build("--suite bf16", torch.ops.deep_gemm.m_grouped_bf16_gemm_build,
                           entry[0], m, n, k, g, expected_m, args.num_sms, args.compiled_dims, False).split("\t")
        status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
        seen.add(name)
        print(f"{label:>24} x {n:>6} x {k:>6} bf16  {status}  {name}  {path}", flush=True)
    for expr, rows, heads, r, dd in einsum_heads:
        t0 = time.perf_counter()
        bhr = expr == "bhr,hdr->bhd"
        n, k = (dd, r) if bhr else (r, dd)
        name, path = build("--suite bf16", torch.ops.deep_gemm.m_grouped_bf16_gemm_build, "heads", rows, n, k,
                           heads, rows, args.num_sms, "", not bhr).split("\t")
        status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
        seen.add(name)
        print(f"{expr} {heads:>3} x {rows:>5} x {n:>6} x {k:>6}  {status}  {name}  {path}", flush=True)
    if indexer:
        for form in INDEXER_PREFILL_FORMS:
            t0 = time.perf_counter()
            name, path = build("--suite indexer", torch.ops.deep_gemm.fp8_mqa_logits_build, INDEXER_HEADS,
                               INDEXER_HEAD_DIM, "fp32", form).split("\t")
            status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
            seen.add(name)
            print(f"{'mqa logits ' + form:>24} H {INDEXER_HEADS} D {INDEXER_HEAD_DIM} fp32  {status}  {name}  {path}",
                  flush=True)
        for next_n in INDEXER_NEXT_N:
            t0 = time.perf_counter()
            for line in build("--suite indexer", torch.ops.deep_gemm.paged_mqa_logits_build, next_n, INDEXER_HEADS,
                              INDEXER_HEAD_DIM, "float32"):
                name, path = line.split("\t")
                status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
                seen.add(name)
                print(f"{f'paged next_n {next_n}':>24} H {INDEXER_HEADS} D {INDEXER_HEAD_DIM} fp32  {status}  {name}  "
                      f"{path}", flush=True)
    for m, n, k in hc:
        t0 = time.perf_counter()
        name, path = build("--suite hc", torch.ops.deep_gemm.tf32_hc_prenorm_gemm_build, m, n, k, None,
                           args.num_sms).split("\t")
        status = "cached" if name in seen else f"{time.perf_counter() - t0:6.2f} s"
        seen.add(name)
        print(f"{m:>6} x {n:>6} x {k:>6} fp32 (HC prenorm)  {status}  {name}  {path}", flush=True)
    total = len(shapes) + len(grouped) + len(bf16) + (len(INDEXER_PREFILL_FORMS) + len(INDEXER_NEXT_N)) * indexer + len(hc)
    print(f"warmup: {len(seen)} kernels for {total} shapes in {time.perf_counter() - t_all:.1f} s", file=sys.stderr)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
