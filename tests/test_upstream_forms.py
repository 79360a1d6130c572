"""Upstream DeepGEMM's FP8 call forms, as its own tests and vLLM / SGLang pass them: the
fp8_fp4 names and parameter order, the grouped keywords (recipe_a / recipe_b,
ensure_zero_padding, m_indices=), K not a multiple of 128 (the backward GEMMs of 2112 x 7168
and 576 x 7168 weights), and the k-grouped flat operands with ``sf.T`` scale views.

Shape checks run on meta tensors (CI); the GPU tests compare against a float reference on
fresh random data, the output poisoned (NaN) first."""

from __future__ import annotations

import random

import pytest
import torch

import deep_gemm
from deep_gemm.testing import assert_bitwise_equal, calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_channel_cast_to_fp8, per_token_cast_to_fp8
from fp8_reference import dequant_blocks, dequant_rows

FP8 = torch.float8_e4m3fn
I32 = torch.int32


def _meta_dense(m, n, k, out=torch.bfloat16, sfb_blocks=True):
    e = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    kb = -(-k // 128)
    sfb = e(-(-n // 128), kb) if sfb_blocks else e(n, kb)
    return (e(m, k, dt=FP8), e(m, kb)), (e(n, k, dt=FP8), sfb), e(m, n, dt=out)


# ---- shapes and arguments (CI) ---------------------------------------------------------


def test_fp8_fp4_positional_order_is_upstreams():
    a, b, d = _meta_dense(256, 512, 1024)
    # a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast
    deep_gemm.fp8_fp4_gemm_nt(a, b, d, None, None, (1, 128), (128, 128), "nk", True)
    with pytest.raises(ValueError, match="recipe"):
        deep_gemm.fp8_fp4_gemm_nt(a, b, d, None, None, (1, 128), (1, 256), "nk", False)
    with pytest.raises(TypeError, match="compiled_dims"):
        deep_gemm.fp8_fp4_gemm_nt(a, b, d, None, None, None, None, 5)


def test_alpha_is_sm100_only():
    a, b, d = _meta_dense(256, 512, 1024)
    deep_gemm.fp8_fp4_gemm_nt(a, b, d, alpha=None)
    with pytest.raises(RuntimeError, match="alpha.*SM100"):
        deep_gemm.fp8_fp4_gemm_nt(a, b, d, alpha=0.5)


@pytest.mark.parametrize("k", [576, 2112, 7168 + 64, 144])
def test_k_tail_shapes_accepted(k):
    a, b, d = _meta_dense(128, 256, k)
    deep_gemm.fp8_gemm_nt(a, b, d)
    a, b, d = _meta_dense(128, 256, k, out=torch.float32, sfb_blocks=False)
    deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))


def test_k_tail_packed_rows_stay_tma_aligned():
    a, b, d = _meta_dense(128, 256, 100)  # a packed [M, 100] FP8 row pitch is not a multiple of 16 bytes
    with pytest.raises(RuntimeError, match="multiple of 16 for TMA"):
        deep_gemm.fp8_gemm_nt(a, b, d)


def test_k_tail_scales_need_ceil_columns():
    (a, sfa), b, d = _meta_dense(128, 256, 2112)
    with pytest.raises(RuntimeError, match=r"ceil\(K / 128\)"):
        deep_gemm.fp8_gemm_nt((a, sfa[:, :16]), b, d)


def test_1d1d_bf16_out_without_c():
    a, b, d = _meta_dense(256, 512, 2112, out=torch.bfloat16, sfb_blocks=False)
    deep_gemm.fp8_gemm_nt(a, b, d, recipe=(1, 1, 128))
    with pytest.raises(RuntimeError, match="c .accumulation. needs an fp32 d"):
        deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))


def test_skip_head_mid_shapes():
    n, heads = 1024, (128, 64, 128)
    a, b, _ = _meta_dense(256, n, 512)
    d = torch.empty(256, n + n // 256 * 64, dtype=torch.bfloat16, device="meta")
    deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, heads)
    with pytest.raises(RuntimeError, match="N \\+ N / \\(left \\+ right\\) \\* mid"):
        deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d[:, :n], heads)
    with pytest.raises(RuntimeError, match="multiple of left \\+ right"):
        deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, (128, 64, 96))
    with pytest.raises(RuntimeError, match="multiples of 16"):
        deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, (120, 64, 136))
    with pytest.raises(ValueError, match="head_splits must have 3 elements"):
        deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, (128, 128))
    with pytest.raises(ValueError, match="recipe"):
        deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, heads, recipe=(1, 1, 128))


def _meta_contig(m_sum=256, n=256, k=576, g=2):
    e = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    kb = -(-k // 128)
    return ((e(m_sum, k, dt=FP8), e(m_sum, kb)), (e(g, n, k, dt=FP8), e(g, -(-n // 128), kb)),
            e(m_sum, n, dt=torch.bfloat16), e(m_sum, dt=I32), e(g, dt=I32))


def test_grouped_fp8_fp4_keywords():
    a, b, d, index, ends = _meta_contig()
    fn = deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous
    fn(a, b, d, index, recipe_a=(1, 128), recipe_b=(128, 128), ensure_zero_padding=False)
    fn(a, b, d, ends, use_psum_layout=True, ensure_zero_padding=True, expected_m_for_psum_layout=128)
    fn(a, b, d, m_indices=index)  # SGLang's keyword
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, index, None, None, None, "nk", False, False, True)
    with pytest.raises(TypeError, match="m_indices, not both"):
        fn(a, b, d, index, m_indices=index)
    with pytest.raises(TypeError, match="ensure_zero_padding"):
        fn(a, b, d, index, ensure_zero_padding="yes")
    with pytest.raises(ValueError, match="recipe"):
        fn(a, b, d, index, recipe_a=(1, 128), recipe_b=(1, 128))
    b_nn = (b[0].transpose(1, 2), b[1].transpose(1, 2))
    deep_gemm.m_grouped_fp8_fp4_gemm_nn_contiguous(a, b_nn, d, index, ensure_zero_padding=False)


def test_masked_fp8_fp4_keywords():
    e = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    a, b = (e(4, 64, 576, dt=FP8), e(4, 64, 5)), (e(4, 256, 576, dt=FP8), e(4, 2, 5))
    d, masked_m = e(4, 64, 256, dt=torch.bfloat16), e(4, dt=I32)
    deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked(a, b, d, masked_m, 32, None, (1, 128), (128, 128), "nk", True)


def test_k_grouped_accepts_upstreams_scale_views():
    m, n, ks = 256, 384, [256, 0, 128]
    kb = sum(ks) // 128
    e = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    a, b = e(sum(ks) * m, dt=FP8), e(sum(ks) * n, dt=FP8)
    d, layout = e(3, m, n), e(3, dt=I32)
    sfa_t, sfb_t = e(kb, m).T, e(kb, n).T  # upstream's form: [mn, sum(ks)/128], strides (1, mn)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous((a, sfa_t), (b, sfb_t), d, ks, layout, d)
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous((a, e(kb, m)), (b, e(kb, n)), d, ks, layout, d)
    with pytest.raises(RuntimeError, match=r"sum\(ks\) / 128"):
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous((a, e(kb + 1, m)), (b, sfb_t), d, ks, layout, d)


def test_assert_bitwise_equal():
    x = torch.tensor([1.0, -0.0, float("nan")])
    assert_bitwise_equal(x, x.clone(), "same")
    with pytest.raises(AssertionError, match="zero: 1 of 3 elements differ bitwise; first at index \\(1,\\)"):
        assert_bitwise_equal(x, torch.tensor([1.0, 0.0, float("nan")]), "zero")
    with pytest.raises(AssertionError, match="shape/dtype"):
        assert_bitwise_equal(x, x.double())
    assert_bitwise_equal(torch.arange(6).view(2, 3).t(), torch.arange(6).view(2, 3).t().contiguous())


# ---- correctness (GPU) -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def _exact_fp32_matmul():
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


def _dense_data(m, n, k, per_row_b, seed):
    torch.manual_seed(seed)
    a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    x_b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b, sfb = (per_token_cast_to_fp8 if per_row_b else per_block_cast_to_fp8)(x_b, use_ue8m0=False)
    ref = dequant_rows(a, sfa) @ (dequant_rows(b, sfb) if per_row_b else dequant_blocks(b, sfb)).t()
    return (a, sfa), (b, sfb), ref


# The backward GEMMs of upstream's shape list: dgrad of 2112 x 7168 and 576 x 7168 weights
# (K = 2112, 576), and K one half block past a multiple of 128.
K_TAIL = [(4096, 7168, 2112), (4096, 7168, 576), (129, 2112, 7168 + 64), (1, 576, 2112)]


@pytest.mark.gpu
@pytest.mark.parametrize("compiled_dims", ["nk", "mn"])
@pytest.mark.parametrize("m,n,k", K_TAIL)
def test_k_tail_1d2d(m, n, k, compiled_dims):
    a, b, ref = _dense_data(m, n, k, per_row_b=False, seed=m + n + k)
    assert a[1].shape[1] == -(-k // 128)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, d, compiled_dims=compiled_dims)
    torch.cuda.synchronize()
    assert not d.isnan().any()
    assert calc_diff(d, ref) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["c_is_d", "c_separate", "no_c"])
@pytest.mark.parametrize("m,n,k", K_TAIL)
def test_k_tail_1d1d(m, n, k, mode):
    a, b, ref = _dense_data(m, n, k, per_row_b=True, seed=m * 3 + n + k)
    c = torch.randn(m, n, device="cuda")
    if mode == "c_is_d":
        d = c.clone()
        deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))
    else:
        d = torch.full((m, n), float("nan"), device="cuda")
        deep_gemm.fp8_gemm_nt(a, b, d, c=c if mode == "c_separate" else None, recipe=(1, 1, 128))
    torch.cuda.synchronize()
    expected = ref + (c if mode != "no_c" else 0)
    assert not d.isnan().any()
    assert calc_diff(d, expected) < 1e-3


@pytest.mark.gpu
def test_k_tail_tn_layout_as_upstreams_tests_pass_it():
    # Upstream's alias test: fp8_fp4_gemm_tn with A and B given [K, M] / [K, N] (contiguous
    # after .T) must be transposed views of K-major storage on SM90.
    m, n, k = 256, 576, 2112
    (a, sfa), (b, sfb), ref = _dense_data(m, n, k, per_row_b=True, seed=5)
    d = torch.full((m, n), float("nan"), device="cuda")
    deep_gemm.fp8_fp4_gemm_tn((a.T, sfa.T), (b.T, sfb.T), d, None, (1, 1, 128))
    torch.cuda.synchronize()
    assert calc_diff(d, ref) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("k", [576, 2112])
def test_k_tail_grouped(k):
    g, n, align = 4, 1024, deep_gemm.get_mk_alignment_for_contiguous_layout()
    rows = [200, 0, 130, 77]
    index = []
    for grp, r in enumerate(rows):
        index += [grp] * r + [-1] * (-(-r // align) * align - r)
    torch.manual_seed(k)
    a, sfa = per_token_cast_to_fp8(torch.randn(len(index), k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    parts = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
             for _ in range(g)]
    b, sfb = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    d = torch.full((len(index), n), float("nan"), device="cuda", dtype=torch.bfloat16)
    index_t = torch.tensor(index, dtype=I32, device="cuda")
    deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, index_t, recipe=(1, 128, 128))
    torch.cuda.synchronize()
    a_deq, valid = dequant_rows(a, sfa), index_t >= 0
    assert d[~valid].isnan().all() and not d[valid].isnan().any()
    for grp in range(g):
        sel = index_t == grp
        if sel.any():
            assert calc_diff(d[sel], a_deq[sel] @ dequant_blocks(b[grp], sfb[grp]).t()) < 1e-3
    # masked, same K
    max_m = 256
    am, sfam = per_token_cast_to_fp8(torch.randn(g * max_m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    am, sfam = am.view(g, max_m, k), sfam.view(g, max_m, -1)
    masked_m = torch.tensor(rows, dtype=I32, device="cuda")
    dm = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked((am, sfam), (b, sfb), dm, masked_m, 160, recipe_a=(1, 128),
                                               recipe_b=(128, 128))
    torch.cuda.synchronize()
    for grp, r in enumerate(rows):
        assert dm[grp, r:].isnan().all()
        if r:
            ref = dequant_rows(am[grp, :r], sfam[grp, :r]) @ dequant_blocks(b[grp], sfb[grp]).t()
            assert calc_diff(dm[grp, :r], ref) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("ensure_zero_padding", [True, False])
def test_psum_ensure_zero_padding(ensure_zero_padding):
    g, n, k, align = 4, 512, 1024, deep_gemm.get_mk_alignment_for_contiguous_layout()
    rows = [150, 0, 300, 33]
    starts, ends, pos = [], [], 0
    for r in rows:
        starts.append(pos)
        ends.append(pos + r)
        pos = -(-(pos + r) // align) * align
    m_sum = pos
    torch.manual_seed(11)
    x = torch.randn(m_sum, k, device="cuda", dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=False)
    parts = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
             for _ in range(g)]
    b, sfb = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    d = torch.full((m_sum, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    ends_t = torch.tensor(ends, dtype=I32, device="cuda")
    deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, ends_t, use_psum_layout=True,
                                                   ensure_zero_padding=ensure_zero_padding)
    torch.cuda.synchronize()
    inside = torch.zeros(m_sum, dtype=torch.bool, device="cuda")
    a_deq = dequant_rows(a, sfa)
    for grp, (s, r) in enumerate(zip(starts, rows, strict=True)):
        inside[s:s + r] = True
        if r:
            assert calc_diff(d[s:s + r], a_deq[s:s + r] @ dequant_blocks(b[grp], sfb[grp]).t()) < 1e-3
    outside = d[~inside]
    if ensure_zero_padding:
        assert torch.equal(outside, torch.zeros_like(outside)), "rows outside the groups are not zero"
    else:
        assert outside.isnan().all(), "rows outside the groups were written"


def _flat_nt(x, ks):
    """[sum_k, mn] (tokens as rows) -> upstream's flat operand: group g's K-major [mn, k_g] back to back."""
    parts, start = [], 0
    for k in ks:
        parts.append(x[start:start + k].view(torch.uint8).t().contiguous().flatten())
        start += k
    return torch.cat(parts).view(x.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("g", [4, 8, 16])
def test_k_grouped_upstream_operands(g):
    m, n = 768, 1536
    rng = random.Random(g)
    ks = [rng.choice([128, 256, 512, 1024]) for _ in range(g)]
    ks[g // 2] = 0  # an empty group
    torch.manual_seed(g)
    x_a = torch.randn(sum(ks), m, device="cuda", dtype=torch.bfloat16)
    x_b = torch.randn(sum(ks), n, device="cuda", dtype=torch.bfloat16)
    a_tn, sfa = per_channel_cast_to_fp8(x_a, use_ue8m0=False)  # [sum_k, m], [sum_k / 128, m]
    b_tn, sfb = per_channel_cast_to_fp8(x_b, use_ue8m0=False)
    a, b = _flat_nt(a_tn, ks), _flat_nt(b_tn, ks)
    assert a.dim() == 1 and sfa.T.stride() == (1, m)
    c = torch.randn(g, m, n, device="cuda")
    d = c.clone()
    layout = torch.tensor(ks, dtype=I32, device="cuda")
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous((a, sfa.T), (b, sfb.T), d, ks, layout, d, recipe=(1, 1, 128))
    torch.cuda.synchronize()
    a_deq = a_tn.float() * sfa.repeat_interleave(128, dim=0)
    b_deq = b_tn.float() * sfb.repeat_interleave(128, dim=0)
    start = 0
    for grp, k in enumerate(ks):
        if k == 0:
            assert_bitwise_equal(d[grp], c[grp], f"empty group {grp}")
        else:
            ref = c[grp] + a_deq[start:start + k].t() @ b_deq[start:start + k]
            assert calc_diff(d[grp], ref) < 1e-3, f"group {grp}"
        start += k


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(4096, 7168, 2048), (129, 2112, 576), (1, 512, 7168)])
def test_1d1d_bf16_out(m, n, k):
    a, b, ref = _dense_data(m, n, k, per_row_b=True, seed=m + k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_fp4_gemm_nt(a, b, d, recipe=(1, 1, 128))
    torch.cuda.synchronize()
    assert not d.isnan().any()
    assert calc_diff(d, ref) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("m", [128, 4096])
@pytest.mark.parametrize("n", [8192, 32768])
def test_skip_head_mid(m, n):
    left, mid, right = 128, 64, 128
    k = 512
    a, b, ref = _dense_data(m, n, k, per_row_b=False, seed=m + n)
    heads = n // (left + right)
    d = torch.full((m, n + heads * mid), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, (left, mid, right))
    torch.cuda.synchronize()
    d3 = d.view(m, heads, left + mid + right)
    ref3 = ref.view(m, heads, left + right)
    assert d3[:, :, left:left + mid].isnan().all(), "the skipped middle columns were written"
    got = torch.cat([d3[:, :, :left], d3[:, :, left + mid:]], dim=2)
    assert not got.isnan().any()
    assert calc_diff(got, ref3) < 1e-3
