"""`python -m deep_gemm.warmup` compiles the fp8 suite's kernels with no GPU."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
def test_warmup_compiles_fp8_suite_into_a_fresh_cache(tmp_path):
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path))
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--suite", "fp8", "--shape", "129,2112,7168:fp32"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    # Nine suite shapes and the fp32 one, plus the four M = 128 shapes' kernels that read
    # per-token scales as given ("_sg").
    assert len(lines) == 14
    assert sorted(int(line.split()[0]) for line in lines if "_sg" in line.split()[-2]) == [128] * 4, lines
    cubins = [line.split()[-1] for line in lines]
    # The tiles measured best on the H200 (2026-11-30): BLOCK_M 256 for the
    # large shapes, 128x192 for the single-wave 128x24576x1536, 128-row tiles over 64-row
    # ones for 128x7168x16384 and 128x4096x7168 (a BLOCK_M A/B).
    names = {tuple(int(x) for x in line.split()[0:5:2]): line.split()[-2] for line in lines if "bf16" in line}
    assert "_b256x128_" in names[(4096, 7168, 16384)] and "_b256x128_" in names[(4096, 4096, 7168)], names
    assert "_b128x192_" in names[(128, 24576, 1536)], names
    assert "_b128x64_" in names[(128, 7168, 16384)] and "_b128x32_" in names[(128, 4096, 7168)], names
    for path in cubins:
        assert path.startswith(str(tmp_path)) and os.path.getsize(path) > 1000
        with open(path, "rb") as f:
            assert f.read(4) == b"\x7fELF"
    # A second run is all cache hits: fast, same files.
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and [line.split()[-1] for line in again.stdout.strip().splitlines()] == cubins


def test_warmup_rejects_other_archs():
    out = subprocess.run([sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--suite", "fp8", "--arch", "sm_100a"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "only sm_90a" in out.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
def test_chosen_kernels_do_not_spill(tmp_path):
    """Every kernel the heuristics pick over a grid of shapes compiles without
    spills or local memory (DG_JIT_PTXAS_CHECK fails the compile otherwise)."""
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    shapes = [f"{m},{n},{k}" for m in (64, 256, 1024) for (n, k) in ((4096, 2048), (2112, 7168), (576, 7168))]
    shapes += [f"{m},24576,1536" for m in (7, 128, 4096)] + ["4096,7168,16384", "128,7168,16384"]
    shapes += ["256,4096,2048:fp32", "4096,7168,2048:fp32"]
    # Small M: also the kernels that read per-token scales as given (the "_sg" names).
    shapes += ["1,7168,16384", "16,4096,7168", "64,2112,7168", "16,256,512"]
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132"]
    for s in shapes:
        cmd += ["--shape", s]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    # M <= 384 with a dense bf16 kernel of one slab per warpgroup (block_m <= 128): also the
    # one reading per-token scales as given ("_sg"); never above M = 384.
    # ("_efb", B under L2's evict-first policy where one m-block spans M, is left out here.)
    rows = [(int(line.split()[0]), line.split()[-2].replace("_efb", "")) for line in out.stdout.strip().splitlines()]
    sg = [(m, name) for m, name in rows if "_sg" in name]
    assert all(m <= 384 and "_b256x" not in name for m, name in sg), sg
    small = {name for m, name in rows if m <= 384 and "_b256x" not in name and "_sg" not in name and "_1d1d_" not in name}
    assert {name[: -len("_sg")] for _, name in sg} == small, (sg, small)
    assert any(name.endswith("_o_sg") for _, name in sg) and any(not name.endswith("_o_sg") for _, name in sg), sg


# Tuning knobs of the FP8 GEMM configuration: (variable, a good value, what the kernel name
# then holds and no longer holds, bad values, the error's words).
TUNING_KNOBS = [
    ("DG_DEV_SM90_FP8_GROUP_N", "8", "_g8", "_g16", ("7", "0", "66", "x"), "must be an even number"),
    ("DG_DEV_SM90_FP8_STAGES", "2", "_s2_", "_s3_", ("1", "13", "x"), "must be in [2, 12]"),
]


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
@pytest.mark.parametrize("var,good,present,absent,bad_values,error", TUNING_KNOBS)
def test_tuning_knob_reaches_the_kernel_and_rejects_bad_values(tmp_path, var, good, present, absent, bad_values, error):
    """A tuning knob (scheduler group width, stage cap) shows in the kernel the warmup compiles;
    a bad value fails loudly, naming the variable."""
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--shape", "256,4096,2048"]
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), **{var: good})
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert present in out.stdout and absent not in out.stdout, out.stdout
    for bad in bad_values:
        env[var] = bad
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and f"{var} {error}" in out.stderr, (bad, out.stderr[-800:])


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
def test_fp8_b_read_once_loads_under_evict_first(tmp_path):
    """A dense FP8 GEMM that reads B once (one m-block spans M, or two whose tiles run in one
    wave) loads it under L2's evict-first policy ("_efb"); M = 4096 keeps the default policy. DG_DEV_SM90_FP8_EVICT_FIRST_B
    overrides the rule both ways, and a bad value fails loudly."""
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--shape", "128,24576,1536", "--shape",
           "4096,4096,7168", "--shape", "128,2112,7168"]
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path))
    env.pop("DG_DEV_SM90_FP8_EVICT_FIRST_B", None)

    def names(**knob):
        out = subprocess.run(cmd, env=dict(env, **knob), capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        # "   M x   N x   K bf16 ... name path", keyed by N (small M: the last of its two kernels, "_sg").
        return {int(line.split()[2]): line.split()[-2] for line in out.stdout.strip().splitlines()}

    # N = 24576: one m-block; N = 2112: 64 x 32 tiles, two m-blocks, 132 tiles in one wave.
    chosen = names()
    assert chosen[24576].endswith("_efb") and "_efb" not in chosen[4096], chosen
    assert chosen[2112].endswith("_efb") and "_b64x32_" in chosen[2112], chosen
    off = {n: name.removesuffix("_efb") for n, name in chosen.items()}
    assert names(DG_DEV_SM90_FP8_EVICT_FIRST_B="0") == off, chosen
    assert names(DG_DEV_SM90_FP8_EVICT_FIRST_B="1") == {n: name + "_efb" for n, name in off.items()}, chosen
    bad = subprocess.run(cmd, env=dict(env, DG_DEV_SM90_FP8_EVICT_FIRST_B="2"), capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "DG_DEV_SM90_FP8_EVICT_FIRST_B must be 0 or 1" in bad.stderr, bad.stderr[-800:]


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
def test_small_m_warmup_builds_the_per_token_scale_kernel_unless_turned_off(tmp_path):
    """M <= 384: warmup also builds the kernel that reads per-token scales as given ("_sg");
    DG_DEV_SM90_FP8_SFA_FROM_GLOBAL=0 turns it off, and a bad value fails loudly."""
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--shape", "16,256,512", "--shape",
           "385,256,512"]
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path))
    env.pop("DG_DEV_SM90_FP8_SFA_FROM_GLOBAL", None)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines if "_sg" in line] == ["16"], lines
    off = subprocess.run(cmd, env=dict(env, DG_DEV_SM90_FP8_SFA_FROM_GLOBAL="0"), capture_output=True, text=True,
                         timeout=600)
    assert off.returncode == 0 and "_sg" not in off.stdout and len(off.stdout.strip().splitlines()) == 2, off.stdout
    bad = subprocess.run(cmd, env=dict(env, DG_DEV_SM90_FP8_SFA_FROM_GLOBAL="2"), capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "DG_DEV_SM90_FP8_SFA_FROM_GLOBAL must be 0 or 1" in bad.stderr, bad.stderr[-800:]


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
def test_warmup_bf16_suite(tmp_path):
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--suite", "bf16"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    dense = [line for line in lines if "(BF16 GEMM)" in line]
    grouped = [line for line in lines if "bf16 contiguous" in line or "bf16 masked" in line]
    heads = [line for line in lines if "hdr" in line]
    assert len(dense) == 9 and len(grouped) == 4 and len(heads) == 2 and len(lines) == 15, lines
    # The m-grouped BF16 kernels of the grouped suite: two contiguous, two masked.
    kinds = sorted(line.split()[-2].split("_")[4] for line in grouped)
    assert kinds == ["mgc", "mgc", "mgm", "mgm"], grouped
    # einsum's per-head forms: the masked kernel, B K-major (bhr,hdr->bhd) and MN-major (bhd,hdr->bhr).
    assert sorted(line.split()[-2].split("_")[3:5] for line in heads) == [["nn", "mgm"], ["nt", "mgm"]], heads
    split, paired = {}, {}
    for line in dense:
        name, path = line.split()[-2:]
        m, n, k = (int(v) for v in line.split("bf16")[0].split("x"))
        assert name.startswith("sm90_bf16_gemm_nt_bf16_") and path.startswith(str(tmp_path)), line
        split[(m, n, k)] = "_sk" in name
        paired[(m, n, k)] = "_pb" in name
    # M = 128 with N <= 7168 has too few output tiles of its best width for 132 SMs: 128 x 2112
    # x 7168 splits its K loop over clusters; 128 x 4096 x 7168, whose 128 tiles of 64 x 64 fill
    # them once, runs those in CTA pairs sharing B; M = 4096 fills them whole.
    assert split[(128, 2112, 7168)] and paired[(128, 4096, 7168)], (split, paired)
    assert not any(s or paired[key] for key, s in split.items() if key[0] == 4096), (split, paired)


def test_warmup_indexer_and_hc_suites(tmp_path):
    # The V3.2 indexer (prefill forms, paged next_n 1-4 with their clean and schedule kernels)
    # and the HC prenorm shapes, compiled without a GPU under the ptxas check; ptxas's report
    # names no wgmma it serialised or waited for on its own (C7514, C7517, C7518).
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1", DG_JIT_PTXAS_VERBOSE="1")
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--suite", "indexer", "--suite", "hc"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("ptxas report for kernel") >= 11, out.stderr[-3000:]
    assert not re.search(r"C751[478]", out.stderr), out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    names = {line.split()[-2] for line in lines}
    assert all(line.split()[-1].startswith(str(tmp_path)) for line in lines), lines
    assert {f"sm90_fp8_paged_mqa_logits_n{t}_h64_d128" for t in (1, 2, 3, 4)} <= {n.rsplit("_s", 1)[0] for n in names}
    assert {"paged_mqa_logits_metadata", "paged_mqa_clean_logits_f32"} <= names
    assert sum(n.startswith("sm90_fp8_mqa_logits_h64_d128") for n in names) == 3, names
    assert any(n.startswith("sm90_tf32_hc_prenorm_gemm_n24") for n in names), names
    assert len(lines) == 3 + 4 * 3 + 10, lines


def test_two_processes_warm_one_empty_cache_at_once(tmp_path):
    # A process per GPU sharing one empty DG_JIT_CACHE_DIR, both compiling the same kernels at
    # the same time (the new families' and a BF16 split-K one): both succeed, one entry per key.
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path))
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--suite", "indexer", "--suite", "hc",
           "--suite", "bf16"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=1800) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    paths = [{line.split()[-2]: line.split()[-1] for line in out.strip().splitlines()} for out, _ in outs]
    assert paths[0] == paths[1]  # the same kernel names, each in the same cache entry
    entries = [e for e in os.listdir(os.path.join(tmp_path, "cache")) if not e.startswith(".")]
    assert len(entries) == len(paths[0]), sorted(entries)
