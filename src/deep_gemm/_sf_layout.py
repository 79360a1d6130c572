"""Scale-factor layouts the SM90 kernels read (API.md P0 layout helpers).

The FP8 kernels load per-token (1x128) scales with TMA, so they want them
MN-major with each column padded to 16 bytes: shape ``[..., mn, k_blocks]``,
strides ``(..., 1, align(mn, 4))``. On CUDA tensors the conversion is our layout
kernel (op ``get_mn_major_tma_aligned_tensor``); CPU tensors use a torch copy.
The input itself is returned when it already has the required layout, so passing
prepared scales costs nothing.

Upstream's packed-UE8M0 layouts (the SM100 scale format: four 8-bit exponents per int32)
are here too, as plain layout transforms that run on any device
(:func:`get_mn_major_tma_aligned_packed_ue8m0_tensor`,
:func:`get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor`): on CUDA tensors our
kernels (``cuda/deep_gemm/impls/sf_pack_ue8m0.cuh``), on CPU tensors torch.
"""

from __future__ import annotations

from typing import Optional
from collections.abc import Sequence

import torch

from . import _args


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _is_mn_major_tma_aligned(sf: torch.Tensor) -> bool:
    mn, kb = sf.shape[-2], sf.shape[-1]
    pad = _align(mn, 4)
    if sf.stride(-2) != 1 and mn > 1:
        return False
    if sf.stride(-1) != pad and kb > 1:
        return False
    return sf.dim() == 2 or sf.shape[0] <= 1 or sf.stride(0) == pad * kb


def get_mn_major_tma_aligned_tensor(sf: torch.Tensor) -> torch.Tensor:
    """``sf`` ([mn, k] or [groups, mn, k], fp32) in MN-major, TMA-aligned layout."""
    _args.tensor("get_mn_major_tma_aligned_tensor", "sf", sf)
    if sf.dim() not in (2, 3):
        raise ValueError(f"deep_gemm.get_mn_major_tma_aligned_tensor: sf must be 2-D or 3-D, got shape {tuple(sf.shape)}")
    if sf.dtype != torch.float32:
        raise ValueError(f"deep_gemm.get_mn_major_tma_aligned_tensor: sf must be torch.float32 on SM90, got {sf.dtype}")
    if _is_mn_major_tma_aligned(sf):
        return sf
    if sf.device.type != "cpu":  # CUDA (the layout kernel) and meta (shapes only)
        return torch.ops.deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    *batch, mn, kb = sf.shape
    storage = torch.empty((*batch, kb, _align(mn, 4)), dtype=sf.dtype, device=sf.device)
    out = storage.transpose(-1, -2)[..., :mn, :]
    out.copy_(sf)
    return out


def _granularity(recipe: Sequence[int], is_sfa: Optional[bool]) -> tuple[int, int]:
    fn = "transform_sf_into_required_layout"
    if isinstance(recipe, (tuple, list)) and len(recipe) == 2:
        gran_mn, gran_k = _args.recipe(fn, "recipe", recipe, 2)
        return gran_mn, gran_k
    if isinstance(recipe, (tuple, list)) and len(recipe) != 3:
        raise ValueError(f"deep_gemm.{fn}: recipe must have 2 elements (gran_mn, gran_k) or 3 (gran_m, gran_n, "
                         f"gran_k), got {tuple(recipe)!r}")
    recipe = _args.recipe(fn, "recipe", recipe, 3)
    if is_sfa is None:
        raise ValueError(f"deep_gemm.{fn}: is_sfa: a 3-element recipe needs is_sfa=True/False")
    return (recipe[0] if is_sfa else recipe[1]), recipe[2]


def transform_sf_into_required_layout(sf: torch.Tensor, mn: int, k: int, recipe: Sequence[int],
                                      num_groups: Optional[int] = None, is_sfa: Optional[bool] = None,
                                      disable_ue8m0_cast: bool = False,
                                      psum_layout: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Scales as the SM90 kernels want them.

    ``recipe`` is ``(gran_mn, gran_k)`` of this tensor, or the GEMM's
    ``(gran_m_a, gran_n_b, gran_k)`` with ``is_sfa`` picking the operand. On SM90
    scales are fp32 (``disable_ue8m0_cast`` has no effect: there is no UE8M0
    packing; ``psum_layout``, an SM100 grouped layout, is not used either). Per-row
    scales (gran_mn 1) become MN-major TMA-aligned; per-block scales (gran_mn 128)
    become contiguous. The input is returned unchanged when it already has that layout.
    ``mn`` and ``k`` are the operand's sizes (>= 0), ``num_groups`` (> 0) its groups.
    """
    fn = "transform_sf_into_required_layout"
    _args.tensor(fn, "sf", sf, "a torch.float32 tensor of scale factors")
    mn = _args.int_(fn, "mn", mn, min=0)
    k = _args.int_(fn, "k", k, min=0)
    num_groups = _args.opt_int(fn, "num_groups", num_groups, min=1)
    is_sfa = _args.opt_bool(fn, "is_sfa", is_sfa)
    _args.bool_(fn, "disable_ue8m0_cast", disable_ue8m0_cast)
    _args.opt_tensor(fn, "psum_layout", psum_layout)
    gran_mn, gran_k = _granularity(recipe, is_sfa)
    if gran_k != 128 or gran_mn not in (1, 128):
        raise ValueError(f"deep_gemm.{fn}: recipe: SM90 supports scale granularity (1, 128) or "
                         f"(128, 128), got ({gran_mn}, {gran_k})")
    if sf.dtype != torch.float32:
        raise ValueError(f"deep_gemm.{fn}: sf: SM90 scales are torch.float32, got {sf.dtype}")
    expected = (-(-mn // gran_mn), -(-k // gran_k))
    if num_groups is not None:
        expected = (num_groups, *expected)
    if tuple(sf.shape) != expected:
        raise ValueError(f"deep_gemm.{fn}: sf must have shape {list(expected)} for "
                         f"mn={mn}, k={k}, granularity ({gran_mn}, {gran_k}), got {list(sf.shape)}")
    if gran_mn == 1:
        return get_mn_major_tma_aligned_tensor(sf)
    return sf.contiguous()


# ---- packed UE8M0 (upstream's SM100 scale format, as plain layout transforms) -------------

_BELOW_2_31 = (1 << 31) - 1
# Sign and mantissa bits of an fp32 (as an int32): zero for +0.0, 2^e and +inf.
_NOT_EXPONENT_BITS = -2139095041  # 0x807fffff


def _check_device(fn: str, name: str, t: torch.Tensor, sf: torch.Tensor) -> None:
    if t.device != sf.device:
        raise ValueError(f"deep_gemm.{fn}: {name} must be on sf's device ({sf.device}), got a tensor on {t.device}")


def _check_sf_device(fn: str, sf: torch.Tensor) -> None:
    if sf.device.type not in ("cpu", "cuda", "meta"):
        raise ValueError(f"deep_gemm.{fn}: sf must be a CUDA (or CPU) tensor, got a tensor on {sf.device}")


def _check_int_table(fn: str, name: str, t: torch.Tensor, sf: torch.Tensor, what: str) -> int:
    """A 1-D contiguous int32 table on sf's device with at least one entry; its length."""
    if t.dtype != torch.int32:
        raise ValueError(f"deep_gemm.{fn}: {name} must be torch.int32 ({what}), got {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"deep_gemm.{fn}: {name} must be 1-D ({what}), got shape {tuple(t.shape)}")
    groups = t.shape[0]
    if groups < 1:
        raise ValueError(f"deep_gemm.{fn}: {name} must hold at least one group, got shape {tuple(t.shape)}")
    if groups > _BELOW_2_31:
        raise ValueError(f"deep_gemm.{fn}: {name} must hold fewer than 2^31 groups, got {groups}")
    if groups > 1 and t.stride(0) != 1:
        raise ValueError(f"deep_gemm.{fn}: {name} must be contiguous, got strides {t.stride()}")
    _check_device(fn, name, t, sf)
    return groups


def _check_below_2_31(fn: str, what: str, value: int) -> None:
    if value > _BELOW_2_31:
        raise ValueError(f"deep_gemm.{fn}: {what} must be below 2^31 (the kernels index with 32-bit integers), "
                         f"got {value}")


def _check_powers_of_two(fn: str, name: str, x: torch.Tensor) -> None:
    """CPU only: every value is +0.0, a positive power of two or +inf (sign and mantissa 0)."""
    bits = x.contiguous().view(torch.int32)
    bad = torch.bitwise_and(bits, _NOT_EXPONENT_BITS) != 0
    if bool(bad.any()):
        where = [int(i) for i in bad.nonzero()[0]]
        value = float(x[tuple(where)])
        raise ValueError(f"deep_gemm.{fn}: {name}: every scale must be a positive power of two (or +0.0): UE8M0 "
                         f"keeps only the exponent (round with deep_gemm.utils.ceil_to_ue8m0 first), got {value!r} "
                         f"at index {tuple(where)} ({int(bad.sum())} such values)")


def _exponents(x: torch.Tensor) -> torch.Tensor:
    """The biased fp32 exponent of every value, as int64 (0..255)."""
    bits = x.contiguous().view(torch.int32).to(torch.int64)
    return torch.bitwise_and(torch.bitwise_right_shift(bits, 23), 0xFF)


def _pack4(exps: torch.Tensor) -> torch.Tensor:
    """[..., 4 * n, cols] exponents (int64) -> [..., n, cols] int32 words, row 4p + j in byte j."""
    *lead, rows, cols = exps.shape
    e = exps.reshape(*lead, rows // 4, 4, cols)
    words = e[..., 0, :] | (e[..., 1, :] << 8) | (e[..., 2, :] << 16) | (e[..., 3, :] << 24)
    return torch.where(words >= (1 << 31), words - (1 << 32), words).to(torch.int32)


def _psum_rows(ends: list[int], rows: int, alignment: int) -> torch.Tensor:
    """Bool [rows]: the rows some group of a psum layout holds (see the docstring)."""
    held = torch.zeros(rows, dtype=torch.bool)
    prev = 0
    for g, v in enumerate(ends):
        end = max(int(v), 0)
        start = 0 if g == 0 else _align(prev, alignment)
        if start < end:
            held[start:end] = True
        prev = end
    return held


def get_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor,
                                                 psum_layout: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``sf`` (fp32 powers of two) packed into UE8M0, MN-major, TMA-aligned (upstream's SM100 format).

    ``sf``: fp32 ``[mn, sf_k]`` or ``[groups, mn, sf_k]`` (any strides), each value a positive
    power of two (or +0.0), e.g. from :func:`deep_gemm.utils.ceil_to_ue8m0`. Each value
    becomes its 8-bit biased exponent (``(bits >> 23) & 0xff``), and four consecutive K
    blocks share one int32: K block ``4p + j`` lands in byte ``j`` (bits ``8j..8j+7``) of
    packed column ``p``. When ``sf_k`` is not a multiple of 4 the last word's high bytes
    are 0.

    Returns a fresh int32 tensor ``[mn, ceil(sf_k / 4)]`` (or ``[groups, mn, ceil(sf_k / 4)]``)
    with strides ``(1, align(mn, 4))`` (``(ceil(sf_k / 4) * align(mn, 4), 1, align(mn, 4))``):
    MN-major, every column padded to 16 bytes for TMA. The pad rows ``[mn, align(mn, 4))``
    of the storage are 0.

    ``psum_layout`` (optional, int32 ``[G]`` on sf's device; one group of scales only): the
    m-grouped psum layout, cumulative row ends. Group ``g`` holds rows
    ``[align(ends[g-1], alignment), ends[g])`` (``ends[-1] = 0``; ``alignment`` is
    :func:`get_mk_alignment_for_contiguous_layout`; negative ends count as 0). Rows that no
    group holds (the padding between groups, whose scales may be uninitialised memory) are
    not read and pack to 0.

    The values are checked on CPU tensors only (a ValueError names the first bad one). On
    CUDA nothing is read on the host (no sync, CUDA-graph safe): the kernel packs the
    exponent bits as above whatever the sign and mantissa, the same words the CPU path gives
    for valid input. Upstream ( ``csrc/jit_kernels/impls/smxx_layout.hpp`` ) behaves the same
    except that its kernel traps on a non-power-of-two and leaves the pad rows unwritten.
    """
    fn = "get_mn_major_tma_aligned_packed_ue8m0_tensor"
    _args.tensor(fn, "sf", sf, "a torch.float32 tensor of scale factors")
    _args.opt_tensor(fn, "psum_layout", psum_layout, "an int32 tensor of cumulative row ends")
    if sf.dim() not in (2, 3):
        raise ValueError(f"deep_gemm.{fn}: sf must be 2-D [mn, sf_k] or 3-D [groups, mn, sf_k], got shape "
                         f"{tuple(sf.shape)}")
    if sf.dtype != torch.float32:
        raise ValueError(f"deep_gemm.{fn}: sf must be torch.float32 (power-of-two scales), got {sf.dtype}")
    _check_sf_device(fn, sf)
    groups = sf.shape[0] if sf.dim() == 3 else 1
    mn, sf_k = sf.shape[-2], sf.shape[-1]
    for what, v in (("sf.shape[0] (groups)", groups), ("mn", mn), ("sf_k", sf_k)):
        _check_below_2_31(fn, what, v)
    if psum_layout is not None:
        _check_int_table(fn, "psum_layout", psum_layout, sf, "cumulative row ends")
        if groups != 1:
            raise ValueError(f"deep_gemm.{fn}: psum_layout needs one group of scales (2-D sf, or 3-D with "
                             f"shape[0] == 1), got sf of shape {tuple(sf.shape)}")
    if sf.device.type != "cpu":  # CUDA (the layout kernel) and meta (shapes only)
        return torch.ops.deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout)

    x = sf if sf.dim() == 3 else sf.unsqueeze(0)
    exps = torch.zeros((groups, _align(mn, 4), _align(sf_k, 4)), dtype=torch.int64)
    if psum_layout is None:
        _check_powers_of_two(fn, "sf", x)
        exps[:, :mn, :sf_k] = _exponents(x)
    else:
        held = _psum_rows(psum_layout.tolist(), mn, torch.ops.deep_gemm.get_mk_alignment_for_contiguous_layout())
        _check_powers_of_two(fn, "sf", x[:, held])
        exps[:, :mn, :sf_k] = _exponents(x) * held.view(1, mn, 1)
    words = _pack4(exps.transpose(1, 2))  # [groups, packed_k, align(mn, 4)]: the storage
    out = words.contiguous().transpose(1, 2)[:, :mn, :]
    return out if sf.dim() == 3 else out[0]


def _k_group_rows(layout: list[int], gran_k: int, k_alignment: int, use_psum_layout: bool) -> list[int]:
    """Each group's number of scale rows (K blocks), from grouped_layout's values."""
    rows, prev = [], 0
    for g, v in enumerate(layout):
        end = max(int(v), 0)
        k = end
        if use_psum_layout:
            start = 0 if g == 0 else _align(prev, k_alignment)
            k = max(end - start, 0)
            prev = end
        rows.append(-(-k // gran_k))
    return rows


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor, grouped_layout: torch.Tensor,
                                                           ks_cpu: Optional[Sequence[int]], gran_k: int,
                                                           k_alignment: Optional[int] = None,
                                                           use_psum_layout: bool = False) -> torch.Tensor:
    """K-grouped scales (the k-grouped GEMM's SFA/SFB) packed into UE8M0, each group on its own.

    ``sf``: fp32 ``[sf_rows, mn]`` (any strides; ``mn`` a multiple of 4), one row per K block
    of ``gran_k`` elements, the groups back to back: group ``g``'s ``n_g = ceil(k_g / gran_k)``
    rows start at row ``n_0 + ... + n_{g-1}``. Values: positive powers of two (or +0.0), as
    for :func:`get_mn_major_tma_aligned_packed_ue8m0_tensor`.

    Returns a fresh contiguous int32 ``[packed_rows, mn]`` (MN-major: row ``p`` is packed
    K-block row ``p``, ``mn`` words). Group ``g`` owns ``ceil(n_g / 4)`` packed rows, the
    groups back to back; its packed row ``q`` holds its K blocks ``4q .. 4q + 3`` (K block
    ``4q + j`` in byte ``j``), so each group's K blocks are padded to a multiple of 4 on
    their own (bytes past ``n_g`` are 0): split along dim 0 by ``ceil(n_g / 4)``, group ``g``
    equals ``get_mn_major_tma_aligned_packed_ue8m0_tensor(sf_g.T).T``.

    ``grouped_layout``: int32 ``[G]`` on sf's device (read by the kernel, never on the host).
    With ``use_psum_layout=False`` it holds each group's K size ``k_g`` (the same values as
    ``ks_cpu``); with ``use_psum_layout=True`` cumulative K ends: group ``g`` spans
    ``[align(ends[g-1], k_alignment), ends[g])`` (``ends[-1] = 0``), so
    ``k_g = ends[g] - align(ends[g-1], k_alignment)`` and the scale rows stay compact.

    ``ks_cpu``: each group's K size on the host. Required without the psum layout: ``G``
    values, each a multiple of ``gran_k`` and of ``k_alignment``, with
    ``sum(ks_cpu) / gran_k == sf_rows``; then ``packed_rows = sum(ceil(k / gran_k / 4))``.
    With the psum layout it only sizes the output: the real or the aligned K sizes give
    ``sum(ceil(ceil(k / gran_k) / 4))`` rows (the aligned ones an upper bound), and ``None``
    or ``[]`` the upper bound ``(sf_rows + 3 * G) // 4``. Packed rows past the last group's
    are 0.

    ``gran_k`` (>= 1): K elements per scale (upstream's GEMMs use 32 or 128).
    ``k_alignment`` (>= 1): the K alignment of the groups. Default (``None``, as in vLLM's
    four-argument call and upstream before the argument existed): ``gran_k``, the weakest
    alignment the layout has anyway (every ``k_g`` a whole number of K blocks), which
    upstream's own test passes too. Upstream's GEMMs need multiples of 128 (SM90: exactly 128).

    CPU tensors also have their values checked: ``grouped_layout`` against ``ks_cpu`` (or,
    psum, non-decreasing ends that fit ``sf`` and the output) and the scales of every group.
    On CUDA nothing is read on the host (no sync, CUDA-graph safe); inconsistent values give
    wrong words, never an access out of bounds.
    """
    fn = "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"
    _args.tensor(fn, "sf", sf, "a torch.float32 tensor of scale factors")
    _args.tensor(fn, "grouped_layout", grouped_layout, "an int32 tensor of the groups' K sizes (or ends)")
    ks = None if ks_cpu is None else _args.ints(fn, "ks_cpu", ks_cpu, what="ints (each group's K)")
    gran_k = _args.int_(fn, "gran_k", gran_k, min=1, max=_BELOW_2_31)
    k_alignment = gran_k if k_alignment is None else _args.int_(fn, "k_alignment", k_alignment, min=1,
                                                                max=_BELOW_2_31)
    use_psum_layout = _args.bool_(fn, "use_psum_layout", use_psum_layout)
    if sf.dim() != 2:
        raise ValueError(f"deep_gemm.{fn}: sf must be 2-D [sf_rows, mn] (K blocks as rows), got shape "
                         f"{tuple(sf.shape)}")
    if sf.dtype != torch.float32:
        raise ValueError(f"deep_gemm.{fn}: sf must be torch.float32 (power-of-two scales), got {sf.dtype}")
    _check_sf_device(fn, sf)
    sf_rows, mn = sf.shape
    _check_below_2_31(fn, "sf.shape[0] (K blocks)", sf_rows)
    _check_below_2_31(fn, "mn", mn)
    if mn % 4 != 0:
        raise ValueError(f"deep_gemm.{fn}: sf.shape[1] (mn) must be a multiple of 4 (the output's rows must be "
                         f"16-byte aligned for TMA), got shape {tuple(sf.shape)}")
    groups = _check_int_table(fn, "grouped_layout", grouped_layout, sf,
                              "cumulative K ends" if use_psum_layout else "each group's K")
    if not ks:
        if not use_psum_layout:
            raise ValueError(f"deep_gemm.{fn}: ks_cpu must list every group's K ({groups} groups), got "
                             f"{ks_cpu!r}; only use_psum_layout=True works without it")
        packed_rows = (sf_rows + 3 * groups) // 4
    else:
        if len(ks) != groups:
            raise ValueError(f"deep_gemm.{fn}: ks_cpu has {len(ks)} entries but grouped_layout holds {groups} "
                             f"groups")
        for i, k in enumerate(ks):
            if not 0 <= k <= _BELOW_2_31:
                raise ValueError(f"deep_gemm.{fn}: ks_cpu[{i}] must be in [0, 2^31), got {k}")
            if not use_psum_layout and (k % gran_k or k % k_alignment):
                raise ValueError(f"deep_gemm.{fn}: ks_cpu[{i}] must be a multiple of gran_k ({gran_k}) and of "
                                 f"k_alignment ({k_alignment}), got {k}")
        rows = [-(-k // gran_k) for k in ks]
        if not use_psum_layout and sum(rows) != sf_rows:
            raise ValueError(f"deep_gemm.{fn}: sf.shape[0] must be sum(ks_cpu) / gran_k = {sum(rows)} (one row per "
                             f"K block), got shape {tuple(sf.shape)}")
        packed_rows = sum(-(-n // 4) for n in rows)
    _check_below_2_31(fn, "the output's rows", packed_rows)
    if sf.device.type != "cpu":  # CUDA (the layout kernel) and meta (shapes only)
        return torch.ops.deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
            sf, grouped_layout, list(ks or []), gran_k, k_alignment, use_psum_layout)

    layout = grouped_layout.tolist()
    if not use_psum_layout and ks is not None and layout != list(ks):
        raise ValueError(f"deep_gemm.{fn}: grouped_layout must hold ks_cpu's values (each group's K), got "
                         f"{layout[:8]}{'...' if groups > 8 else ''} for ks_cpu {list(ks)[:8]}"
                         f"{'...' if groups > 8 else ''}")
    if use_psum_layout:
        for g, v in enumerate(layout):
            if v < 0 or (g > 0 and v < layout[g - 1]):
                raise ValueError(f"deep_gemm.{fn}: grouped_layout (psum) must hold non-negative, non-decreasing "
                                 f"K ends, got {v} at index {g}" + (f" after {layout[g - 1]}" if g else ""))
    rows = _k_group_rows(layout, gran_k, k_alignment, use_psum_layout)
    if sum(rows) > sf_rows:
        raise ValueError(f"deep_gemm.{fn}: grouped_layout's groups need {sum(rows)} scale rows but sf has "
                         f"{sf_rows} (shape {tuple(sf.shape)})")
    needed = sum(-(-n // 4) for n in rows)
    if needed > packed_rows:
        raise ValueError(f"deep_gemm.{fn}: ks_cpu sizes the output for {packed_rows} packed rows but "
                         f"grouped_layout's groups need {needed}")
    _check_powers_of_two(fn, "sf", sf[:sum(rows)])
    out = torch.zeros((packed_rows, mn), dtype=torch.int32)
    exps = _exponents(sf)
    row = packed = 0
    for n in rows:
        words = -(-n // 4)
        block = torch.zeros((4 * words, mn), dtype=torch.int64)
        block[:n] = exps[row:row + n]
        out[packed:packed + words] = _pack4(block)
        row, packed = row + n, packed + words
    return out


__all__ = ["get_mn_major_tma_aligned_tensor", "transform_sf_into_required_layout",
           "get_mn_major_tma_aligned_packed_ue8m0_tensor", "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"]
