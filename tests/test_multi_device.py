"""Several GPUs in one process: every op runs on its operands' device, whichever device is
current, on that device's current stream; operands on two devices are refused. Skips
unless at least two SM90 GPUs are visible (the device tool's `nvidia-h200-x2` has two)."""

from __future__ import annotations

import threading

import pytest
import torch
from concurrency import run_concurrently
from fp8_reference import dequant_blocks, dequant_rows

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

I32 = torch.int32


def _two_sm90_gpus() -> bool:
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return False
    return all(torch.cuda.get_device_capability(i)[0] == 9 for i in range(2))


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _two_sm90_gpus(), reason="needs two SM90 GPUs"),
]


def _dense(m, n, k, dev, seed):
    torch.manual_seed(seed)
    a = per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
    return a, b, dequant_rows(*a) @ dequant_blocks(*b).t()


def _poisoned(*shape, dev, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), device=dev, dtype=dtype)


def _on(dev):
    return torch.device("cuda", dev)


def test_dense_runs_on_the_operands_device_not_the_current_one():
    # Device 0 stays current; each GPU's first call also loads its own kernels.
    for dev in (1, 0, 1):
        with torch.cuda.device(0):
            a, b, ref = _dense(300, 2112, 1536, _on(dev), seed=dev)
            d = _poisoned(300, 2112, dev=_on(dev))
            deep_gemm.fp8_gemm_nt(a, b, d)  # per-token SFA: the layout kernel runs there too
            prepared = (a[0], deep_gemm.get_mn_major_tma_aligned_tensor(a[1]))
            d2 = _poisoned(300, 2112, dev=_on(dev))
            deep_gemm.fp8_gemm_nt(prepared, b, d2)
            assert torch.cuda.current_device() == 0
        torch.cuda.synchronize(dev)
        assert calc_diff(d, ref) < 1e-3 and torch.equal(d, d2), f"device {dev}"


def test_dense_1d1d_accumulates_on_the_second_device():
    dev = _on(1)
    torch.manual_seed(5)
    a = per_token_cast_to_fp8(torch.randn(129, 1024, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_token_cast_to_fp8(torch.randn(576, 1024, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
    c = torch.randn(129, 576, device=dev)
    d = c.clone()
    with torch.cuda.device(0):
        deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))
    torch.cuda.synchronize(dev)
    assert calc_diff(d, c + dequant_rows(*a) @ dequant_rows(*b).t()) < 1e-3


def test_m_grouped_layouts_on_the_second_device():
    dev, g, n, k = _on(1), 3, 512, 1024
    torch.manual_seed(7)
    b_parts = [per_block_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
               for _ in range(g)]
    b = (torch.stack([p[0] for p in b_parts]), torch.stack([p[1] for p in b_parts]))
    b_deq = [dequant_blocks(b[0][i], b[1][i]) for i in range(g)]
    with torch.cuda.device(0):
        # masked: masked_m lives on the operands' device; one group empty
        max_m, rows = 256, [200, 0, 77]
        x = torch.randn(g * max_m, k, device=dev, dtype=torch.bfloat16)
        a_t, sfa = per_token_cast_to_fp8(x, use_ue8m0=False)
        a = (a_t.view(g, max_m, k), sfa.view(g, max_m, -1))
        d = _poisoned(g, max_m, n, dev=dev)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, torch.tensor(rows, dtype=I32, device=dev), 128)
        # contiguous: groups of 256, 128 and 384 rows (multiples of the alignment)
        sizes = [256, 128, 384]
        layout = torch.cat([torch.full((s,), i, dtype=I32, device=dev) for i, s in enumerate(sizes)])
        xc = per_token_cast_to_fp8(torch.randn(sum(sizes), k, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
        dc = _poisoned(sum(sizes), n, dev=dev)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(xc, b, dc, layout)
    torch.cuda.synchronize(dev)
    for i, r in enumerate(rows):
        assert d[i, r:].isnan().all(), f"masked group {i}: rows past masked_m written"
        if r:
            assert calc_diff(d[i, :r], dequant_rows(a[0][i, :r], a[1][i, :r]) @ b_deq[i].t()) < 1e-3
    ref = dequant_rows(*xc)
    for i in range(g):
        rows_i = layout == i
        assert calc_diff(dc[rows_i], ref[rows_i] @ b_deq[i].t()) < 1e-3, f"contiguous group {i}"


def test_operands_on_two_devices_are_refused():
    a, b, _ = _dense(128, 256, 512, _on(0), seed=1)
    d = torch.empty(128, 256, device=_on(1), dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"d is on cuda:1 but a is on cuda:0"):
        deep_gemm.fp8_gemm_nt(a, b, d)


def test_graph_captured_on_the_second_device_replays_there():
    dev = _on(1)
    a, b, ref = _dense(256, 1024, 2048, dev, seed=3)
    d = _poisoned(256, 1024, dev=dev)
    with torch.cuda.device(1):
        deep_gemm.fp8_gemm_nt(a, b, d)  # loads the kernels before capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            deep_gemm.fp8_gemm_nt(a, b, d)
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize(dev)
    assert calc_diff(d, ref) < 1e-3


def test_one_thread_per_device_at_once():
    """One thread per GPU, each on its own stream there, calling at the same time."""
    cases = [_dense(129, 2112, 1536, _on(i), seed=20 + i) for i in range(2)]
    errors: list[str] = []
    start = threading.Barrier(2)

    def worker(i):
        try:
            with torch.cuda.device(i), torch.cuda.stream(torch.cuda.Stream()):
                a, b, ref = cases[i]
                start.wait()
                for rep in range(20):
                    d = _poisoned(*ref.shape, dev=_on(i))
                    deep_gemm.fp8_gemm_nt(a, b, d)
                    diff = calc_diff(d, ref)
                    if not diff < 1e-3:
                        errors.append(f"device {i}, call {rep}: calc_diff {diff:.2e}")
        except Exception as exc:  # noqa: BLE001  (reported by the main thread)
            errors.append(f"device {i}: {exc!r}")

    run_concurrently(worker, 2, errors)
