"""BF16 GEMMs on SM90 (bf16_gemm_*, m_grouped_bf16_gemm_*, k_grouped_bf16_gemm_tn_contiguous):
argument checks on meta tensors (CI), and on an SM90 GPU every layout and output dtype against
a float reference with the output poisoned (NaN) first, accumulation in place, the grouped and
masked forms (one CUDA graph replayed with new masked_m), and k-grouped with an empty group."""

from __future__ import annotations

import random
import re

import pytest
import torch

import deep_gemm
from deep_gemm.testing import calc_diff

BF16, F32, I32 = torch.bfloat16, torch.float32, torch.int32
LAYOUTS = ("nt", "nn", "tn", "tt")


def _meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _operands(layout, m, n, k, make):
    a = make(k, m) if layout[0] == "t" else make(m, k)
    b = make(n, k) if layout[1] == "t" else make(k, n)
    return a, b


def _logical(layout, a, b):
    """A [M, K] and B [N, K] as floats, whatever the layout."""
    a = a.float().t() if layout[0] == "t" else a.float()
    b = b.float() if layout[1] == "t" else b.float().t()
    return a, b


# ---- arguments (CI) --------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_accept_their_shapes(layout):
    a, b = _operands(layout, 64, 48, 128, lambda *s: _meta(*s))
    fn = getattr(deep_gemm, f"bf16_gemm_{layout}")
    fn(a, b, _meta(64, 48))
    fn(a, b, _meta(64, 48, dtype=F32), _meta(64, 48, dtype=F32))


def test_grouped_forms_accept_their_shapes():
    a, d = _meta(256, 128), _meta(256, 64)
    idx, ends = _meta(256, dtype=I32), _meta(2, dtype=I32)
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, _meta(2, 64, 128), d, idx)
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, _meta(2, 64, 128), d, ends, use_psum_layout=True,
                                                expected_m_for_psum_layout=100)
    deep_gemm.m_grouped_bf16_gemm_nn_contiguous(a, _meta(2, 128, 64), d, m_indices=idx)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(_meta(2, 64, 128), _meta(2, 64, 128), _meta(2, 64, 64), ends, 32)
    deep_gemm.bf16_m_grouped_gemm_nt_masked(_meta(2, 64, 128), _meta(2, 128, 64).transpose(1, 2), _meta(2, 64, 64),
                                            ends, 32)
    # The masked groups of A and D may interleave (read and written through rank-3 maps).
    deep_gemm.m_grouped_bf16_gemm_nt_masked(_meta(64, 2, 128).transpose(0, 1), _meta(2, 64, 128),
                                            _meta(64, 2, 64).transpose(0, 1), ends, 32)


BAD = {
    "fp16 a": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 128, dtype=torch.float16), _meta(48, 128), _meta(64, 48)),
               "a must be torch.bfloat16"),
    "k mismatch": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 128), _meta(48, 64), _meta(64, 48)), "K, from a"),
    "fp16 d": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(64, 48, dtype=torch.float16)),
               "d must be torch.bfloat16 or torch.float32"),
    "c dtype": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(64, 48), _meta(64, 48, dtype=F32)),
                "c must have d's dtype"),
    "c layout": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(64, 48, dtype=F32),
                                                _meta(64, 64, dtype=F32)[:, :48]), "c must have d's layout"),
    "no unit stride": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 256)[:, ::2], _meta(48, 128), _meta(64, 48)),
                       "K-major .* or MN-major"),
    "odd pitch": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 130)[:, :128], _meta(48, 128), _meta(64, 48)),
                  "multiple of 16 bytes"),
    "column-major d": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(48, 64).T), "row-major"),
    "broadcast d": (lambda: deep_gemm.bf16_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(1, 48).expand(64, 48)), "d"),
    "grouped k tail": (lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(
        _meta(256, 96), _meta(2, 64, 96), _meta(256, 64), _meta(256, dtype=I32)), "multiple of 64"),
    "grouped layout length": (lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(
        _meta(256, 128), _meta(2, 64, 128), _meta(256, 64), _meta(128, dtype=I32)), "M_sum"),
    "grouped fp32 d": (lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(
        _meta(256, 128), _meta(2, 64, 128), _meta(256, 64, dtype=F32), _meta(256, dtype=I32)), "torch.bfloat16"),
    "masked groups": (lambda: deep_gemm.m_grouped_bf16_gemm_nt_masked(
        _meta(2, 64, 128), _meta(3, 64, 128), _meta(2, 64, 64), _meta(2, dtype=I32), 32), "number of groups"),
    "masked expected_m": (lambda: deep_gemm.m_grouped_bf16_gemm_nt_masked(
        _meta(2, 64, 128), _meta(2, 64, 128), _meta(2, 64, 64), _meta(2, dtype=I32), 0), "expected_m"),
    "k-grouped ks": (lambda: deep_gemm.k_grouped_bf16_gemm_tn_contiguous(
        _meta(256, 64), _meta(256, 32), _meta(2, 64, 32, dtype=F32), [128], _meta(2, dtype=I32)), "ks_cpu has 1"),
    "k-grouped psum": (lambda: deep_gemm.k_grouped_bf16_gemm_tn_contiguous(
        _meta(256, 64), _meta(256, 32), _meta(2, 64, 32, dtype=F32), [128, 128], _meta(2, dtype=I32),
        use_psum_layout=True), "not supported on SM90"),
    "cpu operands": (lambda: deep_gemm.bf16_gemm_nt(torch.empty(64, 128, dtype=BF16), torch.empty(48, 128, dtype=BF16),
                                                    torch.empty(64, 48, dtype=BF16)), "CUDA tensor"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_clearly(case):
    fn, pattern = BAD[case]
    with pytest.raises((RuntimeError, TypeError, ValueError), match=pattern):
        fn()


# ---- correctness (GPU) -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def _exact_fp32_matmul():
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


def _randn(*shape):
    return torch.randn(*shape, device="cuda", dtype=BF16)


# Upstream's shapes (a subset of M per (N, K), to bound the JIT compiles of one run), K tails.
SHAPES = [(128, 2112, 7168), (4096, 576, 7168), (1, 24576, 1536), (4096, 7168, 2048), (136, 4096, 200)]


@pytest.mark.gpu
@pytest.mark.parametrize("out", [BF16, F32])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matches_reference(m, n, k, layout, out):
    torch.manual_seed(m + n + k)
    a, b = _operands(layout, m, n, k, _randn)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=out)
    getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d)
    torch.cuda.synchronize()
    la, lb = _logical(layout, a, b)
    assert not d.isnan().any()
    assert calc_diff(d, la @ lb.t()) < 1e-5


@pytest.mark.gpu
def test_odd_m_k_major():
    # M = 129: K-major A only (an MN-major A of 129 columns has a 258-byte pitch, refused).
    m, n, k = 129, 4096, 200
    a, b = _randn(m, k), _randn(n, k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
    deep_gemm.bf16_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    assert calc_diff(d, a.float() @ b.float().t()) < 1e-5
    with pytest.raises(RuntimeError, match="multiple of 16 bytes"):
        deep_gemm.bf16_gemm_tn(_randn(k, m), _randn(k, n), d)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [256, 7168, 129280])
def test_fp32_out_wide(n):
    m, k = 128, 7168
    a, b = _randn(m, k), _randn(n, k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=F32)
    deep_gemm.bf16_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    assert calc_diff(d, a.float() @ b.float().t()) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("out", [BF16, F32])
@pytest.mark.parametrize("mode", ["c_is_d", "c_separate"])
def test_accumulates(mode, out):
    # The wgrad form: tn (tokens as rows), accumulated in place.
    m, n, k = 2112, 7168, 4096
    a, b = _randn(k, m), _randn(k, n)
    c = (torch.randn(m, n, device="cuda") * 8).to(out)
    ref = c.float() + a.float().t() @ b.float()
    if mode == "c_is_d":
        d = c.clone()
        deep_gemm.bf16_gemm_tn(a, b, d, d)
    else:
        d = torch.full((m, n), float("nan"), device="cuda", dtype=out)
        deep_gemm.bf16_gemm_tn(a, b, d, c)
    torch.cuda.synchronize()
    assert calc_diff(d, ref) < (1e-5 if out == F32 else 1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["none", "c_is_d", "c_separate"])
@pytest.mark.parametrize("out", [BF16, F32])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", [(200, 1000, 12288), (64, 512, 8200)])
def test_split_k(m, n, k, layout, out, mode):
    # Few output tiles and K >= 8192: the K loop runs split over CTAs into FP32 partial sums
    # (a ragged last K block in the second shape), reduced by the op, C added once.
    torch.manual_seed(m + k)
    a, b = _operands(layout, m, n, k, _randn)
    la, lb = _logical(layout, a, b)
    ref = la @ lb.t()
    c = None if mode == "none" else (torch.randn(m, n, device="cuda") * 8).to(out)
    if mode == "c_is_d":
        d = c.clone()
        c = d
    else:
        d = torch.full((m, n), float("nan"), device="cuda", dtype=out)
    if c is not None:
        ref = ref + c.float()
    getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d, c)
    torch.cuda.synchronize()
    assert calc_diff(d, ref) < (1e-5 if out == F32 or c is None else 1e-4)


def _contiguous_layout(rows):
    """The contiguous layout of groups of `rows` rows, each padded to the alignment: the
    per-row group index (-1 = padding), each group's first row and its end row."""
    align = deep_gemm.get_mk_alignment_for_contiguous_layout()
    index, starts, ends = [], [], []
    for grp, r in enumerate(rows):
        starts.append(len(index))
        index += [grp] * r
        ends.append(len(index))
        index += [-1] * (-(-r // align) * align - r)
    return index, starts, ends


def _grouped_b(g, n, k, nn):
    b = _randn(g, k, n) if nn else _randn(g, n, k)
    return b, (b.float().transpose(1, 2) if nn else b.float())


@pytest.mark.gpu
@pytest.mark.parametrize("nn", [False, True])
@pytest.mark.parametrize("psum", [False, True])
def test_m_grouped_contiguous(psum, nn):
    g, n, k = 4, 4096, 2048
    rows = [1000, 0, 1500, 333]
    index, starts, ends = _contiguous_layout(rows)
    m_sum = len(index)
    a = _randn(m_sum, k)
    b, b_f = _grouped_b(g, n, k, nn)
    d = torch.full((m_sum, n), float("nan"), device="cuda", dtype=BF16)
    fn = deep_gemm.m_grouped_bf16_gemm_nn_contiguous if nn else deep_gemm.m_grouped_bf16_gemm_nt_contiguous
    if psum:
        fn(a, b, d, torch.tensor(ends, dtype=I32, device="cuda"), use_psum_layout=True, ensure_zero_padding=False)
    else:
        fn(a, b, d, torch.tensor(index, dtype=I32, device="cuda"))
    torch.cuda.synchronize()
    valid = torch.tensor(index, device="cuda") >= 0
    assert d[~valid].isnan().all(), "padding rows were written"
    for grp, (s, r) in enumerate(zip(starts, rows, strict=True)):
        if r:
            assert calc_diff(d[s:s + r], a[s:s + r].float() @ b_f[grp].t()) < 1e-5, f"group {grp}"


HALF_TILE_ROWS = [130, 64, 1, 200, 192]  # last m-blocks of 2, 64, 1, 72 and 64 rows


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["contiguous", "contiguous_nn", "psum_nn", "masked"])
def test_m_grouped_half_tiles(form):
    """Groups whose last 128-row block holds at most 64 rows: both warpgroups compute that
    block's first slab over half of the columns each (a ragged N past the last tile), and
    nothing past the group's rows is written."""
    g = len(HALF_TILE_ROWS)
    n, k = (3000, 1024) if form == "masked" else (4000, 2048)
    nn = form.endswith("_nn")
    torch.manual_seed(7)
    b, b_f = _grouped_b(g, n, k, nn)
    if form == "masked":
        max_m = 256
        name = torch.ops.deep_gemm.m_grouped_bf16_gemm_build("masked", max_m, n, k, g, 128,
                                                             deep_gemm.get_num_sms(), "nk", False)
        a = _randn(g, max_m, k)
        d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=BF16)
        deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, torch.tensor(HALF_TILE_ROWS, dtype=I32, device="cuda"), 128)
        torch.cuda.synchronize()
        for grp, r in enumerate(HALF_TILE_ROWS):
            assert d[grp, r:].isnan().all(), f"group {grp}: rows past masked_m written"
            assert calc_diff(d[grp, :r], a[grp, :r].float() @ b_f[grp].t()) < 1e-5, f"group {grp}"
    else:
        index, starts, ends = _contiguous_layout(HALF_TILE_ROWS)
        m_sum = len(index)
        psum = form.startswith("psum")
        name = torch.ops.deep_gemm.m_grouped_bf16_gemm_build("psum" if psum else "contiguous", m_sum, n, k, g, 0,
                                                             deep_gemm.get_num_sms(), "nk", nn)
        a = _randn(m_sum, k)
        d = torch.full((m_sum, n), float("nan"), device="cuda", dtype=BF16)
        fn = deep_gemm.m_grouped_bf16_gemm_nn_contiguous if nn else deep_gemm.m_grouped_bf16_gemm_nt_contiguous
        layout = torch.tensor(ends if psum else index, dtype=I32, device="cuda")
        fn(a, b, d, layout, use_psum_layout=psum, ensure_zero_padding=False)
        torch.cuda.synchronize()
        valid = torch.tensor(index, device="cuda") >= 0
        assert d[~valid].isnan().all(), "padding rows were written"
        for grp, (s0, r) in enumerate(zip(starts, HALF_TILE_ROWS, strict=True)):
            assert calc_diff(d[s0:s0 + r], a[s0:s0 + r].float() @ b_f[grp].t()) < 1e-5, f"group {grp}"
    # The tiles these shapes get split their halves (a width whose halves keep the staging
    # atoms): a heuristics change that moves them off it must move the shapes too.
    assert "_b128x128_" in name or "_b128x256_" in name, name


@pytest.mark.gpu
@pytest.mark.parametrize("nn", [False, True])
def test_m_grouped_masked_192_wide_tiles(nn):
    """expected_m 192 (128 x 192 tiles, whose halves do not keep the staging atoms: a last block
    of at most 64 rows runs whole) on groups of 1-256 rows and an empty one, a ragged last
    n-block (N = 1000: 5 tiles of 192 and 40 columns); nothing past masked_m written."""
    rows = HALF_TILE_ROWS + [256, 0]
    g, max_m, n, k = len(rows), 256, 1000, 1024
    torch.manual_seed(8)
    b, b_f = _grouped_b(g, n, k, nn)
    name = torch.ops.deep_gemm.m_grouped_bf16_gemm_build("masked", max_m, n, k, g, 192, deep_gemm.get_num_sms(), "nk",
                                                         nn)
    assert "_b128x192_" in name, name
    a = _randn(g, max_m, k)
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=BF16)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b.transpose(1, 2) if nn else b, d,
                                            torch.tensor(rows, dtype=I32, device="cuda"), 192)
    torch.cuda.synchronize()
    for grp, r in enumerate(rows):
        assert d[grp, r:].isnan().all(), f"group {grp}: rows past masked_m written"
        if r:
            assert calc_diff(d[grp, :r], a[grp, :r].float() @ b_f[grp].t()) < 1e-5, f"group {grp}"


@pytest.mark.gpu
@pytest.mark.parametrize("nn", [False, True])
def test_m_grouped_masked_interleaved_groups(nn):
    """A's and D's groups interleaved in their rows (as einsum's heads are), D a column slice of
    a wider buffer: each group's rows up to masked_m are right (half tiles included), and no
    other element of D's buffer is written."""
    g, max_m, n, k = len(HALF_TILE_ROWS), 256, 1000, 512
    torch.manual_seed(11)
    b, b_f = _grouped_b(g, n, k, nn)
    a = _randn(max_m, g, k).transpose(0, 1)
    buf = torch.full((max_m, g, n + 24), float("nan"), device="cuda", dtype=BF16)
    d = buf[:, :, :n].transpose(0, 1)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b.transpose(1, 2) if nn else b, d,
                                            torch.tensor(HALF_TILE_ROWS, dtype=I32, device="cuda"), 128)
    torch.cuda.synchronize()
    assert buf[:, :, n:].isnan().all(), "columns past N written"
    for grp, r in enumerate(HALF_TILE_ROWS):
        assert d[grp, r:].isnan().all(), f"group {grp}: rows past masked_m written"
        assert calc_diff(d[grp, :r], a[grp, :r].float() @ b_f[grp].t()) < 1e-5, f"group {grp}"


@pytest.mark.gpu
def test_m_grouped_masked_cuda_graph_replays_new_masks():
    g, max_m, n, k = 6, 256, 2048, 1024
    a, (b, b_f) = _randn(g, max_m, k), _grouped_b(g, n, k, False)
    d = torch.empty(g, max_m, n, device="cuda", dtype=BF16)
    masked_m = torch.zeros(g, dtype=I32, device="cuda")
    graph = torch.cuda.CUDAGraph()
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 128)  # compile outside the capture
    with torch.cuda.graph(graph):
        deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 128)
    for seed in (1, 2):
        rng = random.Random(seed)
        rows = [rng.randint(0, max_m) for _ in range(g)]
        rows[seed] = 0
        masked_m.copy_(torch.tensor(rows, dtype=I32))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for grp, r in enumerate(rows):
            assert d[grp, r:].isnan().all(), f"group {grp}: rows past masked_m written"
            if r:
                assert calc_diff(d[grp, :r], a[grp, :r].float() @ b_f[grp].t()) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("with_c", [False, True])
def test_k_grouped_tn(with_c):
    m, n = 2048, 1536
    ks = [512, 0, 1024, 256]
    a, b = _randn(sum(ks), m), _randn(sum(ks), n)
    c = torch.randn(len(ks), m, n, device="cuda")
    d = c.clone() if with_c else torch.full((len(ks), m, n), float("nan"), device="cuda")
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, torch.tensor(ks, dtype=I32, device="cuda"),
                                                d if with_c else None)
    torch.cuda.synchronize()
    start = 0
    for grp, k in enumerate(ks):
        base = c[grp] if with_c else torch.zeros_like(c[grp])
        if k == 0:
            assert torch.equal(d[grp], base)
        else:
            ref = base + a[start:start + k].float().t() @ b[start:start + k].float()
            assert calc_diff(d[grp], ref) < 1e-5, f"group {grp}"
        start += k


HAS_NVCC = __import__("shutil").which("nvcc") is not None


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_kernels_compile_without_spills(tmp_path):
    """The BF16 kernels the heuristics pick over a grid of shapes, layouts, output dtypes and
    with / without C compile with DG_JIT_PTXAS_CHECK=1: no spills, no stack, no local memory."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    code = (
        "import torch\n"
        "import deep_gemm\n"
        "cases = [(4096, 7168, 2048, 'nt', 'bf16', False), (4096, 7168, 2048, 'tn', 'fp32', True),\n"
        "         (4096, 7168, 2048, 'tn', 'bf16', True), (128, 2112, 7168, 'nn', 'bf16', False),\n"
        "         (1, 24576, 1536, 'tt', 'fp32', False), (2112, 7168, 4096, 'nt', 'fp32', True),\n"
        "         (128, 4096, 7168, 'nt', 'bf16', False)]\n"
        "for m, n, k, lay, out, c in cases:\n"
        "    print(torch.ops.deep_gemm.bf16_gemm_build(m, n, k, lay, out, c, 132, 'nk'))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 7 and lines[-1].split("\t")[0].endswith("_pb_efb"), lines  # the last: CTA pairs
    for line in lines:
        name, path = line.split("\t")
        assert name.startswith("sm90_bf16_gemm_") and os.path.exists(path)


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_producer_bound_kernels_compile_without_spills(tmp_path):
    """Kernels whose TMA producer runs close to its register budget build under
    DG_JIT_PTXAS_CHECK=1 (no spills, no stack): 64-row m-grouped tiles (one math warpgroup;
    the masked MN-major-B producer at 64 x 64 once kept two registers in local memory) and
    MN-major operands with a short compiled-in K (8 K blocks, once unrolled into 24-76 bytes
    of spills at 128 x 192 and 128 x 256)."""
    res, names = _m_grouped_build_names([("masked", 4096, 128, 1024, 8, 64, True),
                                         ("masked", 4096, 128, 1024, 8, 64, False),
                                         ("contiguous", 4096, 128, 1024, 8, 0, True),
                                         ("masked", 1536, 4096, 512, 8, 192, True),
                                         ("psum", 8192, 2112, 512, 8, 1024, True)],
                                        tmp_path, {"DG_JIT_PTXAS_CHECK": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(names) == 5 and all("_b64x" in name for name in names[:2]), names
    assert "k512_b128x192_" in names[3] and "k512_b128x192_" in names[4], names
    res, names = _build_names([(4096, 2112, 512, "tn", "bf16", False), (4096, 7168, 512, "nn", "fp32", False),
                               (4096, 7168, 512, "tn", "fp32", False)], {"DG_JIT_PTXAS_CHECK": "1"}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(names) == 3, names


def _child_stdout_names(code, tmp_path, env_extra=None):
    """Runs `code` (which prints kernel names) in a child process with its own JIT cache and
    `env_extra` set; the process result and the printed names."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), **(env_extra or {}))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    return res, res.stdout.split()


def _build_names(cases, env_extra, tmp_path):
    """Kernel names the configuration picks for `cases` (m, n, k, layout, out, with_c) in a
    child process with `env_extra` set (the developer knobs are read once per process)."""
    code = ("import torch, deep_gemm\n"
            f"for m, n, k, lay, out, c in {cases!r}:\n"
            "    print(torch.ops.deep_gemm.bf16_gemm_build(m, n, k, lay, out, c, 132, 'nk').split()[0])\n")
    return _child_stdout_names(code, tmp_path, env_extra)


def _m_grouped_build_names(cases, tmp_path, env_extra=None):
    """As _build_names for m_grouped_bf16_gemm_build: `cases` (layout, m, n, k, groups,
    expected_m, mn_major_b), built for 132 SMs."""
    code = ("import torch, deep_gemm\n"
            f"for lay, m, n, k, g, em, nn in {cases!r}:\n"
            "    print(torch.ops.deep_gemm.m_grouped_bf16_gemm_build(lay, m, n, k, g, em, 132, 'nk', nn).split()[0])\n")
    return _child_stdout_names(code, tmp_path, env_extra)


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_staged_d_tiles_prefer_whole_swizzle_rows(tmp_path):
    """4096 x 24576 x 1536 (bf16 D through the staging tile): 128 x 256 tiles, not 128 x 240,
    whose 480-byte rows are staged in 32-byte atoms (as slow per tile on the H200, 2026-12-03)."""
    res, names = _build_names([(4096, 24576, 1536, "nt", "bf16", False)], {}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "_b128x256_" in names[0], names


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_short_k_tiles_take_a_multiple_of_their_k_blocks_in_stages(tmp_path):
    """K = 128 (two K blocks; einsum bhd,hdr->bhr's per-head K): 128 x 256 tiles with 2 stages,
    not the 3 that fit (A then read once from DRAM, an H100 on 2026-12-07); K = 192 (three
    blocks) keeps the 3 that fit."""
    res, names = _build_names([(4096, 24576, 128, "nt", "bf16", False), (4096, 24576, 192, "nt", "bf16", False)],
                              {}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "_b128x256_s2_" in names[0] and "_b128x256_s3_" in names[1], names


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_developer_config_knobs_pick_their_kernel(tmp_path):
    """DG_DEV_SM90_BF16_*: the tile, stages, direct D stores and a forced split count."""
    res, names = _build_names([(4096, 4096, 7168, "nt", "bf16", False)],
                              {"DG_DEV_SM90_BF16_BLOCK_N": "256", "DG_DEV_SM90_BF16_STAGES": "4",
                               "DG_DEV_SM90_BF16_DIRECT_D": "1"}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert names[0].endswith("_b128x256_s4_g8_dd"), names
    res, names = _build_names([(128, 4096, 7168, "nt", "bf16", False)],
                              {"DG_DEV_SM90_BF16_BLOCK_N": "128", "DG_DEV_SM90_BF16_SPLITS": "3"}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "_b128x128_" in names[0] and names[0].endswith("_sk_efb"), names
    # With SPLITS the stages knob sets the split tile's ring (64-row tiles in 3 splits, as
    # cuBLAS runs 128 x 2112 x 7168).
    res, names = _build_names([(128, 2112, 7168, "nt", "bf16", False)],
                              {"DG_DEV_SM90_BF16_BLOCK_M": "64", "DG_DEV_SM90_BF16_BLOCK_N": "96",
                               "DG_DEV_SM90_BF16_SPLITS": "3", "DG_DEV_SM90_BF16_STAGES": "11"}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert names[0].endswith("_b64x96_s11_g8_sk_efb"), names  # two m-blocks in one wave: B read once


@pytest.mark.parametrize("knobs,expected", [
    ({"DG_DEV_SM90_BF16_BLOCK_M": "128", "DG_DEV_SM90_BF16_BLOCK_N": "128", "DG_DEV_SM90_BF16_SPLITS": "2",
      "DG_DEV_SM90_BF16_STAGES": "12"},
     "DG_DEV_SM90_BF16_STAGES=12 does not fit 128x128 split tiles (at most "),
    ({"DG_DEV_SM90_BF16_BLOCK_M": "128", "DG_DEV_SM90_BF16_BLOCK_N": "192", "DG_DEV_SM90_BF16_SPLITS": "2",
      "DG_DEV_SM90_BF16_STAGES": "2"},
     "enough to park the FP32 tile"),
    ({"DG_DEV_SM90_BF16_SPLITS": "2", "DG_DEV_SM90_BF16_PAIR_B": "1"}, "do not combine with SPLITS"),
    ({"DG_DEV_SM90_BF16_SPLITS": "2", "DG_DEV_SM90_BF16_GROUP_N": "4"}, "do not combine with SPLITS"),
])
def test_developer_split_knobs_refuse_what_they_cannot_build(knobs, expected, tmp_path):
    res, _ = _build_names([(128, 4096, 7168, "nt", "bf16", False)], knobs, tmp_path)
    assert res.returncode != 0 and expected in res.stderr, res.stderr[-2000:]


@pytest.mark.parametrize("knob,value,expected", [("DG_DEV_SM90_BF16_STAGES", "17", "in [2, 16]"),
                                                 ("DG_DEV_SM90_BF16_BLOCK_N", "100", "a multiple of 16"),
                                                 ("DG_DEV_SM90_BF16_BLOCK_M", "256", "64 or 128")])
def test_developer_config_knobs_refuse_bad_values(knob, value, expected, tmp_path):
    res, _ = _build_names([(256, 256, 256, "nt", "bf16", False)], {knob: value}, tmp_path)
    assert res.returncode != 0 and f"{knob} must be {expected}" in res.stderr, res.stderr[-2000:]


def test_developer_stages_knob_refuses_a_layout_that_does_not_fit(tmp_path):
    res, _ = _build_names([(4096, 4096, 7168, "nt", "bf16", False)],
                          {"DG_DEV_SM90_BF16_BLOCK_N": "256", "DG_DEV_SM90_BF16_STAGES": "4"}, tmp_path)
    assert res.returncode != 0 and "does not fit 128x256 tiles (at most 3)" in res.stderr, res.stderr[-2000:]


@pytest.mark.gpu
@pytest.mark.parametrize("knobs,shapes", [
    ({"DG_DEV_SM90_BF16_BLOCK_N": "256", "DG_DEV_SM90_BF16_STAGES": "4", "DG_DEV_SM90_BF16_DIRECT_D": "1"},
     [(300, 1000, 4096), (128, 4096, 7168)]),
    ({"DG_DEV_SM90_BF16_BLOCK_N": "128", "DG_DEV_SM90_BF16_SPLITS": "3"}, [(300, 1000, 4096), (128, 4096, 7168)]),
    ({"DG_DEV_SM90_BF16_BLOCK_M": "64", "DG_DEV_SM90_BF16_BLOCK_N": "96", "DG_DEV_SM90_BF16_SPLITS": "3",
      "DG_DEV_SM90_BF16_STAGES": "11"}, [(128, 2112, 7168), (100, 1000, 4096)]),
    # CTA pairs multicasting halves of B: an even number of m-blocks, ragged last ones.
    ({"DG_DEV_SM90_BF16_BLOCK_M": "64", "DG_DEV_SM90_BF16_BLOCK_N": "64", "DG_DEV_SM90_BF16_STAGES": "13",
      "DG_DEV_SM90_BF16_PAIR_B": "1"}, [(250, 1000, 4096), (128, 4096, 7168), (128, 2112, 64)]),
    ({"DG_DEV_SM90_BF16_BLOCK_M": "128", "DG_DEV_SM90_BF16_BLOCK_N": "256", "DG_DEV_SM90_BF16_PAIR_B": "1"},
     [(500, 1000, 4096), (4096, 4096, 7168)]),
])
def test_developer_config_knobs_compute_correctly(knobs, shapes):
    """The kernels only the knobs reach (direct D stores, a split count past the residency
    cap, CTA pairs sharing B) against a float reference, the output poisoned, ragged M and N."""
    import os
    import subprocess
    import sys

    code = ("import torch, deep_gemm\n"
            "from deep_gemm.testing import calc_diff\n"
            "torch.manual_seed(1)\n"
            f"for m, n, k in {shapes!r}:\n"
            "    a = torch.randn(m, k, device='cuda', dtype=torch.bfloat16)\n"
            "    b = torch.randn(n, k, device='cuda', dtype=torch.bfloat16)\n"
            "    for _ in range(2):  # the second launch reuses the kernel on fresh poison\n"
            "        d = torch.full((m, n), float('nan'), device='cuda', dtype=torch.bfloat16)\n"
            "        deep_gemm.bf16_gemm_nt(a, b, d)\n"
            "        diff = calc_diff(d, a.float() @ b.float().t())\n"
            "        assert diff < 1e-5, (m, n, k, diff)\n"
            "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **knobs), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-3000:]


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_masked_groups_of_two_row_blocks_take_192_wide_tiles(tmp_path):
    """Masked groups of 129-256 expected rows: 128 x 192 tiles (4 stages), faster there on an H100
    (2026-12-07); 128 or 512 expected rows, and einsum's per-head GEMMs ('heads': no masked_m, here
    256 rows each), keep what the model ranks first."""
    cases = [("masked", 4096, 4096, 7168, 32, em, False) for em in (192, 256, 129, 128, 512)]
    cases += [("masked", 1024, 7168, 2048, 32, 192, False), ("heads", 256, 512, 128, 16, 256, True)]
    res, names = _m_grouped_build_names(cases, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert all("_b128x192_s4_" in name for name in names[:3] + names[5:6]), names
    assert all("_b128x256_" in name for name in names[3:5]), names
    assert "_b128x192_" not in names[6], names  # the model's own pick for einsum's heads
    assert re.search(r"_g1(_|$)", names[6]) and re.search(r"_g2(_|$)", names[0]), names  # heads: one n-block at a time


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_two_row_blocks_that_fill_the_gpu_once_share_b_in_pairs(tmp_path):
    """128 x 4096 x 7168 (128 tiles of 64 x 64 on 132 SMs): CTA pairs sharing B, 13 stages. Half
    the SMs (N = 2112), two waves (N = 7168), one row block (M = 64), short K, an fp32 D or an
    MN-major operand keep the ranking's choice."""
    res, names = _build_names([(128, 4096, 7168, "nt", "bf16", False), (100, 4000, 4096, "nt", "bf16", False),
                               (128, 2112, 7168, "nt", "bf16", False), (128, 7168, 16384, "nt", "bf16", False),
                               (64, 4096, 7168, "nt", "bf16", False), (128, 4096, 1024, "nt", "bf16", False),
                               (128, 4096, 7168, "nt", "fp32", False), (128, 4096, 7168, "nn", "bf16", False),
                               (128, 4096, 7168, "tn", "bf16", False)],
                              {}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert names[0].endswith("_b64x64_s13_g1_pb_efb") and names[1].endswith("_b64x64_s13_g1_pb_efb"), names
    assert not any("_pb" in name for name in names[2:]), names


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_pair_b_knob_builds_pairs_and_refuses_an_odd_count_of_m_blocks(tmp_path):
    """DG_DEV_SM90_BF16_PAIR_B: m-blocks first (g1), the pair suffix; an odd number of
    m-blocks (or an MN-major B) is an error naming the knob."""
    knobs = {"DG_DEV_SM90_BF16_BLOCK_M": "64", "DG_DEV_SM90_BF16_BLOCK_N": "64", "DG_DEV_SM90_BF16_PAIR_B": "1"}
    res, names = _build_names([(128, 4096, 7168, "nt", "bf16", False)], knobs, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert names[0].endswith("_b64x64_s8_g1_pb_efb"), names
    for shape in [(192, 4096, 7168, "nt", "bf16", False), (128, 4096, 7168, "nn", "bf16", False)]:
        res, _ = _build_names([shape], knobs, tmp_path)
        assert res.returncode != 0 and "DG_DEV_SM90_BF16_PAIR_B needs" in res.stderr, res.stderr[-2000:]


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_b_read_once_loads_under_evict_first(tmp_path):
    """Where B is read once (one m-block spans M: split, paired or a single row of tiles; or two
    m-blocks whose CTAs all run in one wave, with a B that fits in L2) its loads take L2's
    evict-first policy (suffix _efb); M = 4096, three m-blocks (M = 384) and two with a 59 MB B
    (256 x 4096 x 7168) keep the default policy, as does einsum's batched K. The knob overrides
    the choice both ways."""
    shapes = [(128, 2112, 7168, "nt", "bf16", False), (128, 4096, 7168, "nt", "bf16", False),
              (128, 24576, 1536, "nt", "bf16", False), (1, 2112, 7168, "tn", "fp32", True),
              (4096, 4096, 7168, "nt", "bf16", False), (384, 2112, 7168, "nt", "bf16", False),
              (256, 2112, 7168, "nt", "bf16", False), (256, 4096, 7168, "nt", "bf16", False)]
    res, names = _build_names(shapes, {}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert names[0].endswith("_sk_efb") and names[1].endswith("_pb_efb"), names
    assert names[2].endswith("_efb") and names[3].endswith("_efb"), names
    assert not names[4].endswith("_efb") and not names[5].endswith("_efb") and names[6].endswith("_efb"), names
    assert "_sk" in names[7] and not names[7].endswith("_efb"), names
    res, off = _build_names(shapes[:2], {"DG_DEV_SM90_BF16_EVICT_FIRST_B": "0"}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert off == [name.removesuffix("_efb") for name in names[:2]], (off, names)
    res, on = _build_names(shapes[4:5], {"DG_DEV_SM90_BF16_EVICT_FIRST_B": "1"}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert on == [names[4] + "_efb"], (on, names)
    res, _ = _build_names(shapes[4:5], {"DG_DEV_SM90_BF16_EVICT_FIRST_B": "2"}, tmp_path)
    assert res.returncode != 0 and "DG_DEV_SM90_BF16_EVICT_FIRST_B must be 0 or 1" in res.stderr, res.stderr[-2000:]


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_bf16_kernels_scheduler_group_widths(tmp_path):
    """The masked form numbers its tiles in groups of 2 n-blocks (the m-blocks sharing a B tile
    on neighbouring CTAs); the dense GEMM and the contiguous form (M_sum walked like one tall
    GEMM) take 8, or equal groups where 8 would leave a narrow last group with a quarter of the
    tiles or more (12 n-blocks of 176 at N = 2112: two groups of 6; 28 of 256 at N = 7168 keep
    8)."""
    res, names = _m_grouped_build_names([("masked", 4096, 4096, 7168, 32, 192, False),
                                         ("contiguous", 32768, 4096, 7168, 4, 0, False),
                                         ("contiguous", 33712, 7168, 2048, 8, 0, False)], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    res, dense_names = _build_names([(4096, n, 7168, "nt", "bf16", False) for n in (4096, 2112, 7168)], {}, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    masked, contiguous, contiguous_7168 = names
    dense, dense_2112, dense_7168 = dense_names
    assert "_mgm_" in masked and masked.endswith("_g2"), masked
    assert "_mgc_" in contiguous and contiguous.endswith("_b128x256_s3_g8"), contiguous
    assert "_mgc_" in contiguous_7168 and contiguous_7168.endswith("_g8"), contiguous_7168
    assert dense.startswith("sm90_bf16_gemm_nt_bf16_") and dense.endswith("_g8"), dense
    assert dense_2112.endswith("_b128x176_s4_g6"), dense_2112
    assert dense_7168.endswith("_b128x256_s3_g8"), dense_7168
