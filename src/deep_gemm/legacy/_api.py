"""The public functions of ``deep_gemm.legacy`` (see the package docstring)."""

from __future__ import annotations

import torch

from .. import _C
from ._checks import Checker, load_kernels

_BF16 = (torch.bfloat16,)
_D_K_GROUPED = (torch.float32, torch.bfloat16)


def _alignment() -> int:
    return int(_C.get_mk_alignment_for_contiguous_layout())


def _run(device: torch.device, launch) -> None:
    if device.type == "cuda":
        with torch.cuda.device(device):
            launch()
    else:  # TRITON_INTERPRET=1 on CPU tensors
        launch()


# ---- M-grouped -------------------------------------------------------------------------


def _m_grouped(fn: str, a, b, d, m_indices, m_row_indices, *, b_is_kn: bool, mappings_name: str = "") -> None:
    ck = Checker(fn)
    gather = m_row_indices is not None
    a_dims = "[M_src, K]" if gather else "[M, K]"
    b_dims = "[G, K, N]" if b_is_kn else "[G, N, K]"
    ck.tensor("a", a, _BF16, 2, a_dims)
    ck.contiguous("a", a, a_dims)
    ck.tensor("b", b, _BF16, 3, b_dims)
    b_nk = b.mT if b_is_kn else b  # the logical [G, N, K] operand
    if b_nk.is_contiguous():
        b_k_major = True
    elif b_nk.mT.is_contiguous():
        b_k_major = False
    elif b_is_kn:
        ck.fail(f"b must be a contiguous [G, K, N] tensor or the .mT view of a contiguous [G, N, K] one, "
                f"got shape {tuple(b.shape)} with strides {b.stride()}")
    else:
        ck.fail(f"b must be a contiguous [G, N, K] tensor (K-major) or the .mT view of a contiguous [G, K, N] one "
                f"(MN-major), got shape {tuple(b.shape)} with strides {b.stride()}")
    G, N, K = b_nk.shape
    if K != a.shape[1]:
        where = "b.shape[1]" if b_is_kn else "b.shape[2]"
        ck.fail(f"b's K ({where} = {K}) must equal a's K (a.shape[1] = {a.shape[1]})")

    idx_name = f"{mappings_name}[0] (m_indices)" if gather else "m_indices"
    if gather:
        ck.index(idx_name, m_indices, "[M]", None)
        M = m_indices.numel()
        ck.index(f"{mappings_name}[1] (m_row_indices)", m_row_indices, "[M]", M, "one per row of d, as m_indices")
    else:
        M = a.shape[0]
        ck.index(idx_name, m_indices, "[M]", M, "one per row of a")
    ck.tensor("d", d, _BF16, 2, "[M, N]")
    ck.contiguous("d", d, "[M, N]")
    ck.shape("d", d, (M, N), "[M, N]")
    alignment = _alignment()
    ck.aligned(f"M ({mappings_name}[0].numel())" if gather else "M (a.shape[0])", M, alignment,
               "pad each group's rows up to it, with m_indices = -1 on the padding rows")

    tensors = {"a": a, "b": b, "d": d, idx_name: m_indices}
    if gather:
        tensors[f"{mappings_name}[1] (m_row_indices)"] = m_row_indices
    device = ck.devices(tensors)
    ck.no_overlap("d", d, {k: v for k, v in tensors.items() if k != "d"})
    if M == 0 or N == 0:
        return
    kernels = load_kernels(fn)
    _run(device, lambda: kernels.launch_m_grouped(a, b_nk, d, m_indices, m_row_indices,
                                                  b_k_major=b_k_major, alignment=alignment))


def m_grouped_bf16_gemm_nt_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                         m_indices: torch.Tensor) -> None:
    """M-grouped BF16 GEMM over the contiguous layout (MoE forward / dgrad), ``d = a @ b[g]^T``.

    Args:
        a: ``torch.bfloat16 [M, K]``, contiguous: the tokens, grouped by expert; each
            group's rows start at a multiple of ``get_mk_alignment_for_contiguous_layout()``.
        b: ``torch.bfloat16 [G, N, K]``: one weight per group, either contiguous (K-major)
            or the ``.mT`` view of a contiguous ``[G, K, N]`` tensor (MN-major).
        d: ``torch.bfloat16 [M, N]``, contiguous: written (never read).
        m_indices: ``torch.int32 [M]``, contiguous: the group of each row of ``a``; a
            negative value marks a padding row.

    Writes ``d[i] = a[i] @ b[m_indices[i]]^T`` (FP32 accumulation, rounded to BF16) for every
    row with ``0 <= m_indices[i] < G``; every other row of ``d`` (padding: a negative index;
    an index ``>= G`` is treated the same) is written as zeros. M must be a multiple of the
    alignment; within a block of that many rows, any mix of one group and padding is fine
    (a block that mixes several groups is computed correctly too, only slower). Empty
    groups are simply absent from ``m_indices``. ``M == 0`` or ``N == 0`` is a no-op.
    Returns None.
    """
    _m_grouped("m_grouped_bf16_gemm_nt_contiguous_tl", a, b, d, m_indices, None, b_is_kn=False)


def m_grouped_bf16_gemm_nn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                         m_indices: torch.Tensor) -> None:
    """:func:`m_grouped_bf16_gemm_nt_contiguous_tl` with ``b`` given as ``[G, K, N]``: ``d = a @ b[g]``.

    ``b`` is ``torch.bfloat16 [G, K, N]``, contiguous (MN-major) or the ``.mT`` view of a
    contiguous ``[G, N, K]`` tensor; the call equals the ``nt`` form on ``b.mT``. Returns None.
    """
    _m_grouped("m_grouped_bf16_gemm_nn_contiguous_tl", a, b, d, m_indices, None, b_is_kn=True)


def _unpack_mappings(fn: str, mappings) -> tuple:
    m_indices, m_row_indices = Checker(fn).tuple_of_tensors("mappings", mappings, ("m_indices", "m_row_indices"))
    return m_indices, m_row_indices


def a_fused_m_grouped_bf16_gemm_nt_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 mappings: tuple[torch.Tensor, torch.Tensor]) -> None:
    """M-grouped BF16 GEMM with the token permutation fused into the A loads (gathered rows).

    Args:
        a: ``torch.bfloat16 [M_src, K]``, contiguous: the tokens in their original order.
        b: ``torch.bfloat16 [G, N, K]``, contiguous (K-major) or the ``.mT`` view of a
            contiguous ``[G, K, N]`` tensor (MN-major).
        d: ``torch.bfloat16 [M, N]``, contiguous: written (never read).
        mappings: ``(m_indices, m_row_indices)``, both ``torch.int32 [M]``, contiguous:
            row ``i`` of ``d`` belongs to group ``m_indices[i]`` (negative: padding) and
            reads row ``m_row_indices[i]`` of ``a``.

    Writes ``d[i] = a[m_row_indices[i]] @ b[m_indices[i]]^T`` (FP32 accumulation); rows with a
    negative (or ``>= G``) group are written as zeros, and a negative (or ``>= M_src``) row
    index reads a zero row of ``a`` (so its ``d`` row is zero too). M, the length of the
    mappings (not ``a``'s row count), must be a multiple of
    ``get_mk_alignment_for_contiguous_layout()``, with the group layout of
    :func:`m_grouped_bf16_gemm_nt_contiguous_tl`. ``M == 0`` or ``N == 0`` is a no-op.
    Returns None.
    """
    fn = "a_fused_m_grouped_bf16_gemm_nt_contiguous_tl"
    m_indices, m_row_indices = _unpack_mappings(fn, mappings)
    _m_grouped(fn, a, b, d, m_indices, m_row_indices, b_is_kn=False, mappings_name="mappings")


def a_fused_m_grouped_bf16_gemm_nn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 mappings: tuple[torch.Tensor, torch.Tensor]) -> None:
    """:func:`a_fused_m_grouped_bf16_gemm_nt_contiguous_tl` with ``b`` given as ``[G, K, N]``.

    ``b`` is ``torch.bfloat16 [G, K, N]``, contiguous or the ``.mT`` view of a contiguous
    ``[G, N, K]`` tensor; ``d[i] = a[m_row_indices[i]] @ b[m_indices[i]]``. Returns None.
    """
    fn = "a_fused_m_grouped_bf16_gemm_nn_contiguous_tl"
    m_indices, m_row_indices = _unpack_mappings(fn, mappings)
    _m_grouped(fn, a, b, d, m_indices, m_row_indices, b_is_kn=True, mappings_name="mappings")


# ---- K-grouped -------------------------------------------------------------------------


def _k_grouped(fn: str, a, b, d, handle, acc, *, fused_a: bool) -> None:
    ck = Checker(fn)
    k_indices, k_start, k_end = ck.tuple_of_tensors("handle", handle, ("k_indices", "k_start", "k_end"))
    acc = ck.bool_("acc", acc)
    a_dims = "[K_src, M]" if fused_a else "[K, M]"
    b_dims = "[K, N]" if fused_a else "[K_src, N]"
    ck.tensor("a", a, _BF16, 2, a_dims)
    ck.contiguous("a", a, a_dims)
    ck.tensor("b", b, _BF16, 2, b_dims)
    ck.contiguous("b", b, b_dims)
    M, N = a.shape[1], b.shape[1]
    K = b.shape[0] if fused_a else a.shape[0]
    ck.index("handle[0] (k_indices)", k_indices, "[K]", K,
             "one per row of " + ("b: row k of a used is a[k_indices[k]]" if fused_a
                                  else "a: row k of b used is b[k_indices[k]]"))
    ck.index("handle[1] (k_start)", k_start, "[G]", None)
    G = k_start.numel()
    ck.index("handle[2] (k_end)", k_end, "[G]", G, "one per group, as k_start")
    ck.tensor("d", d, _D_K_GROUPED, 3, "[G, M, N]")
    ck.contiguous("d", d, "[G, M, N]")
    ck.shape("d", d, (G, M, N), "[G, M, N] (G = k_start.numel(), M = a.shape[1], N = b.shape[1])")
    alignment = _alignment()
    ck.aligned("K (" + ("b" if fused_a else "a") + ".shape[0])", K, alignment,
               "pad each group's K rows up to it (a padding row can use k_indices = -1, which reads zeros)")

    tensors = {"a": a, "b": b, "d": d, "handle[0] (k_indices)": k_indices,
               "handle[1] (k_start)": k_start, "handle[2] (k_end)": k_end}
    device = ck.devices(tensors)
    ck.no_overlap("d", d, {k: v for k, v in tensors.items() if k != "d"})
    if G == 0 or M == 0 or N == 0:
        return
    kernels = load_kernels(fn)
    _run(device, lambda: kernels.launch_k_grouped(a, b, d, k_indices, k_start, k_end,
                                                  fused_a=fused_a, acc=acc, alignment=alignment))


def a_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 handle: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                                                 acc: bool) -> None:
    """K-grouped BF16 GEMM (MoE weight gradient) with A's rows gathered: ``d[g] (+)= A_g^T @ b_g``.

    Args:
        a: ``torch.bfloat16 [K_src, M]``, contiguous: rows in their original order (e.g. the
            tokens before the MoE permutation), gathered through ``k_indices``.
        b: ``torch.bfloat16 [K, N]``, contiguous: rows in grouped order.
        d: ``torch.float32`` or ``torch.bfloat16 [G, M, N]``, contiguous: one output per
            group; read as well when ``acc`` is True.
        handle: ``(k_indices, k_start, k_end)``, all ``torch.int32``, contiguous:
            ``k_indices [K]``: row ``k`` of the grouped K dimension is row ``k_indices[k]``
            of ``a``; ``k_start [G]`` / ``k_end [G]``: group ``g`` owns the rows
            ``[k_start[g], k_end[g])``.
        acc: True to accumulate into ``d``, False to overwrite it.

    For every group ``g``::

        d[g] = (d[g] if acc else 0) + sum_{k_start[g] <= k < k_end[g]} outer(a[k_indices[k]], b[k])

    i.e. ``A_g^T @ b[k_start[g]:k_end[g]]`` with ``A_g`` the gathered rows, accumulated in
    FP32 (``d`` read, converted, rounded back once). A group with ``k_end[g] <= k_start[g]``
    is empty: ``d[g]`` is left as it was with ``acc``, else zeroed. A negative (or
    ``>= K_src``) ``k_indices[k]`` reads a zero row. ``k_start`` / ``k_end`` are clamped to
    ``[0, K]`` and need not be aligned (a group's K tail is masked), but K, the total, must be
    a multiple of ``get_mk_alignment_for_contiguous_layout()``: the layout in which DeepGEMM
    pads every group. ``G``, ``M`` or ``N`` of 0 is a no-op. Returns None.
    """
    _k_grouped("a_fused_k_grouped_bf16_gemm_tn_contiguous_tl", a, b, d, handle, acc, fused_a=True)


def b_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 handle: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                                                 acc: bool) -> None:
    """K-grouped BF16 GEMM (MoE weight gradient) with B's rows gathered: ``d[g] (+)= a_g^T @ B_g``.

    Args:
        a: ``torch.bfloat16 [K, M]``, contiguous: rows in grouped order.
        b: ``torch.bfloat16 [K_src, N]``, contiguous: rows in their original order,
            gathered through ``k_indices``.
        d: ``torch.float32`` or ``torch.bfloat16 [G, M, N]``, contiguous: one output per
            group; read as well when ``acc`` is True.
        handle: ``(k_indices, k_start, k_end)``, all ``torch.int32``, contiguous:
            ``k_indices [K]``: row ``k`` of the grouped K dimension is row ``k_indices[k]``
            of ``b``; ``k_start [G]`` / ``k_end [G]``: group ``g`` owns the rows
            ``[k_start[g], k_end[g])``.
        acc: True to accumulate into ``d``, False to overwrite it.

    For every group ``g``::

        d[g] = (d[g] if acc else 0) + sum_{k_start[g] <= k < k_end[g]} outer(a[k], b[k_indices[k]])

    with the rules of :func:`a_fused_k_grouped_bf16_gemm_tn_contiguous_tl` (FP32
    accumulation, empty groups, a negative or ``>= K_src`` index reading a zero row, clamped
    and unaligned group bounds, K a multiple of the alignment, no-op on an empty ``d``).
    Returns None.
    """
    _k_grouped("b_fused_k_grouped_bf16_gemm_tn_contiguous_tl", a, b, d, handle, acc, fused_a=False)
