"""tf32_hc_prenorm_gemm (HyperConnection prenorm GEMM): argument checks on meta and CPU tensors
(CI), the kernels the shapes of upstream's test choose compiled and disassembled (HGMMA with a
register A operand, no local memory), and on an SM90 GPU d and sqr_sum against a float64
reference with the outputs poisoned (NaN) first: with and without splits (each split's
partial against its own K range), N = 8 to 32, tails of M, splits without K blocks, a
column slice of a wider d, and a CUDA graph replayed on new data."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

import deep_gemm

BF16, F32 = torch.bfloat16, torch.float32
OP = "tf32_hc_prenorm_gemm"


def _meta(*shape, dtype=F32):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _call(m=64, n=24, k=128, splits=None, a=None, b=None, d=None, s=None):
    a = _meta(m, k, dtype=BF16) if a is None else a
    b = _meta(n, k) if b is None else b
    if d is None:
        d = _meta(m, n) if splits is None else _meta(splits, m, n)
    if s is None:
        s = _meta(m) if splits is None else _meta(splits, m)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=splits)


# ---- arguments (CI) --------------------------------------------------------------------


@pytest.mark.parametrize("n", (8, 16, 24, 32))
@pytest.mark.parametrize("splits", (None, 1, 3, 16))
def test_accepts_its_shapes(n, splits):
    _call(m=137, n=n, k=7168, splits=splits)


def test_num_splits_positional_and_empty_m():
    deep_gemm.tf32_hc_prenorm_gemm(_meta(13, 64, dtype=BF16), _meta(24, 64), _meta(2, 13, 24), _meta(2, 13), 2)
    _call(m=0, splits=None)
    _call(m=0, splits=4)


BAD = {
    "fp16 a": (dict(a=_meta(64, 128, dtype=torch.float16)), "a must be torch.bfloat16"),
    "bf16 b": (dict(b=_meta(24, 128, dtype=BF16)), "b must be torch.float32"),
    "bf16 d": (dict(d=_meta(64, 24, dtype=BF16)), "d must be torch.float32"),
    "fp64 sqr_sum": (dict(s=_meta(64, dtype=torch.float64)), "sqr_sum must be torch.float32"),
    "k mismatch": (dict(b=_meta(24, 192)), r"b.shape\[1\] must be 128"),
    "n over 32": (dict(n=40), "N .* must be 8, 16, 24 or 32"),
    "n not multiple of 8": (dict(n=12), "N .* must be 8, 16, 24 or 32"),
    "k tail": (dict(k=96), "K must be a positive multiple of 64"),
    "k zero": (dict(k=0), "K must be a positive multiple of 64"),
    "3-D d without splits": (dict(d=_meta(2, 64, 24)), "d must be 2-D"),
    "2-D d with splits": (dict(splits=2, d=_meta(64, 24)), "d must be 3-D"),
    "1-D sqr_sum with splits": (dict(splits=2, s=_meta(64)), "sqr_sum must be 2-D"),
    "d splits mismatch": (dict(splits=2, d=_meta(3, 64, 24)), r"d.shape\[0\] must be 2 \(num_splits\)"),
    "sqr_sum splits mismatch": (dict(splits=2, s=_meta(3, 64)), r"sqr_sum.shape\[0\] must be 2"),
    "d rows": (dict(d=_meta(65, 24)), r"d.shape\[0\] must be 64"),
    "d columns": (dict(d=_meta(64, 32)), r"d.shape\[1\] must be 24"),
    "sqr_sum rows": (dict(s=_meta(63)), r"sqr_sum.shape\[0\] must be 64"),
    "a MN-major": (dict(a=_meta(128, 64, dtype=BF16).t()), "a must be K-major"),
    "b MN-major": (dict(b=_meta(128, 24).t()), "b must be K-major"),
    "a pitch": (dict(a=_meta(64, 132, dtype=BF16)[:, :128]), r"a.stride\(0\) \* 2 bytes must be a multiple of 16"),
    "d column-major": (dict(d=_meta(24, 64).t()), "d must be row-major"),
    "d odd row stride": (dict(d=_meta(64, 25)[:, :24]), "d's row stride must be even"),
    "broadcast d": (dict(d=_meta(1, 24).expand(64, 24)), "d has overlapping elements"),
    "broadcast sqr_sum": (dict(s=_meta(1).expand(64)), "sqr_sum has overlapping elements"),
    "strided sqr_sum": (dict(s=_meta(128)[::2]), "sqr_sum must be contiguous along M"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_inputs_name_the_op_and_argument(case):
    kwargs, message = BAD[case]
    with pytest.raises(RuntimeError, match=f"{OP}.*{message}"):
        _call(**kwargs)


@pytest.mark.parametrize("splits, exc, message", [
    (0, ValueError, "num_splits must be >= 1"),
    (True, TypeError, "num_splits must be an int"),
    (2.0, TypeError, "num_splits must be an int"),
])
def test_bad_num_splits(splits, exc, message):
    with pytest.raises(exc, match=f"deep_gemm.{OP}: {message}"):
        _call(splits=splits, d=_meta(2, 64, 24), s=_meta(2, 64))


def test_too_many_splits():
    with pytest.raises(RuntimeError, match=f"{OP}.*num_splits must be in"):
        _call(splits=1 << 16)


def test_cpu_tensors_are_refused():
    a, b = torch.randn(64, 128).to(BF16), torch.randn(24, 128)
    with pytest.raises(RuntimeError, match=f"{OP}: a must be a CUDA tensor"):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, torch.empty(64, 24), torch.empty(64))


def test_non_tensor_argument():
    with pytest.raises(TypeError, match=f"deep_gemm.{OP}: sqr_sum must be a tensor"):
        deep_gemm.tf32_hc_prenorm_gemm(_meta(64, 128, dtype=BF16), _meta(24, 128), _meta(64, 24), None)


def test_fake_mode_refuses_cpu_tensors_like_eager():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b = torch.empty(64, 128, dtype=BF16), torch.empty(24, 128)
        with pytest.raises(RuntimeError, match=f"{OP}: a must be a CUDA tensor"):
            deep_gemm.tf32_hc_prenorm_gemm(a, b, torch.empty(64, 24), torch.empty(64))


def test_output_must_not_alias_an_input():
    # Meta tensors have no addresses: aliasing is checked on CPU memory, before the device check.
    storage = torch.empty(4096, dtype=F32)
    b = storage[:24 * 128].view(24, 128)
    d = storage[:64 * 24].view(64, 24)
    with pytest.raises(RuntimeError, match=f"{OP}: d overlaps b"):
        deep_gemm.tf32_hc_prenorm_gemm(torch.empty(64, 128, dtype=BF16), b, d, torch.empty(64))


# ---- the compiled kernels (CI, with nvcc) ---------------------------------------------------


HAS_NVCC = any(os.path.exists(os.path.join(p, "nvcc")) for p in os.environ.get("PATH", "").split(os.pathsep)) or \
    os.path.exists("/usr/local/cuda/bin/nvcc")


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_kernels_of_upstreams_shapes_use_register_a_hgmma_and_no_local_memory(tmp_path):
    from test_sass import SASS_TOOLS

    if SASS_TOOLS is None:
        pytest.skip("needs cuobjdump")
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1", DG_JIT_PTXAS_VERBOSE="1")
    code = ("import torch, deep_gemm\n"
            "for m in (13, 137, 1024, 4096, 8192):\n"
            "    for k in (7168, 28672):\n"
            "        for s in (None, 16):\n"
            "            print(torch.ops.deep_gemm.tf32_hc_prenorm_gemm_build(m, 24, k, s, 132))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    kernels = dict(line.split("\t") for line in out.stdout.strip().splitlines())
    # Small M takes 64-row tiles, large M 128-row tiles (the K parts are a runtime argument).
    assert {re.sub(r"_s\d+$", "", name) for name in kernels} == {"sm90_tf32_hc_prenorm_gemm_n24_b64",
                                                                  "sm90_tf32_hc_prenorm_gemm_n24_b128"}, kernels
    assert "C7518" not in out.stderr and "serialized" not in out.stderr, out.stderr[-3000:]
    problems = []
    for name, path in sorted(kernels.items()):
        sass = subprocess.run([os.path.join(SASS_TOOLS, "cuobjdump"), "--dump-sass", path], capture_output=True,
                              text=True, timeout=300).stdout
        hgmma = [line for line in sass.splitlines() if "HGMMA" in line]
        if len(hgmma) != 8 or not all("64x24x8.F32.TF32 R" in line and "gdesc" in line for line in hgmma):
            problems.append(f"{name}: expected 8 HGMMA.64x24x8.F32.TF32 with a register A, got {hgmma}")
        if "LDL" in sass or "STL" in sass:
            problems.append(f"{name}: local memory")
    assert not problems, problems


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_kernels_of_every_n_compile_without_spills(tmp_path):
    """N = 8, 16, 24 and 32 at both tile heights build under DG_JIT_PTXAS_CHECK=1. The 288-thread
    CTA caps a thread at 168 registers; at N = 32 the last part's batch of 8 partials (18 floats
    each) once spilled 12-44 bytes."""
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    code = ("import torch, deep_gemm\n"
            "for n in (8, 16, 24, 32):\n"
            "    for m in (128, 8192):\n"
            "        print(torch.ops.deep_gemm.tf32_hc_prenorm_gemm_build(m, n, 7168, 16, 132).split()[0])\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    names = {re.sub(r"_s\d+$", "", name) for name in out.stdout.split()}
    assert names == {f"sm90_tf32_hc_prenorm_gemm_n{n}_b{b}" for n in (8, 16, 24, 32) for b in (64, 128)}, names


# ---- on the GPU ----------------------------------------------------------------------------


def _inputs(m, n, k):
    a = torch.randn(m, k, dtype=BF16, device="cuda")
    b = torch.randn(n, k, dtype=F32, device="cuda")
    return a, b


def _split_ranges(k_blocks, splits):
    per, extra = divmod(k_blocks, splits)
    first = 0
    for i in range(splits):
        count = per + (i < extra)
        yield first * 64, (first + count) * 64
        first += count


def _tf32(x):
    """x rounded to TF32 (10 mantissa bits) two ways: truncated, and to nearest even."""
    bits = x.contiguous().view(torch.int32)
    trunc = (bits & ~0x1FFF).view(F32)
    rne = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(F32)
    return trunc, rne


def _check(a, b, d, s, k0=0, k1=None, label=""):
    """d and s (one split's, or the whole K) against float64 references over K columns [k0, k1)."""
    a64 = a[:, k0:k1].double()
    b_part = b[:, k0:k1]
    ref = a64 @ b_part.double().t()
    assert torch.isfinite(d).all() and torch.isfinite(s).all(), f"{label}: unwritten (NaN) outputs"
    err = ((d.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    # TF32 rounds b to 10 mantissa bits: ~6e-4 relative error against the exact product.
    assert err < 2e-3, f"{label}: relative error {err:.3g} against the float64 product"
    # Against b rounded to TF32 first, only FP32 summation error remains.
    tf32_err = min(((d.double() - a64 @ bt.double().t()).norm() / ref.norm().clamp_min(1e-30)).item()
                   for bt in _tf32(b_part))
    assert tf32_err < 1e-4, f"{label}: relative error {tf32_err:.3g} against the TF32-rounded product"
    ref_s = a64.square().sum(-1)
    s_err = ((s.double() - ref_s).norm() / ref_s.norm().clamp_min(1e-30)).item()
    assert s_err < 1e-5, f"{label}: sqr_sum relative error {s_err:.3g}"


CASES = [(m, 24, k) for m in (1, 13, 137, 1024, 4097) for k in (7168, 7680)] + \
        [(137, 24, 28672), (8192, 24, 28672), (64, 8, 1024), (200, 16, 2048), (300, 32, 4096), (129, 24, 192), (16384, 24, 7168)]


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", CASES)
@pytest.mark.parametrize("splits", (None, 1, 3, 16))
def test_matches_float64_reference(m, n, k, splits):
    torch.manual_seed(m * 7 + k + (splits or 0))
    a, b = _inputs(m, n, k)
    shape_d = (m, n) if splits is None else (splits, m, n)
    d = torch.full(shape_d, float("nan"), device="cuda")
    s = torch.full(shape_d[:-1], float("nan"), device="cuda")
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, splits)
    torch.cuda.synchronize()
    label = f"m={m} n={n} k={k} splits={splits}"
    if splits is None:
        _check(a, b, d, s, label=label)
        return
    _check(a, b, d.sum(0), s.sum(0), label=label + " (sum)")
    for i, (k0, k1) in enumerate(_split_ranges(k // 64, splits)):
        if k0 == k1:
            assert (d[i] == 0).all() and (s[i] == 0).all(), f"{label}: split {i} has no K block but is not zero"
        else:
            _check(a, b, d[i], s[i], k0, k1, label=f"{label} split {i}")


@pytest.mark.gpu
def test_shapes_in_turn_reuse_the_stream_workspace():
    # Eager launches on one stream share one workspace whatever their configuration: 4096 rows
    # (128-row tiles, 4 K parts) leave partials where 4097 rows (64-row tiles, 65 units) once
    # found their counters, and that launch never stored its last tile.
    for m in (4096, 4097, 1, 1024, 137, 4097, 8192, 13):
        a, b = _inputs(m, 24, 7168)
        d = torch.full((m, 24), float("nan"), device="cuda")
        s = torch.full((m,), float("nan"), device="cuda")
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
        torch.cuda.synchronize()
        _check(a, b, d, s, label=f"m={m} after the shapes before it")


@pytest.mark.gpu
def test_more_splits_than_k_blocks_write_zeros():
    a, b = _inputs(100, 24, 128)  # 2 K blocks, 5 splits
    d = torch.full((5, 100, 24), float("nan"), device="cuda")
    s = torch.full((5, 100), float("nan"), device="cuda")
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=5)
    _check(a, b, d.sum(0), s.sum(0), label="5 splits of 2 K blocks")
    assert (d[2:] == 0).all() and (s[2:] == 0).all()


@pytest.mark.gpu
def test_column_slice_of_a_wider_d_leaves_the_rest_alone():
    a, b = _inputs(333, 24, 7168)
    buf = torch.full((333, 32), float("nan"), device="cuda")
    s = torch.full((333,), float("nan"), device="cuda")
    deep_gemm.tf32_hc_prenorm_gemm(a, b, buf[:, :24], s)
    _check(a, b, buf[:, :24], s, label="column slice")
    assert torch.isnan(buf[:, 24:]).all()


@pytest.mark.gpu
def test_cuda_graph_replays_on_new_data():
    a, b = _inputs(1024, 24, 7168)
    d = torch.empty(1024, 24, device="cuda")
    s = torch.empty(1024, device="cuda")
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)  # compile and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    a.copy_(torch.randn_like(a))
    b.copy_(torch.randn_like(b))
    d.fill_(float("nan"))
    s.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _check(a, b, d, s, label="graph replay")


@pytest.mark.gpu
def test_graph_and_eager_launches_keep_their_own_workspaces():
    # M = 512 splits K over several CTAs that meet in a workspace. A captured launch gets its
    # own (zeroed inside the graph), so replays beside eager launches on a side stream, and
    # eager launches after a capture, all stay right.
    a, b = _inputs(512, 24, 7168)
    d, s = torch.empty(512, 24, device="cuda"), torch.empty(512, device="cuda")
    graph = torch.cuda.CUDAGraph()
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)  # compile outside the capture
    with torch.cuda.graph(graph):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    a2, b2 = _inputs(512, 24, 7168)
    d2, s2 = torch.empty(512, 24, device="cuda"), torch.empty(512, device="cuda")
    side = torch.cuda.Stream()
    for _ in range(3):
        d.fill_(float("nan"))
        s.fill_(float("nan"))
        d2.fill_(float("nan"))
        s2.fill_(float("nan"))
        torch.cuda.synchronize()
        graph.replay()
        with torch.cuda.stream(side):
            deep_gemm.tf32_hc_prenorm_gemm(a2, b2, d2, s2)
        torch.cuda.synchronize()
        _check(a, b, d, s, label="graph replay")
        _check(a2, b2, d2, s2, label="eager on a side stream")


@pytest.mark.gpu
def test_empty_m_writes_nothing():
    a = torch.empty(0, 64, dtype=BF16, device="cuda")
    b = torch.randn(24, 64, device="cuda")
    storage = torch.full((16,), 19.0, device="cuda")
    deep_gemm.tf32_hc_prenorm_gemm(a, b, storage[:0].view(0, 24), storage[:0], None)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, storage[:0].view(3, 0, 24), storage[:0].view(3, 0), 3)
    assert (storage == 19).all()
