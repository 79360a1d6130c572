"""m-grouped FP8 GEMMs (MoE; API.md P1): argument validation on CPU and meta tensors (no
GPU needed), and correctness on an SM90 GPU against a float reference on fresh random
data, with the output poisoned (NaN) first so unwritten and wrongly written rows show."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys

import pytest
import torch
from fp8_reference import dequant_blocks, dequant_rows

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

FP8 = torch.float8_e4m3fn
I32 = torch.int32


# ---- validation (CI) ---------------------------------------------------------------


def _contig_operands(device, m=256, n=128, k=256, g=2):
    a = torch.empty(m, k, dtype=FP8, device=device)
    sfa = torch.empty(m, k // 128, device=device)
    b = torch.empty(g, n, k, dtype=FP8, device=device)
    sfb = torch.empty(g, (n + 127) // 128, k // 128, device=device)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    layout = torch.empty(m, dtype=I32, device=device)
    return a, sfa, b, sfb, d, layout


def _masked_operands(device, g=2, max_m=64, n=128, k=256):
    a = torch.empty(g, max_m, k, dtype=FP8, device=device)
    sfa = torch.empty(g, max_m, k // 128, device=device)
    b = torch.empty(g, n, k, dtype=FP8, device=device)
    sfb = torch.empty(g, (n + 127) // 128, k // 128, device=device)
    d = torch.empty(g, max_m, n, dtype=torch.bfloat16, device=device)
    masked_m = torch.empty(g, dtype=I32, device=device)
    return a, sfa, b, sfb, d, masked_m


contig = deep_gemm.m_grouped_fp8_gemm_nt_contiguous
masked = deep_gemm.m_grouped_fp8_gemm_nt_masked

CONTIG_BAD = {
    "group count (sfb)": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb[:1]), d, lay),
                          r"sfb.shape\[0\] must be 2"),
    "index dtype": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d, lay.long()),
                    "grouped_layout must be torch.int32, got torch.int64"),
    "index on cpu": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d, torch.zeros(lay.shape, dtype=I32)),
                     "grouped_layout must live on the GPU"),
    "index length": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d, lay[:128]),
                     r"grouped_layout.shape\[0\] must be 256"),
    "psum length": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d, lay, use_psum_layout=True),
                    r"grouped_layout.shape\[0\] must be 2"),
    "psum expected_m": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d, lay[:2], use_psum_layout=True,
                                                              expected_m_for_psum_layout=0),
                        "expected_m_for_psum_layout must be > 0"),
    "expected_m without psum": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d, lay,
                                                                      expected_m_for_psum_layout=128),
                                "needs use_psum_layout=True"),
    "alignment": (lambda a, sfa, b, sfb, d, lay: contig((a[:200], sfa[:200]), (b, sfb), d[:200], lay[:200]),
                  "must be a multiple of the contiguous-layout alignment"),
    "k mismatch": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b[:, :, :128].contiguous(), sfb), d, lay),
                   r"b.shape\[2\] must be 256"),
    "n mismatch": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d[:, :64], lay),
                   r"d.shape\[1\] must be 128"),
    "d dtype": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d.float(), lay),
                "d must be torch.bfloat16"),
    "b rank": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b[0], sfb), d, lay), "b must be 3-D"),
    "sfa rows": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa[:128]), (b, sfb), d, lay),
                 r"sfa.shape\[0\] must be 256"),
    "recipe": (lambda a, sfa, b, sfb, d, lay: contig((a, sfa), (b, sfb), d, lay, recipe=(1, 1, 128)),
               "support recipe"),
    "not a pair": (lambda a, sfa, b, sfb, d, lay: contig(a, (b, sfb), d, lay), "must be a pair"),
    "nn with K-major b": (lambda a, sfa, b, sfb, d, lay: deep_gemm.m_grouped_fp8_gemm_nn_contiguous(
        (a, sfa), (b.transpose(1, 2).contiguous(), sfb.transpose(1, 2)), d, lay), "must be K-major"),
    # N = 135 with d a column slice (row pitch 144): the TMA would write past column N.
    "n not a multiple of 8": (lambda a, sfa, b, sfb, d, lay: contig(
        (a, sfa), (b.new_empty(2, 135, 256), sfb.new_empty(2, 2, 2)), d.new_empty(256, 144)[:, :135], lay),
        "N \\(= 135\\) must be a multiple of 8 for a bf16 d"),
}

MASKED_BAD = {
    "masked_m on cpu": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d, torch.zeros(mm.shape, dtype=I32), 32),
                        "masked_m must live on the GPU"),
    "masked_m dtype": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d, mm.long(), 32),
                       "masked_m must be torch.int32, got torch.int64"),
    "expected_m zero": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d, mm, 0), "expected_m must be > 0"),
    "expected_m negative": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d, mm, -3),
                            "expected_m must be > 0"),
    "expected_m type": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d, mm, 32.0),
                        "expected_m must be an int"),
    "group count (b)": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (torch.cat([b, b[:1]]), sfb), d, mm, 32),
                        r"b.shape\[0\] must be 2"),
    "group count (masked_m)": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d, torch.cat([mm, mm]), 32),
                               r"masked_m.shape\[0\] must be 2"),
    "group count (d)": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d[:1], mm, 32),
                        r"d.shape\[0\] must be 2"),
    "max_m mismatch": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d[:, :32], mm, 32),
                       r"d.shape\[1\] must be 64"),
    "sfa shape": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa[:, :, :1]), (b, sfb), d, mm, 32),
                  r"sfa.shape\[2\] must be 2"),
    "a rank": (lambda a, sfa, b, sfb, d, mm: masked((a[0], sfa), (b, sfb), d, mm, 32), "a must be 3-D"),
    "d dtype": (lambda a, sfa, b, sfb, d, mm: masked((a, sfa), (b, sfb), d.half(), mm, 32),
                "d must be torch.bfloat16"),
    "n not a multiple of 8": (lambda a, sfa, b, sfb, d, mm: masked(
        (a, sfa), (b.new_empty(2, 135, 256), sfb.new_empty(2, 2, 2)), d.new_empty(2, 64, 144)[..., :135], mm, 32),
        "N \\(= 135\\) must be a multiple of 8 for a bf16 d"),
}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", sorted(CONTIG_BAD))
def test_contiguous_bad_input_raises_clearly(case, device):
    fn, pattern = CONTIG_BAD[case]
    if device == "cpu":
        pattern += "|grouped_layout must live on the GPU"  # with every operand on the CPU it may fire first
    with pytest.raises((RuntimeError, ValueError, TypeError), match=pattern):
        fn(*_contig_operands(device))


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", sorted(MASKED_BAD))
def test_masked_bad_input_raises_clearly(case, device):
    fn, pattern = MASKED_BAD[case]
    if device == "cpu":
        pattern += "|masked_m must live on the GPU"  # with every operand on the CPU it may fire first
    with pytest.raises((RuntimeError, ValueError, TypeError), match=pattern):
        fn(*_masked_operands(device))


def test_cpu_operands_rejected():
    a, sfa, b, sfb, d, lay = _contig_operands("cpu")
    with pytest.raises(RuntimeError, match="must live on the GPU|must be a CUDA tensor"):
        contig((a, sfa), (b, sfb), d, lay)
    a, sfa, b, sfb, d, lay = _contig_operands("meta")
    with pytest.raises(RuntimeError, match="is not a meta tensor"):
        contig((a, sfa), (torch.zeros(b.shape, dtype=FP8), sfb), d, lay)


def test_meta_runs_check_shapes_without_launching():
    a, sfa, b, sfb, d, lay = _contig_operands("meta", m=1024, n=4096, k=7168, g=4)
    contig((a, sfa), (b, sfb), d, lay)
    contig((a, sfa), (b, sfb), d, lay[:4], use_psum_layout=True, expected_m_for_psum_layout=256)
    deep_gemm.m_grouped_fp8_gemm_nn_contiguous((a, sfa), (b.transpose(1, 2), sfb.transpose(1, 2)), d, lay)
    a, sfa, b, sfb, d, mm = _masked_operands("meta", g=6, max_m=4096, n=7168, k=3072)
    masked((a, sfa), (b, sfb), d, mm, 1024)
    deep_gemm.fp8_m_grouped_gemm_nt_masked((a, sfa), (b, sfb), d, mm, 20)


def test_alias_and_exports():
    assert deep_gemm.fp8_m_grouped_gemm_nt_masked is deep_gemm.m_grouped_fp8_gemm_nt_masked
    for name in ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous",
                 "m_grouped_fp8_gemm_nt_masked", "fp8_m_grouped_gemm_nt_masked"):
        assert name in deep_gemm._C.__all__ and hasattr(deep_gemm, name)


def test_opcheck_on_meta():
    a, sfa, b, sfb, d, lay = _contig_operands("meta")
    sfa = deep_gemm.get_mn_major_tma_aligned_tensor(sfa)
    op = torch.ops.deep_gemm.m_grouped_fp8_gemm_nt_contiguous.default
    torch.library.opcheck(op, (a, sfa, b, sfb, d, lay, "nk", False, None))
    torch.library.opcheck(op, (a, sfa, b, sfb, d, lay[:2], "nk", True, 128))
    a, sfa, b, sfb, d, mm = _masked_operands("meta")
    sfa = deep_gemm.get_mn_major_tma_aligned_tensor(sfa)
    torch.library.opcheck(torch.ops.deep_gemm.m_grouped_fp8_gemm_nt_masked.default, (a, sfa, b, sfb, d, mm, 32, "nk"))


def test_build_op_validates():
    with pytest.raises(RuntimeError, match="layout must be 'contiguous', 'psum' or 'masked'"):
        torch.ops.deep_gemm.m_grouped_fp8_gemm_build("dense", 256, 256, 256, 2, 0, 132, "nk")
    with pytest.raises(RuntimeError, match="expected_m must be > 0"):
        torch.ops.deep_gemm.m_grouped_fp8_gemm_build("masked", 256, 256, 256, 2, 0, 132, "nk")


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
def test_warmup_compiles_grouped_suite(tmp_path):
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    cmd = [sys.executable, "-m", "deep_gemm.warmup", "--num-sms", "132", "--suite", "grouped"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 6  # 2 contiguous, 2 masked, 2 k-grouped
    assert sum("sm90_fp8_gemm_1d1d_kg_m7168n" in line for line in lines) == 2
    # The m-grouped bench shapes take 256x128 tiles, measured faster than 128x128 on the
    # H200 (2026-11-30: contiguous 1285/1234 vs 1120/1113 TFLOP/s,
    # masked 944/1168 vs 740/987).
    m_grouped = [line for line in lines if "_mgc_" in line or "_mgm_" in line]
    assert len(m_grouped) == 4 and all("_b256x128_" in line for line in m_grouped), m_grouped
    # They claim their tiles at run time ("_dt") unless DG_DEV_SM90_FP8_DYNAMIC_TILES=0.
    assert all("_dt" in line.split()[-2] for line in m_grouped), m_grouped
    for line in lines:
        path = line.split()[-1]
        assert path.startswith(str(tmp_path))
        with open(path, "rb") as f:
            assert f.read(4) == b"\x7fELF"


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="needs nvcc to compile")
def test_dynamic_tiles_knob_reaches_the_kernels(tmp_path):
    """DG_DEV_SM90_FP8_DYNAMIC_TILES=0 builds the static-stride m-grouped kernels (no "_dt"),
    for every layout; a bad value fails loudly, naming the variable."""
    build = ("import deep_gemm, torch\n"
             "for layout, m, em in (('contiguous', 4096, 0), ('psum', 4096, 512), ('masked', 1024, 256)):\n"
             "    print(torch.ops.deep_gemm.m_grouped_fp8_gemm_build(layout, m, 512, 512, 4, em, 132, 'nk')"
             ".split()[0])\n")
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path))
    names = {}
    for value in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", build], env=dict(env, DG_DEV_SM90_FP8_DYNAMIC_TILES=value),
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        names[value] = out.stdout.split()
    assert len(names["0"]) == 3 and not any(n.endswith("_dt") for n in names["0"]), names
    assert names["1"] == [n + "_dt" for n in names["0"]], names
    bad = subprocess.run([sys.executable, "-c", build], env=dict(env, DG_DEV_SM90_FP8_DYNAMIC_TILES="2"),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "DG_DEV_SM90_FP8_DYNAMIC_TILES must be 0 or 1" in bad.stderr, bad.stderr[-800:]


# ---- correctness (GPU) -------------------------------------------------------------


def _grouped_b(g, n, k):
    parts = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
             for _ in range(g)]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def _group_rows(g, expected_m, seed, cap=None):
    rng = random.Random(seed)
    rows = [int(expected_m * rng.uniform(0.7, 1.3)) for _ in range(g)]
    if cap is not None:
        rows = [min(r, cap) for r in rows]
    rows[1] = 0  # an empty group
    return rows


def _align(x, a):
    return (x + a - 1) // a * a


def _contiguous_index(rows):
    """The index layout of groups with `rows` rows, each padded with -1 rows to the
    contiguous-layout alignment: (first row of each group, the per-row group index)."""
    align = deep_gemm.get_mk_alignment_for_contiguous_layout()
    starts, index = [], []
    for grp, r in enumerate(rows):
        starts.append(len(index))
        index += [grp] * r + [-1] * (_align(r, align) - r)
    return starts, index


CONTIG_CASES = [
    (4, 8192, 6144, 7168),
    (4, 8192, 4096, 4096),
    (8, 4096, 7168, 3072),
    (8, 4096, 4096, 2048),
]


@pytest.mark.gpu
@pytest.mark.parametrize("layout_kind", ["index", "psum"])
@pytest.mark.parametrize("g,expected_m,n,k", CONTIG_CASES)
def test_m_grouped_contiguous_matches_reference(g, expected_m, n, k, layout_kind):
    torch.manual_seed(g * 7 + n + k)
    rows = _group_rows(g, expected_m, seed=n + k)
    starts, index = _contiguous_index(rows)
    m_sum = len(index)
    index_t = torch.tensor(index, dtype=I32, device="cuda")
    ends = torch.tensor([s + r for s, r in zip(starts, rows, strict=True)], dtype=I32, device="cuda")
    x = torch.randn(m_sum, k, device="cuda", dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=False)
    b, sfb = _grouped_b(g, n, k)
    d = torch.full((m_sum, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    if layout_kind == "index":
        contig((a, sfa), (b, sfb), d, index_t)
    else:
        contig((a, sfa), (b, sfb), d, ends, use_psum_layout=True, expected_m_for_psum_layout=expected_m,
               ensure_zero_padding=False)
    torch.cuda.synchronize()
    valid = index_t >= 0
    assert d[~valid].isnan().all(), "padding rows were written"
    assert not d[valid].isnan().any(), "some valid rows were not written"
    a_deq = dequant_rows(a, sfa)
    for grp, (s, r) in enumerate(zip(starts, rows, strict=True)):
        if r == 0:
            continue
        ref = a_deq[s: s + r] @ dequant_blocks(b[grp], sfb[grp]).t()
        diff = calc_diff(d[s: s + r], ref)
        assert diff < 1e-3, f"group {grp}: calc_diff {diff:.2e}"


@pytest.mark.gpu
def test_m_grouped_nn_contiguous_view():
    torch.manual_seed(3)
    g, n, k = 3, 512, 1024
    rows = [130, 0, 300]
    _, index = _contiguous_index(rows)
    index_t = torch.tensor(index, dtype=I32, device="cuda")
    a, sfa = per_token_cast_to_fp8(torch.randn(len(index), k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    b, sfb = _grouped_b(g, n, k)
    d_nt = torch.full((len(index), n), float("nan"), device="cuda", dtype=torch.bfloat16)
    d_nn = d_nt.clone()
    contig((a, sfa), (b, sfb), d_nt, index_t)
    deep_gemm.m_grouped_fp8_gemm_nn_contiguous((a, sfa), (b.transpose(1, 2), sfb.transpose(1, 2)), d_nn, index_t)
    torch.cuda.synchronize()
    valid = index_t >= 0
    assert torch.equal(d_nt[valid], d_nn[valid]) and d_nn[~valid].isnan().all()


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["index", "psum", "masked"])
def test_m_grouped_column_slice_of_d(kind):
    """d a column slice of a wider NaN-poisoned buffer, N = 136 (a multiple of 8 that is not
    one of BLOCK_N): the TMA's stores and the row-by-row stores of partly valid tiles both
    stop at column N. (An N that is not a multiple of 8 is refused: see *_BAD.)"""
    torch.manual_seed(17)
    g, n, k, width = 2, 136, 512, 144
    b, sfb = _grouped_b(g, n, k)
    rows = [100, 37]  # partly valid 64-row slabs in both groups
    if kind == "masked":
        max_m = 256
        x = torch.randn(g * max_m, k, device="cuda", dtype=torch.bfloat16)
        a, sfa = per_token_cast_to_fp8(x, use_ue8m0=False)
        a, sfa = a.view(g, max_m, k), sfa.view(g, max_m, -1)
        buf = torch.full((g, max_m, width), float("nan"), device="cuda", dtype=torch.bfloat16)
        d = buf[..., :n]
        masked((a, sfa), (b, sfb), d, torch.tensor(rows, dtype=I32, device="cuda"), 64)
        torch.cuda.synchronize()
        _check_masked(d, (a, sfa), (b, sfb), rows)
        assert buf[..., n:].isnan().all(), "columns past N were written"
        return
    starts, index = _contiguous_index(rows)
    index_t = torch.tensor(index, dtype=I32, device="cuda")
    a, sfa = per_token_cast_to_fp8(torch.randn(len(index), k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    buf = torch.full((len(index), width), float("nan"), device="cuda", dtype=torch.bfloat16)
    d = buf[:, :n]
    if kind == "index":
        contig((a, sfa), (b, sfb), d, index_t)
    else:
        ends = torch.tensor([s + r for s, r in zip(starts, rows, strict=True)], dtype=I32, device="cuda")
        contig((a, sfa), (b, sfb), d, ends, use_psum_layout=True, ensure_zero_padding=False)
    torch.cuda.synchronize()
    assert buf[:, n:].isnan().all(), "columns past N were written"
    valid = index_t >= 0
    assert d[~valid].isnan().all() and not d[valid].isnan().any()
    a_deq = dequant_rows(a, sfa)
    for grp, (s, r) in enumerate(zip(starts, rows, strict=True)):
        ref = a_deq[s: s + r] @ dequant_blocks(b[grp], sfb[grp]).t()
        assert calc_diff(d[s: s + r], ref) < 1e-3


MASKED_CASES = [(32, 192, 4096, 7168), (6, 1024, 7168, 3072), (32, 20, 4096, 7168), (6, 20, 7168, 3072)]


def _masked_data(g, max_m, n, k):
    x = torch.randn(g * max_m, k, device="cuda", dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=False)
    a, sfa = a.view(g, max_m, k), sfa.view(g, max_m, -1)
    b, sfb = _grouped_b(g, n, k)
    return (a, sfa), (b, sfb)


def _check_masked(d, a, b, rows):
    (a_t, sfa), (b_t, sfb) = a, b
    for grp, r in enumerate(rows):
        assert d[grp, r:].isnan().all(), f"group {grp}: rows >= masked_m were written"
        if r == 0:
            continue
        assert not d[grp, :r].isnan().any(), f"group {grp}: some rows < masked_m were not written"
        ref = dequant_rows(a_t[grp, :r], sfa[grp, :r]) @ dequant_blocks(b_t[grp], sfb[grp]).t()
        diff = calc_diff(d[grp, :r], ref)
        assert diff < 1e-3, f"group {grp}: calc_diff {diff:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("g,expected_m,n,k", MASKED_CASES)
def test_m_grouped_masked_matches_reference(g, expected_m, n, k):
    torch.manual_seed(g + expected_m + n)
    max_m = 4096
    rows = _group_rows(g, expected_m, seed=g * 1000 + expected_m, cap=max_m)
    a, b = _masked_data(g, max_m, n, k)
    masked_m = torch.tensor(rows, dtype=I32, device="cuda")
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    masked(a, b, d, masked_m, expected_m)
    torch.cuda.synchronize()
    _check_masked(d, a, b, rows)


@pytest.mark.gpu
def test_m_grouped_masked_interleaved_groups():
    """A and d as [max_m, G, .] tensors seen as [G, max_m, .] (the groups interleaved row by
    row, as fp8_einsum passes its heads): every group's rows land in its own slice, rows >=
    masked_m stay untouched, and the columns of d's padding are never written."""
    torch.manual_seed(17)
    g, max_m, n, k = 5, 300, 384, 640
    rows = [300, 129, 0, 1, 257]
    x = torch.randn(max_m, g, k, device="cuda", dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x.view(-1, k), use_ue8m0=False)
    a, sfa = a.view(max_m, g, k).transpose(0, 1), sfa.view(max_m, g, -1).transpose(0, 1)
    b, sfb = _grouped_b(g, n, k)
    base = torch.full((max_m, g, n + 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    d = base[:, :, :n].transpose(0, 1)
    masked((a, sfa), (b, sfb), d, torch.tensor(rows, dtype=I32, device="cuda"), 200)
    torch.cuda.synchronize()
    _check_masked(d, (a, sfa), (b, sfb), rows)
    assert base[:, :, n:].isnan().all()


@pytest.mark.gpu
def test_m_grouped_masked_cuda_graph_replays_new_masks():
    torch.manual_seed(11)
    g, max_m, n, k, expected_m = 6, 1024, 4096, 2048, 256
    a, b = _masked_data(g, max_m, n, k)
    # Scales in the kernel's layout up front, so the graph holds the GEMM only.
    a = (a[0], deep_gemm.get_mn_major_tma_aligned_tensor(a[1]))
    masked_m = torch.zeros(g, dtype=I32, device="cuda")
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    masked(a, b, d, masked_m, expected_m)  # compile and load outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            masked(a, b, d, masked_m, expected_m)
    for seed in range(3):
        rows = _group_rows(g, expected_m, seed=seed, cap=max_m)
        rows[seed + 2] = max_m if seed == 0 else 1  # a full group, then a 1-row one
        masked_m.copy_(torch.tensor(rows, dtype=I32))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check_masked(d, a, b, rows)


@pytest.mark.gpu
@pytest.mark.parametrize("prepared", [False, True])
def test_m_grouped_masked_ignores_sfa_rows_past_masked_m(prepared):
    """SFA rows >= masked_m[g] hold NaN: they must not reach any stored row. Per-token SFA
    is converted on the GPU for rows < masked_m only (the rest of the converted buffer is
    never written); prepared SFA carries the NaN into the kernel's layout."""
    torch.manual_seed(5)
    g, max_m, n, k = 5, 384, 1024, 7168
    (a, sfa), b = _masked_data(g, max_m, n, k)
    rows = [129, 0, 384, 1, 258]  # odd counts, an empty group, a full one
    poisoned = sfa.clone()
    for grp, r in enumerate(rows):
        poisoned[grp, r:] = float("nan")
    s = deep_gemm.get_mn_major_tma_aligned_tensor(poisoned) if prepared else poisoned
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    masked((a, s), b, d, torch.tensor(rows, dtype=I32, device="cuda"), 192)
    torch.cuda.synchronize()
    _check_masked(d, (a, sfa), b, rows)


@pytest.mark.gpu
def test_m_grouped_masked_graph_converts_sfa_for_each_replay():
    """The SFA conversion inside a captured graph reads masked_m on the GPU at replay:
    rows that become valid are converted, rows past it (NaN here) never matter."""
    torch.manual_seed(12)
    g, max_m, n, k, expected_m = 4, 512, 2048, 2048, 128
    (a, sfa), b = _masked_data(g, max_m, n, k)
    masked_m = torch.zeros(g, dtype=I32, device="cuda")
    poisoned = sfa.clone()
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    masked((a, poisoned), b, d, masked_m, expected_m)  # compile and load outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            masked((a, poisoned), b, d, masked_m, expected_m)
    for rows in ([5, 0, 130, 512], [512, 3, 0, 77], [1, 200, 511, 2]):
        poisoned.copy_(sfa)
        for grp, r in enumerate(rows):
            poisoned[grp, r:] = float("nan")
        masked_m.copy_(torch.tensor(rows, dtype=I32))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check_masked(d, (a, sfa), b, rows)


@pytest.mark.gpu
def test_m_grouped_masked_all_empty_and_bench_signature():
    g, max_m, n, k = 4, 256, 512, 512
    a, b = _masked_data(g, max_m, n, k)
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, torch.zeros(g, dtype=I32, device="cuda"), 64)
    torch.cuda.synchronize()
    assert d.isnan().all()
    # masked_m above max_m is clamped to max_m (never writes past a group's slot).
    rows = [max_m + 100, 3, 0, 200]
    deep_gemm.fp8_m_grouped_gemm_nt_masked(a, b, d, torch.tensor(rows, dtype=I32, device="cuda"), 64)
    torch.cuda.synchronize()
    _check_masked(d, a, b, [min(r, max_m) for r in rows])


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["contiguous", "psum", "masked"])
def test_m_grouped_sfa_layouts_agree(kind):
    """Per-token SFA ([rows, K/128], converted on the GPU each call) and prepared SFA
    (MN-major, TMA-aligned, used as it is) give the same bits."""
    torch.manual_seed(11)
    g, n, k, align = 3, 512, 2048, deep_gemm.get_mk_alignment_for_contiguous_layout()
    rows = [300, 0, 130]
    if kind == "masked":
        max_m = 384
        (a, sfa), b = _masked_data(g, max_m, n, k)
        masked_m = torch.tensor(rows, dtype=I32, device="cuda")
        run = lambda s, d: masked((a, s), b, d, masked_m, 256)  # noqa: E731
        shape = (g, max_m, n)
    else:
        index, ends = [], []
        for grp, r in enumerate(rows):
            index += [grp] * r
            ends.append(len(index))
            index += [-1] * (_align(r, align) - r)
        index_t = torch.tensor(index, dtype=I32, device="cuda")
        a, sfa = per_token_cast_to_fp8(torch.randn(len(index), k, device="cuda", dtype=torch.bfloat16),
                                       use_ue8m0=False)
        b = _grouped_b(g, n, k)
        if kind == "psum":
            ends_t = torch.tensor(ends, dtype=I32, device="cuda")
            run = lambda s, d: contig((a, s), b, d, ends_t, use_psum_layout=True, ensure_zero_padding=False)  # noqa: E731,E501
        else:
            run = lambda s, d: contig((a, s), b, d, index_t)  # noqa: E731
        shape = (len(index), n)
    outs = []
    for s in (sfa, deep_gemm.get_mn_major_tma_aligned_tensor(sfa)):
        d = torch.full(shape, float("nan"), device="cuda", dtype=torch.bfloat16)
        run(s, d)
        torch.cuda.synchronize()
        outs.append(d)
    assert torch.equal(outs[0].nan_to_num(7.0), outs[1].nan_to_num(7.0))
    if kind == "masked":
        _check_masked(outs[0], (a, sfa), b, rows)
    else:
        a_deq = dequant_rows(a, sfa)
        start = 0
        for grp, r in enumerate(rows):
            if r:
                ref = a_deq[start: start + r] @ dequant_blocks(b[0][grp], b[1][grp]).t()
                assert calc_diff(outs[0][start: start + r], ref) < 1e-3
            start += _align(r, align)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["index", "psum", "masked"])
def test_m_grouped_claimed_tiles_on_few_sms(kind):
    """With 8 SMs every CTA claims several tiles at run time. Prepared scales (no
    conversion kernel, so the op zeroes the claim counter itself), three calls in a row and
    a CUDA graph replayed twice: a counter left over from an earlier call would skip tiles
    and leave NaN rows."""
    torch.manual_seed(23)
    g, n, k = 4, 1024, 512
    rows = [300, 0, 200, 450]
    saved = deep_gemm.get_num_sms()
    deep_gemm.set_num_sms(8)
    try:
        if kind == "masked":
            max_m = 512
            (a, sfa), b = _masked_data(g, max_m, n, k)
            a_q = (a, deep_gemm.get_mn_major_tma_aligned_tensor(sfa))
            masked_m = torch.tensor(rows, dtype=I32, device="cuda")
            d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            run = lambda: masked(a_q, b, d, masked_m, 256)  # noqa: E731
            check = lambda: _check_masked(d, (a, sfa), b, rows)  # noqa: E731
        else:
            starts, index = _contiguous_index(rows)
            a, sfa = per_token_cast_to_fp8(torch.randn(len(index), k, device="cuda", dtype=torch.bfloat16),
                                           use_ue8m0=False)
            a_q = (a, deep_gemm.get_mn_major_tma_aligned_tensor(sfa))
            b = _grouped_b(g, n, k)
            if kind == "psum":
                layout = torch.tensor([s + r for s, r in zip(starts, rows, strict=True)], dtype=I32, device="cuda")
                run = lambda: contig(a_q, b, d, layout, use_psum_layout=True, ensure_zero_padding=False)  # noqa: E731,E501
            else:
                layout = torch.tensor(index, dtype=I32, device="cuda")
                run = lambda: contig(a_q, b, d, layout)  # noqa: E731
            d = torch.full((len(index), n), float("nan"), device="cuda", dtype=torch.bfloat16)
            a_deq = dequant_rows(a, sfa)

            align = deep_gemm.get_mk_alignment_for_contiguous_layout()

            def check():
                for grp, (s0, r) in enumerate(zip(starts, rows, strict=True)):
                    assert d[s0 + r: s0 + _align(r, align)].isnan().all(), f"group {grp}: padding rows written"
                    if r:
                        ref = a_deq[s0: s0 + r] @ dequant_blocks(b[0][grp], b[1][grp]).t()
                        diff = calc_diff(d[s0: s0 + r], ref)
                        assert diff < 1e-3, f"group {grp}: calc_diff {diff:.2e}"
        for _ in range(3):
            d.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            check()
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                run()
        for _ in range(2):
            d.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            check()
    finally:
        deep_gemm.set_num_sms(saved)


@pytest.mark.gpu
def test_static_tile_walk_still_correct():
    """DG_DEV_SM90_FP8_DYNAMIC_TILES=0 (the static stride, kept for A/B runs) on the edge
    layouts of the BLOCK_M 256 child below; a child process because the knob is read once
    per process."""
    child = os.path.join(os.path.dirname(__file__), "forced_block_m_child.py")
    env = dict(os.environ, DG_DEV_SM90_FP8_BLOCK_M="256", DG_DEV_SM90_FP8_DYNAMIC_TILES="0")
    out = subprocess.run([sys.executable, child], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-1500:] + out.stderr[-3000:]
    assert len([x for x in out.stdout.splitlines() if x.startswith("CASE")]) == 8, out.stdout
    loaded = [x for x in out.stdout.splitlines() if x.startswith("LOADED")][0].split()[1].split(",")
    grouped = [name for name in loaded if "_mg" in name]
    assert len(grouped) == 3 and not any("_dt" in name for name in grouped), loaded


@pytest.mark.gpu
@pytest.mark.parametrize("block_m", [64, 128, 256])
def test_forced_block_m_edge_layouts(block_m):
    """Each BLOCK_M on tiles that are only partly valid: dense M tails, contiguous groups
    starting mid-tile (BLOCK_M 256 splits such tiles at their middle row), a 128-row
    padding block before a group, psum, and masked_m at every 64-row slab boundary. Runs in
    a child process because DG_DEV_SM90_FP8_BLOCK_M is read once per process."""
    child = os.path.join(os.path.dirname(__file__), "forced_block_m_child.py")
    env = dict(os.environ, DG_DEV_SM90_FP8_BLOCK_M=str(block_m), DG_PRINT_CONFIGS="1")
    out = subprocess.run([sys.executable, child], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-1500:] + out.stderr[-3000:]
    cases = [x for x in out.stdout.splitlines() if x.startswith("CASE")]
    assert len(cases) == 8, out.stdout
    chosen = [x for x in out.stderr.splitlines() if "-> block" in x]
    assert chosen and all(f"-> block {block_m}x" in x for x in chosen), "\n".join(chosen)
    loaded = [x for x in out.stdout.splitlines() if x.startswith("LOADED")][0].split()[1].split(",")
    grouped = [name for name in loaded if "_mg" in name]
    assert len(grouped) == 3 and all(name.endswith("_dt") for name in grouped), loaded
