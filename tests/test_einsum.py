"""einsum / fp8_einsum on SM90: the supported expressions' shapes on meta tensors and clear
errors for the rest (CI); on an SM90 GPU each expression against torch.einsum in float on fresh
random data with the output poisoned (NaN), accumulation in place, and the FP8 per-head form."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import ceil_div, per_block_cast_to_fp8, per_token_cast_to_fp8

BF16, F32, FP8 = torch.bfloat16, torch.float32, torch.float8_e4m3fn


def _meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_supported_expressions_on_meta():
    z = _meta(128, 384, dtype=F32)
    deep_gemm.einsum("bmk,bnk->mn", _meta(129, 128, 128), _meta(129, 384, 128), z, z)
    deep_gemm.einsum("bmk, bnk -> mn", _meta(4, 128, 128), _meta(4, 384, 128), _meta(128, 384))
    y = _meta(8, 128, 640)[:, :, :512]
    deep_gemm.einsum("bhr,hdr->bhd", _meta(32, 8, 512), y, _meta(32, 8, 128))
    deep_gemm.einsum("bhd,hdr->bhr", _meta(32, 8, 128), y, _meta(32, 8, 512))
    # Layouts our kernel does not take (head rows 136 bytes apart, K = 200) run on cuBLASLt.
    deep_gemm.einsum("bhr,hdr->bhd", _meta(4, 8, 68)[:, :, :64], _meta(8, 32, 64), _meta(4, 8, 32))
    deep_gemm.einsum("bhr,hdr->bhd", _meta(4, 8, 200), _meta(8, 32, 200), _meta(4, 8, 32), use_cublaslt=True)
    z = _meta(8, 128, 512, dtype=F32)
    deep_gemm.einsum("bhd,bhr->hdr", _meta(32, 8, 128), _meta(32, 8, 512), z, z)
    deep_gemm.fp8_einsum("bhr,hdr->bhd", (_meta(64, 16, 512, dtype=FP8), _meta(64, 16, 4, dtype=F32)),
                         (_meta(16, 128, 512, dtype=FP8), _meta(16, 1, 4, dtype=F32)), _meta(64, 16, 128))


@pytest.mark.parametrize("expr,dims,use_cublaslt,ours", [
    ("bhr,hdr->bhd", (4096, 128, 512, 128), False, True),   # memory-bound heads: our masked kernel
    ("bhd,hdr->bhr", (4096, 128, 512, 128), False, True),
    ("bhr,hdr->bhd", (4096, 8, 4096, 1024), False, False),  # compute-bound heads: cuBLASLt
    ("bhr,hdr->bhd", (4096, 128, 512, 128), True, False),   # asked for cuBLASLt
    ("bhr,hdr->bhd", (64, 16, 200, 96), False, False),      # K = 200: not a whole number of K blocks
    ("bhd,hdr->bhr", (64, 0, 512, 128), False, False),      # no heads: nothing for the grouped kernel
])
def test_per_head_forms_pick_their_kernel(monkeypatch, expr, dims, use_cublaslt, ours):
    from deep_gemm import _einsum
    calls = []
    monkeypatch.setattr(_einsum, "_heads_op", lambda *a: calls.append("ours"))
    monkeypatch.setattr(_einsum, "_bmm", lambda *a: calls.append("cublaslt"))
    bsz, h, r, dd = dims
    bhr = expr == "bhr,hdr->bhd"
    a = _meta(bsz, h, r if bhr else dd)
    d = _meta(bsz, h, dd if bhr else r)
    deep_gemm.einsum(expr, a, _meta(h, dd, r), d, use_cublaslt=use_cublaslt)
    assert calls == ["ours" if ours else "cublaslt"]


BAD = {
    "unsupported expression": (lambda: deep_gemm.einsum("ij,jk->ik", _meta(2, 2), _meta(2, 2), _meta(2, 2)),
                               "expr: unsupported expression"),
    "fp8 unsupported expression": (lambda: deep_gemm.fp8_einsum("bhd,hdr->bhr", (_meta(2, 2, 2), _meta(2, 2, 1)),
                                                                (_meta(2, 2, 2), _meta(2, 1, 1)), _meta(2, 2, 2)),
                                   "expr: unsupported expression"),
    "bmk fp32 d with another c": (lambda: deep_gemm.einsum("bmk,bnk->mn", _meta(4, 64, 128), _meta(4, 32, 128),
                                                           _meta(64, 32, dtype=F32), _meta(64, 32, dtype=F32)),
                                  "c must be None or d itself"),
    "bmk k mismatch": (lambda: deep_gemm.einsum("bmk,bnk->mn", _meta(4, 64, 128), _meta(4, 32, 64), _meta(64, 32)),
                       "K, from a"),
    "bhr c": (lambda: deep_gemm.einsum("bhr,hdr->bhd", _meta(4, 8, 64), _meta(8, 32, 64), _meta(4, 8, 32),
                                       _meta(4, 8, 32)), "c must be None"),
    "bhr fp32 d": (lambda: deep_gemm.einsum("bhr,hdr->bhd", _meta(4, 8, 64), _meta(8, 32, 64),
                                            _meta(4, 8, 32, dtype=F32)), "torch.bfloat16"),
    "bhr heads": (lambda: deep_gemm.einsum("bhr,hdr->bhd", _meta(4, 8, 64), _meta(4, 32, 64), _meta(4, 8, 32)),
                  "head counts differ"),
    "bhd contraction": (lambda: deep_gemm.einsum("bhd,hdr->bhr", _meta(4, 8, 64), _meta(8, 32, 64), _meta(4, 8, 64)),
                        "contracted lengths differ"),
    "bhr d shape": (lambda: deep_gemm.einsum("bhr,hdr->bhd", _meta(4, 8, 64), _meta(8, 32, 64), _meta(4, 8, 48)),
                    r"d must be \[4, 8, 32\]"),
    "bhd bhr hdr bf16 d": (lambda: deep_gemm.einsum("bhd,bhr->hdr", _meta(4, 8, 64), _meta(4, 8, 32),
                                                    _meta(8, 64, 32)), "torch.float32"),
    "rank": (lambda: deep_gemm.einsum("bhr,hdr->bhd", _meta(4, 64), _meta(8, 32, 64), _meta(4, 8, 32)), "3-D"),
    "fp8 recipe": (lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (_meta(4, 8, 128, dtype=FP8), _meta(4, 8, 1, dtype=F32)),
                                                (_meta(8, 128, 128, dtype=FP8), _meta(8, 1, 1, dtype=F32)),
                                                _meta(4, 8, 128), recipe=(1, 1, 128)), "recipe"),
    "fp8 c": (lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (_meta(4, 8, 128, dtype=FP8), _meta(4, 8, 1, dtype=F32)),
                                           (_meta(8, 128, 128, dtype=FP8), _meta(8, 1, 1, dtype=F32)),
                                           _meta(4, 8, 128), c=_meta(4, 8, 128)), "c must be None"),
    # The heads are read in place: head h's rows of x start h * R bytes in, which the TMA
    # needs on a 16-byte boundary.
    "fp8 head stride": (lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (_meta(4, 8, 120, dtype=FP8),
                                                                      _meta(4, 8, 1, dtype=F32)),
                                                     (_meta(8, 128, 128, dtype=FP8)[:, :, :120],
                                                      _meta(8, 1, 1, dtype=F32)),
                                                     _meta(4, 8, 128)), r"a.stride\(0\) \* 1 bytes must be a multiple of 16"),
    "fp8 d dtype": (lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (_meta(4, 8, 128, dtype=FP8), _meta(4, 8, 1, dtype=F32)),
                                                 (_meta(8, 128, 128, dtype=FP8), _meta(8, 1, 1, dtype=F32)),
                                                 _meta(4, 8, 128, dtype=F32)), "d must be torch.bfloat16"),
    "fp8 heads": (lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (_meta(4, 8, 128, dtype=FP8), _meta(4, 8, 1, dtype=F32)),
                                               (_meta(4, 128, 128, dtype=FP8), _meta(4, 1, 1, dtype=F32)),
                                               _meta(4, 8, 128)), "head counts differ"),
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


@pytest.mark.gpu
@pytest.mark.parametrize("out", [F32, BF16])
@pytest.mark.parametrize("s,m,n,k", [(129, 128, 384, 128), (4096, 256, 256, 256), (8192, 384, 128, 384), (3, 200, 136, 96),
                                     (2, 1024, 1536, 128)])
def test_bmk_bnk_mn(s, m, n, k, out):
    # All but the last split the batches over CTAs (few output tiles); the last runs unsplit.
    a, b = _randn(s, m, k), _randn(s, n, k)
    ref = torch.einsum("bmk,bnk->mn", a.float(), b.float())
    if out == F32:
        d = torch.randn(m, n, device="cuda")
        ref = ref + d
        deep_gemm.einsum("bmk,bnk->mn", a, b, d, c=d)
    else:
        d = torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
        deep_gemm.einsum("bmk,bnk->mn", a, b, d)
    torch.cuda.synchronize()
    assert calc_diff(d, ref) < 1e-5


@pytest.mark.gpu
def test_bmk_bnk_mn_split_into_strided_odd_d():
    # The split path's workspace pads odd rows for its pair stores; d is a row-strided view.
    s, m, n, k = 300, 72, 37, 64
    a, b = _randn(s, m, k), _randn(s, n, k)
    base = torch.randn(m, 40, device="cuda")
    d = base[:, :n]
    ref = torch.einsum("bmk,bnk->mn", a.float(), b.float()) + d
    tail = base[:, n:].clone()
    deep_gemm.einsum("bmk,bnk->mn", a, b, d, c=d)
    torch.cuda.synchronize()
    assert calc_diff(d, ref) < 1e-5
    assert torch.equal(base[:, n:], tail)  # the columns past N are not d's: untouched


@pytest.mark.gpu
@pytest.mark.parametrize("use_cublaslt", [False, True])
@pytest.mark.parametrize("h,r,dd", [(128, 512, 128), (8, 4096, 1024), (16, 200, 96)])
@pytest.mark.parametrize("bsz", [4, 128, 4096])
def test_bhr_hdr_bhd_and_bhd_hdr_bhr(h, r, dd, bsz, use_cublaslt):
    # Our BF16 kernel where the contraction is a multiple of 64 (else, and with use_cublaslt,
    # cuBLASLt): (16, 200, 96) contracts over 200 and 96.
    x = _randn(bsz, h, r)
    y = _randn(h, dd, r + 128)[:, :, :r]  # a view, as upstream's callers pass it
    z = torch.full((bsz, h, dd), float("nan"), device="cuda", dtype=BF16)
    deep_gemm.einsum("bhr,hdr->bhd", x, y, z, use_cublaslt=use_cublaslt)
    torch.cuda.synchronize()
    assert calc_diff(z, torch.einsum("bhr,hdr->bhd", x.float(), y.float())) < 1e-5
    x2 = _randn(bsz, h, dd)
    y2 = _randn(h, dd, r + 128)[:, :, :r]
    buf = torch.full((bsz, h, r + 8), float("nan"), device="cuda", dtype=BF16)
    z2 = buf[:, :, :r]  # a view: the 8 columns past it stay untouched
    deep_gemm.einsum("bhd,hdr->bhr", x2, y2, z2, use_cublaslt=use_cublaslt)
    torch.cuda.synchronize()
    assert calc_diff(z2, torch.einsum("bhd,hdr->bhr", x2.float(), y2.float())) < 1e-5
    assert buf[:, :, r:].isnan().all()


@pytest.mark.gpu
@pytest.mark.parametrize("bsz", [32, 4096])
def test_bhd_bhr_hdr_accumulates(bsz):
    h, r, dd = 8, 512, 128
    x, y = _randn(bsz, h, dd), _randn(bsz, h, r)
    z0 = torch.randn(h, dd, r, device="cuda") * 10
    z = z0.clone()
    deep_gemm.einsum("bhd,bhr->hdr", x, y, z, z)
    torch.cuda.synchronize()
    assert calc_diff(z, z0 + torch.einsum("bhd,bhr->hdr", x.float(), y.float())) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("h,r,dd", [(8, 4096, 1024), (128, 512, 128), (16, 448, 200)])
@pytest.mark.parametrize("bsz", [4, 77, 128, 4096])
def test_fp8_bhr_hdr_bhd(bsz, h, r, dd):
    # (16, 448, 200): a partial last K block and a d width across two 128-column scale blocks.
    x, y = _randn(bsz, h, r), _randn(h, dd, r)
    xq, sfx = per_token_cast_to_fp8(x.view(-1, r), use_ue8m0=False)
    xq, sfx = xq.view(bsz, h, r), sfx.view(bsz, h, ceil_div(r, 128))
    yq = torch.empty_like(y, dtype=FP8)
    sfy = torch.empty(h, ceil_div(dd, 128), ceil_div(r, 128), device="cuda")
    for i in range(h):
        yq[i], sfy[i] = per_block_cast_to_fp8(y[i], use_ue8m0=False)
    z = torch.full((bsz, h, dd), float("nan"), device="cuda", dtype=BF16)
    deep_gemm.fp8_einsum("bhr,hdr->bhd", (xq, sfx), (yq, sfy), z)
    torch.cuda.synchronize()
    ref = torch.einsum("bhr,hdr->bhd", x.float(), y.float())
    assert calc_diff(z, ref) < 1e-3
