"""The facade's argument checks (deep_gemm/_args.py) and the fake impls (deep_gemm/_fake.py):
every rejection is a TypeError (wrong type) or ValueError (wrong value) that starts with
``deep_gemm.<function>: <argument>``; fake mode refuses what eager refuses."""

from __future__ import annotations

import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import deep_gemm
from deep_gemm import _args

FP8 = torch.float8_e4m3fn
M, N, K = 128, 256, 256


def _dense(device="meta", out=torch.bfloat16):
    a = torch.empty(M, K, dtype=FP8, device=device)
    sfa = torch.empty(M, K // 128, device=device)
    b = torch.empty(N, K, dtype=FP8, device=device)
    sfb = torch.empty(N // 128 if out == torch.bfloat16 else N, K // 128, device=device)
    d = torch.empty(M, N, dtype=out, device=device)
    return (a, sfa), (b, sfb), d


def _raises(exc, fn, arg):
    return pytest.raises(exc, match="^" + re.escape(f"deep_gemm.{fn}: {arg}"))


# ---- the cases -------------------------------------------------------------


@pytest.mark.parametrize("form", ["nn", "tn", "tt"])
def test_one_dimensional_operand_to_a_transposed_form(form):
    fn = f"fp8_gemm_{form}"
    a, b, d = _dense()
    one_d = (torch.empty(K, dtype=FP8, device="meta"), torch.empty(2, device="meta"))
    bad = "b" if form == "nn" else "a"
    args = (a, one_d, d) if bad == "b" else (one_d, b, d)
    with _raises(ValueError, fn, bad):
        getattr(deep_gemm, fn)(*args)


@pytest.mark.parametrize("kwargs, exc, arg", [
    (dict(recipe=5), TypeError, "recipe"),
    (dict(recipe="1,128,128"), TypeError, "recipe"),
    (dict(recipe=(1, 128)), ValueError, "recipe"),
    (dict(recipe=(1, 128.0, 128)), TypeError, "recipe[1]"),
    (dict(recipe=(True, 128, 128)), TypeError, "recipe[0]"),
    (dict(recipe_a=(1,), recipe_b=(128, 128)), ValueError, "recipe_a"),
    (dict(recipe_a=(1, 128), recipe_b=5), TypeError, "recipe_b"),
    (dict(recipe_a=(1, 128), recipe_b=(128, 64)), ValueError, "recipe_a and recipe_b"),
    (dict(recipe_a=(1, 128)), ValueError, "recipe_a and recipe_b"),
    (dict(disable_ue8m0_cast=1), TypeError, "disable_ue8m0_cast"),
    (dict(disable_ue8m0_cast=None), TypeError, "disable_ue8m0_cast"),
    (dict(compiled_dims=None), TypeError, "compiled_dims"),
    (dict(c=5), TypeError, "c"),
])
def test_dense_gemm_bad_keywords(kwargs, exc, arg):
    a, b, d = _dense()
    with _raises(exc, "fp8_gemm_nt", arg):
        deep_gemm.fp8_gemm_nt(a, b, d, **kwargs)


def test_dense_gemm_valid_recipes_still_accepted():
    a, b, d = _dense()
    deep_gemm.fp8_gemm_nt(a, b, d, recipe=[1, 128, 128])
    deep_gemm.fp8_gemm_nt(a, b, d, recipe_a=(1, 128), recipe_b=[128, 128], disable_ue8m0_cast=True)
    a, b, d = _dense(out=torch.float32)
    deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))


@pytest.mark.parametrize("fn", ["m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
                                "k_grouped_fp8_gemm_nt_contiguous"])
@pytest.mark.parametrize("kwargs, exc, arg", [
    (dict(recipe=5), TypeError, "recipe"),
    (dict(recipe=(1, 128)), ValueError, "recipe"),
    (dict(compiled_dims=3), TypeError, "compiled_dims"),
])
def test_grouped_bad_keywords(fn, kwargs, exc, arg):
    t = torch.empty(1, device="meta")
    args = {"m_grouped_fp8_fp4_gemm_nt_contiguous": ((t, t), (t, t), t, t),
            "m_grouped_fp8_fp4_gemm_nt_masked": ((t, t), (t, t), t, t, 1),
            "k_grouped_fp8_gemm_nt_contiguous": ((t, t), (t, t), t, [128], t)}[fn]
    with _raises(exc, fn, arg):
        getattr(deep_gemm, fn)(*args, **kwargs)


def test_grouped_checks_disable_ue8m0_cast_and_expected_m():
    t = torch.empty(1, device="meta")
    with _raises(TypeError, "m_grouped_fp8_fp4_gemm_nt_masked", "disable_ue8m0_cast"):
        deep_gemm.m_grouped_fp8_gemm_nt_masked((t, t), (t, t), t, t, 1, disable_ue8m0_cast="no")
    with _raises(TypeError, "m_grouped_fp8_fp4_gemm_nt_masked", "expected_m"):
        deep_gemm.m_grouped_fp8_gemm_nt_masked((t, t), (t, t), t, t, 1.0)
    with _raises(TypeError, "m_grouped_fp8_fp4_gemm_nt_contiguous", "expected_m_for_psum_layout"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous((t, t), (t, t), t, t, expected_m_for_psum_layout=True)
    with _raises(TypeError, "k_grouped_fp8_gemm_nt_contiguous", "ks_cpu[1]"):
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous((t, t), (t, t), t, [128, 1.5], t)


SF = torch.empty(M, K // 128)


@pytest.mark.parametrize("args, kwargs, exc, arg", [
    ((None, M, K, (1, 128)), {}, TypeError, "sf"),
    ((SF, "5", K, (1, 128)), {}, TypeError, "mn"),
    ((SF, 5.0, K, (1, 128)), {}, TypeError, "mn"),
    ((SF, True, K, (1, 128)), {}, TypeError, "mn"),
    ((SF, M, -5, (1, 128)), {}, ValueError, "k"),
    ((SF, M, 2**64, (1, 128)), {}, ValueError, "k"),
    ((SF, M, K, (1, 128)), dict(num_groups=True), TypeError, "num_groups"),
    ((SF, M, K, (1, 128)), dict(num_groups=0), ValueError, "num_groups"),
    ((SF, M, K, (1, 1, 128)), dict(is_sfa="yes"), TypeError, "is_sfa"),
    ((SF, M, K, (1, 1, 128)), {}, ValueError, "is_sfa"),
    ((SF, M, K, (1, 128)), dict(disable_ue8m0_cast=0), TypeError, "disable_ue8m0_cast"),
    ((SF, M, K, (1, 128)), dict(psum_layout=[0]), TypeError, "psum_layout"),
    ((SF, M, K, 5), {}, TypeError, "recipe"),
    ((SF, M, K, (1,)), {}, ValueError, "recipe"),
    ((SF, M, K, (1, "128")), {}, TypeError, "recipe[1]"),
    ((SF, M, K, (1, 64)), {}, ValueError, "recipe"),
])
def test_transform_sf_into_required_layout_bad_arguments(args, kwargs, exc, arg):
    with _raises(exc, "transform_sf_into_required_layout", arg):
        deep_gemm.transform_sf_into_required_layout(*args, **kwargs)


def test_transform_sf_into_required_layout_valid_calls_unchanged():
    out = deep_gemm.transform_sf_into_required_layout(SF, M, K, (1, 128))
    assert out.shape == SF.shape and out.stride() == (1, M)
    out = deep_gemm.transform_sf_into_required_layout(SF, M, K, [1, 128, 128], is_sfa=True, disable_ue8m0_cast=True)
    assert out.stride() == (1, M)
    sfb = torch.empty(2, 2)
    assert deep_gemm.transform_sf_into_required_layout(sfb, 256, K, (1, 128, 128), is_sfa=False) is sfb


@pytest.mark.parametrize("fn, value, exc", [
    ("set_tc_util", 50.0, TypeError), ("set_tc_util", True, TypeError), ("set_tc_util", 2**70, ValueError),
    ("set_pdl", 1, TypeError), ("set_num_sms", "8", TypeError), ("set_mk_alignment_for_contiguous_layout", None,
                                                                   TypeError),
])
def test_knobs(fn, value, exc):
    with pytest.raises(exc, match=f"^deep_gemm.{fn}: "):
        getattr(deep_gemm, fn)(value)


# ---- _args itself ------------------------------------------------------------------


def test_args_helpers():
    assert _args.int_("f", "x", 3) == 3 and _args.int_("f", "x", 0, min=0) == 0
    for bad in (True, 3.0, "3", None):
        with pytest.raises(TypeError, match=r"^deep_gemm.f: x must be an int"):
            _args.int_("f", "x", bad)
    with pytest.raises(ValueError, match=r"^deep_gemm.f: x must be >= 1, got 0"):
        _args.int_("f", "x", 0, min=1)
    assert _args.bool_("f", "b", False) is False
    with pytest.raises(TypeError, match=r"^deep_gemm.f: b must be a bool, got int \(1\)"):
        _args.bool_("f", "b", 1)
    t = torch.empty(1)
    assert _args.pair("f", "a", [t, t]) == (t, t)
    with pytest.raises(TypeError, match=r"^deep_gemm.f: a must be a pair \(tensor, scale_factors\); its scale"):
        _args.pair("f", "a", (t, None))
    with pytest.raises(TypeError, match=r"of 3 elements"):
        _args.pair("f", "a", (t, t, t))
    assert _args.recipe("f", "recipe", [1, 128, 128]) == (1, 128, 128)
    assert _args.one_recipe("f", None, (1, 128), (128, 128)) == (1, 128, 128)
    assert _args.one_recipe("f", None, None, None) is None


# ---- fake mode ---------------------------------------------------------------------


def _fake_cuda(mode, t):
    return FakeTensor(mode, torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta"),
                      torch.device("cuda", 0))


def test_fake_mode_refuses_cpu_tensors_like_eager():
    a, b, d = _dense(device="cpu")
    with pytest.raises(RuntimeError, match=r"^deep_gemm.fp8_gemm_nt: a must be a CUDA tensor, got a tensor on the CPU"):
        deep_gemm.fp8_gemm_nt(a, b, d)  # eager
    with FakeTensorMode():
        a, b, d = _dense(device="cpu")
        with pytest.raises(RuntimeError,
                           match=r"^deep_gemm.fp8_gemm_nt: a must be a CUDA tensor, got a tensor on the CPU"):
            deep_gemm.fp8_gemm_nt(a, b, d)
        t = torch.empty(4, 2)
        with pytest.raises(RuntimeError, match=r"^deep_gemm.get_mn_major_tma_aligned_tensor: sf must be a CUDA"):
            torch.ops.deep_gemm.get_mn_major_tma_aligned_tensor(t)


def test_fake_mode_mixed_devices_name_the_argument():
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    (a, sfa), (b, sfb), d = _dense()
    fa, fsfa, fb, fsfb = (_fake_cuda(mode, t) for t in (a, sfa, b, sfb))
    with mode:
        d_cpu = torch.empty(M, N, dtype=torch.bfloat16)
        with pytest.raises(RuntimeError, match=r"^deep_gemm.fp8_gemm_nt: d must be a CUDA tensor, got a tensor on "
                                               r"the CPU"):
            deep_gemm.fp8_gemm_nt((fa, fsfa), (fb, fsfb), d_cpu)


def test_fake_mode_cuda_tensors_run_the_cpp_shape_checks():
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    (a, sfa), (b, sfb), d = _dense()
    fa, fsfa, fb, fsfb, fd, fd_short = (_fake_cuda(mode, t) for t in (a, sfa, b, sfb, d, d[:64]))
    fsf = _fake_cuda(mode, torch.empty(5, 3))
    with mode:
        deep_gemm.fp8_gemm_nt((fa, fsfa), (fb, fsfb), fd)  # accepted
        with pytest.raises(RuntimeError, match=r"^deep_gemm.fp8_gemm_nt: d.shape\[0\] must be 128"):
            deep_gemm.fp8_gemm_nt((fa, fsfa), (fb, fsfb), fd_short)
        out = torch.ops.deep_gemm.get_mn_major_tma_aligned_tensor(fsf)
        assert out.shape == (5, 3) and out.stride() == (1, 8) and out.device.type == "cuda"


def test_eager_meta_keeps_the_cpp_messages():
    (a, sfa), (b, sfb), d = _dense()
    with pytest.raises(RuntimeError, match=r"^deep_gemm.fp8_gemm_nt: sfa is not a meta tensor while a is"):
        deep_gemm.fp8_gemm_nt((a, torch.empty(M, K // 128)), (b, sfb), d)
