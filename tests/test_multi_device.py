"""Several GPUs in one process: every op runs on its operands' device, whichever device is
current, on that device's current stream; operands on two devices are refused. Every family:
FP8 dense, m-grouped and k-grouped, BF16 (split K too), cuBLASLt, einsum, the V3.2 indexer
(prefill and paged) and the HC prenorm GEMM. Skips
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
from test_paged_mqa_logits import Problem as PagedProblem

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


BF16 = torch.bfloat16


def _randn(*shape, dev, dtype=BF16):
    return torch.randn(*shape, device=dev, dtype=dtype)


def test_bf16_cublaslt_and_einsum_on_the_second_device():
    dev = _on(1)
    torch.manual_seed(31)
    with torch.cuda.device(0):
        # 128 x 2112 x 7168 splits K over a cluster per tile; 1024 x 1536 x 512 does not.
        for m, n, k in ((128, 2112, 7168), (1024, 1536, 512)):
            a, b = _randn(m, k, dev=dev), _randn(n, k, dev=dev)
            ref = a.float() @ b.float().t()
            for fn in (deep_gemm.bf16_gemm_nt, deep_gemm.cublaslt_gemm_nt):
                d = _poisoned(m, n, dev=dev)
                fn(a, b, d)
                torch.cuda.synchronize(dev)
                assert calc_diff(d, ref) < 1e-5, f"{fn.__name__} {m}x{n}x{k}"
        # bmk,bnk->mn over many batches: split over CTAs into a workspace on that device.
        x, y = _randn(600, 256, 128, dev=dev), _randn(600, 128, 128, dev=dev)
        z = torch.randn(256, 128, device=dev)
        ref = z + torch.einsum("bmk,bnk->mn", x.float(), y.float())
        deep_gemm.einsum("bmk,bnk->mn", x, y, z, z)
        x2, y2 = _randn(64, 16, 512, dev=dev), _randn(16, 128, 512, dev=dev)
        z2 = _poisoned(64, 16, 128, dev=dev)
        deep_gemm.einsum("bhr,hdr->bhd", x2, y2, z2)
        assert torch.cuda.current_device() == 0
    torch.cuda.synchronize(dev)
    assert calc_diff(z, ref) < 1e-5
    assert calc_diff(z2, torch.einsum("bhr,hdr->bhd", x2.float(), y2.float())) < 1e-5


def test_hc_prenorm_on_the_second_device():
    dev = _on(1)
    torch.manual_seed(32)
    for m in (512, 4096):  # K parts meeting in that device's workspace, and one CTA per tile
        a, b = _randn(m, 7168, dev=dev), torch.randn(24, 7168, device=dev)
        d, sq = _poisoned(m, 24, dev=dev, dtype=torch.float32), _poisoned(m, dev=dev, dtype=torch.float32)
        with torch.cuda.device(0):
            deep_gemm.tf32_hc_prenorm_gemm(a, b, d, sq)
        torch.cuda.synchronize(dev)
        assert calc_diff(d, a.double() @ b.double().t()) < 2e-3
        assert calc_diff(sq, a.double().square().sum(-1)) < 1e-5


def test_mqa_logits_on_the_second_device():
    dev = _on(1)
    torch.manual_seed(33)
    s, skv, h, hd = 300, 1500, 64, 128
    q = torch.randn(s, h, hd, device=dev).to(torch.float8_e4m3fn)
    kv = torch.randn(skv, hd, device=dev).to(torch.float8_e4m3fn)
    sf = torch.rand(skv, device=dev) + 0.1
    w = torch.randn(s, h, device=dev)
    ks = torch.randint(0, skv // 2, (s,), device=dev, dtype=I32)
    ke = ks + torch.randint(0, skv // 2, (s,), device=dev, dtype=I32)
    with torch.cuda.device(0):
        out = deep_gemm.fp8_mqa_logits(q, (kv, sf), w, ks, ke)
    assert out.device == dev
    score = torch.einsum("shd,nd->shn", q.double(), kv.double()) * sf.double()[None, None, :]
    ref = (score.relu() * w.double()[:, :, None]).sum(1)
    cols = torch.arange(skv, device=dev)[None, :]
    inside = (cols >= ks.long()[:, None]) & (cols < ke.long()[:, None])
    torch.cuda.synchronize(dev)
    assert (out[~inside] == float("-inf")).all()
    assert calc_diff(out.double().masked_fill(~inside, 0), ref.masked_fill(~inside, 0)) < 1e-5


def test_paged_mqa_logits_and_schedule_on_the_second_device():
    with torch.cuda.device(1):  # the inputs (and their float64 reference) on device 1
        p = PagedProblem(9, 2, 64, 128, 64, False, seed=34)
        ref, valid = p.reference()
    with torch.cuda.device(0):
        meta = deep_gemm.get_paged_mqa_logits_metadata(p.context_lens, 64, 132)
        logits = p.run(meta, clean=True)
    assert meta.device == _on(1) and logits.device == _on(1)
    torch.cuda.synchronize(1)
    assert torch.isfinite(logits[valid]).all()
    assert calc_diff(logits[valid].double(), ref[valid]) < 1e-3
    assert (logits[~valid] == float("-inf")).all()


def test_new_families_refuse_operands_on_two_devices():
    a, b = _randn(128, 512, dev=_on(0)), _randn(256, 512, dev=_on(0))
    with pytest.raises(RuntimeError, match=r"cuda:1.*cuda:0|cuda:0.*cuda:1"):
        deep_gemm.bf16_gemm_nt(a, b, torch.empty(128, 256, device=_on(1), dtype=BF16))
    with pytest.raises(RuntimeError, match=r"cuda:1.*cuda:0|cuda:0.*cuda:1"):
        deep_gemm.tf32_hc_prenorm_gemm(a, torch.randn(24, 512, device=_on(0)), torch.empty(128, 24, device=_on(1)),
                                       torch.empty(128, device=_on(0)))


def test_split_k_graph_captured_on_the_second_device_replays_there():
    dev = _on(1)
    a, b = _randn(128, 7168, dev=dev), _randn(2112, 7168, dev=dev)
    d = _poisoned(128, 2112, dev=dev)
    with torch.cuda.device(1):
        deep_gemm.bf16_gemm_nt(a, b, d)  # loads the kernel before capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            deep_gemm.bf16_gemm_nt(a, b, d)
    a.copy_(torch.randn_like(a))
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize(dev)
    assert calc_diff(d, a.float() @ b.float().t()) < 1e-5
