"""Benchmark deep_gemm against cuBLASLt and torch on one GPU: ``python -m deep_gemm.bench``.

Implements the protocol of the project's BENCH.md:

* inputs are fresh ``torch.randn`` data quantised with ``deep_gemm.utils``
  (A per token, 1x128; B per 128x128 block);
* every result is checked against a float32 reference with ``calc_diff`` before
  it is timed; a row whose error is too large is reported as a failure, not a speed;
* warm-up runs outside the timed region; before each timed launch a 256 MB buffer
  is written to flush L2; each launch is timed with its own pair of CUDA events;
  the median over ``--repeats`` (at least 30 for the protocol) launches is reported;
  a row's implementations are timed launch by launch in turn (ours, each peer, ours,
  ...), so the GPU's clock drift at its power cap affects all of them alike
  (``--sequential``: all launches of one implementation, then the next), and the
  launches are queued behind a GPU spin so that no host launch path lands in an event
  time (a record's ``queued`` says so; see ``LaunchTimer``);
* peers run in the same process on the same data: cuBLASLt blockwise FP8 through
  ``torch.nn.functional.scaled_mm`` and bf16 ``A @ B.t()``; for the k-grouped (wgrad)
  rows, one scaled_mm (1x128 scales on both operands) per group plus the fp32 add of ``c``,
  and our dense 1D1D ``fp8_gemm_nt`` once per group;
* also measured: host overhead per call (3000 back-to-back launches of a
  16x256x512 GEMM, the median of 5 such runs), first-call time with an empty JIT cache and with a warm one
  (each in a fresh process), and ``import deep_gemm`` time after ``import torch``.

Results are written as JSON (``--json``) and a table is printed last. The exit
status is 0 when every row ran and passed (skipped rows included), 1 when a row
failed its correctness check or raised, and 2 when no usable GPU is present.

Layout: ``protocol`` (timing, cases, records), ``peers`` (cuBLASLt and bf16 peers),
``suites/`` (one module per suite, registered in ``suites/__init__.py``), ``extras``
(host overhead, JIT, import time), ``report`` (environment, summary, JSON, table) and
``cli`` (the flags; ``__main__`` runs it). A new suite is one module in ``suites/`` and
one entry in its ``REGISTRY``. The names below are re-exported so that
tools and tests reach all of them as ``deep_gemm.bench.<name>``.
"""

from __future__ import annotations

from .protocol import (  # noqa: F401
    FLUSH_BYTES, OURS, PEER_BF16, PEER_CUBLASLT, PEER_DENSE_LOOP, PEER_LABELS, PEER_ORDER, PROTOCOL_MIN_REPEATS, Case,
    LaunchTimer, Peer, Suite, add_speedups, check_ours, check_peer, checked_diff, describe_error, diff_problem,
    empty_record, gemm_flops, get_op, log, measure_case, nan_output, ours_problem, randn, row_meta, short_status,
    shape_cases, spread, tflops, time_launchers,
)
from .peers import bf16_peer, cublaslt_peer, scaled_mm_api  # noqa: F401
from .extras import (  # noqa: F401
    CHILD_TIMEOUT_S, HOST_OVERHEAD_CALLS, HOST_OVERHEAD_RUNS, HOST_OVERHEAD_WARMUPS, IMPORT_RUNS, JIT_SHAPES,
    RESULT_TAG, TINY_SHAPE, child_env, host_time_per_call_us, jit_backend, measure_extras, measure_host_overhead,
    measure_import, measure_jit, package_parent, run_child, tiny_launchers,
)
from .report import (  # noqa: F401
    detect_commit, environment, fmt, format_report, geomean, git_output, gpu_problem, notes_lines, num_sms,
    package_version, suite_summary, summarize, summary_lines, table_header, table_peers, table_row, write_json,
)
from .cli import main, parse_args, run_benchmark  # noqa: F401
from .suites import MAX_DIFF, REGISTRY, SUITES, run_suite, suite_cases  # noqa: F401
from .suites.fp8 import FP8_SHAPES, fp8_case  # noqa: F401
from .suites.bf16 import BF16_SHAPES, bf16_case  # noqa: F401
from .suites.grouped import (  # noqa: F401
    CONTIGUOUS_SETS, K_GROUPED_SETS, MASKED_SETS, contiguous_case, contiguous_layout, cublaslt_k_grouped_peer,
    dense_loop_k_grouped_peer, k_grouped_case, k_grouped_nt_operand, k_grouped_tokens, masked_case,
    quantize_grouped_b,
)
