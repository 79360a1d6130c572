"""fp8_gemm_nt family: argument validation (CPU and meta tensors, no GPU needed)
and correctness on an SM90 GPU against a float reference on fresh random data,
with the output poisoned first."""

from __future__ import annotations

import threading

import pytest
import torch
from concurrency import run_concurrently
from fp8_reference import dequant_blocks, dequant_rows

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

FP8 = torch.float8_e4m3fn


def _operands(m, n, k, device, fp32_out=False):
    a = torch.empty(m, k, dtype=FP8, device=device)
    sfa = torch.empty(m, k // 128, device=device)
    b = torch.empty(n, k, dtype=FP8, device=device)
    sfb = torch.empty(n if fp32_out else (n + 127) // 128, k // 128, device=device)
    d = torch.empty(m, n, dtype=torch.float32 if fp32_out else torch.bfloat16, device=device)
    return a, sfa, b, sfb, d


# ---- validation (CI) ---------------------------------------------------------------

BAD_CASES = {
    "cpu tensors": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d), "must be a CUDA tensor"),
    "a dtype": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a.view(torch.float8_e5m2), sfa), (b, sfb), d),
                "a must be torch.float8_e4m3fn, got torch.float8_e5m2"),
    "sfa dtype": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa.double()), (b, sfb), d),
                  "sfa must be torch.float32"),
    "k mismatch": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b[:, :128].contiguous(), sfb), d),
                   r"b.shape\[1\] must be 256"),
    "m mismatch": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d[:64]), r"d.shape\[0\] must be 128"),
    "n mismatch": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b[:128], sfb), d), r"d.shape\[1\] must be 128"),
    "sfb shape": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb[:1]), d), r"sfb.shape\[0\] must be 2"),
    "d dtype": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d.half()),
                "d must be torch.bfloat16 .* or torch.float32"),
    "c with bf16 d": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d, c=d.float()),
                      r"recipe \(1, 1, 128\) accumulates into an fp32 d|c \(accumulation\) needs an fp32 d"),
    "bad recipe": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d, recipe=(1, 64, 128)),
                   "SM90 supports recipe"),
    "not a pair": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt(a, (b, sfb), d), "must be a pair"),
    "compiled_dims": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d, compiled_dims="nx"),
                      "compiled_dims may only contain"),
    "nn with K-major b": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nn((a, sfa), (b, sfb), d), "must be K-major"),
    "tn with K-major a": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_tn((a, sfa), (b.t(), sfb.t()), d),
                          "must be K-major|shape"),
    "k tail with floor(K / 128) scale columns": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt(
        (a[:, :192], sfa[:, :1]), (b[:, :192], sfb[:, :1]), d), r"ceil\(K / 128\)"),
    # N = 135 with d a column slice (row pitch 144): the TMA would write past column N.
    "n not a multiple of 8": (lambda a, sfa, b, sfb, d: deep_gemm.fp8_gemm_nt(
        (a, sfa), (b[:135], sfb), d.new_empty(128, 144)[:, :135]), r"N \(= 135\) must be a multiple of 8 for a bf16 d"),
}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_raises_clearly(case, device):
    fn, pattern = BAD_CASES[case]
    if device == "meta" and case == "cpu tensors":
        pytest.skip("meta tensors are valid for shape-only runs")
    a, sfa, b, sfb, d = _operands(128, 256, 256, device)
    with pytest.raises((RuntimeError, ValueError, TypeError), match=pattern):
        fn(a, sfa, b, sfb, d)


def test_meta_run_checks_shapes_without_launching():
    a, sfa, b, sfb, d = _operands(300, 2112, 7168, "meta")
    deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d)  # accepted, nothing to launch


def test_misaligned_strides_and_non_k_major_on_meta():
    a, sfa, b, sfb, d = _operands(128, 256, 256, "meta")
    wide = torch.empty(128, 264, dtype=FP8, device="meta")[:, :256]  # row pitch 264 bytes: not a multiple of 16
    with pytest.raises(RuntimeError, match=r"stride\(0\) \* 1 bytes must be a multiple of 16"):
        deep_gemm.fp8_gemm_nt((wide, sfa), (b, sfb), d)
    with pytest.raises(RuntimeError, match="must be K-major"):
        deep_gemm.fp8_gemm_nt((torch.empty(256, 128, dtype=FP8, device="meta").t(), sfa), (b, sfb), d)


def test_raw_op_checks_scale_shapes():
    a, sfa, b, sfb, d = _operands(130, 256, 256, "meta")
    torch.ops.deep_gemm.fp8_gemm_nt(a, sfa, b, sfb, d, None, "nk")  # any layout of the right shape
    with pytest.raises(RuntimeError, match=r"sfa.shape\[0\] must be 130"):
        torch.ops.deep_gemm.fp8_gemm_nt(a, sfa[:128], b, sfb, d, None, "nk")


def test_opcheck_on_meta():
    a, sfa, b, sfb, d = _operands(256, 384, 512, "meta")
    sfa = deep_gemm.get_mn_major_tma_aligned_tensor(sfa)
    torch.library.opcheck(torch.ops.deep_gemm.fp8_gemm_nt.default, (a, sfa, b, sfb, d, None, "nk"))
    a, sfa, b, sfb, d = _operands(256, 384, 512, "meta", fp32_out=True)
    sfa, sfb = deep_gemm.get_mn_major_tma_aligned_tensor(sfa), deep_gemm.get_mn_major_tma_aligned_tensor(sfb)
    torch.library.opcheck(torch.ops.deep_gemm.fp8_gemm_nt.default, (a, sfa, b, sfb, d, d.clone(), "nk"))


def test_mn_major_layout_op_on_meta():
    sf = torch.empty(130, 7, device="meta")
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    assert out.shape == (130, 7) and out.stride() == (1, 132)
    g = torch.empty(3, 6, 5, device="meta")
    assert deep_gemm.get_mn_major_tma_aligned_tensor(g).stride() == (40, 1, 8)
    torch.library.opcheck(torch.ops.deep_gemm.get_mn_major_tma_aligned_tensor.default, (sf,))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(130, 7), (4097, 56), (1, 3), (3, 6, 5), (4, 129, 16)])
def test_mn_major_layout_kernel(shape):
    sf = torch.randn(*shape, device="cuda")
    for src in (sf, sf.transpose(-1, -2).contiguous().transpose(-1, -2)):
        out = deep_gemm.get_mn_major_tma_aligned_tensor(src)
        pad = (shape[-2] + 3) // 4 * 4
        assert out.stride()[-2:] == (1, pad) and torch.equal(out, sf)


def test_mn_major_layout_helper_on_cpu():
    sf = torch.randn(130, 7)
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    assert out.stride() == (1, 132) and torch.equal(out, sf)
    assert deep_gemm.get_mn_major_tma_aligned_tensor(out) is out
    g = torch.randn(3, 6, 5)
    og = deep_gemm.get_mn_major_tma_aligned_tensor(g)
    assert og.stride() == (40, 1, 8) and torch.equal(og, g)
    blk = torch.randn(4, 7).t()
    assert deep_gemm.transform_sf_into_required_layout(blk, 7 * 128, 4 * 128, (128, 128)).is_contiguous()
    with pytest.raises(ValueError, match="must have shape"):
        deep_gemm.transform_sf_into_required_layout(sf, 100, 7 * 128, (1, 128, 128), is_sfa=True)


# ---- correctness (GPU) -------------------------------------------------------------

M_SET = [1, 7, 128, 129, 4096, 4097]
NK_SET = [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]


def _quantized(m, n, k, fp32_out=False):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=False)
    b, sfb = per_token_cast_to_fp8(y, use_ue8m0=False) if fp32_out else per_block_cast_to_fp8(y, use_ue8m0=False)
    return (a, sfa), (b, sfb)


def _reference(a, b, fp32_out):
    ref_b = dequant_rows(*b) if fp32_out else dequant_blocks(*b)
    return dequant_rows(*a) @ ref_b.t()


@pytest.mark.gpu
@pytest.mark.parametrize("n,k", NK_SET)
@pytest.mark.parametrize("m", M_SET)
def test_fp8_gemm_nt_1d2d_matches_reference(m, n, k):
    torch.manual_seed(m * 31 + n + k)
    a, b = _quantized(m, n, k)
    guard = 256
    buf = torch.full((m * n + 2 * guard,), float("nan"), device="cuda", dtype=torch.bfloat16)
    d = buf[guard: guard + m * n].view(m, n)
    deep_gemm.fp8_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    assert not d.isnan().any(), "some outputs were not written"
    assert buf[:guard].isnan().all() and buf[guard + m * n:].isnan().all(), "wrote outside d"
    ref = _reference(a, b, fp32_out=False)
    diff = calc_diff(d, ref)
    assert diff < 1e-3, f"calc_diff {diff:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(4097, 2112, 7168), (129, 576, 1536), (7, 7168, 2048), (129, 576, 640),
                                   (1, 4096, 7168), (16, 256, 512), (64, 2112, 7168), (65, 576, 1536),
                                   (128, 24576, 1536), (200, 2112, 7168)])
def test_fp8_gemm_sfa_layouts_agree(m, n, k):
    """Every SFA layout gives the same bits: per-token ([M, K/128]), a padded row pitch and
    an MN-major view with an unaligned pitch are converted on the GPU, or, for M <= 384, read
    as given by the kernel ("_sg" kernels: overlapped, and plain at 128 x 24576 x 1536);
    prepared (MN-major, TMA-aligned) SFA is used as it is."""
    torch.manual_seed(m + n + k)
    a, b = _quantized(m, n, k)
    kb = k // 128
    padded = torch.empty(m, kb + 4, device="cuda")[:, :kb]
    padded.copy_(a[1])
    unaligned = torch.empty(kb, m + 5, device="cuda").t()[:m]  # MN-major, pitch m + 5: converted
    unaligned.copy_(a[1])
    variants = {"per-token": a[1], "prepared": deep_gemm.get_mn_major_tma_aligned_tensor(a[1]), "padded": padded,
                "converted": unaligned}
    ref = _reference(a, b, fp32_out=False)
    outs = {}
    for name, sfa in variants.items():
        d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt((a[0], sfa), b, d)
        torch.cuda.synchronize()
        assert calc_diff(d, ref) < 1e-3, name
        outs[name] = d
    assert all(torch.equal(outs["per-token"], d) for d in outs.values())
    if m <= 384:  # (a larger M never takes it: tests/test_warmup.py checks the choice)
        assert any("_sg" in x and f"n{n}k{k}_" in x for x in deepgemm_loaded()), deepgemm_loaded()


def deepgemm_loaded() -> list[str]:
    return deep_gemm.get_jit().loaded_kernels


@pytest.mark.gpu
def test_fp8_gemm_small_m_per_token_scales_in_a_graph():
    """At small M the kernel reads per-token scales where they are: a captured graph then
    reads the scales written into that tensor before each replay."""
    m, n, k = 16, 2112, 7168
    torch.manual_seed(5)
    a, b = _quantized(m, n, k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        deep_gemm.fp8_gemm_nt(a, b, d)  # compile and load outside the capture
        with torch.cuda.graph(graph, stream=stream):
            deep_gemm.fp8_gemm_nt(a, b, d)
    for _ in range(2):
        a2, _ = _quantized(m, n, k)
        a[0].copy_(a2[0])
        a[1].copy_(a2[1])
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert calc_diff(d, _reference(a, b, fp32_out=False)) < 1e-3


def _fill_shared_memory_with_nan():
    """Leaves NaN operands in the SMs' shared memory: a large GEMM whose A is all 0x7F
    (e4m3 NaN) stages NaN tiles in every pipeline slot of every SM."""
    a = torch.full((4096, 2048), 0x7F, device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    sfa = torch.ones(4096, 16, device="cuda")
    b, sfb = per_block_cast_to_fp8(torch.randn(7168, 2048, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), torch.empty(4096, 7168, device="cuda", dtype=torch.bfloat16))


@pytest.mark.gpu
@pytest.mark.parametrize("fp32_out", [False, True])
@pytest.mark.parametrize("m", [1, 5, 9, 63, 100, 129, 200, 257, 389])
def test_tail_boxes_ignore_stale_shared_memory(m, fp32_out):
    """Where M is not a multiple of BLOCK_M, the TMA loads only the last m-block's existing
    rows of A (rounded up to 8); the stage's other rows hold whatever an earlier kernel
    left, here NaN. Those rows only reach outputs past M, which are never stored: d and the
    memory around it stay exact. M < BLOCK_M (one m-block, the decode case) and M above it
    (1 to ~130 rows in the last block) both."""
    torch.manual_seed(m)
    n, k = 2112, 7168
    a, b = _quantized(m, n, k, fp32_out)
    dtype = torch.float if fp32_out else torch.bfloat16
    guard = 256
    buf = torch.full((m * n + 2 * guard,), float("nan"), device="cuda", dtype=dtype)
    d = buf[guard: guard + m * n].view(m, n)
    _fill_shared_memory_with_nan()
    if fp32_out:
        deep_gemm.fp8_gemm_nt(a, b, d, recipe=(1, 1, 128))
    else:
        deep_gemm.fp8_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    assert not d.isnan().any(), "NaN reached rows < M"
    assert buf[:guard].isnan().all() and buf[guard + m * n:].isnan().all(), "wrote outside d"
    assert calc_diff(d, _reference(a, b, fp32_out)) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(129, 2112, 7168), (4096, 7168, 2048), (7, 576, 7168)])
def test_fp8_gemm_1d1d_accumulates(m, n, k):
    torch.manual_seed(7)
    a, b = _quantized(m, n, k, fp32_out=True)
    c = torch.randn(m, n, device="cuda")
    d = torch.full((m, n), float("nan"), device="cuda")
    deep_gemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))
    ref = _reference(a, b, fp32_out=True) + c
    assert calc_diff(d, ref) < 1e-3
    # In place: d = d + A @ B^T
    d2 = c.clone()
    deep_gemm.fp8_gemm_nt(a, b, d2, c=d2, recipe=(1, 1, 128))
    assert calc_diff(d2, ref) < 1e-3


@pytest.mark.gpu
def test_fp8_gemm_from_several_threads():
    """Four Python threads call at once (the op runs without the GIL), each on its own stream,
    alternating its own shape with a neighbour's: the launcher's caches, the JIT's first
    loads and the per-thread tensor-map memo are shared or raced, and every output (poisoned
    first) must match its reference."""
    shapes = [(129, 576, 1536), (256, 2112, 512), (7, 4096, 1024), (300, 1024, 2048)]
    cases = []
    for i, (m, n, k) in enumerate(shapes):
        torch.manual_seed(100 + i)
        a, b = _quantized(m, n, k)
        cases.append((a, b, _reference(a, b, fp32_out=False)))
    torch.cuda.synchronize()
    errors: list[str] = []
    start = threading.Barrier(len(shapes))

    def worker(i):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                start.wait()
                for rep in range(10):
                    for j in (i, (i + 1) % len(shapes)):
                        a, b, ref = cases[j]
                        d = torch.full(ref.shape, float("nan"), device="cuda", dtype=torch.bfloat16)
                        deep_gemm.fp8_gemm_nt(a, b, d)
                        diff = calc_diff(d, ref)  # on this stream, after the GEMM
                        if not diff < 1e-3:
                            errors.append(f"thread {i}, call {rep}, shape {shapes[j]}: calc_diff {diff:.2e}")
        except Exception as exc:  # noqa: BLE001  (reported by the main thread)
            errors.append(f"thread {i}: {exc!r}")

    run_concurrently(worker, len(shapes), errors)


@pytest.mark.gpu
def test_fp8_gemm_is_deterministic_and_graph_capturable():
    m, n, k = 4096, 7168, 2048
    a, b = _quantized(m, n, k)
    d1 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    d2 = torch.empty_like(d1)
    deep_gemm.fp8_gemm_nt(a, b, d1)
    deep_gemm.fp8_gemm_nt(a, b, d2)
    assert torch.equal(d1, d2)
    d3 = torch.full_like(d1, float("nan"))
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            deep_gemm.fp8_gemm_nt(a, b, d3)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(d1, d3)
    # Replay with new inputs written into the captured buffers.
    a2, _ = _quantized(m, n, k)
    a[0].copy_(a2[0])
    a[1].copy_(a2[1])
    graph.replay()
    torch.cuda.synchronize()
    assert calc_diff(d3, _reference(a, b, fp32_out=False)) < 1e-3


@pytest.mark.gpu
def test_fp8_gemm_1d1d_is_deterministic_over_many_runs():
    """The 1D1D kernel reads each stage's SFB from shared memory and hands the stage back to
    the TMA: a read landing after the refill showed up in between 1 of 29 and 19 of 19 runs
    (2026-12-01; docs/design-notes.md), so one pair of runs is not enough to see it."""
    m, n, k = 4096, 7168, 2048
    a, b = _quantized(m, n, k, fp32_out=True)
    c = torch.randn(m, n, device="cuda")
    first = None
    for run in range(16):
        d = torch.full((m, n), float("nan"), device="cuda")
        deep_gemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))
        if first is None:
            first = d
            assert calc_diff(d, _reference(a, b, fp32_out=True) + c) < 1e-3
        else:
            assert torch.equal(d, first), f"run {run} differs from run 0"


@pytest.mark.gpu
def test_fp8_gemm_layout_views():
    m, n, k = 256, 512, 1024
    (a, sfa), (b, sfb) = _quantized(m, n, k)
    ref = _reference((a, sfa), (b, sfb), fp32_out=False)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nn((a, sfa), (b.t(), sfb.t()), d)  # B as a [K, N] view of K-major storage
    assert calc_diff(d, ref) < 1e-3
    with pytest.raises(RuntimeError, match="K-major"):
        deep_gemm.fp8_gemm_nn((a, sfa), (b.t().contiguous(), sfb.t()), d)


@pytest.mark.gpu
def test_fp8_gemm_m_zero_is_noop():
    (a, sfa), (b, sfb) = _quantized(1, 256, 512)
    d = torch.empty(0, 256, device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt((a[:0], sfa[:0]), (b, sfb), d)


_CLUSTER_CHILD = """
import torch, deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8
m, n, k = 4096, 7168, 2048
a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
ref = (a[0].float() * a[1].repeat_interleave(128, 1)) @ (
    b[0].float() * b[1].repeat_interleave(128, 0).repeat_interleave(128, 1)[:n, :k]).t()
d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
deep_gemm.fp8_gemm_nt(a, b, d)
eager = calc_diff(d, ref).item()
g = torch.cuda.CUDAGraph()
d2 = torch.full_like(d, float("nan"))
s = torch.cuda.Stream()
with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
    deep_gemm.fp8_gemm_nt(a, b, d2)
g.replay()
torch.cuda.synchronize()
info = deep_gemm.get_jit()
print("RESULT", eager, calc_diff(d2, ref).item(), info.backend, ",".join(info.loaded_kernels))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["nvcc", "nvrtc"])
def test_cluster_multicast_kernel_in_and_out_of_graph(backend, tmp_path):
    """A cluster-2 kernel (TMA multicast, > 48 KiB dynamic shared memory) built by
    either JIT backend runs correctly eagerly and replayed from a CUDA graph."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, DG_DEV_SM90_FP8_CLUSTER="2", DG_JIT_CACHE_DIR=str(tmp_path),
               DG_JIT_USE_NVRTC="1" if backend == "nvrtc" else "0")
    out = subprocess.run([sys.executable, "-c", _CLUSTER_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    _, eager, graphed, used_backend, kernels = line.split(" ", 4)
    assert used_backend == backend
    assert "_c2_" in kernels, kernels
    assert float(eager) < 1e-3 and float(graphed) < 1e-3, line


@pytest.mark.parametrize("name", ["get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe",
                                  "fp8_fp4_mega_moe", "bf16_mega_moe", "SymmBuffer"])
def test_sm100_only_names_raise_clearly(name):
    with pytest.raises(RuntimeError, match=r"requires an SM100 \(Blackwell\) GPU"):
        getattr(deep_gemm, name)()


def test_fp4_operands_need_sm100():
    a, sfa, b, sfb, d = _operands(128, 256, 256, "meta")
    packed = torch.empty(128, 128, dtype=torch.uint8, device="meta")
    with pytest.raises(RuntimeError, match="FP4 operands .* require an SM100"):
        deep_gemm.fp8_fp4_gemm_nt((a, sfa), (packed, sfb), d)


@pytest.mark.gpu
def test_fp8_gemm_with_pdl_reads_fresh_inputs():
    """With set_pdl(True) the GEMM may start while the kernels before it (here the copy that
    writes A and its scales, then the scale conversion) still run: it must wait for their
    writes before reading. Repeated with new data each time, against the reference."""
    m, n, k = 4097, 2112, 7168
    a, b = _quantized(m, n, k)
    src = [_quantized(m, n, k)[0] for _ in range(3)]
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    deep_gemm.set_pdl(True)
    try:
        for new_a, new_sfa in src:
            a[0].copy_(new_a)
            a[1].copy_(new_sfa)
            d.fill_(float("nan"))
            deep_gemm.fp8_gemm_nt(a, b, d)
            torch.cuda.synchronize()
            assert calc_diff(d, _reference(a, b, fp32_out=False)) < 1e-3
    finally:
        deep_gemm.set_pdl(False)


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc to compile")
def test_fp32_out_kernels_with_a_short_compiled_k_compile_without_spills(tmp_path):
    """The FP32-out (1D1D) kernels at K = 1536 build under DG_JIT_PTXAS_CHECK=1: their producer,
    unrolled over the 12 compiled-in K blocks, once spilled 52-64 bytes at 40 registers."""
    import os
    import subprocess
    import sys

    code = ("import torch, deep_gemm\n"
            "for m, n in ((128, 24576), (4096, 7168), (4096, 576), (200, 7168)):\n"
            "    print(torch.ops.deep_gemm.fp8_gemm_build(m, n, 1536, True, 132, 'nk').split()[0])\n")
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    names = res.stdout.split()
    assert len(names) == 4 and all(name.startswith("sm90_fp8_gemm_1d1d_") and "k1536_" in name for name in names), names
