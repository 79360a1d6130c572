"""Seeded bad-argument fuzzing of the public surface (the issue's acceptance bar).

Every public name of ``deep_gemm.__all__`` (and the ``deep_gemm.utils`` layout functions)
is called with one argument of a valid shape-only (meta) call replaced by a bad one:
wrong Python types, bools / floats / strings for ints, negative and huge ints, wrong
ranks, wrong dtypes, CPU tensors among meta ones, mismatched sizes, overlapping or
broadcast operands (stride 0, row pitch below the row extent), K >= 2**31, empty shapes.

Each case runs in a child process (many per child; the child reports each case's outcome
as one JSON line, and a child that dies or hangs is re-run one case per process to name
the culprit). A case passes when

* the child exits normally (no signal) within the time limit, and
* the call is refused with a *clear* error: a TypeError, ValueError, RuntimeError or
  NotImplementedError whose message starts with ``deep_gemm.<name>:`` (``<name>`` the
  public function, the function it aliases, or a ``torch.ops.deep_gemm`` op) and names
  an argument: one of the function's parameters, the op's schema arguments, a scale
  (``sfa``/``sfb``) or a problem dimension (M, N, K, G, M_sum, max_m) as a whole word
  (SM100-only names: the message says SM100), or
* for the "empty" category only, the call may also be accepted (a GEMM with M = 0 or
  N = 0 has nothing to compute), but K = 0 and G = 0 must be refused.

Every other accepted call is a failure ("silent"): every bad argument must be refused.
Overlapping operands (stride 0, a row pitch below the row) and K >= 2**31 are counted
on their own as well (test_overlapping_and_oversized_operands_are_refused).

DG_FUZZ_SEED overrides the seed; the counts are printed.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any, Optional

import pytest

SEED = int(os.environ.get("DG_FUZZ_SEED", "20261215"))
BATCH = 160
BATCH_TIMEOUT_S = 120
CASE_TIMEOUT_S = 60
CLEAR_TYPES = ("TypeError", "ValueError", "RuntimeError", "NotImplementedError")
DIMS = ("M", "N", "K", "G", "M_sum", "max_m", "sfa", "sfb")


@dataclasses.dataclass
class Case:
    id: int
    fn: str
    category: str
    arg: str
    desc: str
    build: Callable[[], tuple[tuple, dict]]  # -> (args, kwargs); only the child calls it
    may_accept: bool = False


# ---- valid shape-only calls (meta tensors) -----------------------------------------


def _torch():
    import torch

    return torch


def _e(*shape, dtype=None, device="meta"):
    torch = _torch()
    return torch.empty(*shape, dtype=dtype or torch.float32, device=device)


M, N, K, G = 128, 256, 256, 2


def _dense(form: str, m=M, n=N, k=K) -> dict[str, Any]:
    torch = _torch()
    fp8 = torch.float8_e4m3fn
    a, sfa = _e(m, k, dtype=fp8), _e(m, (k + 127) // 128)
    b, sfb = _e(n, k, dtype=fp8), _e((n + 127) // 128, (k + 127) // 128)
    d = _e(m, n, dtype=torch.bfloat16)
    # The letters: t = A given [K, M] (a transposed view), n (second) = B given [K, N].
    av = (a.t(), sfa.t()) if form[0] == "t" else (a, sfa)
    bv = (b.t(), sfb.t()) if form[1] == "n" else (b, sfb)
    return dict(a=av, b=bv, d=d)


def _bf16_contig(nn: bool, m_sum=256, n=N, k=K, g=G) -> dict[str, Any]:
    torch = _torch()
    bf = torch.bfloat16
    b = _e(g, k, n, dtype=bf) if nn else _e(g, n, k, dtype=bf)
    return dict(a=_e(m_sum, k, dtype=bf), b=b, d=_e(m_sum, n, dtype=bf), grouped_layout=_e(m_sum, dtype=torch.int32))


def _bf16_masked() -> dict[str, Any]:
    torch = _torch()
    bf = torch.bfloat16
    return dict(a=_e(G, 64, K, dtype=bf), b=_e(G, N, K, dtype=bf), d=_e(G, 64, N, dtype=bf),
                masked_m=_e(G, dtype=torch.int32), expected_m=32)


def _bf16_k_grouped() -> dict[str, Any]:
    torch = _torch()
    bf = torch.bfloat16
    ks = [128, 0]
    return dict(a=_e(128, M, dtype=bf), b=_e(128, N, dtype=bf), d=_e(2, M, N), ks_cpu=ks,
                grouped_layout=_e(2, dtype=torch.int32))


def _skip_head_mid() -> dict[str, Any]:
    base = _dense("nt", n=512)
    torch = _torch()
    base["d"] = _e(M, 512 + 2 * 64, dtype=torch.bfloat16)
    base["head_splits"] = (128, 64, 128)
    return base


def _cublaslt(form: str, m=M, n=N, k=K) -> dict[str, Any]:
    torch = _torch()
    a = _e(k, m, dtype=torch.bfloat16) if form[0] == "t" else _e(m, k, dtype=torch.bfloat16)
    b = _e(n, k, dtype=torch.bfloat16) if form[1] == "t" else _e(k, n, dtype=torch.bfloat16)
    return dict(a=a, b=b, d=_e(m, n, dtype=torch.bfloat16))


def _contig(nn: bool, m_sum=256, n=N, k=K, g=G) -> dict[str, Any]:
    torch = _torch()
    fp8 = torch.float8_e4m3fn
    b, sfb = _e(g, n, k, dtype=fp8), _e(g, (n + 127) // 128, (k + 127) // 128)
    if nn:
        b, sfb = b.transpose(1, 2), sfb.transpose(1, 2)
    return dict(a=(_e(m_sum, k, dtype=fp8), _e(m_sum, (k + 127) // 128)), b=(b, sfb),
                d=_e(m_sum, n, dtype=torch.bfloat16), grouped_layout=_e(m_sum, dtype=torch.int32))


def _masked(max_m=128, n=N, k=K, g=G) -> dict[str, Any]:
    torch = _torch()
    fp8 = torch.float8_e4m3fn
    return dict(a=(_e(g, max_m, k, dtype=fp8), _e(g, max_m, (k + 127) // 128)),
                b=(_e(g, n, k, dtype=fp8), _e(g, (n + 127) // 128, (k + 127) // 128)),
                d=_e(g, max_m, n, dtype=torch.bfloat16), masked_m=_e(g, dtype=torch.int32), expected_m=64)


def _paged_mqa() -> dict[str, Any]:
    """The paged MQA logits: B = 4, next_n = 1, H = 64, D = 128, 40 pages of 64 tokens."""
    torch = _torch()
    return dict(q=_e(4, 1, 64, 128, dtype=torch.float8_e4m3fn), kv_cache=_e(40, 64, 1, 132, dtype=torch.uint8),
                weights=_e(4, 64), context_lens=_e(4, dtype=torch.int32), block_table=_e(4, 16, dtype=torch.int32),
                schedule_meta=_e(133, 2, dtype=torch.int32), max_context_len=100)


def _kgrouped(tn: bool, m=M, n=N, ks=(256, 128)) -> dict[str, Any]:
    torch = _torch()
    fp8 = torch.float8_e4m3fn
    sum_k = sum(ks)
    a = _e(sum_k, m, dtype=fp8) if tn else _e(sum_k * m, dtype=fp8)
    b = _e(sum_k, n, dtype=fp8) if tn else _e(sum_k * n, dtype=fp8)
    return dict(a=(a, _e(sum_k // 128, m)), b=(b, _e(sum_k // 128, n)), d=_e(len(ks), m, n), ks_cpu=list(ks),
                grouped_layout=_e(len(ks), dtype=torch.int32))


def _mqa_logits(s=8, skv=64, h=64, d=128) -> dict[str, Any]:
    torch = _torch()
    return dict(q=_e(s, h, d, dtype=torch.float8_e4m3fn), kv=(_e(skv, d, dtype=torch.float8_e4m3fn), _e(skv)),
                weights=_e(s, h), cu_seq_len_k_start=_e(s, dtype=torch.int32),
                cu_seq_len_k_end=_e(s, dtype=torch.int32))


# name -> (baseline kwargs builder, {param: kind}); kinds drive the mutations.
GEMM_KW = {"c": "opt_tensor", "recipe": "opt_recipe3", "recipe_a": "opt_recipe2", "recipe_b": "opt_recipe2",
           "compiled_dims": "str", "disable_ue8m0_cast": "bool"}


def _specs() -> dict[str, tuple[Callable[[], dict], dict[str, str]]]:
    s: dict[str, tuple[Callable[[], dict], dict[str, str]]] = {}
    for form in ("nt", "nn", "tn", "tt"):
        for prefix in ("fp8_gemm_", "fp8_fp4_gemm_"):
            s[prefix + form] = ((lambda f=form: _dense(f)), {"a": "pair", "b": "pair", "d": "tensor", **GEMM_KW})
    for prefix in ("m_grouped_fp8_gemm_", "m_grouped_fp8_fp4_gemm_"):
        for nn in (False, True):
            s[f"{prefix}{'nn' if nn else 'nt'}_contiguous"] = (
                (lambda nn=nn: _contig(nn)),
                {"a": "pair", "b": "pair", "d": "tensor", "grouped_layout": "tensor", "recipe": "opt_recipe3",
                 "recipe_a": "opt_recipe2", "recipe_b": "opt_recipe2", "compiled_dims": "str",
                 "disable_ue8m0_cast": "bool", "use_psum_layout": "bool", "ensure_zero_padding": "bool",
                 **({} if nn else {"expected_m_for_psum_layout": "opt_int"})})
    for name in ("m_grouped_fp8_gemm_nt_masked", "m_grouped_fp8_fp4_gemm_nt_masked", "fp8_m_grouped_gemm_nt_masked"):
        s[name] = (_masked, {"a": "pair", "b": "pair", "d": "tensor", "masked_m": "tensor", "expected_m": "pos_int",
                             "recipe": "opt_recipe3", "recipe_a": "opt_recipe2", "recipe_b": "opt_recipe2",
                             "compiled_dims": "str", "disable_ue8m0_cast": "bool"})
    for tn in (False, True):
        s[f"k_grouped_fp8_gemm_{'tn' if tn else 'nt'}_contiguous"] = (
            (lambda tn=tn: _kgrouped(tn)),
            {"a": "pair", "b": "pair", "d": "tensor", "ks_cpu": "ints", "grouped_layout": "tensor", "c": "opt_tensor",
             "recipe": "recipe3", "compiled_dims": "str", "use_psum_layout": "bool"})
    for form in ("nt", "nn", "tn", "tt"):
        s[f"cublaslt_gemm_{form}"] = ((lambda f=form: _cublaslt(f)),
                                      {"a": "tensor", "b": "tensor", "d": "tensor", "c": "opt_tensor"})
    for form in ("nt", "nn", "tn", "tt"):
        s[f"bf16_gemm_{form}"] = ((lambda f=form: _cublaslt(f)),
                                  {"a": "tensor", "b": "tensor", "d": "tensor", "c": "opt_tensor", "compiled_dims": "str"})
    for nn in (False, True):
        s[f"m_grouped_bf16_gemm_{'nn' if nn else 'nt'}_contiguous"] = (
            (lambda nn=nn: _bf16_contig(nn)),
            {"a": "tensor", "b": "tensor", "d": "tensor", "grouped_layout": "tensor", "compiled_dims": "str",
             "use_psum_layout": "bool", "ensure_zero_padding": "bool",
             **({} if nn else {"expected_m_for_psum_layout": "opt_int"})})
    for name in ("m_grouped_bf16_gemm_nt_masked", "bf16_m_grouped_gemm_nt_masked"):
        s[name] = (_bf16_masked, {"a": "tensor", "b": "tensor", "d": "tensor", "masked_m": "tensor",
                                  "expected_m": "pos_int", "compiled_dims": "str"})
    s["k_grouped_bf16_gemm_tn_contiguous"] = (
        _bf16_k_grouped, {"a": "tensor", "b": "tensor", "d": "tensor", "ks_cpu": "ints", "grouped_layout": "tensor",
                          "c": "opt_tensor", "compiled_dims": "str", "use_psum_layout": "bool"})
    s["einsum"] = (lambda: dict(expr="bhr,hdr->bhd", a=_e(4, 8, 64, dtype=_torch().bfloat16),
                                b=_e(8, 32, 64, dtype=_torch().bfloat16), d=_e(4, 8, 32, dtype=_torch().bfloat16)),
                   {"expr": "str", "a": "tensor", "b": "tensor", "d": "tensor", "c": "opt_tensor", "use_cublaslt": "bool"})
    s["fp8_einsum"] = (lambda: dict(expr="bhr,hdr->bhd", a=(_e(4, 8, 128, dtype=_torch().float8_e4m3fn), _e(4, 8, 1)),
                                    b=(_e(8, 128, 128, dtype=_torch().float8_e4m3fn), _e(8, 1, 1)),
                                    d=_e(4, 8, 128, dtype=_torch().bfloat16)),
                       {"expr": "str", "a": "pair", "b": "pair", "d": "tensor", "c": "opt_tensor", "recipe": "recipe3"})
    s["tf32_hc_prenorm_gemm"] = (lambda: dict(a=_e(M, 128, dtype=_torch().bfloat16), b=_e(24, 128), d=_e(M, 24),
                                              sqr_sum=_e(M)),
                                 {"a": "tensor", "b": "tensor", "d": "tensor", "sqr_sum": "tensor",
                                  "num_splits": "opt_pos_int"})
    s["fp8_gemm_nt_skip_head_mid"] = (_skip_head_mid, {"a": "pair", "b": "pair", "d": "tensor", "head_splits": "ints",
                                                       "recipe": "opt_recipe3", "compiled_dims": "str",
                                                       "disable_ue8m0_cast": "bool"})
    for name in ("fp8_mqa_logits", "fp8_fp4_mqa_logits"):
        s[name] = (_mqa_logits, {"q": "tensor", "kv": "pair", "weights": "tensor", "cu_seq_len_k_start": "tensor",
                                 "cu_seq_len_k_end": "tensor", "clean_logits": "bool", "max_seqlen_k": "nonneg_int"})
    paged = {"q": "tensor", "kv_cache": "tensor", "weights": "tensor", "context_lens": "tensor", "block_table": "tensor",
             "schedule_meta": "tensor", "max_context_len": "nonneg_int", "clean_logits": "bool", "indices": "opt_tensor"}
    s["fp8_paged_mqa_logits"] = (_paged_mqa, paged)
    s["fp8_fp4_paged_mqa_logits"] = (_paged_mqa, paged)
    s["get_paged_mqa_logits_metadata"] = (
        lambda: dict(context_lens=_e(4, dtype=_torch().int32), block_kv=64, num_sms=132),
        {"context_lens": "tensor", "block_kv": "pos_int", "num_sms": "pos_int", "indices": "opt_tensor"})
    s["get_mn_major_tma_aligned_tensor"] = (lambda: dict(sf=_e(M, 2)), {"sf": "tensor"})
    s["get_mn_major_tma_aligned_packed_ue8m0_tensor"] = (lambda: dict(sf=_e(M, 2)),
                                                         {"sf": "tensor", "psum_layout": "opt_tensor"})
    s["get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"] = (
        lambda: dict(sf=_e(3, M), grouped_layout=_e(2, dtype=_torch().int32), ks_cpu=[256, 128], gran_k=128),
        {"sf": "tensor", "grouped_layout": "tensor", "ks_cpu": "ints", "gran_k": "pos_int", "k_alignment": "opt_pos_int",
         "use_psum_layout": "bool"})
    s["transform_sf_into_required_layout"] = (
        lambda: dict(sf=_e(M, 2), mn=M, k=K, recipe=(1, 128)),
        {"sf": "tensor", "mn": "nonneg_int", "k": "nonneg_int", "recipe": "recipe2", "num_groups": "opt_pos_int",
         "is_sfa": "opt_bool", "disable_ue8m0_cast": "bool", "psum_layout": "opt_tensor"})
    s["set_num_sms"] = (lambda: dict(new_num_sms=8), {"new_num_sms": "pos_int"})
    s["set_tc_util"] = (lambda: dict(new_tc_util=50), {"new_tc_util": "percent"})
    s["set_pdl"] = (lambda: dict(new_enable_pdl=True), {"new_enable_pdl": "bool"})
    s["check_jit"] = (lambda: dict(gpu=False), {"gpu": "bool"})
    s["set_ignore_compile_dims"] = (lambda: dict(new_value=True), {"new_value": "bool"})
    s["set_block_size_multiple_of"] = (lambda: dict(new_value=8), {"new_value": "pos_int"})
    s["set_mk_alignment_for_contiguous_layout"] = (lambda: dict(new_value=128), {"new_value": "pos_int"})
    s["get_theoretical_mk_alignment_for_contiguous_layout"] = (lambda: dict(expected_m=64),
                                                                {"expected_m": "opt_nonneg_int"})
    s["get_tma_aligned_size"] = (lambda: dict(x=100, element_size=4), {"x": "nonneg_int", "element_size": "elem"})
    return s


SM100_ONLY = ("SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe", "fp8_fp4_mega_moe",
              "bf16_mega_moe")
NO_PARAMS = ("get_num_sms", "get_tc_util", "get_pdl", "get_mk_alignment_for_contiguous_layout", "get_jit",
             "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout")


# ---- bad values ---------------------------------------------------------------------


class _Obj:
    def __repr__(self) -> str:
        return "<object>"


def _type_values(kind: str, t) -> list[tuple[str, Any]]:
    """Values of a wrong Python type for a parameter of `kind` (t: a valid tensor)."""
    common = [("a str", "x"), ("a float", 1.5), ("a dict", {}), ("an object", _Obj())]
    if kind == "pair":
        return common + [("None", None), ("a tensor alone", t), ("a 1-tuple", (t,)), ("(tensor, None)", (t, None)),
                         ("(None, tensor)", (None, t)), ("a 3-tuple", (t, t, t)), ("an int", 5)]
    if kind in ("tensor", "opt_tensor"):
        return common + [("an int", 5), ("a list", [1, 2]), ("a pair", (t, t)), ("a bool", True)] + (
            [("None", None)] if kind == "tensor" else [])
    if "int" in kind or kind in ("percent", "elem"):
        out = common + [("a bool", True), ("a float of int value", 5.0), ("a str of digits", "5"), ("a list", [5])]
        return out + ([("None", None)] if not kind.startswith("opt") else [])
    if kind in ("bool", "opt_bool"):
        return [("an int 1", 1), ("an int 0", 0), ("a str", "yes"), ("a float", 1.0), ("a tensor", t)] + (
            [("None", None)] if kind == "bool" else [])
    if kind == "str":
        return [("None", None), ("an int", 5), ("bytes", b"nk"), ("a list", ["n", "k"]), ("a tensor", t)]
    if kind.startswith("opt_recipe") or kind.startswith("recipe"):
        return [("an int", 5), ("a str", "1,128,128"), ("a float", 1.5), ("a dict", {}), ("a tensor", t),
                ("floats", (1.0, 128.0, 128.0)), ("bools", (True, 128, 128)), ("str items", ("1", "128"))]
    if kind == "ints":
        return [("an int", 256), ("a str", "256"), ("floats", [256.0, 128.0]), ("bools", [True, False]),
                ("a tensor", t), ("None items", [None, 128])]
    raise AssertionError(kind)


def _value_values(kind: str) -> list[tuple[str, Any]]:
    """Values of the right type but out of range."""
    huge = [("2**63", 2**63), ("2**70", 2**70), ("-2**70", -(2**70))]
    if kind in ("pos_int", "opt_pos_int"):
        return [("zero", 0), ("-1", -1), ("-5", -5)] + huge
    if kind in ("nonneg_int", "opt_nonneg_int"):
        return [("-1", -1), ("-5", -5)] + huge
    if kind == "percent":
        return [("zero", 0), ("101", 101), ("-5", -5)] + huge
    if kind == "elem":
        return [("zero", 0), ("3", 3), ("16", 16), ("-4", -4)] + huge
    if kind == "opt_int":
        return [("zero", 0), ("-1", -1)] + huge
    if kind == "str":
        return [("'xyz'", "xyz"), ("'nkq'", "nkq"), ("'NK'", "NK")]
    if kind in ("opt_recipe3", "recipe3"):
        return [("(1, 64, 128)", (1, 64, 128)), ("2 elements", (1, 128)), ("4 elements", (1, 128, 128, 1)),
                ("(128, 128, 128)", (128, 128, 128)), ("empty", ()), ("(0, 0, 0)", (0, 0, 0))]
    if kind == "opt_recipe2":
        return [("1 element", (1,)), ("3 elements", (1, 128, 128)), ("empty", ())]
    if kind == "recipe2":
        return [("(1, 64)", (1, 64)), ("(2, 128)", (2, 128)), ("1 element", (1,)), ("4 elements", (1, 1, 1, 128)),
                ("(-1, 128)", (-1, 128))]
    if kind == "ints":
        return [("a negative K", [-128, 256]), ("K not a multiple of 128", [100, 256]), ("too few", [256]),
                ("too many", [256, 128, 128]), ("2**31", [2**31, 128]), ("2**70", [2**70, 128])]
    return []


# ---- case generation ----------------------------------------------------------------


def _tensor_params(base: dict) -> list[tuple[str, Optional[int]]]:
    """(param, index inside a pair or None) of every tensor in a baseline call."""
    torch = _torch()
    out = []
    for name, v in base.items():
        if isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, torch.Tensor) for x in v):
            out += [(name, 0), (name, 1)]
        elif isinstance(v, torch.Tensor):
            out.append((name, None))
    return out


def _label(param: str, idx: Optional[int]) -> str:
    return param if idx is None else f"{param}[{idx}]"


def _replace(base: dict, param: str, idx: Optional[int], value: Any) -> dict:
    out = dict(base)
    if idx is None:
        out[param] = value
    else:
        pair = list(base[param])
        pair[idx] = value
        out[param] = tuple(pair)
    return out


def _get(base: dict, param: str, idx: Optional[int]):
    return base[param] if idx is None else base[param][idx]


def _rank_variants(t, valid_ranks=()) -> list[tuple[str, Any]]:
    """Tensors of the same dtype with other numbers of dimensions (none of valid_ranks)."""
    torch = _torch()
    out = [("0-D", torch.empty((), dtype=t.dtype, device="meta"))]
    if t.dim() > 1:
        out.append((f"{t.dim() - 1}-D", torch.empty(t.shape[1:], dtype=t.dtype, device="meta")))
    out.append((f"{t.dim() + 1}-D", torch.empty((2, *t.shape), dtype=t.dtype, device="meta")))
    out.append((f"{t.dim() + 2}-D", torch.empty((2, 2, *t.shape), dtype=t.dtype, device="meta")))
    return [(desc, v) for desc, v in out if v.dim() not in valid_ranks]


def _dtype_variants(t) -> list[tuple[str, Any]]:
    torch = _torch()
    dtypes = [torch.float16, torch.float64, torch.int64, torch.bfloat16, torch.float32, torch.int32,
              torch.float8_e5m2, torch.int8, torch.bool]
    return [(str(dt), torch.empty_strided(t.shape, t.stride(), dtype=dt, device="meta")) for dt in dtypes
            if dt != t.dtype]


def _shape_variants(t) -> list[tuple[str, Any]]:
    torch = _torch()
    out = []
    for dim in range(t.dim()):
        for delta in (1, -1, 128):
            shape = list(t.shape)
            if shape[dim] + delta < 0:
                continue
            shape[dim] += delta
            out.append((f"shape[{dim}]{delta:+d}", torch.empty(shape, dtype=t.dtype, device="meta")))
    return out


def _overlap_variants(t) -> list[tuple[str, Any]]:
    """The same shape, rows overlapping: broadcast (stride 0) or a row pitch below the row extent."""
    torch = _torch()
    if t.dim() < 2 or t.shape[-2] < 2 or t.shape[-1] < 2:
        return []
    rows, cols = t.shape[-2], t.shape[-1]
    lead = tuple(t.shape[:-2])
    bcast = torch.empty((*lead, 1, cols), dtype=t.dtype, device="meta").expand(*lead, rows, cols)
    pitch = max(16, cols // 2) if cols > 16 else 1
    lead_strides = tuple(rows * cols for _ in lead)
    short = torch.empty_strided((*lead, rows, cols), (*lead_strides, pitch, 1), dtype=t.dtype, device="meta")
    return [("broadcast rows (stride 0)", bcast), (f"row pitch {pitch} < row extent {cols}", short)]


def generate(seed: int = SEED) -> list[Case]:
    import deep_gemm
    from deep_gemm.utils import layout

    rng = random.Random(seed)
    specs = _specs()
    cases: list[Case] = []

    def add(fn, category, arg, desc, build, may_accept=False):
        cases.append(Case(len(cases), fn, category, arg, desc, build, may_accept))

    names = [n for n in deep_gemm.__all__ if n not in ("__version__", "testing", "utils")]
    facade_objs = {id(getattr(deep_gemm, n)) for n in names}
    for n in layout.LAZY_NAMES:
        try:
            obj = getattr(deep_gemm.utils, n)
        except AttributeError:
            continue  # not provided (see test_surface_is_covered)
        if id(obj) not in facade_objs:  # the same function as a facade name is fuzzed there
            names.append(f"utils.{n}")
    for name in names:
        short = name[6:] if name.startswith("utils.") else name
        if short in SM100_ONLY:
            for desc, args in (("no arguments", ()), ("junk arguments", (1, "x", None))):
                add(name, "sm100", "-", desc, lambda args=args: (args, {}))
            continue
        if short in NO_PARAMS:
            continue
        assert short in specs, f"no fuzz spec for deep_gemm.{name}: add one to tests/test_fuzz.py"
        base_fn, kinds = specs[short]
        base = base_fn()
        t_any = _e(4, 4)
        for param, kind in kinds.items():
            for desc, v in rng.sample(_type_values(kind, t_any), k=min(5, len(_type_values(kind, t_any)))):
                add(name, "type", param, desc, _mk(base_fn, param, None, v))
            for desc, v in _value_values(kind):
                add(name, "value", param, desc, _mk(base_fn, param, None, v))
        for param, idx in _tensor_params(base):
            t = _get(base, param, idx)
            lab = _label(param, idx)
            # Valid ranks besides the baseline's: 3-D scales (groups) in get_mn_major_tma_aligned_tensor;
            # the k-grouped nt operands are "sum(ks) * M elements, contiguous", whatever the rank.
            valid = (2, 3) if short in ("get_mn_major_tma_aligned_tensor",
                                        "get_mn_major_tma_aligned_packed_ue8m0_tensor") else ()
            if short == "get_paged_mqa_logits_metadata":
                valid = (1, 2)  # context_lens [B] or [B, next_n]
            if short == "k_grouped_fp8_gemm_nt_contiguous" and idx == 0:
                valid = (1, 2, 3, 4)
            for desc, v in _rank_variants(t, valid):
                add(name, "rank", lab, desc, _mk(base_fn, param, idx, v))
            dtypes = _dtype_variants(t)
            if short.startswith(("bf16_gemm_", "cublaslt_gemm_")) and param == "d":
                dtypes = [(desc, v) for desc, v in dtypes if v.dtype != _torch().float32]  # fp32 d is valid there
            for desc, v in rng.sample(dtypes, k=min(3, len(dtypes))):
                add(name, "dtype", lab, desc, _mk(base_fn, param, idx, v))
            if not short.startswith(("get_mn_major", "transform_sf")):  # CPU is served there (plain torch)
                add(name, "device", lab, "a CPU tensor among meta ones",
                    _mk_cpu(base_fn, param, idx))
                shapes = _shape_variants(t)
                if short.startswith("m_grouped_bf16") and short.endswith("contiguous") and param == "b":
                    # More groups in b than the index layout names are valid (unused experts).
                    shapes = [(desc, v) for desc, v in shapes if not desc.startswith("shape[0]")]
                if short == "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor" and param == "sf":
                    shapes = [(d, v) for d, v in shapes if d != "shape[1]+128"]  # another mn (a multiple of 4): valid
                if short == "get_paged_mqa_logits_metadata":
                    shapes = []  # any batch, any next_n
                elif "paged_mqa" in short and param in ("kv_cache", "block_table", "schedule_meta"):
                    # More or fewer cache blocks, table columns or CTAs are valid (not the other sizes).
                    free = {"kv_cache": "shape[0]", "block_table": "shape[1]", "schedule_meta": "shape[0]"}[param]
                    shapes = [(d, v) for d, v in shapes if not d.startswith(free)]
                for desc, v in rng.sample(shapes, k=min(3, len(shapes))):
                    add(name, "shape", lab, desc, _mk(base_fn, param, idx, v))
            if param in ("a", "b", "d") and idx in (None, 0) and not short.startswith("k_grouped"):
                for desc, v in _overlap_variants(_as_given(t)):
                    add(name, "overlap", lab, desc, _mk(base_fn, param, idx, v))
        _size_cases(add, name, short)
        _empty_cases(add, name, short)
    return cases


def _as_given(t):
    return t


def _mk(base_fn, param, idx, value):
    return lambda: ((), _replace(base_fn(), param, idx, value))


def _mk_cpu(base_fn, param, idx):
    def build():
        base = base_fn()
        return (), _replace(base, param, idx, _cpu_like(_get(base, param, idx)))
    return build


def _cpu_like(t):
    torch = _torch()
    return torch.empty(t.shape, dtype=t.dtype, device="cpu")


def _size_cases(add, name: str, short: str) -> None:
    """K >= 2**31 (shapes only: meta tensors hold no memory)."""
    for k in (2**31, 2**32 + 128):
        if short.startswith(("fp8_gemm_", "fp8_fp4_gemm_")) and short.endswith("nt"):
            add(name, "size_overflow", "a", f"K = {k}", lambda k=k: ((), _dense("nt", k=k)))
        elif short in ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nt_contiguous"):
            add(name, "size_overflow", "a", f"K = {k}", lambda k=k: ((), _contig(False, k=k)))
        elif short in ("m_grouped_fp8_gemm_nt_masked", "m_grouped_fp8_fp4_gemm_nt_masked",
                       "fp8_m_grouped_gemm_nt_masked"):
            add(name, "size_overflow", "a", f"K = {k}", lambda k=k: ((), _masked(k=k)))


def _empty_cases(add, name: str, short: str) -> None:
    if short.startswith(("fp8_gemm_", "fp8_fp4_gemm_")) and short != "fp8_gemm_nt_skip_head_mid":
        form = short[-2:]
        add(name, "empty", "a", "M = 0", lambda: ((), _dense(form, m=0)), may_accept=True)
        add(name, "empty", "b", "N = 0", lambda: ((), _dense(form, n=0)), may_accept=True)
        add(name, "empty", "a", "K = 0", lambda: ((), _dense(form, k=0)))
    elif short.startswith("m_grouped") and short.endswith("contiguous"):
        nn = "_nn_" in short
        add(name, "empty", "a", "M_sum = 0", lambda: ((), _contig(nn, m_sum=0)), may_accept=True)
        add(name, "empty", "b", "G = 0", lambda: ((), _contig(nn, g=0)))
        add(name, "empty", "a", "K = 0", lambda: ((), _contig(nn, k=0)))
    elif short.endswith("masked"):
        add(name, "empty", "a", "max_m = 0", lambda: ((), _masked(max_m=0)), may_accept=True)
        add(name, "empty", "a", "G = 0", lambda: ((), _masked(g=0)))
        add(name, "empty", "a", "K = 0", lambda: ((), _masked(k=0)))
    elif short.startswith("k_grouped"):
        tn = "_tn_" in short
        add(name, "empty", "ks_cpu", "every group empty", lambda: ((), _kgrouped(tn, ks=(0, 0))), may_accept=True)
        add(name, "empty", "d", "M = 0", lambda: ((), _kgrouped(tn, m=0)), may_accept=True)
        add(name, "empty", "ks_cpu", "no groups", lambda: ((), _kgrouped(tn, ks=())), may_accept=True)


# ---- the child ----------------------------------------------------------------------


def _child(seed: int, ids: list[int]) -> None:
    import deep_gemm

    cases = generate(seed)
    knobs = (deep_gemm.get_tc_util(), deep_gemm.get_pdl(), deep_gemm.get_mk_alignment_for_contiguous_layout())
    for i in ids:
        case = cases[i]
        print(json.dumps({"id": i, "start": True}), flush=True)
        fn = _resolve(case.fn)
        try:
            args, kwargs = case.build()
            fn(*args, **kwargs)
            rec = {"id": i, "outcome": "accepted"}
        except BaseException as exc:  # noqa: BLE001  (the outcome is what is recorded)
            rec = {"id": i, "outcome": "refused", "type": type(exc).__name__, "msg": str(exc).split("\n")[0][:400]}
        finally:
            deep_gemm.set_tc_util(knobs[0])
            deep_gemm.set_pdl(knobs[1])
            deep_gemm.set_mk_alignment_for_contiguous_layout(knobs[2])
            deep_gemm.set_ignore_compile_dims(False)
            deep_gemm.set_block_size_multiple_of(1)
        print(json.dumps(rec), flush=True)


def _resolve(name: str):
    import deep_gemm

    return getattr(deep_gemm.utils, name[6:]) if name.startswith("utils.") else getattr(deep_gemm, name)


def _run_batch(seed: int, ids: list[int], timeout: float) -> tuple[dict[int, dict], Optional[str]]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(seed), ",".join(map(str, ids))]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        stdout, problem = out.stdout, None
        if out.returncode != 0:
            problem = f"exit status {out.returncode}" + (" (signal)" if out.returncode < 0 else "") + \
                      f": {out.stderr.strip().splitlines()[-1:] if out.stderr.strip() else ''}"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        problem = f"timed out after {timeout} s"
    results = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if "outcome" in rec:
                results[rec["id"]] = rec
    return results, problem


def run_all(seed: int = SEED) -> tuple[list[Case], dict[int, dict]]:
    import concurrent.futures

    cases = generate(seed)
    ids = [c.id for c in cases]
    batches = [ids[i:i + BATCH] for i in range(0, len(ids), BATCH)]
    results: dict[int, dict] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for batch, (res, problem) in zip(batches, pool.map(lambda b: _run_batch(seed, b, BATCH_TIMEOUT_S), batches), strict=True):
            results.update(res)
            if problem is None:
                continue
            for i in batch:  # find the culprit(s): one case per process
                if i in results:
                    continue
                one, one_problem = _run_batch(seed, [i], CASE_TIMEOUT_S)
                results[i] = one.get(i, {"id": i, "outcome": "crash", "msg": one_problem or "no report"})
                if one_problem is not None and i in one:
                    results[i] = {"id": i, "outcome": "crash", "msg": one_problem}
    return cases, results


# ---- judging ------------------------------------------------------------------------


def _names_for(case: Case) -> tuple[set[str], set[str]]:
    """(allowed message prefixes, words that name an argument) for a case's function."""
    import inspect

    import deep_gemm  # noqa: F401
    from deep_gemm._stubgen import registered_op_names

    fn = _resolve(case.fn)
    short = case.fn[6:] if case.fn.startswith("utils.") else case.fn
    prefixes = {short, getattr(fn, "__name__", short), *registered_op_names()}
    words = set(DIMS)
    try:
        words |= set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        pass
    import torch

    for op in registered_op_names():
        packet = getattr(torch.ops.deep_gemm, op)
        for ov in packet.overloads():
            words |= {a.name for a in getattr(packet, ov)._schema.arguments}
    words.discard("args")
    words.discard("kwargs")
    return prefixes, words


_NAME_CACHE: dict[str, tuple[set[str], set[str]]] = {}


def verdict(case: Case, rec: dict) -> str:
    """'ok' or the kind of failure: crash, silent (accepted), unclear (a refusal that does not
    name the function and an argument)."""
    if rec["outcome"] == "crash":
        return "crash"
    if rec["outcome"] == "accepted":
        return "ok" if case.may_accept else "silent"
    if rec["type"] not in CLEAR_TYPES:
        return "unclear"
    if case.fn not in _NAME_CACHE:
        _NAME_CACHE[case.fn] = _names_for(case)
    prefixes, words = _NAME_CACHE[case.fn]
    m = re.match(r"deep_gemm\.([A-Za-z_0-9]+): (.*)", rec["msg"])
    if not m or m.group(1) not in prefixes:
        return "unclear"
    if case.category == "sm100":
        return "ok" if "SM100" in m.group(2) else "unclear"
    said = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", m.group(2)))
    return "ok" if said & words else "unclear"


@pytest.fixture(scope="module")
def fuzz(request):
    cases, results = run_all()
    judged = [(c, results.get(c.id, {"id": c.id, "outcome": "crash", "msg": "no report"})) for c in cases]
    judged = [(c, r, verdict(c, r)) for c, r in judged]
    counts = collections.Counter()
    by_cat: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for c, r, v in judged:
        outcome = "accepted" if r["outcome"] == "accepted" else "crash" if r["outcome"] == "crash" else "refused"
        counts[outcome] += 1
        by_cat[c.category][outcome] += 1
        by_cat[c.category]["fail: " + v if v != "ok" else "ok"] += 1
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print(f"\n[fuzz] seed {SEED}: {len(cases)} cases, {counts['refused']} refused, {counts['accepted']} accepted, "
              f"{counts['crash']} crashed/hung, over {len({c.fn for c in cases})} names")
        for cat in sorted(by_cat):
            print(f"[fuzz]   {cat:14s} " + ", ".join(f"{k} {v}" for k, v in sorted(by_cat[cat].items())))
    return judged


def _report(bad) -> str:
    lines = [f"{c.fn}({c.arg} = {c.desc}) [{c.category}]: {v}: {r.get('type', '')} {r.get('msg', '')}"
             for c, r, v in bad[:40]]
    return f"{len(bad)} failing cases:\n" + "\n".join(lines)


def test_bad_arguments_are_refused_clearly(fuzz):
    bad = [(c, r, v) for c, r, v in fuzz if v != "ok"]
    assert not bad, _report(bad)


def test_overlapping_and_oversized_operands_are_refused(fuzz):
    """Every overlapping operand (stride 0, row pitch below the row) and every K >= 2**31."""
    cases = [(c, r, v) for c, r, v in fuzz if c.category in ("overlap", "size_overflow")]
    assert len(cases) >= 40
    bad = [(c, r, v) for c, r, v in cases if v != "ok" or r.get("outcome") == "accepted"]
    assert not bad, _report(bad)


def test_surface_is_covered(fuzz):
    import deep_gemm
    from deep_gemm.utils import layout

    fuzzed = {c.fn for c, _, _ in fuzz}
    public = [n for n in deep_gemm.__all__ if n not in ("__version__", "testing", "utils") and n not in NO_PARAMS]
    assert set(public) <= fuzzed, set(public) - fuzzed
    assert len({c.category for c, _, _ in fuzz}) >= 9
    missing = [n for n in layout.LAZY_NAMES if not hasattr(deep_gemm._C, n) and n not in layout._ALIASES]
    assert not missing, missing


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--child":
    _child(int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",") if x])
