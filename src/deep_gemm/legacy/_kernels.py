"""The Triton kernels behind ``deep_gemm.legacy`` (imported only on the first call).

Two kernels, each a plain ``@triton.jit`` function plus autotuned wrappers built on demand:

* ``_m_grouped_kernel``: ``d[i] = A(i) @ B[g(i)]^T`` over an M-grouped contiguous layout,
  ``A(i)`` being ``a[i]`` or (``GATHER``) ``a[row_indices[i]]``. One program computes one
  ``BLOCK_M x BLOCK_N`` tile of ``d``.
* ``_k_grouped_kernel``: ``d[g] (+)= sum_{k in group g} A(k)^T (outer) B(k)`` over a
  K-grouped contiguous layout, where either ``A(k) = a[k_indices[k]]`` (``FUSED_A``) or
  ``B(k) = b[k_indices[k]]``. One program computes one ``BLOCK_M x BLOCK_N`` tile of one
  group's ``d[g]``.

No atomics: every element of ``d`` is written by exactly one program, with a fixed
reduction order for a given config, so results repeat bit for bit run to run.
Offsets that can pass 2^31 elements (row index times row pitch, group index times group
size) are computed in int64.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

# ---- configs ---------------------------------------------------------------------------

# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps), a short list for A100 and H100/H200.
# BLOCK_M and BLOCK_K are 64 or 128, so they divide every contiguous-layout alignment (a
# power of two >= 64) at least as large; ``configs_for`` keeps those that do.
_M_CONFIGS = (
    (128, 256, 64, 3, 8),
    (128, 128, 64, 4, 8),
    (64, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 64, 64, 4, 4),
)
# The K-grouped loads are gathered: each sits one pipeline stage behind the load of its
# indices, which leaves num_stages - 2 operand buffers (Hopper; one fewer on Ampere), hence
# the deeper num_stages here.
_K_CONFIGS = (
    (128, 256, 64, 5, 8),
    (128, 128, 64, 6, 8),
    (64, 128, 64, 6, 4),
    (128, 64, 64, 6, 4),
    (64, 64, 64, 5, 4),
)
_GROUP_M = 8
# Operand-ring budget: A100 allows 163 KiB per block (H100/H200 227 KiB); the epilogue
# reuses the ring's memory.
SMEM_LIMIT = 160 * 1024


def smem_bytes(cfg: tuple, which: str) -> int:
    """Upper bound of the operand ring of ``cfg``: (BLOCK_M + BLOCK_N) * BLOCK_K BF16
    elements per buffer, ``num_stages`` buffers (``num_stages - 2`` for the K-grouped kernel)."""
    bm, bn, bk, stages, _ = cfg
    return (bm + bn) * bk * 2 * (stages if which == "m" else stages - 2)


def configs_for(alignment: int, which: str) -> list:
    """The configs of kernel ``which`` (``'m'`` or ``'k'``) whose grouped block (``BLOCK_M``,
    or ``BLOCK_K`` for ``'k'``) divides ``alignment``, so that the tiles of the contiguous
    layout line up with its groups."""
    out = []
    for cfg in _M_CONFIGS if which == "m" else _K_CONFIGS:
        bm, bn, bk, stages, warps = cfg
        block = bm if which == "m" else bk
        if alignment % block == 0 and smem_bytes(cfg, which) <= SMEM_LIMIT:
            out.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": _GROUP_M},
                                     num_stages=stages, num_warps=warps))
    return out


# Triton's CPU interpreter (``TRITON_INTERPRET=1`` when this module is imported: the
# decorators below read it then) runs the kernels on CPU tensors.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# ---- device code -----------------------------------------------------------------------


@triton.jit
def _tile_ids(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Walk GROUP_M tile rows down a column of tiles before moving right, so that
    # consecutive programs share B (and A) tiles in L2.
    width = GROUP_M * num_pid_n
    first_m = (pid // width) * GROUP_M
    rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % rows
    pid_n = (pid % width) // rows
    return pid_m, pid_n


@triton.jit
def _mma(acc, a, b, UPCAST: tl.constexpr):
    # UPCAST (interpreter only): Triton's CPU interpreter multiplies BF16 tiles wrongly, FP32
    # ones exactly; the products of BF16 values are exact in FP32 either way.
    if UPCAST:
        return acc + tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return acc + tl.dot(a, b)


@triton.jit
def _m_grouped_mainloop(acc, a_ptr, b_ptr, a_rows, row_ok, g, offs_n, n_ok, K, k_stop,
                        stride_bg, stride_bn, stride_bk,
                        B_K_MAJOR: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    # acc += A[rows where row_ok] @ B[g]^T, K-loop over [0, k_stop), with k_stop <= K.
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + a_rows[:, None] * K + offs_k[None, :]
    b_base = b_ptr + tl.cast(g, tl.int64) * stride_bg
    if B_K_MAJOR:
        b_ptrs = b_base + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None]
        b_step = BLOCK_K
    else:
        b_ptrs = b_base + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :]
        b_step = tl.cast(stride_bk, tl.int64) * BLOCK_K
    for k in range(0, k_stop, BLOCK_K):
        k_ok = offs_k < K - k
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = _mma(acc, a, b, UPCAST)
        a_ptrs += BLOCK_K
        b_ptrs += b_step
    return acc


# M_BUCKET / K_BUCKET only feed the autotuning key; left unspecialized they compile once.
@triton.jit(do_not_specialize=["M_BUCKET"])
def _m_grouped_kernel(a_ptr, b_ptr, d_ptr, m_indices_ptr, row_indices_ptr,
                      M, N, K, M_SRC, G,
                      stride_bg, stride_bn, stride_bk,
                      M_BUCKET,
                      GATHER: tl.constexpr, B_K_MAJOR: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, UPCAST: tl.constexpr = False):
    pid_m, pid_n = _tile_ids(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N

    # Each row's group; a negative (or out-of-range) one is padding: a zero row of d.
    grp = tl.load(m_indices_ptr + offs_m, mask=m_ok, other=-1)
    ok = m_ok & (grp >= 0) & (grp < G)
    if GATHER:
        src = tl.load(row_indices_ptr + offs_m, mask=ok, other=-1)
        a_ok = ok & (src >= 0) & (src < M_SRC)
        a_rows = tl.where(a_ok, src, 0).to(tl.int64)
    else:
        a_ok = ok
        a_rows = offs_m.to(tl.int64)

    # In the contiguous layout a tile holds one group (and maybe padding); the first loop
    # serves it. A tile that mixes groups anyway gets one more pass per further group.
    g_lo = tl.min(tl.where(ok, grp, G), axis=0)
    g_hi = tl.max(tl.where(ok, grp, -1), axis=0)
    k_stop = tl.where(g_lo <= g_hi, K, 0)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = _m_grouped_mainloop(acc, a_ptr, b_ptr, a_rows, a_ok & (grp == g_lo), g_lo, offs_n, n_ok, K, k_stop,
                              stride_bg, stride_bn, stride_bk, B_K_MAJOR, BLOCK_K, UPCAST)
    for g in range(g_lo + 1, g_hi + 1):
        rows_g = a_ok & (grp == g)
        if tl.max(rows_g.to(tl.int32), axis=0) > 0:
            acc = _m_grouped_mainloop(acc, a_ptr, b_ptr, a_rows, rows_g, g, offs_n, n_ok, K, K,
                                      stride_bg, stride_bn, stride_bk, B_K_MAJOR, BLOCK_K, UPCAST)

    d_ptrs = d_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit(do_not_specialize=["K_BUCKET"])
def _k_grouped_kernel(a_ptr, b_ptr, d_ptr, k_indices_ptr, k_start_ptr, k_end_ptr,
                      M, N, K, K_SRC,
                      K_BUCKET,
                      FUSED_A: tl.constexpr, ACC: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, UPCAST: tl.constexpr = False):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    tiles = num_pid_m * num_pid_n
    grp = pid // tiles
    pid_m, pid_n = _tile_ids(pid % tiles, num_pid_m, num_pid_n, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N

    # The group's K rows, clamped to [0, K); an empty range contributes nothing.
    k_lo = tl.maximum(tl.load(k_start_ptr + grp), 0)
    k_hi = tl.minimum(tl.load(k_end_ptr + grp), K)

    d_ptrs = d_ptr + grp.to(tl.int64) * M * N + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    d_mask = m_ok[:, None] & n_ok[None, :]
    if ACC:
        # Start from d[g] (read only when the group has rows: an empty one is left as it was).
        m_lim = tl.where(k_hi > k_lo, M, 0)
        acc = tl.load(d_ptrs, mask=(offs_m < m_lim)[:, None] & n_ok[None, :], other=0.0).to(tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    offs_k = tl.arange(0, BLOCK_K)
    for k in range(k_lo, k_hi, BLOCK_K):
        ks = k + offs_k
        k_ok = ks < k_hi
        # Row k of the logical A (and B) operand; the fused one is gathered, a negative
        # (or out-of-range) index reading a zero row.
        src = tl.load(k_indices_ptr + ks, mask=k_ok, other=-1)
        src_ok = k_ok & (src >= 0) & (src < K_SRC)
        src = tl.where(src_ok, src, 0).to(tl.int64)
        if FUSED_A:
            a_rows = src
            a_rok = src_ok
            b_rows = ks.to(tl.int64)
            b_rok = k_ok
        else:
            a_rows = ks.to(tl.int64)
            a_rok = k_ok
            b_rows = src
            b_rok = src_ok
        # Both operands are row-major with K as the row: the [BLOCK_M, BLOCK_K] A tile is
        # read M-contiguous (MN-major), the [BLOCK_K, BLOCK_N] B tile N-contiguous.
        a = tl.load(a_ptr + a_rows[None, :] * M + offs_m[:, None], mask=a_rok[None, :] & m_ok[:, None], other=0.0)
        b = tl.load(b_ptr + b_rows[:, None] * N + offs_n[None, :], mask=b_rok[:, None] & n_ok[None, :], other=0.0)
        acc = _mma(acc, a, b, UPCAST)

    if ACC:
        if k_hi > k_lo:
            tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=d_mask)
    else:
        tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=d_mask)


# ---- launchers -------------------------------------------------------------------------

# The interpreter runs one fixed, small config (autotuning would time CPU runs).
_INTERPRET_META = {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2, "UPCAST": True}
_tuned: dict = {}


def _bucket(x: int) -> int:
    """Autotuning key for a size that changes call to call (the tokens of an MoE step):
    its power-of-two ceiling, capped, so that tuning reruns a handful of times at most."""
    return 1 << min(max(x - 1, 0).bit_length(), 16)


def _kernel(which: str, alignment: int, acc: bool = False):
    key = (which, alignment, acc)
    if key not in _tuned:
        if which == "m":
            fn = triton.autotune(configs_for(alignment, "m"),
                                 key=["N", "K", "M_BUCKET", "GATHER", "B_K_MAJOR"])(_m_grouped_kernel)
        else:
            # The timing runs write d; when it is accumulated into, it is an input too, so
            # it is saved before and restored after each of them.
            fn = triton.autotune(configs_for(alignment, "k"), key=["M", "N", "K_BUCKET", "FUSED_A", "ACC"],
                                 restore_value=["d_ptr"] if acc else [])(_k_grouped_kernel)
        _tuned[key] = fn
    return _tuned[key]


def launch_m_grouped(a, b, d, m_indices, row_indices, *, b_k_major: bool, alignment: int) -> None:
    """``b`` is the logical ``[G, N, K]`` operand (K- or N-major, see ``b_k_major``)."""
    M, K = d.shape[0], b.shape[2]
    N, G = d.shape[1], b.shape[0]
    gather = row_indices is not None
    args = (a, b, d, m_indices, row_indices if gather else m_indices,
            M, N, K, a.shape[0], G, b.stride(0), b.stride(1), b.stride(2), _bucket(M))
    flags = {"GATHER": gather, "B_K_MAJOR": b_k_major}
    if INTERPRET:
        grid = (triton.cdiv(M, _INTERPRET_META["BLOCK_M"]) * triton.cdiv(N, _INTERPRET_META["BLOCK_N"]),)
        _m_grouped_kernel[grid](*args, **flags, **_INTERPRET_META)
        return
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    _kernel("m", alignment)[grid](*args, **flags)


def launch_k_grouped(a, b, d, k_indices, k_start, k_end, *, fused_a: bool, acc: bool, alignment: int) -> None:
    G, M, N = d.shape
    K = k_indices.shape[0]
    k_src = a.shape[0] if fused_a else b.shape[0]
    args = (a, b, d, k_indices, k_start, k_end, M, N, K, k_src, _bucket(K // max(G, 1)))
    flags = {"FUSED_A": fused_a, "ACC": acc}
    if INTERPRET:
        grid = (triton.cdiv(M, _INTERPRET_META["BLOCK_M"]) * triton.cdiv(N, _INTERPRET_META["BLOCK_N"]) * G,)
        _k_grouped_kernel[grid](*args, **flags, **_INTERPRET_META)
        return
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]) * G,)
    _kernel("k", alignment, acc)[grid](*args, **flags)
