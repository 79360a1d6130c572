"""deep_gemm.legacy: Triton BF16 grouped GEMMs for SM80+ (upstream's A100 kernels).

CI (no GPU, with or without Triton installed): the public signatures are upstream's, the
package imports lazily and without Triton, every bad argument is refused with a message
naming the function and the argument before Triton is touched (meta and CPU tensors), and
a call without Triton says how to get it. With Triton installed, the kernels also run
under Triton's CPU interpreter on small problems (a child process, TRITON_INTERPRET=1).

GPU (@pytest.mark.gpu): every function against a float64 reference on fresh random data,
the output poisoned with NaN first: padding rows (zeros), an empty group, gathered rows
(with negative indices), K- and MN-major b, N/K tails, the k-grouped forms with and without
accumulation (FP32 and BF16 d, aligned and unaligned group ends), determinism, a side
stream and empty problems.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys

import pytest
import torch

import deep_gemm
from deep_gemm.testing import calc_diff

legacy = deep_gemm.legacy

BF16, F32, I32 = torch.bfloat16, torch.float32, torch.int32
HAS_TRITON = importlib.util.find_spec("triton") is not None

# Upstream's parameters, in order, none with a default.
UPSTREAM = {
    "m_grouped_bf16_gemm_nt_contiguous_tl": ("a", "b", "d", "m_indices"),
    "m_grouped_bf16_gemm_nn_contiguous_tl": ("a", "b", "d", "m_indices"),
    "a_fused_m_grouped_bf16_gemm_nt_contiguous_tl": ("a", "b", "d", "mappings"),
    "a_fused_m_grouped_bf16_gemm_nn_contiguous_tl": ("a", "b", "d", "mappings"),
    "a_fused_k_grouped_bf16_gemm_tn_contiguous_tl": ("a", "b", "d", "handle", "acc"),
    "b_fused_k_grouped_bf16_gemm_tn_contiguous_tl": ("a", "b", "d", "handle", "acc"),
}

nt = legacy.m_grouped_bf16_gemm_nt_contiguous_tl
nn = legacy.m_grouped_bf16_gemm_nn_contiguous_tl
fused_nt = legacy.a_fused_m_grouped_bf16_gemm_nt_contiguous_tl
fused_nn = legacy.a_fused_m_grouped_bf16_gemm_nn_contiguous_tl
k_fused_a = legacy.a_fused_k_grouped_bf16_gemm_tn_contiguous_tl
k_fused_b = legacy.b_fused_k_grouped_bf16_gemm_tn_contiguous_tl


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=300)


# ---- surface (CI) ----------------------------------------------------------------------


def test_signatures_match_upstream():
    assert sorted(legacy.__all__) == sorted(UPSTREAM)
    for name, params in UPSTREAM.items():
        sig = inspect.signature(getattr(legacy, name))
        assert tuple(sig.parameters) == params, name
        for p in sig.parameters.values():
            assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is inspect.Parameter.empty, (name, p)
        assert getattr(legacy, name).__doc__, name


def test_legacy_is_lazy_and_needs_no_triton_to_import():
    out = _run(
        "import sys\n"
        "import deep_gemm\n"
        "assert 'deep_gemm.legacy' not in sys.modules\n"
        "had_triton = 'triton' in sys.modules\n"
        "legacy = deep_gemm.legacy\n"
        "import deep_gemm.legacy as again\n"
        "assert again is legacy is sys.modules['deep_gemm.legacy']\n"
        "assert had_triton or 'triton' not in sys.modules, 'importing deep_gemm.legacy imported triton'\n"
        "assert 'legacy' not in deep_gemm.__all__\n"
        "try:\n"
        "    deep_gemm.no_such_name\n"
        "except AttributeError as e:\n"
        "    assert 'no_such_name' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
        "print('ok')\n")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_without_triton_import_works_and_a_call_says_how_to_get_it():
    # triton made unimportable (a torch CPU wheel has none); the checks still run first.
    out = _run(
        "import os, sys, torch\n"
        "sys.modules['triton'] = None\n"
        "sys.modules['triton.language'] = None\n"
        "import deep_gemm, deep_gemm.legacy as L\n"
        "bf = torch.bfloat16\n"
        "a, b, d = torch.zeros(128, 64, dtype=bf), torch.zeros(2, 32, 64, dtype=bf), torch.zeros(128, 32, dtype=bf)\n"
        "mi = torch.zeros(128, dtype=torch.int32)\n"
        "try:\n"
        "    L.m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, mi[:64])\n"
        "except ValueError as e:\n"
        "    assert 'm_indices must have 128 elements' in str(e), e\n"
        "try:\n"
        "    L.m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, mi)\n"
        "except ValueError as e:\n"
        "    assert 'must be a CUDA tensor' in str(e), e\n"
        # The interpreter accepts CPU tensors: the call gets as far as importing Triton.
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "for call in (lambda: L.m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, mi),\n"
        "             lambda: L.a_fused_k_grouped_bf16_gemm_tn_contiguous_tl(\n"
        "                 torch.zeros(64, 32, dtype=bf), torch.zeros(128, 16, dtype=bf), torch.zeros(1, 32, 16),\n"
        "                 (mi, mi[:1], mi[:1]), True)):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as e:\n"
        "        msg = str(e)\n"
        "        assert 'deep_gemm.legacy.' in msg and 'pip install triton' in msg and 'CUDA build of torch' in msg, msg\n"
        "    else:\n"
        "        raise SystemExit('no ImportError')\n"
        "print('ok')\n")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ---- argument checks (CI, meta and CPU tensors) ---------------------------------------


def _t(*shape, dtype=BF16, device="meta"):
    return torch.empty(*shape, dtype=dtype, device=device)


def _m_args(M=256, N=64, K=128, G=3, device="meta", kn=False):
    b = _t(G, K, N, device=device) if kn else _t(G, N, K, device=device)
    return _t(M, K, device=device), b, _t(M, N, device=device), _t(M, dtype=I32, device=device)


def _fused_args(M=256, M_src=300, N=64, K=128, G=3, device="meta", kn=False):
    a, b, d, mi = _m_args(M, N, K, G, device, kn)
    return _t(M_src, K, device=device), b, d, (mi, _t(M, dtype=I32, device=device))


def _k_args(fused_a=True, M=64, N=48, K=256, K_src=300, G=3, device="meta", d_dtype=F32):
    a = _t(K_src if fused_a else K, M, device=device)
    b = _t(K if fused_a else K_src, N, device=device)
    handle = (_t(K, dtype=I32, device=device), _t(G, dtype=I32, device=device), _t(G, dtype=I32, device=device))
    return a, b, _t(G, M, N, dtype=d_dtype, device=device), handle


def _with(args, i, value):
    args = list(args)
    args[i] = value
    return args


def _with_handle(args, i, value):
    handle = list(args[3])
    handle[i] = value
    return _with(args, 3, tuple(handle))


BAD = {
    # M-grouped, nt
    "nt: a not a tensor": (lambda: nt(*_with(_m_args(), 0, [[1.0]])), TypeError,
                           r"a must be a tensor \(\[M, K\]\), got list"),
    "nt: a fp16": (lambda: nt(*_with(_m_args(), 0, _t(256, 128, dtype=torch.float16))), ValueError,
                   r"a must be torch.bfloat16, got torch.float16"),
    "nt: a 3-D": (lambda: nt(*_with(_m_args(), 0, _t(2, 128, 128))), ValueError,
                  r"a must be 2-D \(\[M, K\]\), got shape \(2, 128, 128\)"),
    "nt: a column-major": (lambda: nt(*_with(_m_args(), 0, _t(128, 256).T)), ValueError, r"a must be contiguous"),
    "nt: b 2-D": (lambda: nt(*_with(_m_args(), 1, _t(64, 128))), ValueError, r"b must be 3-D \(\[G, N, K\]\)"),
    "nt: b fp32": (lambda: nt(*_with(_m_args(), 1, _t(3, 64, 128, dtype=F32))), ValueError, r"b must be torch.bfloat16"),
    "nt: b strided": (lambda: nt(*_with(_m_args(), 1, _t(3, 64, 256)[..., ::2])), ValueError,
                      r"b must be a contiguous \[G, N, K\] tensor \(K-major\) or the .mT view"),
    "nt: K mismatch": (lambda: nt(*_with(_m_args(), 1, _t(3, 64, 64))), ValueError,
                       r"b's K \(b.shape\[2\] = 64\) must equal a's K \(a.shape\[1\] = 128\)"),
    "nt: m_indices int64": (lambda: nt(*_with(_m_args(), 3, _t(256, dtype=torch.int64))), ValueError,
                            r"m_indices must be torch.int32"),
    "nt: m_indices 2-D": (lambda: nt(*_with(_m_args(), 3, _t(256, 1, dtype=I32))), ValueError,
                          r"m_indices must be 1-D \(int32 \[M\]\)"),
    "nt: m_indices strided": (lambda: nt(*_with(_m_args(), 3, _t(512, dtype=I32)[::2])), ValueError,
                              r"m_indices must be contiguous"),
    "nt: m_indices length": (lambda: nt(*_with(_m_args(), 3, _t(128, dtype=I32))), ValueError,
                             r"m_indices must have 256 elements \(one per row of a\), got 128"),
    "nt: m_indices not a tensor": (lambda: nt(*_with(_m_args(), 3, [0] * 256)), TypeError,
                                   r"m_indices must be a tensor \(int32 \[M\]\)"),
    "nt: d fp32": (lambda: nt(*_with(_m_args(), 2, _t(256, 64, dtype=F32))), ValueError, r"d must be torch.bfloat16"),
    "nt: d shape": (lambda: nt(*_with(_m_args(), 2, _t(256, 65))), ValueError, r"d must have shape \[M, N\] = \(256, 64\)"),
    "nt: d transposed": (lambda: nt(*_with(_m_args(), 2, _t(64, 256).T)), ValueError, r"d must be contiguous"),
    "nt: M unaligned": (lambda: nt(*_m_args(M=200)), ValueError,
                        r"M \(a.shape\[0\]\) must be a multiple of get_mk_alignment_for_contiguous_layout\(\) "
                        r"\(= 128\), got 200"),
    # M-grouped, nn
    "nn: b strided": (lambda: nn(*_with(_m_args(kn=True), 1, _t(3, 128, 128)[..., ::2])), ValueError,
                      r"m_grouped_bf16_gemm_nn_contiguous_tl: b must be a contiguous \[G, K, N\] tensor"),
    "nn: K mismatch": (lambda: nn(*_with(_m_args(kn=True), 1, _t(3, 96, 64))), ValueError,
                       r"b's K \(b.shape\[1\] = 96\)"),
    "nn: b given [G, N, K]": (lambda: nn(*_m_args(N=64, K=128)), ValueError, r"b's K \(b.shape\[1\] = 64\)"),
    # M-grouped, A gathered
    "fused: mappings a tensor": (lambda: fused_nt(*_with(_fused_args(), 3, _t(256, dtype=I32))), TypeError,
                                 r"a_fused_m_grouped_bf16_gemm_nt_contiguous_tl: mappings must be a tuple"),
    "fused: mappings of one": (lambda: fused_nt(*_with(_fused_args(), 3, (_t(256, dtype=I32),))), TypeError,
                               r"mappings must be a tuple \(m_indices, m_row_indices\) of 2 int32 tensors, got a tuple of 1"),
    "fused: row indices length": (lambda: fused_nt(*_with(_fused_args(), 3, (_t(256, dtype=I32), _t(300, dtype=I32)))),
                                  ValueError, r"mappings\[1\] \(m_row_indices\) must have 256 elements"),
    "fused: row indices int64": (lambda: fused_nn(*_with(_fused_args(kn=True), 3,
                                                         (_t(256, dtype=I32), _t(256, dtype=torch.int64)))),
                                 ValueError, r"mappings\[1\] \(m_row_indices\) must be torch.int32"),
    "fused: m_indices fp32": (lambda: fused_nt(*_with(_fused_args(), 3, (_t(256, dtype=F32), _t(256, dtype=I32)))),
                              ValueError, r"mappings\[0\] \(m_indices\) must be torch.int32"),
    "fused: d rows": (lambda: fused_nt(*_with(_fused_args(), 2, _t(300, 64))), ValueError,
                      r"d must have shape \[M, N\] = \(256, 64\)"),
    "fused: M unaligned": (lambda: fused_nt(*_fused_args(M=192)), ValueError,
                           r"M \(mappings\[0\].numel\(\)\) must be a multiple of .* \(= 128\), got 192"),
    "fused: a 1-D": (lambda: fused_nt(*_with(_fused_args(), 0, _t(300))), ValueError, r"a must be 2-D \(\[M_src, K\]\)"),
    # K-grouped
    "k: handle a tensor": (lambda: k_fused_a(*_with(_k_args(), 3, _t(256, dtype=I32)), True), TypeError,
                           r"a_fused_k_grouped_bf16_gemm_tn_contiguous_tl: handle must be a tuple \(k_indices, k_start, k_end\)"),
    "k: handle of two": (lambda: k_fused_b(*_with(_k_args(False), 3, _k_args(False)[3][:2]), True), TypeError,
                         r"handle must be a tuple"),
    "k: acc an int": (lambda: k_fused_a(*_k_args(), 1), TypeError, r"acc must be a bool, got int"),
    "k: acc None": (lambda: k_fused_b(*_k_args(False), None), TypeError, r"acc must be a bool"),
    "k: a fp16": (lambda: k_fused_a(*_with(_k_args(), 0, _t(300, 64, dtype=torch.float16)), True), ValueError,
                  r"a must be torch.bfloat16"),
    "k: a 3-D": (lambda: k_fused_a(*_with(_k_args(), 0, _t(1, 300, 64)), True), ValueError,
                 r"a must be 2-D \(\[K_src, M\]\)"),
    "k: b transposed": (lambda: k_fused_a(*_with(_k_args(), 1, _t(48, 256).T), True), ValueError,
                        r"b must be contiguous \(\[K, N\]"),
    "k: b_fused b transposed": (lambda: k_fused_b(*_with(_k_args(False), 1, _t(48, 300).T), True), ValueError,
                                r"b must be contiguous \(\[K_src, N\]"),
    "k: d fp16": (lambda: k_fused_a(*_with(_k_args(), 2, _t(3, 64, 48, dtype=torch.float16)), False), ValueError,
                  r"d must be torch.float32 or torch.bfloat16, got torch.float16"),
    "k: d 2-D": (lambda: k_fused_a(*_with(_k_args(), 2, _t(64, 48, dtype=F32)), False), ValueError,
                 r"d must be 3-D \(\[G, M, N\]\)"),
    "k: d groups": (lambda: k_fused_a(*_with(_k_args(), 2, _t(4, 64, 48, dtype=F32)), False), ValueError,
                    r"d must have shape \[G, M, N\] .* = \(3, 64, 48\), got \(4, 64, 48\)"),
    "k: d strided": (lambda: k_fused_b(*_with(_k_args(False), 2, _t(3, 64, 96, dtype=F32)[..., ::2]), False),
                     ValueError, r"d must be contiguous"),
    "k: a_fused k_indices length": (lambda: k_fused_a(*_with_handle(_k_args(), 0, _t(300, dtype=I32)), True),
                                    ValueError, r"handle\[0\] \(k_indices\) must have 256 elements \(one per row of b"),
    "k: b_fused k_indices length": (lambda: k_fused_b(*_with_handle(_k_args(False), 0, _t(300, dtype=I32)), True),
                                    ValueError, r"handle\[0\] \(k_indices\) must have 256 elements \(one per row of a"),
    "k: k_indices int64": (lambda: k_fused_a(*_with_handle(_k_args(), 0, _t(256, dtype=torch.int64)), True),
                           ValueError, r"handle\[0\] \(k_indices\) must be torch.int32"),
    "k: k_start int64": (lambda: k_fused_a(*_with_handle(_k_args(), 1, _t(3, dtype=torch.int64)), True), ValueError,
                         r"handle\[1\] \(k_start\) must be torch.int32"),
    "k: k_end length": (lambda: k_fused_b(*_with_handle(_k_args(False), 2, _t(4, dtype=I32)), True), ValueError,
                        r"handle\[2\] \(k_end\) must have 3 elements"),
    "k: k_end 2-D": (lambda: k_fused_b(*_with_handle(_k_args(False), 2, _t(3, 1, dtype=I32)), True), ValueError,
                     r"handle\[2\] \(k_end\) must be 1-D \(int32 \[G\]\)"),
    "k: a_fused K unaligned": (lambda: k_fused_a(*_k_args(K=200), True), ValueError,
                               r"K \(b.shape\[0\]\) must be a multiple of get_mk_alignment.* got 200"),
    "k: b_fused K unaligned": (lambda: k_fused_b(*_k_args(False, K=200), True), ValueError,
                               r"K \(a.shape\[0\]\) must be a multiple of get_mk_alignment.* got 200"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_are_refused_clearly(case):
    call, exc, pattern = BAD[case]
    with pytest.raises(exc, match=pattern) as info:
        call()
    assert str(info.value).startswith("deep_gemm.legacy."), info.value


def test_alignment_follows_the_runtime_knob():
    deep_gemm.set_mk_alignment_for_contiguous_layout(64)
    with pytest.raises(ValueError, match="must be a CUDA tensor"):  # 192 is aligned now: past the checks
        nt(*_m_args(M=192))
    with pytest.raises(ValueError, match=r"M \(a.shape\[0\]\) must be a multiple .* \(= 64\), got 160"):
        nt(*_m_args(M=160))


VALID = {
    "m_grouped_bf16_gemm_nt_contiguous_tl": lambda dev: nt(*_m_args(device=dev)),
    "m_grouped_bf16_gemm_nn_contiguous_tl": lambda dev: nn(*_m_args(device=dev, kn=True)),
    "a_fused_m_grouped_bf16_gemm_nt_contiguous_tl": lambda dev: fused_nt(*_fused_args(device=dev)),
    "a_fused_m_grouped_bf16_gemm_nn_contiguous_tl": lambda dev: fused_nn(*_fused_args(device=dev, kn=True)),
    "a_fused_k_grouped_bf16_gemm_tn_contiguous_tl": lambda dev: k_fused_a(*_k_args(device=dev), True),
    "b_fused_k_grouped_bf16_gemm_tn_contiguous_tl": lambda dev: k_fused_b(*_k_args(False, device=dev), False),
}


@pytest.mark.parametrize("device", ["meta", "cpu"])
@pytest.mark.parametrize("name", list(VALID))
def test_valid_arguments_off_cuda_are_refused(name, device, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match=rf"deep_gemm.legacy.{name}: a must be a CUDA tensor, got one on {device}"):
        VALID[name](device)


def test_mn_major_and_transposed_b_views_pass_the_checks():
    for b in (_t(3, 128, 64).mT, _t(3, 64, 128)):  # nt: [G, N, K] MN-major view, K-major
        with pytest.raises(ValueError, match="must be a CUDA tensor"):
            nt(*_with(_m_args(), 1, b))
    for b in (_t(3, 64, 128).mT, _t(3, 128, 64)):  # nn: [G, K, N] K-major view, MN-major
        with pytest.raises(ValueError, match="must be a CUDA tensor"):
            nn(*_with(_m_args(kn=True), 1, b))


def test_output_overlapping_an_input_is_refused(monkeypatch):
    # CPU tensors reach the memory checks under the interpreter switch (no Triton needed:
    # they come before it is imported).
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    a, b, _, mi = _m_args(N=128, device="cpu")
    with pytest.raises(ValueError, match="d overlaps a"):
        nt(a, b, a, mi)  # d = a: [256, 128] both
    a, b, d, handle = _k_args(device="cpu")
    buf = torch.empty(256 + 3 * 64 * 48, dtype=F32)
    handle = (buf[:256].view(I32), handle[1], handle[2])
    with pytest.raises(ValueError, match=r"d overlaps handle\[0\] \(k_indices\)"):
        k_fused_a(a, b, buf[64:64 + 3 * 64 * 48].view(3, 64, 48), handle, True)


def test_empty_problems_are_no_ops_without_triton(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setitem(sys.modules, "triton", None)
    a, b, d, mi = _m_args(M=0, device="cpu")
    assert nt(a, b, d, mi) is None
    a, b, d, mi = _m_args(N=0, device="cpu")
    assert nt(a, b, d, mi) is None
    a, b, d, handle = _k_args(G=0, device="cpu")
    assert k_fused_a(a, b, d, handle, True) is None
    a, b, d, handle = _k_args(False, M=0, device="cpu")
    assert k_fused_b(a, b, d, handle, False) is None


# ---- numerics: shared by the GPU tests and the interpreter child -------------------------


def _align(x: int, y: int) -> int:
    return (x + y - 1) // y * y


def _m_indices(sizes, alignment, device, trailing_padding=1):
    """The contiguous layout: group g's rows start at a multiple of the alignment and are
    followed by padding (-1) up to the next one; then ``trailing_padding`` all-padding blocks."""
    idx = []
    for g, s in enumerate(sizes):
        idx += [g] * s + [-1] * (_align(s, alignment) - s)
    idx += [-1] * (alignment * trailing_padding)
    return torch.tensor(idx, dtype=I32, device=device)


def _ref_m(a, b_nk, m_indices, rows=None):
    src = a.double()
    if rows is not None:
        r = rows.long()
        ok = (r >= 0) & (r < a.shape[0])
        src = torch.where(ok[:, None], src[r.clamp(0, max(a.shape[0] - 1, 0))], 0)
    out = torch.zeros(m_indices.numel(), b_nk.shape[1], dtype=torch.float64, device=a.device)
    for g in range(b_nk.shape[0]):
        sel = m_indices == g
        if bool(sel.any()):
            out[sel] = src[sel] @ b_nk[g].double().T
    return out


def _b_operand(G, N, K, form, major, device):
    """Random weights as ``(b, b_nk)``: ``b`` as the function takes it (``form`` ``nt``:
    ``[G, N, K]``, ``nn``: ``[G, K, N]``), in ``major`` (``k`` or ``mn``) memory order, and
    the logical ``[G, N, K]`` operand for the reference."""
    b_nk = torch.randn(G, N, K, device=device).bfloat16()
    stored = b_nk.contiguous() if major == "k" else b_nk.mT.contiguous().mT  # [G, N, K] view either way
    b = stored if form == "nt" else stored.mT
    assert b.is_contiguous() == ((form == "nt") == (major == "k"))
    return b, b_nk


def _check_m(d, ref, m_indices, tol=1e-4):
    assert not bool(d.isnan().any()), "rows left unwritten (NaN poison survived)"
    pad = m_indices < 0
    assert bool((d[pad] == 0).all()), "padding rows must be zeros"
    diff = calc_diff(d[~pad], ref[~pad]).item() if bool((~pad).any()) else 0.0
    assert diff < tol, diff


def case_m_grouped(form, major, sizes, N, K, device, gather=False, m_src=None, mixed=False):
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    G = len(sizes)
    m_indices = _m_indices(sizes, alignment, device)
    M = m_indices.numel()
    if mixed:  # groups interleaved inside tiles: outside the layout's contract, still exact
        m_indices = torch.randint(-1, G, (M,), dtype=I32, device=device)
    b, b_nk = _b_operand(G, N, K, form, major, device)
    d = torch.full((M, N), float("nan"), dtype=BF16, device=device)
    if gather:
        m_src = m_src or M + 37
        a = torch.randn(m_src, K, device=device).bfloat16()
        rows = torch.randint(0, m_src, (M,), dtype=I32, device=device)
        rows[torch.rand(M, device=device) < 0.05] = -1  # rows that read zeros
        fn = fused_nt if form == "nt" else fused_nn
        fn(a, b, d, (m_indices, rows))
        ref = _ref_m(a, b_nk, m_indices, rows)
    else:
        a = torch.randn(M, K, device=device).bfloat16()
        (nt if form == "nt" else nn)(a, b, d, m_indices)
        ref = _ref_m(a, b_nk, m_indices)
    _check_m(d, ref, m_indices)
    return a, b, d, m_indices


def _k_layout(ks, alignment, tail, device, k_src):
    """Groups of ``ks`` rows, each starting at a multiple of the alignment. ``tail``
    ``padded``: k_end covers the aligned size and the padding rows have k_indices = -1
    (upstream's layout); ``masked``: k_end = start + real size (the kernel masks the tail)."""
    starts, ends, idx, pos = [], [], [], 0
    for k in ks:
        size = _align(k, alignment)
        starts.append(pos)
        ends.append(pos + (size if tail == "padded" else k))
        idx += torch.randint(0, k_src, (k,)).tolist() + [-1] * (size - k)
        pos += size
    as_i32 = lambda v: torch.tensor(v, dtype=I32, device=device)
    return as_i32(idx), as_i32(starts), as_i32(ends), pos


def case_k_grouped(fused, acc, d_dtype, ks, M, N, tail, device, k_src=None):
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    k_src = k_src or sum(ks) + 11
    k_indices, k_start, k_end, K = _k_layout(ks, alignment, tail, device, k_src)
    G = len(ks)
    if fused == "a":
        a = torch.randn(k_src, M, device=device).bfloat16()
        b = torch.randn(K, N, device=device).bfloat16()
    else:
        a = torch.randn(K, M, device=device).bfloat16()
        b = torch.randn(k_src, N, device=device).bfloat16()
    ok = k_indices >= 0
    gathered = lambda x: torch.where(ok[:, None], x.double()[k_indices.long().clamp(0)], 0)
    A, B = (gathered(a), b.double()) if fused == "a" else (a.double(), gathered(b))
    c = torch.randn(G, M, N, device=device).to(d_dtype)
    d = c.clone() if acc else torch.full((G, M, N), float("nan"), dtype=d_dtype, device=device)
    (k_fused_a if fused == "a" else k_fused_b)(a, b, d, (k_indices, k_start, k_end), acc)
    ref = torch.stack([A[s:e].T @ B[s:e] for s, e in zip(k_start.tolist(), k_end.tolist(), strict=True)])
    if acc:
        ref = ref + c.double()
    assert not bool(d.isnan().any()), "NaN poison survived"
    tol = 1e-4 if d_dtype == BF16 else 1e-7
    for g, k in enumerate(ks):
        if k == 0:  # empty group: untouched with acc, zeros without
            expect = c[g] if acc else torch.zeros_like(c[g])
            assert torch.equal(d[g], expect), f"empty group {g}"
        else:
            diff = calc_diff(d[g], ref[g]).item()
            assert diff < tol, (g, diff)
    return a, b, d, (k_indices, k_start, k_end)


# ---- Triton's CPU interpreter (CI when Triton is installed) -----------------------------


def _interpreter_child() -> None:
    torch.manual_seed(0)
    deep_gemm.set_mk_alignment_for_contiguous_layout(64)
    sizes = [70, 0, 100, 5]
    for form in ("nt", "nn"):
        for major in ("k", "mn"):
            case_m_grouped(form, major, sizes, 48, 80, "cpu")
            case_m_grouped(form, major, sizes, 40, 72, "cpu", gather=True, m_src=150)
    case_m_grouped("nt", "k", sizes, 32, 64, "cpu", mixed=True)
    for fused in ("a", "b"):
        for acc in (False, True):
            for d_dtype in (F32, BF16):
                for tail in ("padded", "masked"):
                    case_k_grouped(fused, acc, d_dtype, [70, 0, 128, 30], 40, 72, tail, "cpu")
    print("ok")


@pytest.mark.skipif(not HAS_TRITON, reason="needs Triton (its CPU interpreter)")
def test_kernels_under_the_triton_interpreter():
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--interpreter-child"],
                         env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout[-2000:] + out.stderr[-4000:]


# ---- GPU ---------------------------------------------------------------------------------

LAYOUTS = [("nt", "k"), ("nt", "mn"), ("nn", "mn"), ("nn", "k")]
M_SHAPES = {
    "8k-4096x4096": ([2000, 3100, 0, 2600], 4096, 4096),
    "3k-768x2048": ([300, 0, 1000, 77, 1200], 768, 2048),
    "tails-200x100": ([300, 0, 1000, 77], 200, 100),
}


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    torch.manual_seed(1)
    return "cuda"


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(M_SHAPES))
@pytest.mark.parametrize("form,major", LAYOUTS)
def test_m_grouped(gpu, form, major, shape):
    sizes, N, K = M_SHAPES[shape]
    case_m_grouped(form, major, sizes, N, K, gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["3k-768x2048", "tails-200x100"])
@pytest.mark.parametrize("form,major", LAYOUTS)
def test_a_fused_m_grouped(gpu, form, major, shape):
    sizes, N, K = M_SHAPES[shape]
    case_m_grouped(form, major, sizes, N, K, gpu, gather=True, m_src=2500)


@pytest.mark.gpu
def test_m_grouped_alignment_64(gpu):
    deep_gemm.set_mk_alignment_for_contiguous_layout(64)
    case_m_grouped("nt", "k", [70, 0, 130, 64, 1], 512, 256, gpu)
    case_m_grouped("nn", "mn", [70, 0, 130, 64, 1], 512, 256, gpu, gather=True)


@pytest.mark.gpu
@pytest.mark.parametrize("gather", [False, True])
def test_m_grouped_tiles_mixing_groups(gpu, gather):
    case_m_grouped("nt", "k", [500, 500, 500, 500], 384, 512, gpu, gather=gather, mixed=True)


K_COMBOS = [("a", True, F32), ("b", True, F32), ("a", False, BF16), ("b", False, F32), ("b", True, BF16),
            ("a", False, F32)]
K_SHAPES = {"2048x4096": (2048, 4096), "tails-200x72": (200, 72)}


@pytest.mark.gpu
@pytest.mark.parametrize("tail", ["padded", "masked"])
@pytest.mark.parametrize("shape", list(K_SHAPES))
@pytest.mark.parametrize("fused,acc,d_dtype", K_COMBOS)
def test_k_grouped(gpu, fused, acc, d_dtype, shape, tail):
    M, N = K_SHAPES[shape]
    case_k_grouped(fused, acc, d_dtype, [300, 0, 1000, 64, 700], M, N, tail, gpu)


@pytest.mark.gpu
def test_k_grouped_many_small_groups(gpu):
    ks = [0, 128, 5, 0, 256, 1, 128, 0] * 4
    case_k_grouped("b", True, F32, ks, 768, 512, "masked", gpu)
    case_k_grouped("a", False, F32, ks, 768, 512, "padded", gpu)


@pytest.mark.gpu
def test_results_are_deterministic(gpu):
    a, b, d, m_indices = case_m_grouped("nt", "k", [700, 0, 900], 1024, 1024, gpu)
    again = torch.full_like(d, float("nan"))
    for _ in range(3):
        nt(a, b, again, m_indices)
        assert torch.equal(again, d)
    a, b, d, handle = case_k_grouped("a", False, F32, [700, 0, 900], 512, 1024, "masked", gpu)
    again = torch.full_like(d, float("nan"))
    for _ in range(3):
        k_fused_a(a, b, again, handle, False)
        assert torch.equal(again, d)


@pytest.mark.gpu
def test_runs_on_the_current_stream(gpu):
    a, b, d, m_indices = case_m_grouped("nt", "k", [700, 0, 900], 1024, 1024, gpu)
    side = torch.cuda.Stream()
    out = torch.full_like(d, float("nan"))
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        nt(a, b, out, m_indices)
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(out, d)


@pytest.mark.gpu
def test_empty_problems(gpu):
    # M = 0 / N = 0 / G = 0: no-ops; K = 0: every written row is zero (or untouched with acc).
    a, b, d, mi = _m_args(M=0, device=gpu)
    nt(a, b, d, mi)
    a, b, _, mi = _m_args(M=256, K=0, device=gpu)
    mi.copy_(_m_indices([100, 0, 30], 128, gpu, trailing_padding=0))
    d = torch.full((256, 64), float("nan"), dtype=BF16, device=gpu)
    nt(a, b, d, mi)
    assert bool((d == 0).all())
    a, b, d, handle = _k_args(G=0, device=gpu)
    k_fused_a(a, b, d, handle, True)
    a, b, _, handle = _k_args(False, K=0, device=gpu)
    handle[1].zero_()
    handle[2].zero_()
    c = torch.randn(3, 64, 48, device=gpu)
    d = c.clone()
    k_fused_b(a, b, d, handle, True)
    assert torch.equal(d, c)
    k_fused_b(a, b, d, handle, False)
    assert bool((d == 0).all())


if __name__ == "__main__" and sys.argv[1:] == ["--interpreter-child"]:
    _interpreter_child()
