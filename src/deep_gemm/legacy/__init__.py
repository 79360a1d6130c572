"""deep_gemm.legacy: Triton BF16 grouped GEMMs for GPUs before Hopper (SM80 / A100 and later).

The names, parameters and semantics follow upstream DeepGEMM's ``deep_gemm.legacy``; the
kernels are this package's own (``_kernels.py``):

* ``m_grouped_bf16_gemm_{nt,nn}_contiguous_tl(a, b, d, m_indices)``: MoE forward / dgrad
  over the M-grouped contiguous layout, ``d[i] = a[i] @ b[m_indices[i]]^T`` (``nn``: ``b``
  given as ``[G, K, N]``), padding rows (``m_indices < 0``) written as zeros;
* ``a_fused_m_grouped_bf16_gemm_{nt,nn}_contiguous_tl(a, b, d, mappings)``: the same with
  A's rows gathered, ``mappings = (m_indices, m_row_indices)``,
  ``d[i] = a[m_row_indices[i]] @ b[m_indices[i]]^T``;
* ``{a,b}_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a, b, d, handle, acc)``: MoE weight
  gradients over the K-grouped contiguous layout, ``handle = (k_indices, k_start, k_end)``,
  ``d[g] (+)= sum_{k_start[g] <= k < k_end[g]} outer(A(k), B(k))`` with A's (``a_fused``)
  or B's (``b_fused``) rows gathered through ``k_indices``.

Importing this package needs no Triton; the first call imports it (``pip install triton``,
or a CUDA build of torch, which brings one) and checks every argument before that. The
tensors must live on one CUDA device of compute capability 8.0 or newer; under
``TRITON_INTERPRET=1`` Triton's CPU interpreter runs the kernels on CPU tensors instead
(slow, for debugging). Each call runs on torch's current CUDA stream, autotunes on the
first call of each problem class (a few configs, ``d`` restored between timing runs when
it is accumulated into), uses no atomics and returns None.
"""

from ._api import (
    a_fused_k_grouped_bf16_gemm_tn_contiguous_tl,
    a_fused_m_grouped_bf16_gemm_nn_contiguous_tl,
    a_fused_m_grouped_bf16_gemm_nt_contiguous_tl,
    b_fused_k_grouped_bf16_gemm_tn_contiguous_tl,
    m_grouped_bf16_gemm_nn_contiguous_tl,
    m_grouped_bf16_gemm_nt_contiguous_tl,
)

__all__ = [
    "m_grouped_bf16_gemm_nt_contiguous_tl",
    "m_grouped_bf16_gemm_nn_contiguous_tl",
    "a_fused_m_grouped_bf16_gemm_nt_contiguous_tl",
    "a_fused_m_grouped_bf16_gemm_nn_contiguous_tl",
    "a_fused_k_grouped_bf16_gemm_tn_contiguous_tl",
    "b_fused_k_grouped_bf16_gemm_tn_contiguous_tl",
]
