"""deep_gemm.utils: integer helpers, UE8M0 rounding, FP8/FP4 casts, lazy layout exports."""

import math

import pytest
import torch

from deep_gemm import utils
from deep_gemm.utils import (
    align,
    cast_back_from_fp4,
    ceil_div,
    ceil_to_ue8m0,
    pack_ue8m0_to_int,
    per_block_cast_to_fp8,
    per_channel_cast_to_fp8,
    per_custom_dims_cast_to_fp8,
    per_token_cast_to_fp4,
    per_token_cast_to_fp8,
    transpose_packed_fp4,
    unpack_ue8m0_from_int,
)

FP8 = torch.float8_e4m3fn
# Round-to-nearest into E4M3: at most half an ulp, 2**-4 relative for normal values;
# below the smallest normal (2**-6) the spacing is 2**-9 in units of the scale.
REL_TOL = 2.0**-4
SUBNORMAL_ABS = 2.0**-9


def random_input(m, n, dtype=torch.bfloat16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randn((m, n), generator=gen) * torch.rand((m, 1), generator=gen).add(0.05) * 8
    return rows.to(dtype)


def expand_token_scales(sf, k, gran_k):
    return sf.repeat_interleave(gran_k, dim=1)[:, :k]


def expand_block_scales(sf, m, n, gran):
    return sf.repeat_interleave(gran, dim=0).repeat_interleave(gran, dim=1)[:m, :n]


def assert_fp8_reconstructs(x, x_fp8, sf_full):
    x = x.float()
    deq = x_fp8.float() * sf_full
    assert torch.isfinite(x_fp8.float()).all(), "FP8 output holds NaN (overflow past 448)"
    bound = REL_TOL * x.abs() + SUBNORMAL_ABS * sf_full + 1e-12
    assert ((deq - x).abs() <= bound).all()
    assert float(1 - 2 * (deq.double() * x.double()).sum() / (deq.double() ** 2 + x.double() ** 2).sum()) < 1e-3


def is_power_of_two(t):
    bits = t.float().view(torch.int32)
    return bool(((bits & ((1 << 23) - 1)) == 0).all() and (t > 0).all())


# ---------------------------------------------------------------------------- integers


@pytest.mark.parametrize("x,y,q", [(0, 128, 0), (1, 128, 1), (128, 128, 1), (129, 128, 2), (7168, 128, 56)])
def test_ceil_div(x, y, q):
    assert ceil_div(x, y) == q


@pytest.mark.parametrize("x,y,r", [(0, 128, 0), (1, 128, 128), (128, 128, 128), (4097, 4, 4100)])
def test_align(x, y, r):
    assert align(x, y) == r
    assert align(x, y) % y == 0 and 0 <= align(x, y) - x < y


# ---------------------------------------------------------------------------- ue8m0


def test_ceil_to_ue8m0_is_smallest_power_of_two_not_below_input():
    x = torch.rand(10000).add(1e-3) * torch.tensor(2.0) ** torch.randint(-60, 60, (10000,)).float()
    y = ceil_to_ue8m0(x)
    assert y.dtype == torch.float32 and is_power_of_two(y)
    assert (y >= x).all() and (y / 2 < x).all()


def test_ceil_to_ue8m0_edge_values():
    x = torch.tensor([1.0, 0.25, 1.5, 3.0, -3.0, 0.0, 1e-45, float("inf")])
    expected = torch.tensor([1.0, 0.25, 2.0, 4.0, 4.0, 2.0**-126, 2.0**-126, 2.0**127])
    assert torch.equal(ceil_to_ue8m0(x), expected)


def test_ceil_to_ue8m0_accepts_bf16_and_keeps_shape():
    x = torch.rand(3, 5, dtype=torch.bfloat16) + 0.1
    y = ceil_to_ue8m0(x)
    assert y.shape == (3, 5) and y.dtype == torch.float32 and (y >= x.float()).all()


def test_pack_unpack_ue8m0_roundtrip():
    sf = ceil_to_ue8m0(torch.rand(6, 8) + 0.01)
    packed = pack_ue8m0_to_int(sf)
    assert packed.dtype == torch.int32 and packed.shape == (6, 2)
    assert torch.equal(unpack_ue8m0_from_int(packed), sf)
    # the first scale of each four sits in the low byte
    assert torch.equal(packed[:, 0] & 0xFF, (sf[:, 0].view(torch.int32) >> 23))


def test_pack_ue8m0_rejects_non_powers_and_bad_shapes():
    with pytest.raises(ValueError):
        pack_ue8m0_to_int(torch.full((2, 4), 1.5))
    with pytest.raises(ValueError):
        pack_ue8m0_to_int(torch.ones(2, 3))


# ---------------------------------------------------------------------------- per-token


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("m,k", [(4, 256), (5, 300), (1, 7), (33, 1000)])
def test_per_token_cast_reconstructs(m, k, dtype):
    x = random_input(m, k, dtype)
    x_fp8, sf = per_token_cast_to_fp8(x, use_ue8m0=False)
    assert x_fp8.dtype == FP8 and x_fp8.shape == (m, k) and x_fp8.is_contiguous()
    assert sf.dtype == torch.float32 and sf.shape == (m, ceil_div(k, 128))
    assert_fp8_reconstructs(x, x_fp8, expand_token_scales(sf, k, 128))


def test_per_token_scales_are_group_amax_over_448_with_padding_ignored():
    x = random_input(3, 300)
    _, sf = per_token_cast_to_fp8(x, use_ue8m0=False)
    for g, (lo, hi) in enumerate([(0, 128), (128, 256), (256, 300)]):
        amax = x[:, lo:hi].float().abs().amax(dim=1)
        torch.testing.assert_close(sf[:, g], amax / 448.0, rtol=1e-6, atol=0)
    # each group's maximum maps onto the largest E4M3 value
    x_fp8, _ = per_token_cast_to_fp8(x, use_ue8m0=False)
    group_max = [x_fp8[:, lo:hi].float().abs().amax(dim=1) for lo, hi in [(0, 128), (128, 256), (256, 300)]]
    assert all((g == 448.0).all() for g in group_max)


def test_per_token_ue8m0_scales_are_powers_of_two_and_cover_amax():
    x = random_input(8, 384)
    x_fp8, sf = per_token_cast_to_fp8(x, use_ue8m0=True)
    assert is_power_of_two(sf)
    amax = x.float().abs().view(8, 3, 128).amax(dim=2)
    assert (sf * 448.0 >= amax).all() and (sf * 224.0 < amax).all()
    assert_fp8_reconstructs(x, x_fp8, expand_token_scales(sf, 384, 128))


@pytest.mark.parametrize("gran_k", [32, 64, 128])
def test_per_token_gran_k(gran_k):
    x = random_input(6, 200)
    x_fp8, sf = per_token_cast_to_fp8(x, use_ue8m0=False, gran_k=gran_k)
    assert sf.shape == (6, ceil_div(200, gran_k))
    assert_fp8_reconstructs(x, x_fp8, expand_token_scales(sf, 200, gran_k))


def test_per_token_zero_rows_get_floor_scale():
    x = torch.zeros(2, 256, dtype=torch.bfloat16)
    x_fp8, sf = per_token_cast_to_fp8(x, use_ue8m0=False)
    assert (x_fp8.float() == 0).all()
    torch.testing.assert_close(sf, torch.full((2, 2), 1e-4 / 448.0))


def test_per_token_packed_ue8m0():
    x = random_input(4, 512)
    _, sf = per_token_cast_to_fp8(x, use_ue8m0=True)
    _, packed = per_token_cast_to_fp8(x, use_ue8m0=True, use_packed_ue8m0=True)
    assert packed.dtype == torch.int32 and packed.shape == (4, 1)
    assert torch.equal(unpack_ue8m0_from_int(packed), sf)
    with pytest.raises(ValueError):
        per_token_cast_to_fp8(x, use_ue8m0=False, use_packed_ue8m0=True)


def test_per_token_empty_rows():
    x_fp8, sf = per_token_cast_to_fp8(torch.zeros(0, 256), use_ue8m0=False)
    assert x_fp8.shape == (0, 256) and sf.shape == (0, 2)


@pytest.mark.parametrize("fn", [per_token_cast_to_fp8, per_block_cast_to_fp8, per_channel_cast_to_fp8])
def test_casts_reject_non_2d(fn):
    with pytest.raises(ValueError, match="2-D"):
        fn(torch.randn(128), use_ue8m0=False)


# ---------------------------------------------------------------------------- per-block


@pytest.mark.parametrize("m,n", [(256, 256), (130, 300), (1, 129), (384, 128)])
@pytest.mark.parametrize("use_ue8m0", [False, True])
def test_per_block_cast_shapes_and_reconstruction(m, n, use_ue8m0):
    x = random_input(m, n)
    x_fp8, sf = per_block_cast_to_fp8(x, use_ue8m0=use_ue8m0)
    assert x_fp8.dtype == FP8 and x_fp8.shape == (m, n) and x_fp8.is_contiguous()
    assert sf.dtype == torch.float32 and sf.shape == (ceil_div(m, 128), ceil_div(n, 128))
    if use_ue8m0:
        assert is_power_of_two(sf)
    assert_fp8_reconstructs(x, x_fp8, expand_block_scales(sf, m, n, 128))


def test_per_block_scale_is_block_amax():
    x = random_input(200, 260, torch.float32)
    _, sf = per_block_cast_to_fp8(x, use_ue8m0=False)
    for i in range(2):
        for j in range(3):
            block = x[i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128]
            torch.testing.assert_close(sf[i, j], block.abs().amax() / 448.0, rtol=1e-6, atol=0)


def test_per_block_gran_k_is_square():
    x = random_input(100, 100)
    x_fp8, sf = per_block_cast_to_fp8(x, use_ue8m0=False, gran_k=32)
    assert sf.shape == (4, 4)
    assert_fp8_reconstructs(x, x_fp8, expand_block_scales(sf, 100, 100, 32))


# ---------------------------------------------------------------------------- per-channel


@pytest.mark.parametrize("m,n", [(256, 7), (300, 5)])
def test_per_channel_cast(m, n):
    x = random_input(m, n)
    x_fp8, sf = per_channel_cast_to_fp8(x, use_ue8m0=True)
    assert x_fp8.shape == (m, n) and sf.shape == (ceil_div(m, 128), n)
    assert is_power_of_two(sf)
    full = sf.repeat_interleave(128, dim=0)[:m]
    assert_fp8_reconstructs(x, x_fp8, full)


def test_per_custom_dims_cast():
    x = torch.randn(4, 6, 8)
    x_fp8, sf = per_custom_dims_cast_to_fp8(x, dims=(0, 2), use_ue8m0=False)
    assert x_fp8.shape == x.shape and sf.shape == (4, 8)
    torch.testing.assert_close(sf, x.abs().amax(dim=1) / 448.0)
    assert_fp8_reconstructs(x.view(4, 48), x_fp8.view(4, 48), sf[:, None, :].expand(4, 6, 8).reshape(4, 48))


# ---------------------------------------------------------------------------- fp4


def test_fp4_cast_roundtrip_and_shapes():
    x = random_input(4, 256, torch.float32)
    packed, sf = per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32)
    assert packed.dtype == torch.int8 and packed.shape == (4, 128) and sf.shape == (4, 8)
    back = cast_back_from_fp4(packed, sf, gran_k=32)
    assert back.shape == (4, 256)
    diff = 1 - 2 * (back.double() * x.double()).sum() / (back.double() ** 2 + x.double() ** 2).sum()
    assert float(diff) < 0.02
    # every E2M1 magnitude is reachable exactly
    exact = torch.tensor([[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -6.0, -0.5]])
    p, s = per_token_cast_to_fp4(exact, use_ue8m0=False, gran_k=10)
    torch.testing.assert_close(cast_back_from_fp4(p, s, gran_k=10), exact)


def test_transpose_packed_fp4_matches_transposed_values():
    x = random_input(6, 8, torch.float32)
    packed, _ = per_token_cast_to_fp4(x, use_ue8m0=False, gran_k=8)
    ones = torch.ones(6, 1)
    values = cast_back_from_fp4(packed, ones, gran_k=8)
    t = transpose_packed_fp4(packed)
    assert t.shape == (8, 3)
    torch.testing.assert_close(cast_back_from_fp4(t, torch.ones(8, 1), gran_k=6), values.t())


# ---------------------------------------------------------------------------- lazy layout exports


def test_layout_names_listed_and_resolved_lazily():
    names = utils.layout.LAZY_NAMES
    for name in (
        "get_tma_aligned_size",
        "get_mn_major_tma_aligned_tensor",
        "transform_sf_into_required_layout",
        "get_mk_alignment_for_contiguous_layout",
    ):
        assert name in names and name in dir(utils)
        try:
            fn = getattr(utils, name)
        except ImportError as exc:  # no compiled extension here: a clear message
            assert "extension" in str(exc)
        except AttributeError as exc:  # extension present but the op not there yet
            assert name in str(exc)
        else:
            assert callable(fn)


def test_unknown_attribute_is_attribute_error_and_star_import_needs_no_extension():
    with pytest.raises(AttributeError):
        utils.definitely_not_a_helper  # noqa: B018
    assert not hasattr(utils, "definitely_not_a_helper")
    # a star import takes __all__: plain-PyTorch names only, all bound without the extension
    assert "per_token_cast_to_fp8" in utils.__all__
    assert set(utils.__all__).isdisjoint(utils.layout.LAZY_NAMES)
    assert all(name in vars(utils) for name in utils.__all__)
    assert set(utils.__all__) == set(utils.math.__all__) | set(utils.fp4.__all__)


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("fn", [per_token_cast_to_fp8, per_block_cast_to_fp8, per_channel_cast_to_fp8])
def test_casts_on_cuda_match_cpu(fn):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    x = random_input(256, 300)
    q_cpu, sf_cpu = fn(x, use_ue8m0=True)
    q_gpu, sf_gpu = fn(x.cuda(), use_ue8m0=True)
    assert q_gpu.is_cuda and sf_gpu.is_cuda
    assert torch.equal(q_gpu.cpu().view(torch.uint8), q_cpu.view(torch.uint8))
    assert torch.equal(sf_gpu.cpu(), sf_cpu)
    assert math.isfinite(float(sf_gpu.sum()))
