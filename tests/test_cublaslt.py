"""cuBLASLt GEMMs (cublaslt_gemm_{nt,nn,tn,tt}): argument checks on meta tensors (CI), and on
an SM90 GPU every layout and output dtype against a float reference with the output poisoned,
accumulation into c (c is d, and a separate c), FP8 operands, a CUDA graph replayed with new
inputs, and a side stream."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.testing import calc_diff

BF16, F32, FP8 = torch.bfloat16, torch.float32, torch.float8_e4m3fn
LAYOUTS = ("nt", "nn", "tn", "tt")


def _meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _operands(layout, m, n, k, device, dtype=BF16, make=None):
    make = make or (lambda *s: torch.empty(*s, dtype=dtype, device=device))
    a = make(k, m) if layout[0] == "t" else make(m, k)
    b = make(n, k) if layout[1] == "t" else make(k, n)
    return a, b


# ---- arguments (CI) --------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_accept_their_shapes(layout):
    a, b = _operands(layout, 64, 48, 128, "meta")
    getattr(deep_gemm, f"cublaslt_gemm_{layout}")(a, b, _meta(64, 48))
    getattr(deep_gemm, f"cublaslt_gemm_{layout}")(a, b, _meta(64, 48, dtype=F32), _meta(64, 48, dtype=F32))


BAD = {
    "k mismatch": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128), _meta(48, 96), _meta(64, 48)), "K, from a"),
    "d shape": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(64, 40)), "N, from b"),
    "fp16 operands": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128, dtype=torch.float16),
                                                         _meta(48, 128, dtype=torch.float16), _meta(64, 48)),
                      "torch.bfloat16 or torch.float8_e4m3fn"),
    "mixed operand dtypes": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128), _meta(48, 128, dtype=FP8),
                                                                _meta(64, 48)), "b must have a's dtype"),
    "fp8 d": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(64, 48, dtype=FP8)),
              "d must be torch.bfloat16 or torch.float32"),
    "c dtype": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(64, 48),
                                                   _meta(64, 48, dtype=F32)), "c must have d's dtype"),
    "fp8 mn-major": (lambda: deep_gemm.cublaslt_gemm_nn(_meta(64, 128, dtype=FP8), _meta(128, 48, dtype=FP8),
                                                        _meta(64, 48)), "FP8 operands must both be K-major"),
    "no unit stride": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 256)[:, ::2], _meta(48, 128), _meta(64, 48)),
                       "K-major .* or MN-major"),
    "column-major d": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(48, 64).T),
                       "row-major"),
    "broadcast d": (lambda: deep_gemm.cublaslt_gemm_nt(_meta(64, 128), _meta(48, 128), _meta(1, 48).expand(64, 48)),
                    "d"),
    "a not a tensor": (lambda: deep_gemm.cublaslt_gemm_nt([1, 2], _meta(48, 128), _meta(64, 48)), "a"),
    "cpu operands": (lambda: deep_gemm.cublaslt_gemm_nt(torch.empty(64, 128, dtype=BF16), torch.empty(48, 128, dtype=BF16),
                                                        torch.empty(64, 48, dtype=BF16)), "CUDA tensor"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_clearly(case):
    fn, pattern = BAD[case]
    with pytest.raises((RuntimeError, TypeError, ValueError), match=pattern):
        fn()


def test_empty_problem_is_a_no_op():
    deep_gemm.cublaslt_gemm_nt(_meta(0, 128), _meta(48, 128), _meta(0, 48))


# ---- correctness (GPU) -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def _exact_fp32_matmul():
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


def _logical(layout, a, b):
    """A [M, K] and B [N, K] as floats, whatever the layout."""
    a = a.float().t() if layout[0] == "t" else a.float()
    b = b.float() if layout[1] == "t" else b.float().t()
    return a, b


SHAPES = [(128, 2112, 7168), (4096, 576, 1024), (1, 4096, 512), (257, 320, 72)]


@pytest.mark.gpu
@pytest.mark.parametrize("out", [BF16, F32])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matches_reference(m, n, k, layout, out):
    torch.manual_seed(m + n + k)
    a, b = _operands(layout, m, n, k, "cuda", make=lambda *s: torch.randn(*s, device="cuda", dtype=BF16))
    d = torch.full((m, n), float("nan"), device="cuda", dtype=out)
    getattr(deep_gemm, f"cublaslt_gemm_{layout}")(a, b, d)
    la, lb = _logical(layout, a, b)
    assert not d.isnan().any()
    assert calc_diff(d, la @ lb.t()) < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["c_is_d", "c_separate"])
@pytest.mark.parametrize("out", [BF16, F32])
def test_accumulates_into_c(mode, out):
    m, n, k = 512, 768, 1024
    a = torch.randn(m, k, device="cuda", dtype=BF16)
    b = torch.randn(n, k, device="cuda", dtype=BF16)
    c = torch.randn(m, n, device="cuda").to(out) * 8
    ref = c.float() + a.float() @ b.float().t()
    if mode == "c_is_d":
        d = c.clone()
        deep_gemm.cublaslt_gemm_nt(a, b, d, d)
    else:
        d = torch.full((m, n), float("nan"), device="cuda", dtype=out)
        deep_gemm.cublaslt_gemm_nt(a, b, d, c)
    assert calc_diff(d, ref) < 1e-4


@pytest.mark.gpu
def test_fp8_operands():
    m, n, k = 256, 512, 2048
    a = torch.randn(m, k, device="cuda").to(FP8)
    b = torch.randn(n, k, device="cuda").to(FP8)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
    deep_gemm.cublaslt_gemm_nt(a, b, d)
    assert calc_diff(d, a.float() @ b.float().t()) < 1e-4


@pytest.mark.gpu
def test_k_zero_writes_c_or_zeros():
    a = torch.empty(64, 0, device="cuda", dtype=BF16)
    b = torch.empty(32, 0, device="cuda", dtype=BF16)
    d = torch.full((64, 32), float("nan"), device="cuda", dtype=F32)
    deep_gemm.cublaslt_gemm_nt(a, b, d)
    assert torch.equal(d, torch.zeros_like(d))
    c = torch.randn(64, 32, device="cuda")
    deep_gemm.cublaslt_gemm_nt(a, b, d, c)
    assert torch.equal(d, c)


@pytest.mark.gpu
def test_cuda_graph_replays_new_inputs_and_side_stream():
    m, n, k = 384, 640, 512
    a = torch.randn(m, k, device="cuda", dtype=BF16)
    b = torch.randn(n, k, device="cuda", dtype=BF16)
    d = torch.zeros(m, n, device="cuda", dtype=BF16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # a side stream outside any graph
        deep_gemm.cublaslt_gemm_tn(a.t().contiguous(), b.t().contiguous(), d)
    stream.synchronize()
    assert calc_diff(d, a.float() @ b.float().t()) < 1e-4
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.cublaslt_gemm_nt(a, b, d)
    for seed in (1, 2):
        torch.manual_seed(seed)
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert calc_diff(d, a.float() @ b.float().t()) < 1e-4


@pytest.mark.gpu
def test_fewer_sms_still_correct():
    saved = deep_gemm.get_num_sms()
    try:
        deep_gemm.set_num_sms(saved // 2)
        a = torch.randn(1024, 1024, device="cuda", dtype=BF16)
        b = torch.randn(2048, 1024, device="cuda", dtype=BF16)
        d = torch.empty(1024, 2048, device="cuda", dtype=BF16)
        deep_gemm.cublaslt_gemm_nt(a, b, d)
        assert calc_diff(d, a.float() @ b.float().t()) < 1e-4
    finally:
        deep_gemm.set_num_sms(saved)
