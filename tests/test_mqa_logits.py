"""deep_gemm.fp8_mqa_logits / fp8_fp4_mqa_logits (the V3.2 indexer's dense MQA logits).

CPU: every bad input raises a clear error naming the op and the argument; the fake (meta)
path gives upstream's padded layout. GPU: every supported H, D and logits dtype against a
float64 reference on fresh random data, ragged windows with empty ones, -inf cells of
clean_logits, the compressed form, negative scales, and outputs poisoned with NaN first."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import deep_gemm
from deep_gemm.testing import calc_diff

_op = torch.ops.deep_gemm.fp8_mqa_logits.default
_spec = importlib.util.spec_from_file_location("sass_test", Path(__file__).with_name("test_sass.py"))
sass_test = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_test)
SASS_TOOLS, HAS_NVCC = sass_test.SASS_TOOLS, sass_test.HAS_NVCC
FP8 = torch.float8_e4m3fn


def _inputs(s, skv, h, d, device="cpu"):
    q = torch.randn(s, h, d, device=device).to(FP8)
    kv = torch.randn(skv, d, device=device).to(FP8)
    sf = torch.rand(skv, device=device) + 0.5
    w = torch.randn(s, h, device=device)
    ks = torch.zeros(s, dtype=torch.int32, device=device)
    ke = torch.full((s,), skv, dtype=torch.int32, device=device)
    return q, (kv, sf), w, ks, ke


def _raises(match, fn, *args, exc=RuntimeError, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


# ---------------------------------------------------------------- CPU: bad inputs

@pytest.mark.parametrize("h", [12, 128])
def test_unsupported_heads(h):
    q, kv, w, ks, ke = _inputs(4, 64, h, 128)
    _raises(r"fp8_mqa_logits: the number of heads .* must be 8, 16, 32 or 64", deep_gemm.fp8_mqa_logits, q, kv, w, ks, ke)


@pytest.mark.parametrize("d", [16, 96, 256])
def test_unsupported_head_dim(d):
    q, kv, w, ks, ke = _inputs(4, 64, 64, d)
    _raises(r"fp8_mqa_logits: the head dimension .* must be 32, 64 or 128", deep_gemm.fp8_mqa_logits, q, kv, w, ks, ke)


def test_fp4_operands_require_sm100():
    q, (kv, sf), w, ks, ke = _inputs(4, 64, 64, 128)
    _raises(r"fp8_fp4_mqa_logits: q: FP4 operands .* require an SM100", deep_gemm.fp8_fp4_mqa_logits,
            q.view(torch.uint8), (kv, sf), w, ks, ke)
    _raises(r"fp8_fp4_mqa_logits: kv: FP4 operands .* require an SM100", deep_gemm.fp8_fp4_mqa_logits,
            q, (kv.view(torch.int8), sf), w, ks, ke)


def test_mx_scales_and_half_weights_require_sm100():
    q, (kv, sf), w, ks, ke = _inputs(4, 64, 64, 128)
    _raises(r"q scale factors .* require an SM100", deep_gemm.fp8_fp4_mqa_logits,
            (q, torch.zeros(4, 64, dtype=torch.int32)), (kv, sf), w, ks, ke)
    _raises(r"int32 .* kv scales require an SM100", deep_gemm.fp8_fp4_mqa_logits,
            q, (kv, sf.view(torch.int32)), w, ks, ke)
    _raises(r"torch.bfloat16 weights require an SM100", deep_gemm.fp8_mqa_logits, q, (kv, sf), w.bfloat16(), ks, ke)


def test_plain_q_pair_is_accepted_up_to_the_device_check():
    q, kv, w, ks, ke = _inputs(4, 64, 64, 128)
    _raises(r"fp8_fp4_mqa_logits: q must be a tensor or a \(tensor, None\) pair", deep_gemm.fp8_fp4_mqa_logits,
            (q, None, None), kv, w, ks, ke, exc=TypeError)
    _raises(r"fp8_mqa_logits: q must be a CUDA tensor", deep_gemm.fp8_fp4_mqa_logits, (q, None), kv, w, ks, ke)


def test_bad_dtypes_and_shapes():
    q, (kv, sf), w, ks, ke = _inputs(4, 64, 64, 128)
    f = deep_gemm.fp8_mqa_logits
    _raises(r"fp8_mqa_logits: q must be torch.float8_e4m3fn, got torch.bfloat16", f, q.bfloat16(), (kv, sf), w, ks, ke)
    _raises(r"fp8_mqa_logits: kv must be torch.float8_e4m3fn", f, q, (kv.float(), sf), w, ks, ke)
    _raises(r"fp8_mqa_logits: kv.shape\[1\] must be 128", f, q, (kv[:, :64], sf), w, ks, ke)
    _raises(r"fp8_mqa_logits: kv_sf.shape\[0\] must be 64", f, q, (kv, sf[:32]), w, ks, ke)
    _raises(r"fp8_mqa_logits: kv_sf must be torch.float32", f, q, (kv, sf.double()), w, ks, ke)
    _raises(r"fp8_mqa_logits: weights.shape\[1\] must be 64", f, q, (kv, sf), w[:, :32], ks, ke)
    _raises(r"fp8_mqa_logits: weights must be torch.float32, got torch.float64", f, q, (kv, sf), w.double(), ks, ke)
    _raises(r"fp8_mqa_logits: cu_seq_len_k_start must be torch.int32", f, q, (kv, sf), w, ks.long(), ke)
    _raises(r"fp8_mqa_logits: cu_seq_len_k_end.shape\[0\] must be 4", f, q, (kv, sf), w, ks, ke[:3])
    _raises(r"fp8_mqa_logits: q must be 3-D", f, q[0], (kv, sf), w, ks, ke, exc=ValueError)
    _raises(r"fp8_mqa_logits: q must be contiguous", f, q.transpose(0, 1).contiguous().transpose(0, 1), (kv, sf), w,
            torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32))
    _raises(r"fp8_mqa_logits: kv must be row-major", f, q, (kv.t().contiguous().t(), sf), w, ks, ke)


def test_bad_python_arguments():
    q, kv, w, ks, ke = _inputs(4, 64, 64, 128)
    _raises(r"fp8_mqa_logits: clean_logits must be a bool", deep_gemm.fp8_mqa_logits, q, kv, w, ks, ke, 1,
            exc=TypeError)
    _raises(r"fp8_mqa_logits: max_seqlen_k must be >= 0", deep_gemm.fp8_mqa_logits, q, kv, w, ks, ke, False, -1,
            exc=ValueError)
    _raises(r"clean_logits must be False with max_seqlen_k > 0", deep_gemm.fp8_mqa_logits, q, kv, w, ks, ke, True, 8,
            exc=ValueError)
    _raises(r"fp8_fp4_mqa_logits: logits_dtype must be torch.float32 or torch.bfloat16", deep_gemm.fp8_fp4_mqa_logits,
            q, kv, w, ks, ke, logits_dtype=torch.float16, exc=ValueError)
    _raises(r"fp8_mqa_logits: kv must be", deep_gemm.fp8_mqa_logits, q, kv[0], w, ks, ke, exc=TypeError)


def test_op_checks_logits_and_clean_with_compressed():
    q, (kv, sf), w, ks, ke = _inputs(4, 64, 64, 128)
    out = torch.empty(4, 64)
    _raises(r"fp8_mqa_logits: logits must be torch.float32 or torch.bfloat16", _op, q, kv, sf, w, ks, ke, out.half(),
            True, 0)
    _raises(r"fp8_mqa_logits: logits.shape\[1\] must be 64", _op, q, kv, sf, w, ks, ke, out[:, :32], True, 0)
    _raises(r"fp8_mqa_logits: logits.shape\[1\] must be 8 \(max_seqlen_k\)", _op, q, kv, sf, w, ks, ke, out, False, 8)
    _raises(r"fp8_mqa_logits: clean_logits must be False with max_seqlen_k > 0", _op, q, kv, sf, w, ks, ke,
            out[:, :8], True, 8)
    _raises(r"fp8_mqa_logits: q must be a CUDA tensor", _op, q, kv, sf, w, ks, ke, out, True, 0)


def test_meta_gives_upstream_layout():
    q, (kv, sf), w, ks, ke = _inputs(100, 1000, 64, 128)
    q, kv, sf, w, ks, ke = (t.to("meta") for t in (q, kv, sf, w, ks, ke))
    out = deep_gemm.fp8_mqa_logits(q, (kv, sf), w, ks, ke)
    assert out.shape == (100, 1000) and out.stride() == (1280, 1) and out.dtype == torch.float32
    out = deep_gemm.fp8_fp4_mqa_logits(q, (kv, sf), w, ks, ke, False, 300, torch.bfloat16)
    assert out.shape == (100, 300) and out.stride() == (512, 1) and out.dtype == torch.bfloat16


def test_fake_mode_checks_devices():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, kv, w, ks, ke = _inputs(8, 64, 64, 128)
        _raises(r"fp8_mqa_logits: q must be a CUDA tensor", deep_gemm.fp8_mqa_logits, q, kv, w, ks, ke)


def test_opcheck_on_meta():
    q, (kv, sf), w, ks, ke = _inputs(100, 1000, 64, 128)
    args = [t.to("meta") for t in (q, kv, sf, w, ks, ke)]
    torch.library.opcheck(_op, (*args, torch.empty(100, 1000, device="meta"), True, 0))
    torch.library.opcheck(_op, (*args, torch.empty(100, 40, device="meta", dtype=torch.bfloat16), False, 40))


# The kernels' machine code, compiled here (no GPU): QGMMA, no local memory, no stage release
# behind a shared-memory read in flight, and wgmmas left in flight (ptxas serialises every
# wgmma when it cannot prove the accumulators untouched: one DEPBAR per QGMMA).
@pytest.mark.skipif(SASS_TOOLS is None or not HAS_NVCC, reason="needs nvcc, cuobjdump and nvdisasm")
@pytest.mark.parametrize("heads, head_dim, out, form", [
    (64, 128, "fp32", "clean"), (64, 128, "bf16", "compressed"), (32, 64, "fp32", "plain"), (16, 128, "fp32", "clean"),
    (8, 32, "bf16", "clean"), (8, 128, "fp32", "compressed")])
def test_sass(heads, head_dim, out, form, tmp_path, monkeypatch):
    script = ("import sys, torch, deep_gemm\n"
              f"print(torch.ops.deep_gemm.fp8_mqa_logits_build({heads}, {head_dim}, '{out}', '{form}'))\n")
    res = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path)),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    name, path = res.stdout.strip().splitlines()[-1].split("\t")
    assert "mqa_logits" in name
    sass = subprocess.run([os.path.join(SASS_TOOLS, "cuobjdump"), "--dump-sass", path], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PATH=SASS_TOOLS + os.pathsep + os.environ.get("PATH", "")))
    assert sass.returncode == 0, sass.stderr[-2000:]
    text = sass.stdout
    n = 256 if heads >= 16 else 128
    assert text.count(f"QGMMA.64x{n}x32.F32.E4M3.E4M3") >= head_dim // 32
    assert "LDL" not in text and "STL" not in text, "local memory"
    if head_dim >= 64:  # several wgmmas per KV block: not each followed by its own wait
        assert text.count("WARPGROUP.DEPBAR") < text.count("QGMMA"), "every wgmma waited for (serialised)"
    if n == 128:  # double-buffered: the next block's wgmmas stay in flight
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text, "no wait_group 1 left"
    assert sass_test.check_module.check(text) == [], "a stage release behind an LDS in flight"


# ---------------------------------------------------------------- GPU

def _reference(q, kv, sf, w, ks, ke):
    """float64: sum_h relu(q . kv * sf) * w inside [ks, ke), -inf outside."""
    score = torch.einsum("shd,nd->shn", q.double(), kv.double()) * sf.double()[None, None, :]
    logits = (score.relu() * w.double()[:, :, None]).sum(1)
    cols = torch.arange(kv.shape[0], device=q.device)[None, :]
    inside = (cols >= ks.long()[:, None]) & (cols < ke.long()[:, None])
    return logits.masked_fill(~inside, float("-inf")), inside


def _windows(s, skv, device):
    """Ragged windows: random starts and lengths, some empty, some past S_kv, some reversed."""
    ks = torch.randint(-8, skv, (s,), device=device, dtype=torch.int32)
    ke = ks + torch.randint(-16, skv, (s,), device=device, dtype=torch.int32)
    ke[::7] = ks[::7]  # empty
    ke[1::11] = skv + 100  # past the end
    return ks, ke


def _gpu_inputs(s, skv, h, d, negative_scales=False):
    q = torch.randn(s, h, d, device="cuda").to(FP8)
    kv = torch.randn(skv, d, device="cuda").to(FP8)
    sf = torch.rand(skv, device="cuda") + 0.1
    if negative_scales:
        sf[::3] = -sf[::3]
    w = torch.randn(s, h, device="cuda")
    ks, ke = _windows(s, skv, "cuda")
    return q, kv, sf, w, ks, ke


def _check(out, ref, inside, dtype, clean):
    out = out.double()
    assert not out[inside].isnan().any(), "cells inside a window were not written"
    if clean:
        assert torch.equal(out == float("-inf"), ref == float("-inf")), "-inf cells differ"
    diff = calc_diff(out.masked_fill(~inside, 0), ref.masked_fill(~inside, 0))
    assert diff < (1e-5 if dtype == torch.float32 else 5e-5), f"diff {diff}"


@pytest.mark.gpu
@pytest.mark.parametrize("h", [8, 16, 32, 64])
@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logits_clean(h, d, dtype):
    torch.manual_seed(h * 1000 + d)
    s, skv = 257, 1100
    q, kv, sf, w, ks, ke = _gpu_inputs(s, skv, h, d)
    ref, inside = _reference(q, kv, sf, w, ks, ke)
    out = torch.full((s, skv), float("nan"), device="cuda", dtype=dtype)
    _op(q, kv, sf, w, ks, ke, out, True, 0)
    _check(out, ref, inside, dtype, clean=True)
    public = deep_gemm.fp8_fp4_mqa_logits(q, (kv, sf), w, ks, ke, logits_dtype=dtype)
    assert public.shape == (s, skv) and public.dtype == dtype
    _check(public, ref, inside, dtype, clean=True)


@pytest.mark.gpu
@pytest.mark.parametrize("h", [32, 64])
def test_logits_unclean_leaves_outside_untouched(h):
    torch.manual_seed(h)
    s, skv = 130, 700
    q, kv, sf, w, ks, ke = _gpu_inputs(s, skv, h, 128)
    ref, inside = _reference(q, kv, sf, w, ks, ke)
    out = torch.full((s, skv), float("nan"), device="cuda")
    _op(q, kv, sf, w, ks, ke, out, False, 0)
    assert out[~inside].isnan().all(), "clean_logits=False wrote outside the windows"
    _check(out, ref, inside, torch.float32, clean=False)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("h", [32, 64])
def test_compressed(h, dtype):
    torch.manual_seed(7 + h)
    s, skv = 200, 1500
    q, kv, sf, w, ks, ke = _gpu_inputs(s, skv, h, 128)
    ref, inside = _reference(q, kv, sf, w, ks, ke)
    lo, hi = ks.clamp(0, skv), ke.clamp(0, skv)
    max_len = int((hi - lo).clamp(min=0).max())
    out = deep_gemm.fp8_fp4_mqa_logits(q, (kv, sf), w, ks, ke, clean_logits=False, max_seqlen_k=max_len,
                                       logits_dtype=dtype)
    assert out.shape == (s, max_len) and out.stride(0) % (1024 // out.element_size()) == 0
    poisoned = torch.full((s, max_len), float("nan"), device="cuda", dtype=dtype)
    _op(q, kv, sf, w, ks, ke, poisoned, False, max_len)
    for result in (out, poisoned):
        full = torch.full((s, skv), float("-inf"), device="cuda", dtype=torch.float64)
        for i in range(s):
            n = int(hi[i] - lo[i])
            if n > 0:
                full[i, lo[i]:hi[i]] = result[i, :n].double()
        _check(full, ref, inside, dtype, clean=True)
    # A max_seqlen_k below a window's length keeps the first max_seqlen_k keys, writes no more.
    short = torch.full((s, 16), float("nan"), device="cuda")
    _op(q, kv, sf, w, ks, ke, short, False, 16)
    row = int(torch.argmax(hi - lo))
    assert not short[row].isnan().any()


@pytest.mark.gpu
def test_negative_scales_and_causal_windows():
    torch.manual_seed(3)
    s, skv = 512, 2048
    q, kv, sf, w, _, _ = _gpu_inputs(s, skv, 64, 128, negative_scales=True)
    ks = torch.zeros(s, dtype=torch.int32, device="cuda")
    ke = torch.arange(s, dtype=torch.int32, device="cuda") + (skv - s) + 1
    ref, inside = _reference(q, kv, sf, w, ks, ke)
    out = deep_gemm.fp8_mqa_logits(q, (kv, sf), w, ks, ke)
    _check(out, ref, inside, torch.float32, clean=True)


@pytest.mark.gpu
def test_all_windows_empty_and_sliced_scales():
    torch.manual_seed(5)
    s, skv = 64, 300
    q, kv, sf_full, w, ks, _ = _gpu_inputs(s, skv + 1, 64, 64)
    kv, sf = kv[1:], sf_full[1:]  # a 4-byte offset scale view: copied for the TMA
    ke = ks.clone()
    out = deep_gemm.fp8_mqa_logits(q, (kv, sf), w, ks, ke)
    assert (out == float("-inf")).all()
    ks, ke = _windows(s, skv, "cuda")
    ref, inside = _reference(q, kv, sf, w, ks, ke)
    _check(deep_gemm.fp8_mqa_logits(q, (kv, sf), w, ks, ke), ref, inside, torch.float32, clean=True)
