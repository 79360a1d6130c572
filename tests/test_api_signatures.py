"""The public names keep upstream DeepGEMM's signatures: parameter names, order and defaults.

The table below is upstream's registration list (names, parameters, defaults) for the
families this build implements. A caller written for upstream passes these positionally or by
keyword, so every listed parameter must appear in the same position with the same default.
Ours may add parameters after them only with defaults (older spellings such as ``m_indices``,
``num_groups``), never before or between them.
"""

import inspect

import pytest

deep_gemm = pytest.importorskip("deep_gemm")

_REQUIRED = inspect.Parameter.empty

# name -> upstream's parameters: (name, default), _REQUIRED for none.
_FP8_GEMM = [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("c", None), ("recipe", None), ("recipe_a", None),
             ("recipe_b", None)]
_M_GROUPED = [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("grouped_layout", _REQUIRED), ("recipe", None),
              ("recipe_a", None), ("recipe_b", None), ("compiled_dims", "nk"), ("disable_ue8m0_cast", False),
              ("use_psum_layout", False), ("ensure_zero_padding", True)]
_MASKED = [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("masked_m", _REQUIRED), ("expected_m", _REQUIRED),
           ("recipe", None), ("recipe_a", None), ("recipe_b", None), ("compiled_dims", "nk"),
           ("disable_ue8m0_cast", False)]
_K_GROUPED = [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("ks_cpu", _REQUIRED),
              ("grouped_layout", _REQUIRED), ("c", None), ("recipe", (1, 1, 128)), ("compiled_dims", "mn"),
              ("use_psum_layout", False)]

UPSTREAM = {
    **{f"fp8_fp4_gemm_{lay}": _FP8_GEMM + [("compiled_dims", "nk" if lay in ("nt", "nn") else "mn"),
                                          ("disable_ue8m0_cast", False)] for lay in ("nt", "nn", "tn", "tt")},
    **{f"fp8_gemm_{lay}": _FP8_GEMM + [("compiled_dims", "nk" if lay in ("nt", "nn") else "mn"),
                                      ("disable_ue8m0_cast", False)] for lay in ("nt", "nn", "tn", "tt")},
    "m_grouped_fp8_fp4_gemm_nt_contiguous": _M_GROUPED + [("expected_m_for_psum_layout", None)],
    "m_grouped_fp8_fp4_gemm_nn_contiguous": _M_GROUPED,
    "m_grouped_fp8_fp4_gemm_nt_masked": _MASKED,
    "m_grouped_fp8_gemm_nt_contiguous": _M_GROUPED + [("expected_m_for_psum_layout", None)],
    "m_grouped_fp8_gemm_nn_contiguous": _M_GROUPED,
    "m_grouped_fp8_gemm_nt_masked": _MASKED,
    "fp8_m_grouped_gemm_nt_masked": _MASKED,
    "k_grouped_fp8_gemm_tn_contiguous": _K_GROUPED,
    "k_grouped_fp8_gemm_nt_contiguous": _K_GROUPED,
    "fp8_gemm_nt_skip_head_mid": [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("head_splits", _REQUIRED),
                                  ("recipe", None), ("compiled_dims", "nk"), ("disable_ue8m0_cast", False)],
    **{f"bf16_gemm_{lay}": [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("c", None),
                             ("compiled_dims", "nk" if lay in ("nt", "nn") else "mn")] for lay in ("nt", "nn", "tn", "tt")},
    "m_grouped_bf16_gemm_nt_contiguous": [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED),
                                          ("grouped_layout", _REQUIRED), ("compiled_dims", "nk"),
                                          ("use_psum_layout", False), ("ensure_zero_padding", True),
                                          ("expected_m_for_psum_layout", None)],
    "m_grouped_bf16_gemm_nn_contiguous": [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED),
                                          ("grouped_layout", _REQUIRED), ("compiled_dims", "nk"),
                                          ("use_psum_layout", False), ("ensure_zero_padding", True)],
    "m_grouped_bf16_gemm_nt_masked": [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("masked_m", _REQUIRED),
                                      ("expected_m", _REQUIRED), ("compiled_dims", "nk")],
    "k_grouped_bf16_gemm_tn_contiguous": [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("ks_cpu", _REQUIRED),
                                          ("grouped_layout", _REQUIRED), ("c", None), ("compiled_dims", "mn"),
                                          ("use_psum_layout", False)],
    **{f"cublaslt_gemm_{lay}": [("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("c", None)]
       for lay in ("nt", "nn", "tn", "tt")},
    "einsum": [("expr", _REQUIRED), ("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("c", None),
               ("use_cublaslt", False)],
    "fp8_einsum": [("expr", _REQUIRED), ("a", _REQUIRED), ("b", _REQUIRED), ("d", _REQUIRED), ("c", None),
                   ("recipe", (1, 128, 128))],
    "transform_sf_into_required_layout": [("sf", _REQUIRED), ("mn", _REQUIRED), ("k", _REQUIRED),
                                          ("recipe", _REQUIRED), ("num_groups", None), ("is_sfa", None),
                                          ("disable_ue8m0_cast", False), ("psum_layout", None)],
    "get_tma_aligned_size": [("x", _REQUIRED), ("element_size", _REQUIRED)],
    "get_mn_major_tma_aligned_tensor": [("sf", _REQUIRED)],
    "set_mk_alignment_for_contiguous_layout": [("new_value", _REQUIRED)],
    "get_mk_alignment_for_contiguous_layout": [],
    "get_theoretical_mk_alignment_for_contiguous_layout": [("expected_m", None)],
    "set_num_sms": [("new_num_sms", _REQUIRED)],
    "get_num_sms": [],
    "set_tc_util": [("new_tc_util", _REQUIRED)],
    "get_tc_util": [],
    "set_pdl": [("new_enable_pdl", _REQUIRED)],
    "get_pdl": [],
    "set_ignore_compile_dims": [("new_value", _REQUIRED)],
    "set_block_size_multiple_of": [("new_value", _REQUIRED)],
}

UTILS = ["ceil_div", "align", "ceil_to_ue8m0", "pack_ue8m0_to_int", "unpack_ue8m0_from_int", "per_token_cast_to_fp8",
         "per_channel_cast_to_fp8", "per_block_cast_to_fp8", "per_custom_dims_cast_to_fp8", "per_token_cast_to_fp4",
         "transpose_packed_fp4", "cast_back_from_fp4", "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor",
         "transform_sf_into_required_layout", "set_mk_alignment_for_contiguous_layout",
         "get_mk_alignment_for_contiguous_layout", "get_theoretical_mk_alignment_for_contiguous_layout",
         "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout"]
TESTING = {"bench": None, "bench_kineto": None, "calc_diff": ["x", "y"], "count_bytes": None,
           "assert_bitwise_equal": ["x", "y", "label"], "get_arch_major": [], "test_filter": None,
           "ignore_env": None, "empty_suppress": None, "suppress_stdout_stderr": None}


# Required upstream, None by default here: an older keyword spelling may stand in for them
# (``m_indices=``, ``ks=`` / ``ks_tensor=``), and leaving both out still raises TypeError.
_ALIASED = {"grouped_layout", "ks_cpu"}


def _check(fn, expected):
    params = list(inspect.signature(fn).parameters.values())
    got = [(p.name, _REQUIRED if p.name in _ALIASED and p.default is None else p.default)
           for p in params[: len(expected)]]
    assert got == expected, f"{fn.__name__}: upstream's parameters {expected}, ours begin {got}"
    for p in params[: len(expected)]:
        assert p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD, f"{fn.__name__}: {p.name} must be positional"
    for p in params[len(expected):]:
        assert p.default is not _REQUIRED or p.kind == inspect.Parameter.VAR_KEYWORD, (
            f"{fn.__name__}: an added parameter {p.name} must have a default")


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_signature_matches_upstream(name):
    fn = getattr(deep_gemm, name)
    _check(fn, UPSTREAM[name])


@pytest.mark.parametrize("alias, target", [
    ("fp8_gemm_nt", "fp8_fp4_gemm_nt"), ("fp8_gemm_tt", "fp8_fp4_gemm_tt"),
    ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nt_contiguous"),
    ("m_grouped_fp8_gemm_nn_contiguous", "m_grouped_fp8_fp4_gemm_nn_contiguous"),
    ("m_grouped_fp8_gemm_nt_masked", "m_grouped_fp8_fp4_gemm_nt_masked"),
    ("fp8_m_grouped_gemm_nt_masked", "m_grouped_fp8_fp4_gemm_nt_masked"),
])
def test_fp8_names_are_aliases_of_fp8_fp4(alias, target):
    assert getattr(deep_gemm, alias) is getattr(deep_gemm, target)


@pytest.mark.parametrize("name", UTILS)
def test_utils_names(name):
    import deep_gemm.utils as utils

    fn = getattr(utils, name)
    assert callable(fn)
    if name in UPSTREAM:
        _check(fn, UPSTREAM[name])


@pytest.mark.parametrize("name", sorted(TESTING))
def test_testing_names(name):
    import deep_gemm.testing as testing

    fn = getattr(testing, name)
    assert callable(fn)
    if TESTING[name] is not None:
        names = [p.name for p in inspect.signature(fn).parameters.values()][: len(TESTING[name])]
        assert names == TESTING[name]


def test_alignment_aliases_agree():
    import deep_gemm.utils as utils

    value = deep_gemm.get_mk_alignment_for_contiguous_layout()
    assert utils.get_m_alignment_for_contiguous_layout() == value
    assert utils.get_k_alignment_for_contiguous_layout() == value


def test_theoretical_alignment_takes_vllm_num_groups():
    assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(32, 8) == \
        deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(32)
    assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(4096, 8) == \
        deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(4096)
    with pytest.raises(TypeError, match="num_groups"):
        deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(32, "8")


def test_aliased_arguments_still_required():
    with pytest.raises(TypeError, match="grouped_layout"):
        deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous((None, None), (None, None), None)
    with pytest.raises(TypeError, match="ks_cpu"):
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous((None, None), (None, None), None)
