"""Upstream's packed-UE8M0 layout transforms (get_mn_major_tma_aligned_packed_ue8m0_tensor,
get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor): the CUDA kernels of
cuda/deep_gemm/impls/sf_pack_ue8m0.cuh and the CPU (torch) path, against a numpy reference
written here.

On the CPU: the signatures and exports, meta / fake shapes and strides, every bad input
refused with a clear error, the CPU path against the reference, the kernels compiled with
nvcc for sm_90a (no spills), and the kernels' code run as host C++ (one std::thread per CUDA
thread) against the reference. On an SM90 GPU: the kernels bitwise against the reference
and the CPU path for M in {4096, 4097, 8192}, K in {128, 7168, 7296}, 1/2/4 groups, psum
layouts with garbage in the gaps, k-grouped layouts with empty groups, and CUDA-graph replay.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import deep_gemm
from deep_gemm import _jit

PACK = "get_mn_major_tma_aligned_packed_ue8m0_tensor"
KPACK = "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"
pack = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor
kpack = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor

HAS_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")
CXX = shutil.which("g++") or shutil.which("c++")


# ---- the reference (numpy, independent of deep_gemm's code) ---------------------------


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def ref_storage(sf: torch.Tensor, held: np.ndarray | None = None) -> torch.Tensor:
    """int32 [groups, ceil(sf_k / 4), align(mn, 4)]: byte j of word (g, p, i) is the fp32
    exponent of sf[g, i, 4p + j] (0 past sf_k, in the pad rows and in rows not `held`)."""
    x = sf.detach().cpu()
    x = x if x.dim() == 3 else x[None]
    bits = x.numpy().astype(np.float32).view(np.uint32)
    exps = ((bits >> 23) & 0xFF).astype(np.uint8)
    g, mn, kb = exps.shape
    if held is not None:
        exps[:, ~held, :] = 0
    pk, pad = ceil_div(kb, 4), ceil_div(mn, 4) * 4
    buf = np.zeros((g, pad, 4 * pk), dtype=np.uint8)
    buf[:, :mn, :kb] = exps
    words = buf.view("<u4")  # [g, pad, pk]: bytes 4p .. 4p + 3, the first in the low byte
    return torch.from_numpy(np.ascontiguousarray(words.transpose(0, 2, 1)).view(np.int32))


def ref_pack(sf: torch.Tensor, held: np.ndarray | None = None) -> torch.Tensor:
    """The expected result: the [.., mn, packed_k] view of ref_storage."""
    storage = ref_storage(sf, held)
    out = storage.transpose(1, 2)[:, : sf.shape[-2], :]
    return out if sf.dim() == 3 else out[0]


def ref_psum_held(ends: list[int], mn: int, alignment: int) -> np.ndarray:
    rows = np.arange(mn)
    held = np.zeros(mn, dtype=bool)
    prev = 0
    for g, e in enumerate(ends):
        start = 0 if g == 0 else ceil_div(max(prev, 0), alignment) * alignment
        held |= (rows >= start) & (rows < max(e, 0))
        prev = e
    return held


def ref_k_grouped(sf: torch.Tensor, group_rows: list[int], packed_rows: int) -> torch.Tensor:
    """Each group's rows packed on their own (as the mn-major layout of sf_g^T), back to back,
    then zero rows up to packed_rows."""
    parts, row = [], 0
    for n in group_rows:
        sf_g = sf[row:row + n].cpu()
        parts.append(ref_storage(sf_g.T)[0] if n else torch.zeros(0, sf.shape[1], dtype=torch.int32))
        row += n
    out = torch.cat(parts) if parts else torch.zeros(0, sf.shape[1], dtype=torch.int32)
    assert out.shape[0] <= packed_rows
    return torch.cat([out, torch.zeros(packed_rows - out.shape[0], sf.shape[1], dtype=torch.int32)])


def pow2(*shape, device="cpu", zeros=False, gen=None) -> torch.Tensor:
    """Powers of two 2^e, e in [-40, 40] (UE8M0 bytes 87..167, so word bytes >= 128 occur);
    a few +0.0 with zeros=True."""
    e = torch.randint(-40, 41, shape, generator=gen)
    x = torch.exp2(e.float())
    if zeros:
        x[torch.rand(shape, generator=gen) < 0.05] = 0.0
    return x.to(device)


def psum_ends(group_rows: list[int], alignment: int) -> list[int]:
    """Cumulative ends of a psum layout whose group g starts at align(ends[g-1], alignment)."""
    ends, start = [], 0
    for n in group_rows:
        ends.append(start + n)
        start = ceil_div(start + n, alignment) * alignment
    return ends


def storage_of(out: torch.Tensor) -> torch.Tensor:
    """The whole [.., packed_k, align(mn, 4)] buffer behind a packed mn-major result."""
    pad = out.stride(-1)
    pk = out.shape[-1]
    if out.dim() == 2:
        return out.as_strided((1, pk, pad), (pk * pad, pad, 1))
    return out.as_strided((out.shape[0], pk, pad), (out.stride(0), pad, 1))


def assert_packed_equal(out: torch.Tensor, sf: torch.Tensor, held: np.ndarray | None = None) -> None:
    want = ref_pack(sf, held)
    mn, kb = sf.shape[-2], sf.shape[-1]
    pad = ceil_div(mn, 4) * 4
    assert out.dtype == torch.int32 and out.shape == want.shape
    pk = ceil_div(kb, 4)
    assert out.stride() == ((pk * pad, 1, pad) if sf.dim() == 3 else (1, pad))
    assert torch.equal(out.cpu(), want)
    assert torch.equal(storage_of(out).cpu(), ref_storage(sf, held))  # the pad rows are 0 too


# ---- signatures and exports -----------------------------------------------------------


def test_signatures_match_upstream():
    p = inspect.signature(pack).parameters
    assert list(p) == ["sf", "psum_layout"]
    assert p["sf"].default is inspect.Parameter.empty and p["psum_layout"].default is None
    k = inspect.signature(kpack).parameters
    assert list(k) == ["sf", "grouped_layout", "ks_cpu", "gran_k", "k_alignment", "use_psum_layout"]
    assert [k[n].default for n in ("sf", "grouped_layout", "ks_cpu", "gran_k")] == [inspect.Parameter.empty] * 4
    assert k["k_alignment"].default is None and k["use_psum_layout"].default is False
    assert all(x.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for x in (*p.values(), *k.values()))


def test_exported_everywhere():
    import deep_gemm.utils
    import deep_gemm.utils.layout

    for name, fn in ((PACK, pack), (KPACK, kpack)):
        assert name in deep_gemm.__all__ and name in deep_gemm._C.__all__
        assert getattr(deep_gemm, name) is fn and getattr(deep_gemm._C, name) is fn
        assert getattr(deep_gemm.utils, name) is fn and getattr(deep_gemm.utils.layout, name) is fn
        assert fn.__doc__ and "UE8M0" in fn.__doc__


def test_vllm_four_argument_call():
    """vLLM passes (sf, grouped_layout, ks_cpu, gran_k): k_alignment defaults to gran_k."""
    ks = [256, 0, 384]
    sf = pow2(sum(ks) // 128, 8)
    gl = torch.tensor(ks, dtype=torch.int32)
    out = kpack(sf, gl, ks, 128)
    assert torch.equal(out, kpack(sf, gl, ks, 128, 128, False))
    # k_alignment=gran_k accepts any whole number of K blocks; a larger one is checked.
    ks32 = [96, 32]
    out32 = kpack(pow2(4, 8), torch.tensor(ks32, dtype=torch.int32), ks32, 32)
    assert out32.shape == (2, 8)
    with pytest.raises(ValueError, match=rf"^deep_gemm.{KPACK}: ks_cpu\[0\] must be a multiple of .*k_alignment"):
        kpack(pow2(4, 8), torch.tensor(ks32, dtype=torch.int32), ks32, 32, 128)


# ---- the CPU path against the reference ---------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (4, 4), (130, 57), (3, 9, 1), (2, 66, 12), (1, 3, 5)])
@pytest.mark.parametrize("layout", ["k-major", "mn-major", "odd strides"])
def test_cpu_path_matches_reference(shape, layout):
    gen = torch.Generator().manual_seed(sum(shape))
    sf = pow2(*shape, zeros=True, gen=gen)
    if layout == "mn-major":
        sf = sf.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "odd strides":
        wide = torch.zeros(*shape[:-2], 2 * shape[-2] + 1, 3 * shape[-1])
        wide[..., 1::2, ::3] = sf
        sf = wide[..., 1::2, ::3]
    out = pack(sf)
    assert_packed_equal(out, sf)
    assert (out != 0).float().mean() > 0.5  # the data is not trivially zero


def test_cpu_packing_by_hand():
    """One word spelled out: K blocks 2^-127 (+0.0), 2^0, 2^1, 2^40 -> bytes 0, 127, 128, 167."""
    sf = torch.tensor([[0.0, 1.0, 2.0, 2.0 ** 40, 0.5]])
    out = pack(sf)
    assert out.shape == (1, 2) and out.stride() == (1, 4)
    assert int(out[0, 0]) & 0xFFFFFFFF == (167 << 24) | (128 << 16) | (127 << 8) | 0
    assert int(out[0, 1]) == 126  # 0.5; the three missing K blocks are 0


@pytest.mark.parametrize("alignment", [64, 128, 256])
def test_cpu_psum_layout_skips_the_gaps(alignment):
    torch.manual_seed(alignment)
    deep_gemm.set_mk_alignment_for_contiguous_layout(alignment)
    rows = [100, 0, 300, 1, alignment]
    ends = psum_ends(rows, alignment)
    mn = ends[-1] + 37  # rows past the last group: not held
    sf = pow2(mn, 9)
    held = ref_psum_held(ends, mn, alignment)
    assert held.sum() == sum(rows) and (~held).sum() > 0
    sf[torch.from_numpy(~held)] = float("nan")  # uninitialised gaps: neither read nor checked
    psum = torch.tensor(ends, dtype=torch.int32)
    for x in (sf, sf[None]):
        out = pack(x, psum)
        assert_packed_equal(out, x, held)
    # The alignment is the runtime's: a smaller one holds more rows (here some NaN ones).
    if alignment > 64:
        deep_gemm.set_mk_alignment_for_contiguous_layout(64)
        assert (ref_psum_held(ends, mn, 64) & ~held).any()
        with pytest.raises(ValueError, match=rf"^deep_gemm.{PACK}: sf: every scale must be a positive power of two"):
            pack(sf, psum)


def test_cpu_k_grouped_matches_reference():
    torch.manual_seed(3)
    for gran_k in (32, 128):
        for ks in ([0, 512, 384, 0, 128], [128], [1024, 0], [0]):
            n = [k // gran_k for k in ks]
            sf = pow2(sum(n), 12, zeros=True)
            gl = torch.tensor(ks, dtype=torch.int32)
            out = kpack(sf, gl, ks, gran_k, 128)
            packed = sum(ceil_div(x, 4) for x in n)
            assert out.shape == (packed, 12) and out.stride() == (12, 1) and out.dtype == torch.int32
            assert torch.equal(out, ref_k_grouped(sf, n, packed))
            # Each group alone equals the mn-major layout of its transpose (upstream's test).
            for g, part in enumerate(out.split([ceil_div(x, 4) for x in n])):
                start = sum(n[:g])
                assert torch.equal(part, pack(sf[start:start + n[g]].T).T)


def test_cpu_k_grouped_psum_sizes():
    torch.manual_seed(4)
    gran_k, k_alignment = 32, 128
    real = [500, 0, 128, 77, 256]  # real K sizes: not aligned, not whole K blocks
    n = [ceil_div(k, gran_k) for k in real]
    sf = pow2(sum(n), 8)
    gl = torch.tensor(psum_ends(real, k_alignment), dtype=torch.int32)
    exact = sum(ceil_div(x, 4) for x in n)
    want = ref_k_grouped(sf, n, exact)
    out = kpack(sf, gl, real, gran_k, k_alignment, use_psum_layout=True)
    assert torch.equal(out, want)
    aligned = [ceil_div(k, k_alignment) * k_alignment for k in real]
    for ks in (aligned, None, []):
        out = kpack(sf, gl, ks, gran_k, k_alignment, True)
        rows = (sf.shape[0] + 3 * len(real)) // 4 if not ks else sum(ceil_div(ceil_div(k, gran_k), 4) for k in ks)
        assert out.shape == (rows, 8) and rows >= exact
        assert torch.equal(out[:exact], want) and not out[exact:].any()


# ---- meta and fake shapes -------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(130, 7), (5, 1), (3, 6, 5), (4, 129, 1), (2, 4097, 57), (4096, 0), (0, 5)])
def test_meta_shapes_and_strides(shape):
    sf = torch.empty(*shape[:-1], shape[-1] + 1, device="meta")[..., :-1]
    out = pack(sf)
    mn, kb = shape[-2:]
    pad, pk = ceil_div(mn, 4) * 4, ceil_div(kb, 4)
    assert out.device.type == "meta" and out.dtype == torch.int32
    assert out.shape == (*shape[:-1], pk)
    if mn > 1 and pk > 1:
        assert out.stride() == ((pk * pad, 1, pad) if len(shape) == 3 else (1, pad))
    psum = torch.empty(3, dtype=torch.int32, device="meta")
    if len(shape) == 2 or shape[0] == 1:
        assert pack(sf, psum).shape == out.shape


def test_meta_k_grouped_shapes():
    gl = torch.empty(3, dtype=torch.int32, device="meta")
    sf = torch.empty(11, 4096, device="meta")
    out = kpack(sf, gl, [256, 0, 1152], 128)
    assert out.shape == (1 + 0 + 3, 4096) and out.stride() == (4096, 1) and out.dtype == torch.int32
    assert kpack(sf, gl, None, 128, 128, True).shape == ((11 + 9) // 4, 4096)
    assert kpack(sf, gl, [100, 0, 1000], 128, 256, True).shape == (1 + 0 + 2, 4096)


def _fake_cuda(mode, shape, dtype=torch.float32):
    return FakeTensor(mode, torch.empty(shape, dtype=dtype, device="meta"), torch.device("cuda", 0))


def test_fake_tensors_get_the_cpp_shapes():
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    sf, sf3, psum = _fake_cuda(mode, (130, 7)), _fake_cuda(mode, (2, 6, 5)), _fake_cuda(mode, (4,), torch.int32)
    ksf, gl = _fake_cuda(mode, (11, 64)), _fake_cuda(mode, (3,), torch.int32)
    with mode:
        out = pack(sf, psum)
        assert out.shape == (130, 2) and out.stride() == (1, 132) and out.device.type == "cuda"
        out = torch.ops.deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf3)
        assert out.shape == (2, 6, 2) and out.stride() == (16, 1, 8) and out.dtype == torch.int32
        out = kpack(ksf, gl, [256, 0, 1152], 128)
        assert out.shape == (4, 64) and out.device.type == "cuda"
        with pytest.raises(RuntimeError, match=rf"^deep_gemm.{KPACK}: grouped_layout must be a CUDA tensor"):
            torch.ops.deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
                ksf, torch.empty(3, dtype=torch.int32), [256, 0, 1152], 128, 128, False)


# ---- bad inputs ---------------------------------------------------------------------------


def _refused(exc_type, fn_name, arg, call):
    with pytest.raises(exc_type) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"deep_gemm.{fn_name}: "), msg
    assert arg in msg, (arg, msg)


def _pack_bad_cases():
    sf = pow2(8, 4)
    psum = torch.tensor([4, 8], dtype=torch.int32)
    meta = torch.empty(8, 4, device="meta")
    return [
        (TypeError, "sf", lambda: pack([[1.0]])),
        (TypeError, "sf", lambda: pack(None)),
        (TypeError, "psum_layout", lambda: pack(sf, [4, 8])),
        (TypeError, "psum_layout", lambda: pack(sf, 4)),
        (ValueError, "sf", lambda: pack(sf.half())),
        (ValueError, "sf", lambda: pack(sf.to(torch.int32))),
        (ValueError, "sf", lambda: pack(sf[0])),
        (ValueError, "sf", lambda: pack(sf[None, None])),
        (ValueError, "sf", lambda: pack(torch.tensor(1.0))),
        (ValueError, "psum_layout", lambda: pack(sf, psum.long())),
        (ValueError, "psum_layout", lambda: pack(sf, psum[None])),
        (ValueError, "psum_layout", lambda: pack(sf, psum[:0])),
        (ValueError, "psum_layout", lambda: pack(sf, torch.tensor([4, 0, 8, 0], dtype=torch.int32)[::2])),
        (ValueError, "psum_layout", lambda: pack(sf.expand(2, 8, 4), psum)),
        (ValueError, "psum_layout", lambda: pack(meta, psum)),  # another device
        (ValueError, "sf", lambda: pack(torch.tensor([[3.0, 1.0]]))),
        (ValueError, "sf", lambda: pack(torch.tensor([[-2.0]]))),
        (ValueError, "sf", lambda: pack(torch.tensor([[-0.0]]))),
        (ValueError, "sf", lambda: pack(torch.tensor([[2.0 ** -130]]))),  # subnormal: mantissa bits
        (ValueError, "sf", lambda: pack(torch.tensor([[float("nan")]]))),
        (ValueError, "sf", lambda: pack(torch.cat([sf[:3], torch.full((1, 4), 0.3), sf[4:]]),
                                        torch.tensor([8], dtype=torch.int32))),  # a held row, not a power of two
    ]


@pytest.mark.parametrize("case", range(len(_pack_bad_cases())))
def test_pack_refuses_bad_inputs(case):
    exc, arg, call = _pack_bad_cases()[case]
    _refused(exc, PACK, arg, call)


def _kpack_bad_cases():
    ks = [256, 0, 128]
    sf, gl = pow2(3, 8), torch.tensor(ks, dtype=torch.int32)
    meta_gl = torch.empty(3, dtype=torch.int32, device="meta")
    psum = torch.tensor(psum_ends(ks, 128), dtype=torch.int32)
    return [
        (TypeError, "sf", lambda: kpack(None, gl, ks, 128)),
        (TypeError, "grouped_layout", lambda: kpack(sf, ks, ks, 128)),
        (TypeError, "ks_cpu", lambda: kpack(sf, gl, 256, 128)),
        (TypeError, "ks_cpu", lambda: kpack(sf, gl, gl, 128)),
        (TypeError, "ks_cpu", lambda: kpack(sf, gl, [256.0, 0, 128], 128)),
        (TypeError, "ks_cpu", lambda: kpack(sf, gl, [True, 0, 128], 128)),
        (TypeError, "gran_k", lambda: kpack(sf, gl, ks, 128.0)),
        (TypeError, "gran_k", lambda: kpack(sf, gl, ks, True)),
        (TypeError, "gran_k", lambda: kpack(sf, gl, ks, None)),
        (TypeError, "k_alignment", lambda: kpack(sf, gl, ks, 128, "128")),
        (TypeError, "use_psum_layout", lambda: kpack(sf, gl, ks, 128, 128, 1)),
        (ValueError, "gran_k", lambda: kpack(sf, gl, ks, 0)),
        (ValueError, "gran_k", lambda: kpack(sf, gl, ks, -128)),
        (ValueError, "gran_k", lambda: kpack(sf, gl, ks, 2 ** 31)),
        (ValueError, "k_alignment", lambda: kpack(sf, gl, ks, 128, 0)),
        (ValueError, "k_alignment", lambda: kpack(sf, gl, ks, 128, -1)),
        (ValueError, "sf", lambda: kpack(sf.double(), gl, ks, 128)),
        (ValueError, "sf", lambda: kpack(sf[None], gl, ks, 128)),
        (ValueError, "sf", lambda: kpack(sf[0], gl, ks, 128)),
        (ValueError, "mn", lambda: kpack(pow2(3, 6), gl, ks, 128)),
        (ValueError, "mn", lambda: kpack(pow2(3, 4097), gl, ks, 128)),
        (ValueError, "grouped_layout", lambda: kpack(sf, gl.long(), ks, 128)),
        (ValueError, "grouped_layout", lambda: kpack(sf, gl[None], ks, 128)),
        (ValueError, "grouped_layout", lambda: kpack(sf, gl[:0], [], 128, 128, True)),
        (ValueError, "grouped_layout", lambda: kpack(sf, torch.tensor([256, 9, 0, 9, 128], dtype=torch.int32)[::2],
                                                     ks, 128)),
        (ValueError, "grouped_layout", lambda: kpack(sf, meta_gl, ks, 128)),  # another device
        (ValueError, "ks_cpu", lambda: kpack(sf, gl, None, 128)),
        (ValueError, "ks_cpu", lambda: kpack(sf, gl, [], 128)),
        (ValueError, "ks_cpu", lambda: kpack(sf, gl, [256, 128], 128)),
        (ValueError, "ks_cpu", lambda: kpack(sf, gl, [256, 0, 128, 0], 128)),
        (ValueError, "ks_cpu", lambda: kpack(sf, gl, [256, -128, 256], 128)),
        (ValueError, "ks_cpu", lambda: kpack(sf, gl, [2 ** 31, 0, 128], 128)),
        (ValueError, "ks_cpu", lambda: kpack(sf, gl, [200, 56, 128], 128)),
        (ValueError, "ks_cpu", lambda: kpack(pow2(6, 8), torch.tensor([64, 128], dtype=torch.int32), [64, 128], 32,
                                             128)),
        (ValueError, "sf.shape[0]", lambda: kpack(pow2(4, 8), gl, ks, 128)),
        (ValueError, "sf.shape[0]", lambda: kpack(pow2(2, 8), gl, ks, 128)),
        (ValueError, "grouped_layout", lambda: kpack(sf, torch.tensor([128, 128, 128], dtype=torch.int32), ks,
                                                     128)),  # values differ from ks_cpu
        (ValueError, "grouped_layout", lambda: kpack(sf, torch.tensor([256, 128, 384], dtype=torch.int32), None,
                                                     128, 128, True)),  # psum ends decrease
        (ValueError, "grouped_layout", lambda: kpack(sf, torch.tensor([-1, 256, 384], dtype=torch.int32), None,
                                                     128, 128, True)),
        (ValueError, "grouped_layout", lambda: kpack(sf, torch.tensor([256, 256, 1024], dtype=torch.int32), None,
                                                     128, 128, True)),  # more rows than sf
        (ValueError, "ks_cpu", lambda: kpack(sf, psum, [128, 0, 0], 128, 128, True)),  # output too small
        (ValueError, "sf", lambda: kpack(torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.tensor([128], dtype=torch.int32),
                                         [128], 128)),
    ]


@pytest.mark.parametrize("case", range(len(_kpack_bad_cases())))
def test_k_grouped_refuses_bad_inputs(case):
    exc, arg, call = _kpack_bad_cases()[case]
    _refused(exc, KPACK, arg, call)


def test_unused_rows_are_not_checked():
    """Rows past the groups (an upper-bound buffer) may hold anything."""
    ks = [128, 256]
    sf = pow2(5, 4)
    sf[3:] = float("nan")
    out = kpack(sf, torch.tensor(psum_ends(ks, 128), dtype=torch.int32), None, 128, 128, True)
    assert torch.equal(out[:2], ref_k_grouped(sf, [1, 2], 2))


def test_ops_keep_their_own_checks():
    """torch.ops called directly (no facade): the C++ checks refuse what would go out of bounds."""
    ops = torch.ops.deep_gemm
    gl = torch.empty(2, dtype=torch.int32, device="meta")
    sf = torch.empty(3, 8, device="meta")
    bad = [
        (lambda: ops.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, gl, [128, 128], 128, 128, False),
         "sf.shape[0] must be"),
        (lambda: ops.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(torch.empty(3, 6, device="meta"), gl,
                                                                            [128, 256], 128, 128, False), "mn"),
        (lambda: ops.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, gl, [], 128, 128, False), "ks_cpu"),
        (lambda: ops.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, gl, [128, 256], 0, 128, False),
         "gran_k"),
        (lambda: ops.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, gl, [128, 256, 0], 128, 128, False),
         "ks_cpu"),
        (lambda: ops.get_mn_major_tma_aligned_packed_ue8m0_tensor(torch.empty(2, 3, 4, device="meta"), gl),
         "psum_layout"),
        (lambda: ops.get_mn_major_tma_aligned_packed_ue8m0_tensor(torch.empty(3, 4), None), "CUDA"),
        (lambda: ops.get_mn_major_tma_aligned_packed_ue8m0_tensor(torch.empty(3, 4, 5, 6, device="meta"), None),
         "sf"),
    ]
    for call, word in bad:
        with pytest.raises(RuntimeError, match=r"^deep_gemm\.get_(k_grouped_)?mn_major_tma_aligned_packed") as info:
            call()
        assert word in str(info.value), str(info.value)


# ---- the kernels on the CPU: compiled with nvcc, and run as host C++ ------------------------------


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_kernels_compile_for_sm90_without_spills(tmp_path):
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    code = "import torch, deep_gemm\nprint('\\n'.join(torch.ops.deep_gemm.sf_pack_ue8m0_build()))\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    paths = out.stdout.strip().splitlines()[-2:]
    assert [Path(p).parent.name.split("-")[0] for p in paths] == ["sf_pack_ue8m0_mn_major", "sf_pack_ue8m0_k_grouped"]
    for p in paths:
        assert p.startswith(str(tmp_path)) and Path(p).read_bytes()[:4] == b"\x7fELF"


# The impls compiled as host C++: the CUDA built-ins they use are shimmed (blockIdx, blockDim,
# gridDim, threadIdx, __syncthreads as a barrier over the block's std::threads, __shared__ as
# static storage, __ldg, __float_as_uint, min). Every block of the given grid runs.
EMULATOR = r"""
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

struct Dim3 { uint32_t x, y, z; };
static thread_local Dim3 threadIdx;
static Dim3 blockIdx, blockDim, gridDim;

struct Barrier {
  std::mutex mu;
  std::condition_variable cv;
  unsigned n, waiting = 0, phase = 0;
  explicit Barrier(unsigned count) : n(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    const unsigned my_phase = phase;
    if (++waiting == n) { waiting = 0; ++phase; cv.notify_all(); return; }
    cv.wait(lock, [&] { return phase != my_phase; });
  }
};
static Barrier* g_barrier;

#define __device__
#define __forceinline__ inline
#define __shared__ static
using std::min;
inline void __syncthreads() { g_barrier->wait(); }
template <class T> T __ldg(const T* p) { return *p; }
inline uint32_t __float_as_uint(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
#include <deep_gemm/impls/sf_pack_ue8m0.cuh>

extern "C" void emulate_mn_major(uint32_t gx, uint32_t gy, uint32_t gz, const float* in, uint32_t* out,
                                 uint32_t groups, uint32_t mn, uint32_t sf_k, uint32_t packed_k, int64_t stride_g,
                                 int64_t stride_mn, int64_t stride_k, uint32_t out_ld, const int* psum,
                                 uint32_t num_psum, uint32_t m_alignment) {
  // No barrier in this kernel: the threads of a block may run one after the other.
  blockDim = {deep_gemm::sf_pack::kThreads, 1, 1};
  gridDim = {gx, gy, gz};
  for (uint32_t z = 0; z < gz; ++z)
    for (uint32_t y = 0; y < gy; ++y)
      for (uint32_t x = 0; x < gx; ++x) {
        blockIdx = {x, y, z};
        for (uint32_t t = 0; t < blockDim.x; ++t) {
          threadIdx = {t, 0, 0};
          deep_gemm::pack_ue8m0_mn_major_impl(in, out, groups, mn, sf_k, packed_k, stride_g, stride_mn, stride_k,
                                              out_ld, psum, num_psum, m_alignment);
        }
      }
}

extern "C" void emulate_k_grouped(uint32_t gx, uint32_t gy, const float* in, uint32_t* out, uint32_t mn,
                                  uint32_t sf_rows, uint32_t packed_rows, int64_t stride_k, int64_t stride_mn,
                                  const int* layout, uint32_t num_groups, uint32_t gran_k, uint32_t k_alignment,
                                  bool psum) {
  const uint32_t n = deep_gemm::sf_pack::kThreads;
  blockDim = {n, 1, 1};
  gridDim = {gx, gy, 1};
  for (uint32_t y = 0; y < gy; ++y)
    for (uint32_t x = 0; x < gx; ++x) {
      blockIdx = {x, y, 0};
      Barrier barrier(n);
      g_barrier = &barrier;
      std::vector<std::thread> threads;
      for (uint32_t t = 0; t < n; ++t)
        threads.emplace_back([&, t] {
          threadIdx = {t, 0, 0};
          deep_gemm::pack_ue8m0_k_grouped_impl(in, out, mn, sf_rows, packed_rows, stride_k, stride_mn, layout,
                                               num_groups, gran_k, k_alignment, psum);
        });
      for (auto& t : threads) t.join();
    }
}
"""

SENTINEL = 0x5A5A5A5A


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    if CXX is None:
        pytest.skip("needs a C++ compiler")
    d = tmp_path_factory.mktemp("sf_pack_emulator")
    (d / "emulate.cpp").write_text(EMULATOR)
    lib = d / "emulate.so"
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-I", _jit.INCLUDE_ROOT,
                            str(d / "emulate.cpp"), "-o", str(lib)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    so = ctypes.CDLL(str(lib))
    u32, i64, ptr = ctypes.c_uint32, ctypes.c_int64, ctypes.c_void_p
    so.emulate_mn_major.argtypes = [u32, u32, u32, ptr, ptr, u32, u32, u32, u32, i64, i64, i64, u32, ptr, u32, u32]
    so.emulate_k_grouped.argtypes = [u32, u32, ptr, ptr, u32, u32, u32, i64, i64, ptr, u32, u32, u32, ctypes.c_bool]
    return so


def emulate_pack(so, sf: torch.Tensor, psum: list[int] | None, alignment: int, gy: int, gz: int) -> torch.Tensor:
    x = sf if sf.dim() == 3 else sf[None]
    g, mn, kb = x.shape
    pk, pad = ceil_div(kb, 4), ceil_div(mn, 4) * 4
    out = torch.full((g, pk, pad), SENTINEL, dtype=torch.int32)
    table = torch.tensor(psum or [0], dtype=torch.int32)
    so.emulate_mn_major(ceil_div(pad, 256), gy, gz, x.data_ptr(), out.data_ptr(), g, mn, kb, pk, x.stride(0),
                        x.stride(1), x.stride(2), pad, table.data_ptr() if psum is not None else None,
                        len(psum or []), alignment)
    return out


def test_mn_major_kernel_on_the_host(emulator):
    rng = random.Random(11)
    gen = torch.Generator().manual_seed(11)
    cases = [(1, 1, 1), (1, 4, 4), (2, 5, 9), (3, 257, 3), (1, 300, 70), (2, 33, 1), (1, 7, 0)]
    cases += [(rng.randint(1, 3), rng.randint(1, 600), rng.randint(1, 80)) for _ in range(12)]
    for i, (g, mn, kb) in enumerate(cases):
        base = pow2(g, mn, kb, zeros=True, gen=gen)
        layout = i % 3
        if layout == 1:
            base = base.transpose(1, 2).contiguous().transpose(1, 2)
        elif layout == 2:
            wide = torch.zeros(g + 1, 2 * mn + 1, 3 * kb + 1)
            wide[1:, 1::2, : 3 * kb : 3] = base
            base = wide[1:, 1::2, : 3 * kb : 3]
        gy, gz = rng.choice([(1, 1), (2, 2), (65535, 65535)])  # grid-stride loops, and the launcher's caps
        gy = min(gy, max(1, ceil_div(ceil_div(kb, 4), 8)))
        gz = min(gz, g)
        out = emulate_pack(emulator, base, None, 1, gy, gz)
        assert torch.equal(out, ref_storage(base)), (i, g, mn, kb)
        if g == 1:  # psum layouts: random ends, negative and past mn too
            alignment = rng.choice([1, 4, 64, 128])
            ends = sorted(rng.randint(-5, mn + 5) for _ in range(rng.randint(1, 6)))
            if rng.random() < 0.3:
                ends = [rng.randint(-5, mn + 5) for _ in ends]  # not monotonic: still in bounds
            out = emulate_pack(emulator, base, ends, alignment, gy, 1)
            assert torch.equal(out, ref_storage(base, ref_psum_held(ends, mn, alignment))), (i, ends, alignment)


def emulate_k_grouped(so, sf, layout: list[int], packed_rows: int, gran_k: int, k_alignment: int, psum: bool,
                      gy: int) -> torch.Tensor:
    sf_rows, mn = sf.shape
    out = torch.full((packed_rows, mn), SENTINEL, dtype=torch.int32)
    table = torch.tensor(layout, dtype=torch.int32)
    so.emulate_k_grouped(ceil_div(mn, 1024), min(gy, max(packed_rows, 1)), sf.data_ptr(), out.data_ptr(), mn,
                         sf_rows, packed_rows, sf.stride(0), sf.stride(1), table.data_ptr(), len(layout), gran_k,
                         k_alignment, psum)
    return out


def test_k_grouped_kernel_on_the_host(emulator):
    rng = random.Random(12)
    gen = torch.Generator().manual_seed(12)
    for i in range(12):
        gran_k = rng.choice([32, 128])
        k_alignment = rng.choice([128, 256])
        # 300 groups (mostly empty): the layout is read in several chunks of 256.
        groups = 300 if i >= 10 else rng.choice([1, 2, 4, 7])
        full = 0.05 if groups == 300 else 0.7
        mn = rng.choice([4, 8, 1028]) if groups < 300 else 8
        psum = i % 2 == 1
        if psum:
            real = [rng.randint(1, 700) if rng.random() < full or g == groups - 1 else 0 for g in range(groups)]
            n = [ceil_div(k, gran_k) for k in real]
            layout = psum_ends(real, k_alignment)
        else:
            ks = [k_alignment * rng.randint(1, 4) if rng.random() < full or g == groups - 1 else 0
                  for g in range(groups)]
            n = [k // gran_k for k in ks]
            layout = ks
        sf = pow2(sum(n), mn, zeros=True, gen=gen)
        if i % 4 == 2:
            sf = sf.T.contiguous().T  # column-major input
        exact = sum(ceil_div(x, 4) for x in n)
        packed_rows = exact + rng.choice([0, 0, 3])  # extra rows (an upper bound) stay 0
        gy = rng.choice([1, 3, 16])  # the grid-stride loop over packed rows
        out = emulate_k_grouped(emulator, sf, layout, packed_rows, gran_k, k_alignment, psum, gy)
        assert torch.equal(out, ref_k_grouped(sf, n, packed_rows)), (i, groups, mn, psum)
    # Inconsistent layouts (sizes past sf's rows, past the output, negative): in bounds, rows
    # past sf read as 0 and packed rows past the output are not written.
    sf = pow2(6, 8, gen=gen)
    for layout, psum in (([2048, 4096], False), ([-128, 512, 100], True), ([128, -5, 4096], False)):
        out = emulate_k_grouped(emulator, sf, layout, 3, 128, 128, psum, 2)
        rows = [ceil_div(max(k, 0), 128) for k in layout] if not psum else None
        if rows is not None:
            padded = torch.cat([sf, torch.zeros(100, 8)])  # the kernel reads rows >= 6 as 0
            assert torch.equal(out, ref_k_grouped(padded, rows, sum(ceil_div(r, 4) for r in rows))[:3])
        assert not (out == SENTINEL).any()


# ---- GPU ------------------------------------------------------------------------------------


def _gpu_sf(g, mn, kb, mn_major, seed):
    gen = torch.Generator().manual_seed(seed)
    sf = pow2(g, mn, kb, zeros=True, gen=gen)
    sf = sf if g > 1 else sf[0]
    sf = sf.cuda()
    return sf.transpose(-1, -2).contiguous().transpose(-1, -2) if mn_major else sf


@pytest.mark.gpu
@pytest.mark.parametrize("mn", [4096, 4097, 8192])
@pytest.mark.parametrize("k", [128, 7168, 7296])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_gpu_pack_matches_reference(mn, k, groups):
    kb = ceil_div(k, 128)
    for mn_major in (False, True):
        sf = _gpu_sf(groups, mn, kb, mn_major, mn + k + groups)
        out = pack(sf)
        assert out.is_cuda
        assert_packed_equal(out, sf)
        assert (out != 0).float().mean() > 0.5
        assert torch.equal(out.cpu(), pack(sf.cpu()))  # the CPU path gives the same words


@pytest.mark.gpu
@pytest.mark.parametrize("alignment", [64, 128])
def test_gpu_psum_layout(alignment):
    deep_gemm.set_mk_alignment_for_contiguous_layout(alignment)
    torch.manual_seed(alignment)
    for rows in ([1000, 0, 3000, 1, 4096], [4096], [0, 0, 77], [2048] * 4):
        ends = psum_ends(rows, alignment)
        mn = ends[-1] + 100
        sf = pow2(mn, 57).cuda()
        held = ref_psum_held(ends, mn, alignment)
        sf[torch.from_numpy(~held).cuda()] = 3.0  # gap garbage: not a power of two, never read
        psum = torch.tensor(ends, dtype=torch.int32, device="cuda")
        for x in (sf, sf[None]):
            out = pack(x, psum)
            assert_packed_equal(out, x, held)
            assert torch.equal(out.cpu(), pack(x.cpu(), psum.cpu()))


@pytest.mark.gpu
@pytest.mark.parametrize("mn", [4096, 8192])
@pytest.mark.parametrize("gran_k", [32, 128])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_gpu_k_grouped_matches_reference(mn, gran_k, groups):
    rng = random.Random(mn + gran_k + groups)
    k_alignment = 128
    for ks in ([k_alignment * rng.randint(1, 24) for _ in range(groups)],
               [0] + [k_alignment * rng.randint(1, 24) for _ in range(groups)] + [0]):  # empty groups
        n = [k // gran_k for k in ks]
        sf = pow2(sum(n), mn, zeros=True).cuda()
        gl = torch.tensor(ks, dtype=torch.int32, device="cuda")
        packed = sum(ceil_div(x, 4) for x in n)
        out = kpack(sf, gl, ks, gran_k, k_alignment)
        assert out.is_cuda and out.shape == (packed, mn) and out.stride() == (mn, 1) and out.dtype == torch.int32
        want = ref_k_grouped(sf, n, packed)
        assert torch.equal(out.cpu(), want) and (want != 0).float().mean() > 0.5
        assert torch.equal(out.cpu(), kpack(sf.cpu(), gl.cpu(), ks, gran_k, k_alignment))
        # psum form of the same groups, with real (unaligned) K sizes and compact scales.
        real = [max(k - rng.choice([0, gran_k // 2, 1]), 0) for k in ks]
        nr = [ceil_div(k, gran_k) for k in real]
        sfr = pow2(sum(nr), mn).cuda()
        glr = torch.tensor(psum_ends(real, k_alignment), dtype=torch.int32, device="cuda")
        exact = sum(ceil_div(x, 4) for x in nr)
        wantr = ref_k_grouped(sfr, nr, exact)
        assert torch.equal(kpack(sfr, glr, real, gran_k, k_alignment, True).cpu(), wantr)
        for sizes in (ks, None, []):  # aligned K sizes / no host sizes: upper bounds, zeros past the groups
            got = kpack(sfr, glr, sizes, gran_k, k_alignment, True).cpu()
            assert got.shape[0] >= exact and torch.equal(got[:exact], wantr) and not got[exact:].any()
            assert torch.equal(got, kpack(sfr.cpu(), glr.cpu(), sizes, gran_k, k_alignment, True))


@pytest.mark.gpu
def test_gpu_k_grouped_refuses_mn_4097():
    gl = torch.tensor([128], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match=rf"^deep_gemm.{KPACK}: sf.shape\[1\] \(mn\) must be a multiple of 4"):
        kpack(pow2(1, 4097).cuda(), gl, [128], 128)


@pytest.mark.gpu
def test_gpu_values_are_not_read_on_the_host():
    """On CUDA a non-power-of-two is packed by its exponent bits (no sync, no error); the CPU refuses it."""
    sf = torch.tensor([[3.0, -2.0, 0.75, 1.0]], device="cuda")
    out = pack(sf)
    assert int(out[0, 0]) & 0xFFFFFFFF == (127 << 24) | (126 << 16) | (128 << 8) | 128
    with pytest.raises(ValueError, match=rf"^deep_gemm.{PACK}: sf: every scale"):
        pack(sf.cpu())


@pytest.mark.gpu
def test_gpu_empty_shapes():
    assert pack(torch.empty(0, 5, device="cuda")).shape == (0, 2)
    assert pack(torch.empty(4096, 0, device="cuda")).shape == (4096, 0)
    out = kpack(torch.empty(0, 64, device="cuda"), torch.zeros(2, dtype=torch.int32, device="cuda"), [0, 0], 128)
    assert out.shape == (0, 64)


@pytest.mark.gpu
def test_gpu_cuda_graph_replay():
    """Neither op syncs or reads device memory on the host: both capture and replay."""
    ks = [256, 0, 512]
    sf = pow2(4096, 57).cuda()
    ksf = pow2(6, 4096).cuda()
    gl = torch.tensor(ks, dtype=torch.int32, device="cuda")
    psum = torch.tensor([1000, 2048 + 500], dtype=torch.int32, device="cuda")
    pack(sf), kpack(ksf, gl, ks, 128), pack(sf, psum)  # load the kernels first
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = (pack(sf), kpack(ksf, gl, ks, 128), pack(sf, psum))
    sf.copy_(pow2(4096, 57))
    ksf.copy_(pow2(6, 4096))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(outs[0].cpu(), ref_pack(sf))
    assert torch.equal(outs[1].cpu(), ref_k_grouped(ksf, [2, 0, 4], 2))
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    assert torch.equal(outs[2].cpu(), ref_pack(sf, ref_psum_held([1000, 2548], 4096, alignment)))
