"""python -m deep_gemm.bench: CLI behaviour without a GPU, and the report/summary logic."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from fp8_reference import dequant_blocks, dequant_rows

from deep_gemm import bench

# BENCH.md's example record, as the tools read it.
EXAMPLE_RECORD = {
    "suite": "fp8",
    "op": "fp8_gemm_nt",
    "m": 4096,
    "n": 7168,
    "k": 16384,
    "groups": None,
    "us": 674.6,
    "tflops": 1426.2,
    "diff": 0.0007,
    "status": "ok",
    "peers": {"cublaslt_blockwise": {"us": 771.2, "tflops": 1247.6}, "torch_bf16": {"us": 1371.8, "tflops": 701.3}},
}
TOP_LEVEL_KEYS = (
    "gpu",
    "num_sms",
    "copy_tb_s",
    "torch",
    "cuda",
    "deep_gemm",
    "commit",
    "date",
    "records",
    "host_overhead_us",
    "jit",
    "import_ms",
)


def run_cli(*args, env_extra=None, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([bench.package_parent(), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "deep_gemm.bench", *args],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def record(**overrides):
    rec = json.loads(json.dumps(EXAMPLE_RECORD))
    rec.update(overrides)
    bench.add_speedups(rec)
    return rec


# ---------------------------------------------------------------------------- CLI


def test_help_exits_zero_and_lists_options():
    proc = run_cli("--help")
    assert proc.returncode == 0, proc.stderr
    for option in ("--suite", "--json", "--repeats", "fp8", "grouped", "bf16", "all"):
        assert option in proc.stdout


def test_without_gpu_exits_nonzero_with_clear_message(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli("--suite", "fp8", "--json", str(out), env_extra={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 2
    assert "no CUDA GPU" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not out.exists()


def test_bad_arguments_are_usage_errors():
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(["--suite", "fp4"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        bench.parse_args(["--repeats", "0"])


def test_parse_args_defaults():
    args = bench.parse_args([])
    assert args.suite == "all" and args.repeats >= 30 and args.json.endswith(".json")
    assert not args.sequential  # interleaved timing unless asked
    assert bench.parse_args(["--suite", "grouped", "--repeats", "50"]).repeats == 50
    assert bench.parse_args(["--sequential"]).sequential


def test_only_selects_rows_by_label(monkeypatch):
    assert bench.parse_args(["--only", "paged B=64"]).only.pattern == "paged B=64"
    assert bench.parse_args([]).only is None
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(["--only", "(unclosed"])
    assert exc.value.code == 2
    built = []

    def cases(dg, seed):
        for label in ("paged B=1 next_n=1", "paged B=64 next_n=1", "indexer S=4096"):
            def build(label=label):
                built.append(label)
                raise RuntimeError("no inputs on this machine")
            yield label, build

    from deep_gemm.bench import suites

    monkeypatch.setitem(suites.REGISTRY, "fake", bench.Suite("fake", 1e-5, cases))
    timer = None  # never reached: the row's build fails before it is timed
    records = bench.run_suite(None, "fake", timer, seed=0, with_peers=False, log=print, only=re.compile("B=64"))
    # Only the matching row is built (an unmatched row costs nothing, not even its inputs).
    assert built == ["paged B=64 next_n=1"]
    assert [(r["label"], r["status"]) for r in records] == [("paged B=64 next_n=1", "error")]
    assert bench.run_suite(None, "fake", timer, seed=0, with_peers=False, log=print, only=re.compile("nothing")) == []


# ---------------------------------------------------------------------------- shape sets


def test_shape_sets_match_the_protocol():
    assert len(bench.FP8_SHAPES) == 9 and len(set(bench.FP8_SHAPES)) == 9
    assert (4096, 7168, 16384) in bench.FP8_SHAPES and (128, 2112, 7168) in bench.FP8_SHAPES
    assert all(k % 128 == 0 for _, _, k in bench.FP8_SHAPES)
    assert bench.CONTIGUOUS_SETS == ((4, 8192, 4096, 7168), (8, 4096, 7168, 2048))
    assert [s[:2] + s[3:] for s in bench.MASKED_SETS] == [(32, 192, 4096, 7168), (6, 1024, 7168, 3072)]
    assert bench.K_GROUPED_SETS == ((4, 7168, 4096, 4096), (8, 7168, 2048, 4096))
    ks = bench.k_grouped_tokens(8, 4096, seed=0)
    assert len(ks) == 8 and all(k % 128 == 0 and 0.7 * 4096 - 128 <= k <= 1.3 * 4096 + 128 for k in ks)
    assert bench.TINY_SHAPE == (16, 256, 512) and bench.HOST_OVERHEAD_CALLS == 3000
    assert bench.FLUSH_BYTES >= 256e6


def test_contiguous_layout_marks_padding_rows():
    layout, valid = bench.contiguous_layout([3, 130], alignment=128, device="cpu")
    assert layout.dtype == torch.int32 and layout.numel() == 128 + 256
    assert layout[:3].tolist() == [0, 0, 0] and (layout[3:128] == -1).all()
    assert (layout[128:258] == 1).all() and (layout[258:] == -1).all()
    assert int(valid.sum()) == 133 and torch.equal(valid, layout >= 0)


# ---------------------------------------------------------------------------- arithmetic


def test_geomean_and_tflops():
    assert bench.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert bench.geomean([]) is None
    assert bench.tflops(2 * 4096 * 7168 * 16384, 674.6) == pytest.approx(1426.2, rel=1e-3)
    assert bench.tflops(1e12, None) is None


def test_spread_reports_median_and_quartiles():
    stats = bench.spread([5.0, 1.0, 3.0, 2.0, 4.0])
    assert stats["us"] == 3.0 and stats["us_q1"] <= 3.0 <= stats["us_q3"] and stats["launches"] == 5


def test_diff_problem():
    assert bench.diff_problem(5e-4, 1e-3) is None
    assert "allowed" in bench.diff_problem(2e-3, 1e-3)
    assert bench.diff_problem(float("nan"), 1e-3) is not None


def test_speedup_is_peer_time_over_ours():
    rec = record()
    assert rec["peers"]["cublaslt_blockwise"]["speedup"] == pytest.approx(771.2 / 674.6)
    assert rec["peers"]["torch_bf16"]["speedup"] == pytest.approx(1371.8 / 674.6)
    failed = record(us=None, tflops=None, status="fail", reason="diff 0.5 > allowed 0.001")
    assert all("speedup" not in p for p in failed["peers"].values())


# ---------------------------------------------------------------------------- timing order (CPU fakes)


class FakeEvent:
    """Stands in for torch.cuda.Event: records a tick of a shared clock. query() (has the
    GPU passed it?) answers from `FakeEvent.passed`, a list of answers in turn."""

    clock = 0
    passed: list = []

    def __init__(self, enable_timing=False):
        self.tick = None

    def record(self):
        FakeEvent.clock += 1
        self.tick = FakeEvent.clock

    def query(self):
        return FakeEvent.passed.pop(0)

    def elapsed_time(self, end):
        return (end.tick - self.tick) * 1e-3  # ms


def fake_timer(monkeypatch, repeats, warmups, passed=None):
    """A LaunchTimer on fake events; `passed`: the spin-finished answers (default: never)."""
    spins = []
    FakeEvent.passed = list(passed) if passed is not None else [False] * 100
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "_sleep", spins.append)
    timer = object.__new__(bench.LaunchTimer)  # no CUDA flush buffer on this machine
    timer.repeats, timer.warmups, timer.queue_ahead = repeats, warmups, True
    timer.spin_cycles = bench.LaunchTimer.SPIN_CYCLES
    timer.flush_buffer = torch.empty(4)
    return timer, spins


def test_interleaved_samples_take_turns_launch_by_launch(monkeypatch):
    timer, spins = fake_timer(monkeypatch, repeats=3, warmups=2)
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("ours", "peer")}
    samples = timer.samples_us_interleaved(fns)
    assert calls == ["ours"] * 2 + ["peer"] * 2 + ["ours", "peer"] * 3  # warm-ups, then in turn
    # One spin behind each launcher's first warm-up (can it be queued ahead?), then one
    # in front of all six timed launches.
    assert spins == [bench.LaunchTimer.SPIN_CYCLES] * 3 and timer.last_queued
    assert {name: len(s) for name, s in samples.items()} == {"ours": 3, "peer": 3}
    assert all(t == pytest.approx(1.0) for s in samples.values() for t in s)  # one tick per launch, in us


def test_launches_queued_too_late_are_timed_again_behind_longer_spins(monkeypatch):
    # The spin is over before the host has queued everything twice (slow host or full
    # launch queue): then each half is timed on its own, the first half in time.
    timer, spins = fake_timer(monkeypatch, repeats=4, warmups=0, passed=[False, True, True, False, False])
    calls = []
    samples = timer.samples_us(lambda: calls.append(1))
    first = bench.LaunchTimer.SPIN_CYCLES
    assert spins == [first, first, 2 * first, 4 * first, 4 * first] and timer.spin_cycles == 4 * first
    assert len(calls) == 1 + 4 + 4 + 2 + 2 and len(samples) == 4 and timer.last_queued
    with pytest.raises(RuntimeError, match="could not queue one launch"):
        fake_timer(monkeypatch, repeats=1, warmups=0, passed=[False] + [True] * 4)[0].samples_us(lambda: None)


def test_a_launcher_that_waits_for_the_gpu_is_timed_as_it_comes(monkeypatch):
    # Its probe launch outlasts the spin (it synchronises, as a reference op reading
    # masked_m on the host does): no spin in front of its timed launches.
    timer, spins = fake_timer(monkeypatch, repeats=3, warmups=1, passed=[True])
    calls = []
    assert len(timer.samples_us(lambda: calls.append(1))) == 3
    assert spins == [bench.LaunchTimer.SPIN_CYCLES] and len(calls) == 4 and not timer.last_queued


class Launches:
    """A case's implementations as fakes that log their launches; `wrong` ones fail the check."""

    def __init__(self, wrong=()):
        self.log, self.wrong = [], set(wrong)
        self.reference = torch.ones(4)

    def fn(self, name):
        def run():
            self.log.append(name)
            return -self.reference if name in self.wrong else self.reference.clone()

        return run

    def case(self):
        case = bench.Case(meta=bench.row_meta("fp8", "fp8_gemm_nt", 1, 1, 128), flops=2e6, max_diff=1e-3)
        case.ours, case.reference = self.fn("ours"), self.reference
        case.read_ours = lambda: self.reference if "ours" not in self.wrong else -self.reference
        case.peers = {name: bench.Peer(run=self.fn(name)) for name in ("cublaslt_blockwise", "torch_bf16")}
        case.peers["missing"] = bench.Peer(reason="not in this torch")
        return case


@pytest.mark.parametrize("interleaved", [True, False])
def test_measure_case_checks_all_then_times_the_correct_ones(monkeypatch, interleaved):
    timer, _ = fake_timer(monkeypatch, repeats=2, warmups=0)
    launches = Launches(wrong=["torch_bf16"])
    rec = bench.measure_case(launches.case(), timer, with_peers=True, interleaved=interleaved)
    checks, timed = launches.log[:3], launches.log[3:]
    assert checks == ["ours", "cublaslt_blockwise", "torch_bf16"]
    if interleaved:  # one probe launch each (no warm-ups asked for), then in turn
        assert timed == ["ours", "cublaslt_blockwise"] + ["ours", "cublaslt_blockwise"] * 2
    else:
        assert timed == ["ours"] * 3 + ["cublaslt_blockwise"] * 3
    assert rec["status"] == "ok" and rec["us"] > 0 and rec["tflops"] > 0 and rec["queued"]
    assert rec["peers"]["cublaslt_blockwise"]["speedup"] == pytest.approx(1.0)
    bf16 = rec["peers"]["torch_bf16"]
    assert bf16["status"] == "fail" and "us" not in bf16 and "speedup" not in bf16
    assert rec["peers"]["missing"] == {"available": False, "reason": "not in this torch"}


def test_floors_are_timed_beside_ours_unchecked(monkeypatch):
    timer, _ = fake_timer(monkeypatch, repeats=2, warmups=0)
    launches = Launches()
    case = launches.case()
    case.peers = {}
    case.floors = {"read_a": launches.fn("floor")}
    rec = bench.measure_case(case, timer, with_peers=True)
    # Never checked (it computes something else), timed in turn with ours.
    assert launches.log == ["ours", "ours", "floor"] + ["ours", "floor"] * 2
    floor = rec["floors"]["read_a"]
    assert floor["us"] > 0 and floor["of_ours"] == pytest.approx(floor["us"] / rec["us"])
    assert "read_a" not in rec["peers"] and "floor read_a" in bench.short_status(rec)
    # A wrong op times nothing, its floors included.
    launches = Launches(wrong=["ours"])
    case = launches.case()
    case.floors = {"read_a": launches.fn("floor")}
    rec = bench.measure_case(case, timer, with_peers=False)
    assert launches.log == ["ours"] and "floors" not in rec


def test_measure_case_does_not_time_a_wrong_op(monkeypatch):
    timer, _ = fake_timer(monkeypatch, repeats=2, warmups=1)
    launches = Launches(wrong=["ours"])
    rec = bench.measure_case(launches.case(), timer, with_peers=False)
    assert launches.log == ["ours"] and rec["status"] == "fail" and rec["us"] is None


def test_summary_geomean_over_cublaslt_counts_only_ok_rows():
    records = [
        record(),
        record(m=128, us=771.2 / 2),  # 2x over cuBLASLt
        record(m=1, us=None, tflops=None, status="fail", reason="diff too large"),
        record(
            suite="bf16",
            op="bf16_gemm_nt",
            us=None,
            tflops=None,
            status="skipped",
            reason="deep_gemm.bf16_gemm_nt does not exist yet",
            peers={},
        ),
    ]
    summary = bench.summarize(records)
    expected = bench.geomean([771.2 / 674.6, 2.0])
    assert summary["geomean_speedup_over_cublaslt"] == pytest.approx(expected)
    fp8 = summary["suites"]["fp8"]
    assert fp8["rows"] == 3 and fp8["ok"] == 2 and fp8["compared_rows"]["cublaslt_blockwise"] == 2
    assert fp8["min_speedup"]["cublaslt_blockwise"] == pytest.approx(771.2 / 674.6)
    assert summary["failures"] == 1
    assert summary["suites"]["bf16"]["ok"] == 0


# ---------------------------------------------------------------------------- report and JSON


def fake_result():
    records = [
        record(),
        record(
            suite="bf16",
            op="bf16_gemm_nt",
            us=None,
            tflops=None,
            diff=None,
            status="skipped",
            reason="deep_gemm.bf16_gemm_nt does not exist yet",
            peers={"torch_bf16": {"us": 1371.8, "tflops": 701.3}},
        ),
        record(m=128, peers={"cublaslt_blockwise": {"available": False, "reason": "RuntimeError: unsupported"}}),
    ]
    result = {
        "gpu": "NVIDIA H200",
        "num_sms": 132,
        "copy_tb_s": 4.31,
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "deep_gemm": "0.1.0",
        "commit": "abc",
        "date": "2026-11-29",
        "records": records,
        "host_overhead_us": {"deep_gemm": 14.0, "cublaslt_blockwise": 25.4, "torch_bf16": 13.6},
        "jit": {"backend": "nvcc", "cold_compile_s": [1.2, 1.1], "warm_first_call_ms": 30.0},
        "import_ms": 80.0,
    }
    result["summary"] = bench.summarize(records)
    return result


def test_report_has_table_and_summary():
    text = bench.format_report(fake_result())
    lines = text.splitlines()
    assert lines[0].startswith("deep_gemm.bench: gpu NVIDIA H200")
    assert "TFLOP/s" in lines[1] and "cuBLASLt us" in lines[1] and "bf16 us" in lines[1]
    row = lines[2]
    assert "4096" in row and "674.6" in row and "1426" in row and "1.14" in row and "2.03" in row
    assert any("skipped" in line and "bf16_gemm_nt does not exist yet" in line for line in lines)
    assert any("peer cublaslt_blockwise (1 row: 128x7168x16384): RuntimeError: unsupported" in line for line in lines)
    assert any(line.startswith("x = peer time / deep_gemm time") for line in lines)
    assert any("geomean speedup over cublaslt_blockwise" in line for line in lines)
    assert any("host overhead per call (16x256x512, median of 5 x 3000 calls)" in line and "14.0 us" in line for line in lines)
    assert any("1.20 s, 1.10 s" in line and "30.0 ms" in line for line in lines)
    assert "import deep_gemm after torch: 80.0 ms" in lines[-1]


def test_report_has_a_column_for_every_peer_a_suite_names():
    # The indexer's and HC's peers are not among the protocol's three: their columns come after.
    records = [
        record(suite="hc", op="tf32_hc_prenorm_gemm", us=44.0, peers={"torch_reference": {"us": 660.0, "tflops": 1.0}}),
        record(peers={"torch_bf16": {"us": 1371.8, "tflops": 701.3}}),
        record(suite="indexer", op="fp8_paged_mqa_logits", us=94.4,
               peers={"torch_paged": {"us": 2365.0, "tflops": 14.0}, "torch_reference": {"us": 9000.0, "tflops": 1.0}}),
    ]
    assert bench.table_peers(records) == ["torch_bf16", "torch_reference", "torch_paged"]
    header, hc_row = bench.format_report({"records": records}).splitlines()[1:3]
    assert header.index("bf16 us") < header.index("torch_refere us") < header.index("torch_paged us")
    assert "15.00" in hc_row  # 660 / 44: the hc row's speedup over its torch reference is shown


def test_json_has_the_protocol_keys(tmp_path, capsys):
    result = fake_result()
    path = tmp_path / "out.json"
    bench.write_json(result, str(path))
    loaded = json.loads(path.read_text())
    for key in TOP_LEVEL_KEYS:
        assert key in loaded
    rec = loaded["records"][0]
    for key in ("suite", "op", "m", "n", "k", "groups", "us", "tflops", "diff", "peers"):
        assert key in rec
    assert set(rec["peers"]["cublaslt_blockwise"]) >= {"us", "tflops", "speedup"}
    bench.write_json(result, "-")
    assert json.loads(capsys.readouterr().out)["gpu"] == "NVIDIA H200"


def test_commit_falls_back_to_env(monkeypatch):
    monkeypatch.setattr(bench, "git_output", lambda *a: None)
    monkeypatch.setenv("DG_COMMIT", "feedface")
    assert bench.detect_commit() == "feedface"
    monkeypatch.delenv("DG_COMMIT")
    assert bench.detect_commit() == "unknown"


def test_missing_op_gives_skip_reason():
    class Empty:
        pass

    op, reason = bench.get_op(Empty(), "bf16_gemm_nt")
    assert op is None and "deep_gemm.bf16_gemm_nt does not exist yet" in reason


def test_scaled_mm_api_is_found_or_explained():
    fn, scaling_type, reason = bench.scaled_mm_api()
    if fn is None:
        assert reason and "torch" in reason
    else:
        assert reason is None
        assert hasattr(scaling_type, "BlockWise1x128") and hasattr(scaling_type, "BlockWise128x128")


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_fp8_suite_runs_end_to_end_on_gpu(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    out = tmp_path / "bench.json"
    proc = run_cli("--suite", "fp8", "--repeats", "3", "--skip-extras", "--json", str(out), timeout=900)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    loaded = json.loads(out.read_text())
    assert len(loaded["records"]) == 9
    assert loaded["num_sms"] > 0 and loaded["gpu"]
    # The copy bandwidth of this GPU, measured in the run (Hopper's HBM: a few TB/s).
    assert 0.5 < loaded["copy_tb_s"] < 20, loaded["copy_tb_s"]
    assert proc.stdout.strip().splitlines()[-1]  # the table (and summary) is printed last
    for rec in loaded["records"]:
        assert rec["status"] in ("ok", "skipped", "fail", "error")
        if rec["status"] == "ok":
            assert rec["us"] > 0 and rec["diff"] < 1e-3
            assert rec["queued"], "our launches never wait for the host: they must be timed queued ahead"
        bf16 = rec["peers"]["torch_bf16"]
        assert bf16.get("us", 0) > 0 and bf16["diff"] < 1e-4 and bf16["queued"]
    assert loaded["protocol"]["order"] == "interleaved"


class ReferenceOps:
    """Plain-torch stand-ins for the ops, to check the benchmark's own logic on a GPU."""

    @staticmethod
    def _dequant_a(a):
        return dequant_rows(*a)

    @staticmethod
    def _dequant_b(b):
        return dequant_blocks(*b)

    def get_mk_alignment_for_contiguous_layout(self):
        return 128

    def get_num_sms(self):
        return torch.cuda.get_device_properties(0).multi_processor_count

    def fp8_gemm_nt(self, a, b, d):
        d.copy_(self._dequant_a(a) @ self._dequant_b(b).t())

    def bf16_gemm_nt(self, a, b, d):
        d.copy_(a @ b.t())

    def cublaslt_gemm_nt(self, a, b, d):
        d.copy_(a @ b.t())

    def m_grouped_fp8_gemm_nt_contiguous(self, a, b, d, layout):
        a_f, b_f = self._dequant_a(a), self._dequant_b(b)
        for g in range(b_f.size(0)):
            rows = layout == g
            d[rows] = (a_f[rows] @ b_f[g].t()).to(d.dtype)

    def m_grouped_fp8_gemm_nt_masked(self, a, b, d, masked_m, expected_m):
        a_f, b_f = self._dequant_a(a), self._dequant_b(b)
        for g, m in enumerate(masked_m.tolist()):
            d[g, :m] = (a_f[g, :m] @ b_f[g].t()).to(d.dtype)

    def k_grouped_fp8_gemm_nt_contiguous(self, a, b, d, ks, ks_tensor, c=None):
        (a_x, sfa), (b_x, sfb) = a, b
        _, m, n = d.shape
        start = 0
        for g, k in enumerate(ks):
            kb = slice(start // 128, (start + k) // 128)
            a_g = a_x[start * m: (start + k) * m].view(m, k).float() * sfa[kb].t().repeat_interleave(128, dim=1)
            b_g = b_x[start * n: (start + k) * n].view(n, k).float() * sfb[kb].t().repeat_interleave(128, dim=1)
            d[g] = a_g @ b_g.t() + (c[g] if c is not None else 0)
            start += k


@pytest.mark.gpu
@pytest.mark.parametrize("suite", ["fp8", "grouped", "bf16"])
def test_suites_pass_with_reference_ops(suite):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    timer = bench.LaunchTimer(repeats=3, warmups=1)
    records = bench.run_suite(ReferenceOps(), suite, timer, seed=0, with_peers=suite != "grouped", log=print)
    assert records and all(r["status"] == "ok" for r in records), [r.get("reason") for r in records]
    for r in records:
        assert r["diff"] < bench.MAX_DIFF[suite] and r["us"] > 0 and r["tflops"] > 0
        for peer in r["peers"].values():
            assert peer["status"] == "ok" and peer["speedup"] == pytest.approx(peer["us"] / r["us"])
    if suite == "grouped":
        masked = [r for r in records if r["op"].endswith("masked")]
        assert [r["groups"] for r in masked] == [32, 6] and all(r["max_m"] == 4096 for r in masked)
        k_grouped = [r for r in records if r["op"].startswith("k_grouped")]
        assert [(r["groups"], r["m"], r["n"]) for r in k_grouped] == [(4, 7168, 4096), (8, 7168, 2048)]
        assert all(r["k"] == sum(r["ks"]) and all(k % 128 == 0 for k in r["ks"]) for r in k_grouped)
    if suite == "bf16":  # the memory-bound rows (M = 128) time a read of B beside ours
        assert all(("floors" in r) == (r["m"] == 128) for r in records)
        assert all(r["floors"]["read_b"]["us"] > 0 for r in records if r["m"] == 128)
    summary = bench.summarize(records)
    assert summary["failures"] == 0 and summary["suites"][suite]["ok"] == len(records)


@pytest.mark.gpu
def test_wrong_or_raising_ops_are_failures_not_speeds():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    class Wrong(ReferenceOps):
        def fp8_gemm_nt(self, a, b, d):
            super().fp8_gemm_nt(a, b, d)
            d.mul_(-1)  # calc_diff of x and -x is 2

        def bf16_gemm_nt(self, a, b, d):
            raise RuntimeError("deep_gemm.bf16_gemm_nt: unsupported shape")

        cublaslt_gemm_nt = bf16_gemm_nt

    timer = bench.LaunchTimer(repeats=3, warmups=1)
    fp8 = bench.run_suite(Wrong(), "fp8", timer, seed=0, with_peers=False, log=print)
    assert all(r["status"] == "fail" and r["us"] is None and r["diff"] > 1 for r in fp8)
    bf16 = bench.run_suite(Wrong(), "bf16", timer, seed=0, with_peers=False, log=print)
    assert all(r["status"] == "error" and "unsupported shape" in r["reason"] for r in bf16)
    assert bench.summarize(fp8 + bf16)["failures"] == len(fp8) + len(bf16) == 27


@pytest.mark.gpu
def test_host_overhead_with_reference_ops():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    results, errors = bench.measure_host_overhead(ReferenceOps())
    assert set(results) == {"deep_gemm", "deep_gemm_prepared_sf", "deep_gemm_bf16", "deep_gemm_cublaslt",
                            "cublaslt_blockwise", "torch_bf16"}
    assert results["deep_gemm"] > 0 and results["torch_bf16"] > 0
    assert all(name in errors for name, value in results.items() if value is None)
