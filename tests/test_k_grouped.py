"""k-grouped FP8 GEMMs (MoE weight gradients; API.md P1): argument validation on CPU and meta
tensors (no GPU needed), kernel compilation without spills, and correctness on an SM90 GPU
against a float reference per group on fresh random data, the output poisoned (NaN) first
wherever the kernel must write it."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys

import pytest
import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_channel_cast_to_fp8

FP8 = torch.float8_e4m3fn
I32 = torch.int32

nt = deep_gemm.k_grouped_fp8_gemm_nt_contiguous
tn = deep_gemm.k_grouped_fp8_gemm_tn_contiguous

HAS_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")


# ---- validation (CI) ---------------------------------------------------------------


def _operands(device, m=256, n=384, ks=(256, 0, 128), layout="nt"):
    g, sum_k = len(ks), sum(ks)
    if layout == "nt":
        a = torch.empty(sum_k * m, dtype=FP8, device=device)
        b = torch.empty(sum_k * n, dtype=FP8, device=device)
    else:
        a = torch.empty(sum_k, m, dtype=FP8, device=device)
        b = torch.empty(sum_k, n, dtype=FP8, device=device)
    sfa = torch.empty(sum_k // 128, m, device=device)
    sfb = torch.empty(sum_k // 128, n, device=device)
    d = torch.empty(g, m, n, device=device)
    ks_tensor = torch.empty(g, dtype=I32, device=device)
    return a, sfa, b, sfb, d, list(ks), ks_tensor


def _call(fn=nt, **over):
    def run(a, sfa, b, sfb, d, ks, kt):
        args = dict(a=(a, sfa), b=(b, sfb), d=d, ks_cpu=ks, grouped_layout=kt)
        args.update({k: (v(a, sfa, b, sfb, d, ks, kt) if callable(v) else v) for k, v in over.items()})
        fn(**args)
    return run


BAD = {
    "ks not multiple of 128": (_call(ks_cpu=[256, 0, 100]), r"ks\[2\] must be a non-negative multiple of 128"),
    "ks negative": (_call(ks_cpu=[256, 128, -128]), r"ks\[2\] must be a non-negative multiple of 128"),
    "ks count vs d": (_call(ks_cpu=[256, 128]), "ks has 2 entries but d.shape\\[0\\] \\(the number of groups\\) is 3"),
    "ks as a tensor": (_call(ks_cpu=lambda *t: torch.tensor(t[5])), "ks_cpu must be a Python list of ints"),
    "ks entry type": (_call(ks_cpu=[256, 0, 128.0]), r"ks_cpu\[2\] must be an int"),
    "ks_tensor length": (_call(grouped_layout=lambda *t: t[6][:2]), r"ks_tensor.shape\[0\] must be 3"),
    "ks_tensor dtype": (_call(grouped_layout=lambda *t: t[6].long()), "ks_tensor must be torch.int32, got torch.int64"),
    "ks_tensor on cpu": (_call(grouped_layout=lambda *t: torch.zeros(3, dtype=I32)), "ks_tensor .*must live on the GPU"),
    "ks_tensor 2-D": (_call(grouped_layout=lambda *t: t[6].view(3, 1)), "ks_tensor must be 1-D"),
    "a dtype": (_call(a=lambda *t: (t[0].view(torch.uint8), t[1])), "a must be torch.float8_e4m3fn"),
    "b dtype": (_call(b=lambda *t: (t[2].view(torch.int8), t[3])), "b must be torch.float8_e4m3fn"),
    "a numel": (_call(a=lambda *t: (t[0][: -256], t[1])), r"a must hold sum\(ks\) \* M = 384 \* 256"),
    "b numel": (_call(b=lambda *t: (t[2][: -384], t[3])), r"b must hold sum\(ks\) \* N = 384 \* 384"),
    "sfa dtype": (_call(a=lambda *t: (t[0], t[1].to(torch.bfloat16))), "sfa must be torch.float32"),
    "sfa rows": (_call(a=lambda *t: (t[0], t[1][:2])), r"sfa.shape\[0\] must be 3 \(sum\(ks\) / 128"),
    "sfa cols": (_call(a=lambda *t: (t[0], t[1][:, :128])), r"sfa.shape\[1\] must be 256"),
    "sfb shape": (_call(b=lambda *t: (t[2], t[3][:, :128])), r"sfb.shape\[1\] must be 384"),
    "sfb rank": (_call(b=lambda *t: (t[2], t[3].view(-1))), "sfb must be 2-D"),
    "d dtype": (_call(d=lambda *t: t[4].to(torch.bfloat16)), "d must be torch.float32"),
    "d rank": (_call(d=lambda *t: t[4].view(-1, 384)), "d must be 3-D"),
    "d not contiguous": (_call(d=lambda *t: t[4].transpose(1, 2).contiguous().transpose(1, 2)),
                         "d must be contiguous"),
    "n odd": (_call(b=lambda *t: (t[2][: 384 * 383], t[3][:, :383]), d=lambda *t: t[4][:, :, :383].contiguous()),
              "N \\(d.shape\\[2\\]\\) must be even"),
    "c shape": (_call(c=lambda *t: t[4][:2].clone()), r"c.shape\[0\] must be 3"),
    "c dtype": (_call(c=lambda *t: t[4].to(torch.bfloat16)), "c must be torch.float32"),
    "c not contiguous": (_call(c=lambda *t: t[4].transpose(1, 2).contiguous().transpose(1, 2)), "c must be contiguous"),
    "c not a tensor": (_call(c=3.0), "c must be a tensor or None"),
    "recipe 1d2d": (_call(recipe=(1, 128, 128)), r"support recipe \(1, 1, 128\) only"),
    "recipe none": (_call(recipe=None), r"support recipe \(1, 1, 128\) only"),
    "psum layout": (_call(use_psum_layout=True), "use_psum_layout=True is not supported on SM90"),
    "both spellings": (_call(ks=[256, 0, 128]), "pass ks_cpu or its alias ks, not both"),
    "both layout spellings": (_call(ks_tensor=lambda *t: t[6]), "pass grouped_layout or its alias ks_tensor, not both"),
    "not a pair": (_call(a=lambda *t: t[0]), "a must be a pair"),
    "compiled dims": (_call(compiled_dims="mx"), "compiled_dims may only contain"),
}

TN_BAD = {
    "tn a shape": (_call(tn, a=lambda *t: (t[0][:256], t[1])), r"a.shape\[0\] must be 384"),
    "tn a cols": (_call(tn, a=lambda *t: (t[0][:, :128], t[1])), r"a.shape\[1\] must be 256"),
    "tn a rank": (_call(tn, a=lambda *t: (t[0].view(-1), t[1])), "a must be 2-D"),
    "tn a not contiguous": (_call(tn, a=lambda *t: (t[0].t().contiguous().t(), t[1])), "a must be contiguous"),
    "tn b rows": (_call(tn, b=lambda *t: (t[2][:128], t[3])), r"b.shape\[0\] must be 384"),
}


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_nt_bad_input_raises_clearly(case, device):
    fn, pattern = BAD[case]
    if device == "cpu":
        pattern += "|ks_tensor .*must live on the GPU"  # with every operand on the CPU it may fire first
    with pytest.raises((RuntimeError, ValueError, TypeError), match=pattern):
        fn(*_operands(device))


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("case", sorted(TN_BAD))
def test_tn_bad_input_raises_clearly(case, device):
    fn, pattern = TN_BAD[case]
    if device == "cpu":
        pattern += "|ks_tensor .*must live on the GPU"
    with pytest.raises((RuntimeError, ValueError, TypeError), match=pattern):
        fn(*_operands(device, layout="tn"))


def test_missing_group_arguments():
    a, sfa, b, sfb, d, ks, kt = _operands("meta")
    with pytest.raises(TypeError, match="missing ks_cpu"):
        nt((a, sfa), (b, sfb), d, grouped_layout=kt)
    with pytest.raises(TypeError, match="missing grouped_layout"):
        nt((a, sfa), (b, sfb), d, ks)


def test_cpu_operands_rejected():
    a, sfa, b, sfb, d, ks, kt = _operands("cpu")
    with pytest.raises(RuntimeError, match="must live on the GPU|must be a CUDA tensor"):
        nt((a, sfa), (b, sfb), d, ks, kt)
    # Everything on the meta device but one operand on the CPU: named.
    a, sfa, b, sfb, d, ks, kt = _operands("meta")
    with pytest.raises(RuntimeError, match="sfb is not a meta tensor"):
        nt((a, sfa), (b, torch.zeros(sfb.shape)), d, ks, kt)
    with pytest.raises(RuntimeError, match="c is not a meta tensor"):
        nt((a, sfa), (b, sfb), d, ks, kt, c=torch.zeros(d.shape))


def test_output_overlapping_an_input_rejected():
    # Real (CPU) memory: the overlap checks run before the device check.
    m, n, ks = 256, 384, [256, 128]
    kt = torch.empty(2, dtype=I32, device="meta")
    buf = torch.empty(2 * m * n + 16)
    d = buf[: 2 * m * n].view(2, m, n)
    a = buf.view(torch.uint8).view(FP8)[: sum(ks) * m]  # a aliases d's bytes
    b = torch.empty(sum(ks) * n, dtype=FP8)
    sfa, sfb = torch.empty(3, m), torch.empty(3, n)
    with pytest.raises(RuntimeError, match="d overlaps a in memory"):
        nt((a, sfa), (b, sfb), d, ks, kt)
    with pytest.raises(RuntimeError, match="d overlaps sfb in memory"):
        nt((torch.empty_like(a), sfa), (b, buf[4: 4 + 3 * n].view(3, n)), d, ks, kt)
    c = buf[4: 4 + 2 * m * n].view(2, m, n)  # overlaps d without being d
    with pytest.raises(RuntimeError, match="d overlaps c in memory"):
        nt((torch.empty_like(a), sfa), (b, sfb), d, ks, kt, c=c)


def test_meta_runs_check_shapes_without_launching():
    # nt and tn, both argument spellings, c as d / separate / None, an empty group and an
    # all-empty call, more groups than one launch holds, M and N not multiples of 4.
    for m, n, ks in [(7168, 2048, [4096, 0, 3968, 4224]), (4096, 7168, [128] * 40), (130, 258, [0, 0]),
                     (2112, 4096, [0, 256, 0])]:
        a, sfa, b, sfb, d, ks, kt = _operands("meta", m, n, ks)
        nt((a, sfa), (b, sfb), d, ks, kt)
        nt((a, sfa), (b, sfb), d, ks, kt, c=d)
        nt((a, sfa), (b, sfb), d, ks=ks, ks_tensor=kt, c=torch.empty_like(d), recipe=(1, 1, 128), compiled_dims="")
        nt((a, sfa), (b, sfb), d, tuple(ks), kt, None, (1, 1, 128), "mn", False)
        a, sfa, b, sfb, d, ks, kt = _operands("meta", m, n, ks, layout="tn")
        tn((a, sfa), (b, sfb), d, ks, kt, c=d)
        tn((a, sfa), (b, sfb), d, ks_cpu=ks, grouped_layout=kt)
    # No groups at all.
    a, sfa, b, sfb, d, ks, kt = _operands("meta", 64, 64, [])
    nt((a, sfa), (b, sfb), d, ks, kt)


def test_exports_and_signature():
    import inspect

    for name in ("k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous"):
        assert name in deep_gemm._C.__all__ and hasattr(deep_gemm, name)
        params = list(inspect.signature(getattr(deep_gemm, name)).parameters)
        assert params[:9] == ["a", "b", "d", "ks_cpu", "grouped_layout", "c", "recipe", "compiled_dims",
                              "use_psum_layout"]
        sig = inspect.signature(getattr(deep_gemm, name))
        assert sig.parameters["recipe"].default == (1, 1, 128) and sig.parameters["compiled_dims"].default == "mn"


def test_opcheck_on_meta():
    for layout, op in (("nt", torch.ops.deep_gemm.k_grouped_fp8_gemm_nt_contiguous.default),
                       ("tn", torch.ops.deep_gemm.k_grouped_fp8_gemm_tn_contiguous.default)):
        a, sfa, b, sfb, d, ks, kt = _operands("meta", 256, 384, [256, 0, 128], layout=layout)
        torch.library.opcheck(op, (a, sfa, b, sfb, d, ks, kt, None, "mn"))
        torch.library.opcheck(op, (a, sfa, b, sfb, d, ks, kt, d.clone(), "mn"))


def test_build_op_validates():
    build = torch.ops.deep_gemm.k_grouped_fp8_gemm_build
    with pytest.raises(RuntimeError, match="non-negative multiple of 128"):
        build(256, 256, 100, 2, 132, "mn")
    with pytest.raises(RuntimeError, match="num_groups must be > 0"):
        build(256, 256, 256, 0, 132, "mn")
    with pytest.raises(RuntimeError, match="num_sms must be in"):
        build(256, 256, 256, 2, 0, "mn")


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc to compile")
def test_kernels_compile_without_spills(tmp_path):
    """The k-grouped kernels the heuristics pick over a grid of wgrad shapes (and the tn
    layout kernel) compile with DG_JIT_PTXAS_CHECK=1: no spills, no stack, no local memory."""
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    code = (
        "import torch, deep_gemm\n"
        "shapes = [(7168, 2048, 4096, 8), (7168, 4096, 4096, 4), (4096, 7168, 2048, 16), (2112, 4096, 1024, 4),\n"
        "          (7168, 2048, 512, 32), (256, 384, 128, 40), (130, 258, 256, 5), (64, 64, 0, 3)]\n"
        "for i, (m, n, k, g) in enumerate(shapes):\n"
        "    for dims in ('mn', '') if i < 2 else ('mn',):\n"
        "        print(torch.ops.deep_gemm.k_grouped_fp8_gemm_build(m, n, k, g, 132, dims, i == 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 10
    for line in lines:
        name, path = line.split("\t")
        assert name.startswith("sm90_fp8_gemm_1d1d_kg_") and path.startswith(str(tmp_path))
        with open(path, "rb") as f:
            assert f.read(4) == b"\x7fELF"
    # The layout kernel of the tn form was built too.
    assert any("k_grouped_transpose" in p for p in os.listdir(tmp_path / "cache"))


def _has_nvrtc():
    from deep_gemm import _jit

    return bool(_jit.find_wheel_nvrtc()[0])


@pytest.mark.skipif(not _has_nvrtc(), reason="needs the nvidia-cuda-nvrtc wheel")
def test_nvrtc_compiles_without_spills(tmp_path):
    """NVRTC declares CUtensorMap itself (64-byte aligned, cuda.h says 128): the group table
    must still compile to the same member offsets, without spills."""
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1", DG_JIT_USE_NVRTC="1")
    code = ("import torch, deep_gemm\n"
            "print(torch.ops.deep_gemm.k_grouped_fp8_gemm_build(7168, 2048, 4096, 8, 132, 'mn', True))\n"
            "print(deep_gemm.get_jit().backend)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    kernel_line, backend = out.stdout.strip().splitlines()[-2:]
    assert backend == "nvrtc" and kernel_line.startswith("sm90_fp8_gemm_1d1d_kg_")


# ---- correctness (GPU) -------------------------------------------------------------


def _draw_ks(g, mean_k, seed, empty=(1,)):
    rng = random.Random(seed)
    ks = [max(128, int(mean_k * rng.uniform(0.5, 1.5)) // 128 * 128) for _ in range(g)]
    for i in empty:
        ks[i] = 0
    return ks


def _nt_layout(x, ks):
    """[sum_k, mn] fp8 (tokens as rows) -> flat nt layout (group g's K-major [mn, k_g] at mn * o_g)."""
    parts, start = [], 0
    for k in ks:
        parts.append(x[start: start + k].view(torch.uint8).t().contiguous().flatten())
        start += k
    if not parts:
        return torch.empty(0, dtype=x.dtype, device=x.device)
    return torch.cat(parts).view(x.dtype)


class Problem:
    """Fresh random data of one k-grouped problem, its nt and tn operands and the float
    reference of every group's product (without c)."""

    def __init__(self, m, n, ks, seed=0):
        torch.manual_seed(seed)
        self.m, self.n, self.ks, self.g = m, n, list(ks), len(ks)
        sum_k = sum(ks)
        x_a = torch.randn(sum_k, m, device="cuda", dtype=torch.bfloat16)
        x_b = torch.randn(sum_k, n, device="cuda", dtype=torch.bfloat16)
        self.a_tn, self.sfa = per_channel_cast_to_fp8(x_a, use_ue8m0=False)  # [sum_k, m], [sum_k/128, m]
        self.b_tn, self.sfb = per_channel_cast_to_fp8(x_b, use_ue8m0=False)
        self.a_nt, self.b_nt = _nt_layout(self.a_tn, ks), _nt_layout(self.b_tn, ks)
        self.ks_tensor = torch.tensor(ks, dtype=I32, device="cuda")
        a_deq = self.a_tn.float() * self.sfa.repeat_interleave(128, dim=0)
        b_deq = self.b_tn.float() * self.sfb.repeat_interleave(128, dim=0)
        self.products, start = [], 0
        for k in ks:
            self.products.append(a_deq[start: start + k].t() @ b_deq[start: start + k])
            start += k

    def nt(self, d, c=None, **kw):
        nt((self.a_nt, self.sfa), (self.b_nt, self.sfb), d, self.ks, self.ks_tensor, c=c, **kw)

    def tn(self, d, c=None, **kw):
        tn((self.a_tn, self.sfa), (self.b_tn, self.sfb), d, self.ks, self.ks_tensor, c=c, **kw)

    def check(self, d, c):
        """d[g] == c[g] + product[g] (c None: the product), calc_diff < 1e-3 per group; an
        empty group is exactly c[g] (or zeros)."""
        assert not d.isnan().any(), "some outputs were not written"
        for grp, (k, prod) in enumerate(zip(self.ks, self.products, strict=True)):
            base = c[grp] if c is not None else torch.zeros_like(d[grp])
            if k == 0:
                assert torch.equal(d[grp], base), f"empty group {grp} is not c[g] (or zeros)"
                continue
            diff = calc_diff(d[grp], base + prod)
            assert diff < 1e-3, f"group {grp} (k={k}): calc_diff {diff:.2e}"


@pytest.fixture(autouse=True)
def _exact_fp32_matmul():
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


# (groups, M, N, mean tokens per group): the wgrad shapes of DeepSeek-style experts.
SHAPES = [(4, 4096, 7168, 2048), (8, 7168, 2048, 2048), (16, 2112, 4096, 1024)]


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["c_is_d", "c_separate", "no_c"])
@pytest.mark.parametrize("g,m,n,mean_k", SHAPES)
def test_nt_matches_reference(g, m, n, mean_k, mode):
    ks = _draw_ks(g, mean_k, seed=g * 31 + m)
    p = Problem(m, n, ks, seed=g + m + n)
    c = torch.randn(g, m, n, device="cuda") * 4
    if mode == "c_is_d":
        d = c.clone()
        p.nt(d, c=d)  # in-place accumulation, the usual wgrad form
    else:
        d = torch.full((g, m, n), float("nan"), device="cuda")
        p.nt(d, c=c if mode == "c_separate" else None)
    torch.cuda.synchronize()
    p.check(d, c if mode != "no_c" else None)


@pytest.mark.gpu
@pytest.mark.parametrize("g,m,n,mean_k", SHAPES)
def test_tn_matches_reference_and_nt(g, m, n, mean_k):
    ks = _draw_ks(g, mean_k, seed=g * 7 + n, empty=(0,))
    p = Problem(m, n, ks, seed=g * 3 + n)
    c = torch.randn(g, m, n, device="cuda")
    d_tn = torch.full((g, m, n), float("nan"), device="cuda")
    p.tn(d_tn, c=c)
    d_nt = torch.full((g, m, n), float("nan"), device="cuda")
    p.nt(d_nt, c=c)
    torch.cuda.synchronize()
    p.check(d_tn, c)
    # The tn form is the layout kernel plus the very same nt kernel: bitwise equal.
    assert torch.equal(d_tn, d_nt)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_more_groups_than_one_launch(layout):
    # 70 groups: three launches (32 + 32 + 6) with empty groups in each, c separate and None.
    ks = _draw_ks(70, 384, seed=5, empty=(0, 13, 33, 64, 69))
    p = Problem(384, 512, ks, seed=9)
    c = torch.randn(70, 384, 512, device="cuda")
    for cc in (c, None):
        d = torch.full((70, 384, 512), float("nan"), device="cuda")
        getattr(p, layout)(d, c=cc)
        torch.cuda.synchronize()
        p.check(d, cc)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n", [(130, 258), (200, 96), (64, 2)])
def test_odd_shapes_and_scale_conversion(m, n):
    # M / N not multiples of 4 (the scales are converted on the GPU), M not a multiple of 16
    # (the tn layout kernel's byte path), tiles that overhang M and N.
    ks = [256, 0, 128, 384, 128]
    p = Problem(m, n, ks, seed=m + n)
    c = torch.randn(len(ks), m, n, device="cuda")
    for form in ("nt", "tn"):
        d = torch.full((len(ks), m, n), float("nan"), device="cuda")
        getattr(p, form)(d, c=c)
        torch.cuda.synchronize()
        p.check(d, c)


@pytest.mark.gpu
def test_all_groups_empty_writes_c_or_zeros():
    m, n, ks = 256, 512, [0, 0, 0]
    a = torch.empty(0, dtype=FP8, device="cuda")
    sf = torch.empty(0, m, device="cuda")
    sfb = torch.empty(0, n, device="cuda")
    kt = torch.zeros(3, dtype=I32, device="cuda")
    c = torch.randn(3, m, n, device="cuda")
    d = torch.full((3, m, n), float("nan"), device="cuda")
    nt((a, sf), (a, sfb), d, ks, kt, c=c)
    torch.cuda.synchronize()
    assert torch.equal(d, c)
    d.fill_(float("nan"))
    nt((a, sf), (a, sfb), d, ks, kt)
    torch.cuda.synchronize()
    assert torch.equal(d, torch.zeros_like(d))
    d.fill_(float("nan"))
    tn((a.view(0, m), sf), (a.view(0, n), sfb), d, ks, kt, c=c)
    torch.cuda.synchronize()
    assert torch.equal(d, c)


@pytest.mark.gpu
@pytest.mark.parametrize("g,m,n", [(8, 7168, 2048), (16, 2112, 4096)])
def test_deterministic(g, m, n):
    """Many runs, bitwise: a stage's SFB read landing after the TMA refilled the stage showed
    up in between 3 of 31 and 21 of 21 runs of the 16-group problem (2026-12-01; docs/design-notes.md)."""
    ks = _draw_ks(g, 1024, seed=3, empty=(0,))
    p = Problem(m, n, ks, seed=3)
    c = torch.randn(g, m, n, device="cuda")
    first = torch.full_like(c, float("nan"))
    p.nt(first, c=c)
    for run in range(1, 12):
        d = torch.full_like(c, float("nan"))
        p.nt(d, c=c)
        assert torch.equal(d, first), f"run {run} differs from run 0"
    d = c.clone()
    p.nt(d, c=d)
    assert torch.equal(d, first), "c = d differs from c separate"


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay():
    ks = _draw_ks(8, 1024, seed=4)
    p = Problem(2112, 4096, ks, seed=4)
    q = Problem(2112, 4096, ks, seed=44)  # same sizes, other values
    c = torch.randn(8, 2112, 4096, device="cuda")
    d = torch.full_like(c, float("nan"))
    p.nt(d, c=c)  # compile and load outside the capture
    p.tn(d, c=c)
    torch.cuda.synchronize()
    graph, graph_tn = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            p.nt(d, c=c)
        with torch.cuda.graph(graph_tn, stream=stream):
            p.tn(d, c=c)
    for g, prob in ((graph, p), (graph_tn, p)):
        d.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        prob.check(d, c)
    # New operand values copied into the captured buffers: the replay computes with them.
    for name in ("a_nt", "b_nt", "a_tn", "b_tn", "sfa", "sfb"):
        getattr(p, name).copy_(getattr(q, name))
    for g in (graph, graph_tn):
        d.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        q.check(d, c)


@pytest.mark.gpu
def test_pdl_and_small_sm_count():
    ks = _draw_ks(4, 512, seed=6)
    p = Problem(512, 768, ks, seed=6)
    c = torch.randn(4, 512, 768, device="cuda")
    saved = deep_gemm.get_num_sms()
    try:
        deep_gemm.set_pdl(True)
        deep_gemm.set_num_sms(16)
        for form in ("nt", "tn"):
            d = torch.full_like(c, float("nan"))
            getattr(p, form)(d, c=c)
            torch.cuda.synchronize()
            p.check(d, c)
    finally:
        deep_gemm.set_num_sms(saved)


_BACKEND_CHILD = r"""
import torch, deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_channel_cast_to_fp8
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(1)
m, n, ks = 384, 640, [256, 0, 512, 128]
xa = torch.randn(sum(ks), m, device="cuda", dtype=torch.bfloat16)
xb = torch.randn(sum(ks), n, device="cuda", dtype=torch.bfloat16)
(a, sfa), (b, sfb) = per_channel_cast_to_fp8(xa, use_ue8m0=False), per_channel_cast_to_fp8(xb, use_ue8m0=False)
c = torch.randn(len(ks), m, n, device="cuda")
d = torch.full_like(c, float("nan"))
kt = torch.tensor(ks, dtype=torch.int32, device="cuda")
deep_gemm.k_grouped_fp8_gemm_tn_contiguous((a, sfa), (b, sfb), d, ks, kt, c=c)
torch.cuda.synchronize()
ad, bd = a.float() * sfa.repeat_interleave(128, 0), b.float() * sfb.repeat_interleave(128, 0)
worst, start = 0.0, 0
for g, k in enumerate(ks):
    ref = c[g] + ad[start:start + k].t() @ bd[start:start + k]
    worst = max(worst, calc_diff(d[g], ref).item())
    start += k
print("RESULT", worst, deep_gemm.get_jit().backend)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["nvcc", "nvrtc"])
def test_kernel_built_by_either_backend_runs(backend, tmp_path):
    """The by-value group table has the same member offsets whichever compiler built the
    kernel (NVRTC's CUtensorMap is 64-byte aligned, cuda.h's 128): results agree."""
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_USE_NVRTC="1" if backend == "nvrtc" else "0")
    out = subprocess.run([sys.executable, "-c", _BACKEND_CHILD], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    _, worst, used = next(x for x in out.stdout.splitlines() if x.startswith("RESULT")).split()
    assert used == backend and float(worst) < 1e-3
