"""Operands the kernels cannot address safely are refused before any launch; sizes that do
not fit the kernels' 32-bit indices are refused instead of truncated; empty problems are
no-ops. The refusals are checked on meta tensors (the fake implementations, CI) and, for the
out-of-bounds write a broadcast output used to cause, on the GPU with a guard buffer."""

from __future__ import annotations

import pytest
import torch

import deep_gemm

FP8 = torch.float8_e4m3fn
F32 = torch.float32
BF16 = torch.bfloat16
I32 = torch.int32
M, N, K, G = 128, 256, 512, 4
OVERLAP = "has overlapping elements"


def _e(*shape, dtype=FP8, device="meta"):
    return torch.empty(*shape, dtype=dtype, device=device)


def _dense(device, m=M, n=N, k=K, fp32_out=False):
    a = (_e(m, k, device=device), _e(m, k // 128, dtype=F32, device=device))
    b = (_e(n, k, device=device), _e(n if fp32_out else -(-n // 128), k // 128, dtype=F32, device=device))
    d = _e(m, n, dtype=F32 if fp32_out else BF16, device=device)
    return a, b, d


def _broadcast_rows(rows, cols, dtype, device="meta"):
    """A [rows, cols] view of a single row: row stride 0."""
    return _e(1, cols, dtype=dtype, device=device).expand(rows, cols)


# ---- overlapping operands (meta: the same checks as on the GPU) -------------------------

def _dense_overlap_cases():
    a, b, d = _dense("meta")
    low_pitch_d = torch.empty_strided((M, N), (N - 8, 1), dtype=BF16, device="meta")
    yield "d broadcast", lambda: deep_gemm.fp8_gemm_nt(a, b, _broadcast_rows(M, N, BF16)), "d " + OVERLAP
    yield "a broadcast", lambda: deep_gemm.fp8_gemm_nt((_broadcast_rows(M, K, FP8), a[1]), b, d), "a " + OVERLAP
    yield "b broadcast", lambda: deep_gemm.fp8_gemm_nt(a, (_broadcast_rows(N, K, FP8), b[1]), d), "b " + OVERLAP
    yield "d pitch below its row", lambda: deep_gemm.fp8_gemm_nt(a, b, low_pitch_d), "d " + OVERLAP
    a32, b32, d32 = _dense("meta", fp32_out=True)
    yield "fp32 d broadcast", lambda: deep_gemm.fp8_gemm_nt(a32, b32, _broadcast_rows(M, N, F32)), "d " + OVERLAP
    yield "c broadcast", lambda: deep_gemm.fp8_gemm_nt(a32, b32, d32, c=_broadcast_rows(M, N, F32)), "c " + OVERLAP
    yield "nn b broadcast", lambda: deep_gemm.fp8_gemm_nn(
        a, (_broadcast_rows(N, K, FP8).t(), b[1].t()), d), "b " + OVERLAP


def _grouped_overlap_cases():
    a = (_e(M, K), _e(M, K // 128, dtype=F32))
    b = (_e(G, N, K), _e(G, 2, K // 128, dtype=F32))
    layout = _e(M, dtype=I32)
    yield "contiguous d broadcast", lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        a, b, _broadcast_rows(M, N, BF16), layout), "d " + OVERLAP
    yield "contiguous a broadcast", lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (_broadcast_rows(M, K, FP8), a[1]), b, _e(M, N, dtype=BF16), layout), "a " + OVERLAP
    yield "contiguous b groups share one", lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        a, (_e(1, N, K).expand(G, N, K), b[1]), _e(M, N, dtype=BF16), layout), "b " + OVERLAP
    ma = (_e(G, M, K), _e(G, M, K // 128, dtype=F32))
    masked_m = _e(G, dtype=I32)
    yield "masked d broadcast", lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(
        ma, b, _e(1, 1, N, dtype=BF16).expand(G, M, N), masked_m, M), "d " + OVERLAP
    yield "masked a rows broadcast", lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(
        (_e(G, 1, K).expand(G, M, K), ma[1]), b, _e(G, M, N, dtype=BF16), masked_m, M), "a " + OVERLAP
    ka, kb = _e(K * M), _e(K * N)
    yield "k-grouped d broadcast", lambda: deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
        (ka, _e(K // 128, M, dtype=F32)), (kb, _e(K // 128, N, dtype=F32)), _e(1, 1, N, dtype=F32).expand(1, M, N),
        [K], _e(1, dtype=I32)), "d must be contiguous"


@pytest.mark.parametrize("name,call,match", [*_dense_overlap_cases(), *_grouped_overlap_cases()],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_overlapping_operands_are_refused(name, call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


def test_scale_factors_may_be_broadcast():
    """Scales are only read, through their strides or after a copy into the kernels'
    layout, so an expanded scale tensor is accepted (meta: shapes only)."""
    a, b, d = _dense("meta")
    sfa = _e(1, K // 128, dtype=F32).expand(M, K // 128)
    deep_gemm.fp8_gemm_nt((a[0], sfa), b, d)


# ---- sizes past the kernels' 32-bit indices ---------------------------------------------

BIG_K = 2**32 + 128


def test_k_of_2_to_the_32_is_refused_not_truncated():
    a = (_e(M, BIG_K), _e(M, BIG_K // 128, dtype=F32))
    b = (_e(N, BIG_K), _e(2, BIG_K // 128, dtype=F32))
    with pytest.raises(RuntimeError, match=r"fp8_gemm_nt: K must be in \[0, 2\^31\)"):
        deep_gemm.fp8_gemm_nt(a, b, _e(M, N, dtype=BF16))
    with pytest.raises(RuntimeError, match=r"K must be in \[0, 2\^31\)"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
            a, (_e(G, N, BIG_K), _e(G, 2, BIG_K // 128, dtype=F32)), _e(M, N, dtype=BF16), _e(M, dtype=I32))


def test_k_of_2_to_the_31_is_refused():
    k = 2**31
    a = (_e(M, k), _e(M, k // 128, dtype=F32))
    b = (_e(N, k), _e(2, k // 128, dtype=F32))
    with pytest.raises(RuntimeError, match=r"K must be in \[0, 2\^31\) .*got 2147483648"):
        deep_gemm.fp8_gemm_nt(a, b, _e(M, N, dtype=BF16))


@pytest.mark.parametrize("op,args", [
    ("fp8_gemm_build", (2**32, 256, 512, False, 132, "nk")),
    ("fp8_gemm_build", (128, 256, BIG_K, False, 132, "nk")),
    ("m_grouped_fp8_gemm_build", ("contiguous", 2**32, 256, 512, 4, 0, 132, "nk")),
    ("k_grouped_fp8_gemm_build", (128, 256, BIG_K, 4, 132, "mn", False)),
])
def test_warmup_builds_refuse_sizes_past_32_bits(op, args):
    with pytest.raises(RuntimeError, match=r"must be in \[0, 2\^31\)"):
        getattr(torch.ops.deep_gemm, op)(*args)


def test_k_grouped_element_count_overflow_is_refused():
    # 64 groups of 2^31 - 128 (each valid), M = 2^30: sum(ks) * M is ~2^67.
    ks = [2**31 - 128] * 64
    sum_kb = sum(ks) // 128
    m, n = 2**30, 8
    with pytest.raises(RuntimeError, match="must fit in 64 bits"):
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
            (_e(16), _e(sum_kb, m, dtype=F32)), (_e(16), _e(sum_kb, n, dtype=F32)), _e(64, m, n, dtype=F32), ks,
            _e(64, dtype=I32))


def test_tma_aligned_size_does_not_wrap():
    with pytest.raises(RuntimeError, match="must fit in 64 bits"):
        deep_gemm.get_tma_aligned_size(2**63 - 1, 1)
    assert deep_gemm.get_tma_aligned_size(2**63 - 16, 1) == 2**63 - 16


# ---- empty problems are no-ops ------------------------------------------------------------

def _empty_cases(device):
    a, b, _ = _dense(device)
    yield "dense N = 0, bf16 d", lambda: deep_gemm.fp8_gemm_nt(
        a, (_e(0, K, device=device), _e(0, K // 128, dtype=F32, device=device)), _e(M, 0, dtype=BF16, device=device))
    yield "dense M = 0", lambda: deep_gemm.fp8_gemm_nt(
        (_e(0, K, device=device), _e(0, K // 128, dtype=F32, device=device)), b, _e(0, N, dtype=BF16, device=device))
    a32, b32, _ = _dense(device, fp32_out=True)
    yield "dense N = 0, fp32 d += c", lambda: deep_gemm.fp8_gemm_nt(
        a32, (_e(0, K, device=device), _e(0, K // 128, dtype=F32, device=device)), _e(M, 0, dtype=F32, device=device),
        c=_e(M, 0, dtype=F32, device=device))
    yield "masked max_m = 0", lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(
        (_e(G, 0, K, device=device), _e(G, 0, K // 128, dtype=F32, device=device)),
        (_e(G, N, K, device=device), _e(G, 2, K // 128, dtype=F32, device=device)),
        _e(G, 0, N, dtype=BF16, device=device), torch.zeros(G, dtype=I32, device=device), 1)
    yield "contiguous N = 0", lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (_e(M, K, device=device), _e(M, K // 128, dtype=F32, device=device)),
        (_e(G, 0, K, device=device), _e(G, 0, K // 128, dtype=F32, device=device)),
        _e(M, 0, dtype=BF16, device=device), torch.zeros(M, dtype=I32, device=device))
    yield "contiguous M_sum = 0", lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
        (_e(0, K, device=device), _e(0, K // 128, dtype=F32, device=device)),
        (_e(G, N, K, device=device), _e(G, 2, K // 128, dtype=F32, device=device)),
        _e(0, N, dtype=BF16, device=device), torch.zeros(0, dtype=I32, device=device))
    yield "k-grouped M = 0", lambda: deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
        (_e(0, device=device), _e(2 * K // 128, 0, dtype=F32, device=device)),
        (_e(2 * K * N, device=device), _e(2 * K // 128, N, dtype=F32, device=device)),
        _e(2, 0, N, dtype=F32, device=device), [K, K], torch.full((2,), K, dtype=I32, device=device))
    yield "k-grouped tn M = 0", lambda: deep_gemm.k_grouped_fp8_gemm_tn_contiguous(
        (_e(K, 0, device=device), _e(K // 128, 0, dtype=F32, device=device)),
        (_e(K, N, device=device), _e(K // 128, N, dtype=F32, device=device)),
        _e(1, 0, N, dtype=F32, device=device), [K], torch.full((1,), K, dtype=I32, device=device))


@pytest.mark.parametrize("name,call", list(_empty_cases("meta")), ids=lambda x: x if isinstance(x, str) else "")
def test_empty_problems_are_accepted(name, call):
    call()


def test_empty_problems_still_check_devices():
    a = (_e(0, K, device="cpu"), _e(0, K // 128, dtype=F32, device="cpu"))
    b = (_e(N, K, device="cpu"), _e(2, K // 128, dtype=F32, device="cpu"))
    with pytest.raises(RuntimeError, match="must be a CUDA tensor"):
        deep_gemm.fp8_gemm_nt(a, b, _e(0, N, dtype=BF16, device="cpu"))


# ---- on the GPU -----------------------------------------------------------------------------

def _quantized(m, n, k, fp32_out=False):
    from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

    x = torch.randn(m, k, device="cuda", dtype=BF16)
    y = torch.randn(n, k, device="cuda", dtype=BF16)
    a = per_token_cast_to_fp8(x, use_ue8m0=False)
    b = per_token_cast_to_fp8(y, use_ue8m0=False) if fp32_out else per_block_cast_to_fp8(y, use_ue8m0=False)
    return a, b


@pytest.mark.gpu
def test_broadcast_d_cannot_write_past_its_row():
    """The reproducer: d a stride-0 view of one row at the front of a zeroed buffer. Before
    the overlap check the GEMM returned normally and wrote 127 rows past the view."""
    a, b = _quantized(M, N, K)
    buf = torch.zeros(M * N, dtype=BF16, device="cuda")
    d = buf[:N].view(1, N).expand(M, N)
    with pytest.raises(RuntimeError, match="d " + OVERLAP):
        deep_gemm.fp8_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    assert (buf == 0).all(), "the buffer behind the broadcast view was written"


@pytest.mark.gpu
def test_broadcast_inputs_are_refused_on_the_gpu():
    a, b = _quantized(M, N, K)
    d = torch.zeros(M, N, dtype=BF16, device="cuda")
    with pytest.raises(RuntimeError, match="a " + OVERLAP):
        deep_gemm.fp8_gemm_nt((a[0][:1].expand(M, K), a[1]), b, d)
    with pytest.raises(RuntimeError, match="b " + OVERLAP):
        deep_gemm.fp8_gemm_nt(a, (b[0][:1].expand(N, K), b[1]), d)
    torch.cuda.synchronize()
    assert (d == 0).all()


@pytest.mark.gpu
def test_grouped_broadcast_d_is_refused_on_the_gpu():
    a, _ = _quantized(M, N, K)
    bs = [_quantized(1, N, K)[1] for _ in range(G)]
    b = (torch.stack([x[0] for x in bs]), torch.stack([x[1] for x in bs]))
    buf = torch.zeros(M * N, dtype=BF16, device="cuda")
    layout = torch.zeros(M, dtype=I32, device="cuda")
    with pytest.raises(RuntimeError, match="d " + OVERLAP):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, buf[:N].view(1, N).expand(M, N), layout)
    masked = torch.full((G,), M, dtype=I32, device="cuda")
    ma = (a[0].unsqueeze(0).expand(G, M, K).contiguous(), a[1].unsqueeze(0).expand(G, M, K // 128).contiguous())
    with pytest.raises(RuntimeError, match="d " + OVERLAP):
        deep_gemm.m_grouped_fp8_gemm_nt_masked(ma, b, buf[:N].view(1, 1, N).expand(G, M, N), masked, M)
    torch.cuda.synchronize()
    assert (buf == 0).all()


@pytest.mark.gpu
def test_k_of_2_to_the_31_is_refused_on_the_gpu():
    """Refused on its shape before anything is read: the operands need no memory of that
    size (a zero-stride K view), and the size check comes before the layout checks."""
    k = 2**31
    a = torch.empty(M, 1, dtype=FP8, device="cuda").expand(M, k)
    sfa = torch.empty(M, 1, device="cuda").expand(M, k // 128)
    b = torch.empty(N, 1, dtype=FP8, device="cuda").expand(N, k)
    sfb = torch.empty(2, 1, device="cuda").expand(2, k // 128)
    with pytest.raises(RuntimeError, match=r"K must be in \[0, 2\^31\)"):
        deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), torch.empty(M, N, dtype=BF16, device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("fp32_out", [False, True])
def test_single_row_operands_with_any_outer_stride(fp32_out):
    """M = 1: the row stride of a and d means nothing, and any value is legal (0 and odd ones
    included). The launcher gives the TMA a real pitch instead of the stride."""
    from fp8_reference import dequant_blocks, dequant_rows

    torch.manual_seed(7)
    n, k = 512, 1024
    (a, sfa), (b, sfb) = _quantized(1, n, k, fp32_out)
    a_odd = torch.empty_strided((1, k), (3, 1), dtype=FP8, device="cuda")
    a_odd.copy_(a)
    d = torch.full((n,), float("nan"), dtype=F32 if fp32_out else BF16, device="cuda").as_strided((1, n), (0, 1))
    c = torch.zeros(1, n, device="cuda") if fp32_out else None
    deep_gemm.fp8_gemm_nt((a_odd, sfa), (b, sfb), d, c=c)
    ref = dequant_rows(a, sfa) @ (dequant_rows(b, sfb) if fp32_out else dequant_blocks(b, sfb)).t()
    torch.cuda.synchronize()
    assert not d.isnan().any()
    from deep_gemm.testing import calc_diff

    assert calc_diff(d, ref) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("name", [name for name, _ in _empty_cases("meta")])
def test_empty_problems_are_no_ops_on_the_gpu(name):
    dict(_empty_cases("cuda"))[name]()
    torch.cuda.synchronize()
