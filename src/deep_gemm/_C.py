"""deep_gemm._C: the public op surface, a pure-Python facade over the extension.

The compiled ``_C_extension.abi3.so`` registers ``torch.ops.deep_gemm.*`` through
the LibTorch stable ABI. Schemas cannot say everything upstream's pybind module
said (``(tensor, scale)`` pairs, ``None`` defaults, ``x or (x, y)`` arguments,
aliases, objects), so this module restores those conveniences and nothing else:
every function here validates Python-level types and forwards to one op.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Optional

import torch

from . import _args

_LIB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_C_extension.abi3.so")


def _extension_state(path: str = _LIB_PATH) -> dict[str, str]:
    """What the extension at ``path`` (loaded) says about itself: its path, build id,
    ``state`` (``registered``: it registered torch.ops.deep_gemm; ``same_build`` /
    ``other_build``: another copy had, so it registered nothing) and that other copy's
    ``other_path`` / ``other_build_id``."""
    ident = ctypes.CDLL(path).deep_gemm_extension_identity_v1
    ident.restype = ctypes.c_char_p
    fields = ident().decode("utf-8", "replace").split("\t")
    return dict(zip(("path", "build_id", "state", "other_path", "other_build_id"), fields))


def _load_extension() -> Any:
    if not os.path.exists(_LIB_PATH):
        raise ImportError(
            f"deep_gemm: the compiled extension is missing ({_LIB_PATH}); "
            "reinstall the wheel or build it with `nox -s build`."
        )
    torch.ops.load_library(_LIB_PATH)
    # A copy of the extension loaded earlier in this process (another venv's, a vendored
    # one) owns torch.ops.deep_gemm; ours then registered nothing (extension.cpp). The same
    # build serves this facade as well as our own would; another build does not.
    state = _extension_state()
    if state.get("state") == "other_build":
        raise ImportError(
            f"deep_gemm: torch.ops.deep_gemm is already registered in this process by {state['other_path']} "
            f"(build {state['other_build_id']}), a different build than this package's {state['path']} "
            f"(build {state['build_id']}); two deep_gemm builds cannot share one process: import one of them only"
        )
    return torch.ops.deep_gemm


_ops = _load_extension()

from . import _jit  # noqa: E402  (needs the ops loaded)
from ._sf_layout import get_mn_major_tma_aligned_tensor, transform_sf_into_required_layout  # noqa: E402
from ._sm100 import (  # noqa: E402
    SymmBuffer,
    bf16_mega_moe,
    check_not_fp4,
    fp8_fp4_mega_moe,
    get_symm_buffer_for_mega_moe,
    transform_weights_for_mega_moe,
)

from . import _fake  # noqa: E402

_jit.configure()
_fake.register()

__all__ = [
    "set_num_sms",
    "get_num_sms",
    "set_tc_util",
    "get_tc_util",
    "set_pdl",
    "get_pdl",
    "set_ignore_compile_dims",
    "set_block_size_multiple_of",
    "set_mk_alignment_for_contiguous_layout",
    "get_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_tma_aligned_size",
    "get_jit",
    "get_mn_major_tma_aligned_tensor",
    "transform_sf_into_required_layout",
    "fp8_gemm_nt",
    "fp8_gemm_nn",
    "fp8_gemm_tn",
    "fp8_gemm_tt",
    "fp8_fp4_gemm_nt",
    "fp8_fp4_gemm_nn",
    "fp8_fp4_gemm_tn",
    "fp8_fp4_gemm_tt",
]


_int = _args.int_
_bool = _args.bool_


# ---- runtime knobs -----------------------------------------------------------


def set_num_sms(num_sms: int) -> None:
    """Cap the number of SMs the kernels use (1 .. the device's SM count)."""
    _ops.set_num_sms(_int("set_num_sms", "num_sms", num_sms))


def get_num_sms() -> int:
    """The SM cap set by :func:`set_num_sms`, else the current device's SM count."""
    return _ops.get_num_sms()


def set_tc_util(tc_util: int) -> None:
    """Approximate tensor-core utilisation (percent, 1..100) the heuristics assume."""
    _ops.set_tc_util(_int("set_tc_util", "tc_util", tc_util))


def get_tc_util() -> int:
    return _ops.get_tc_util()


def set_pdl(enable_pdl: bool) -> None:
    """Enable programmatic dependent launch for the kernels launched afterwards."""
    _ops.set_pdl(_bool("set_pdl", "enable_pdl", enable_pdl))


def get_pdl() -> bool:
    return _ops.get_pdl()


def set_ignore_compile_dims(ignore_compile_dims: bool) -> None:
    """When True, no shape dimension is baked into JIT kernels (fewer compiles)."""
    _ops.set_ignore_compile_dims(_bool("set_ignore_compile_dims", "ignore_compile_dims", ignore_compile_dims))


def set_block_size_multiple_of(block_size_multiple_of: int | tuple[int, int]) -> None:
    """Constrain BLOCK_M/BLOCK_N to multiples of ``x`` (both) or ``(x, y)``."""
    v = block_size_multiple_of
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(
                f"deep_gemm.set_block_size_multiple_of: expected an int or a pair (block_m, block_n), got {v!r}"
            )
        m, n = (_int("set_block_size_multiple_of", "block_size_multiple_of", x) for x in v)
    else:
        m = n = _int("set_block_size_multiple_of", "block_size_multiple_of", v)
    if not (1 <= m <= 256 and 1 <= n <= 256):
        # RuntimeError, as the op raised it before (callers and tests match it); here the
        # message also names the argument.
        raise RuntimeError(f"deep_gemm.set_block_size_multiple_of: block_size_multiple_of: each multiple must be in "
                           f"[1, 256], got {(m, n)}")
    _ops.set_block_size_multiple_of(m, n)


# ---- layout arithmetic -------------------------------------------------------


def set_mk_alignment_for_contiguous_layout(alignment: int) -> None:
    """Row (M or K) alignment of each group in the contiguous grouped layouts."""
    _ops.set_mk_alignment_for_contiguous_layout(_int("set_mk_alignment_for_contiguous_layout", "alignment", alignment))


def get_mk_alignment_for_contiguous_layout() -> int:
    return _ops.get_mk_alignment_for_contiguous_layout()


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m: int | None = None) -> int:
    """Smallest group alignment the SM90 grouped kernels accept for groups of
    about ``expected_m`` rows (64 for ``expected_m <= 64``, else 128)."""
    e = 0 if expected_m is None else _int("get_theoretical_mk_alignment_for_contiguous_layout", "expected_m", expected_m)
    return _ops.get_theoretical_mk_alignment_for_contiguous_layout(e)


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """``x`` rounded up so ``x * element_size`` is a multiple of 16 bytes (TMA strides)."""
    x = _int("get_tma_aligned_size", "x", x)
    return _ops.get_tma_aligned_size(x, _int("get_tma_aligned_size", "element_size", element_size))


# ---- JIT runtime -------------------------------------------------------------


def get_jit() -> _jit.JitInfo:
    """Cache roots, compiler backend and version, and the kernels loaded so far."""
    return _jit.get_jit()


# ---- dense FP8 GEMM ------------------------------------------------------------

# The resolved overload: calling it skips the packet's overload lookup (~2 µs a call).
_fp8_gemm_op = _ops.fp8_gemm_nt.default
_RECIPE_1D2D = (1, 128, 128)
_RECIPE_1D1D = (1, 1, 128)


def _choose_recipe(fn: str, d: torch.Tensor, recipe: Any, recipe_a: Any, recipe_b: Any) -> tuple[int, int, int]:
    if recipe is None and recipe_a is None and recipe_b is None:
        # As upstream: FP32 output means the 1D1D (wgrad) kernel, BF16 the 1D2D one.
        return _RECIPE_1D1D if d.dtype == torch.float32 else _RECIPE_1D2D
    recipe = _args.one_recipe(fn, recipe, recipe_a, recipe_b)
    if recipe != _RECIPE_1D2D and recipe != _RECIPE_1D1D:
        raise ValueError(f"deep_gemm.{fn}: recipe: SM90 supports recipe (1, 128, 128) or (1, 1, 128), got {recipe}")
    return recipe


_pair = _args.pair


def _fp8_gemm(fn: str, a: Any, b: Any, d: Any, c: Any, recipe: Any, recipe_a: Any, recipe_b: Any,
              compiled_dims: Any, disable_ue8m0_cast: Any, transpose_a: bool, transpose_b: bool) -> None:
    a_t, sfa = _pair(fn, "a", a)
    b_t, sfb = _pair(fn, "b", b)
    if not isinstance(d, torch.Tensor):
        _args.tensor(fn, "d", d)
    if c is not None and not isinstance(c, torch.Tensor):
        _args.opt_tensor(fn, "c", c)
    if compiled_dims.__class__ is not str:
        _args.str_(fn, "compiled_dims", compiled_dims, "'nk'")
    if disable_ue8m0_cast is not False and disable_ue8m0_cast is not True:
        _args.bool_(fn, "disable_ue8m0_cast", disable_ue8m0_cast)
    if a_t.dtype is not torch.float8_e4m3fn or b_t.dtype is not torch.float8_e4m3fn:
        check_not_fp4(fn, a=a_t, b=b_t)  # a clear "needs SM100" for FP4; other dtypes fail in the op
    # nn/tn/tt are views of nt: the same kernel sees transposed operands.
    if transpose_a:
        if a_t.dim() != 2 or sfa.dim() != 2:
            _args.dims(fn, "a", a_t, 2, "[K, M]")
            _args.dims(fn, "a's scale factors", sfa, 2, "[ceil(K / 128), M]")
        a_t, sfa = a_t.transpose(0, 1), sfa.transpose(0, 1)
    if transpose_b:
        if b_t.dim() != 2 or sfb.dim() != 2:
            _args.dims(fn, "b", b_t, 2, "[K, N]")
            _args.dims(fn, "b's scale factors", sfb, 2, "[ceil(K / 128), N or ceil(N / 128)]")
        b_t, sfb = b_t.transpose(0, 1), sfb.transpose(0, 1)
    recipe = _choose_recipe(fn, d, recipe, recipe_a, recipe_b)
    if recipe == _RECIPE_1D2D and d.dtype == torch.float32:
        raise ValueError(f"deep_gemm.{fn}: recipe (1, 128, 128) writes torch.bfloat16 d; fp32 d is the 1D1D recipe "
                         "(1, 1, 128)")
    if recipe == _RECIPE_1D1D and d.dtype != torch.float32:
        raise ValueError(f"deep_gemm.{fn}: recipe (1, 1, 128) accumulates into an fp32 d, got {d.dtype}")
    _fp8_gemm_op(a_t, sfa, b_t, sfb, d, c, compiled_dims)


def fp8_gemm_nt(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                compiled_dims: str = "nk", disable_ue8m0_cast: bool = False,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None) -> None:
    """``d = (A * SFA) @ (B * SFB)^T (+ c)``: A ``[M, K]`` and B ``[N, K]`` FP8 e4m3, K-major.

    ``a = (A, SFA)`` with SFA fp32 ``[M, ceil(K/128)]`` (per token); ``b = (B, SFB)`` with
    SFB fp32 ``[ceil(N/128), ceil(K/128)]`` (per 128x128 block) and ``d`` bf16 ``[M, N]``;
    or, with ``recipe=(1, 1, 128)`` / an fp32 ``d``, SFB ``[N, ceil(K/128)]`` and
    ``d = c + A @ B^T`` in fp32 (``c`` may be ``d``). Scales may come in any layout:
    per-row scales not already MN-major and TMA-aligned (see
    :func:`get_mn_major_tma_aligned_tensor`) are read as given by the bf16 kernel at
    M <= 384 (where its tiles have at most 128 rows) and otherwise converted on the GPU on
    every call, so pass prepared ones on hot paths. ``disable_ue8m0_cast`` has no effect on SM90
    (fp32 scales, no UE8M0 packing).
    """
    _fp8_gemm("fp8_gemm_nt", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, False,
              False)


def fp8_gemm_nn(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                compiled_dims: str = "nk", disable_ue8m0_cast: bool = False,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None) -> None:
    """:func:`fp8_gemm_nt` with B given as ``[K, N]`` (and its scales transposed alike).
    SM90 needs K-major operands, so B must be a transposed view of a K-major tensor."""
    _fp8_gemm("fp8_gemm_nn", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, False,
              True)


def fp8_gemm_tn(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                compiled_dims: str = "mn", disable_ue8m0_cast: bool = False,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None) -> None:
    """:func:`fp8_gemm_nt` with A given as ``[K, M]`` and B as ``[K, N]``... see fp8_gemm_nt;
    A must be a transposed view of a K-major tensor on SM90."""
    _fp8_gemm("fp8_gemm_tn", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, True,
              True)


def fp8_gemm_tt(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                c: Optional[torch.Tensor] = None, recipe: Optional[tuple[int, int, int]] = None,
                compiled_dims: str = "mn", disable_ue8m0_cast: bool = False,
                recipe_a: Optional[tuple[int, int]] = None, recipe_b: Optional[tuple[int, int]] = None) -> None:
    """:func:`fp8_gemm_nt` with A given as ``[K, M]`` (B as in nt); A must be a transposed
    view of a K-major tensor on SM90."""
    _fp8_gemm("fp8_gemm_tt", a, b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, True,
              False)


# Upstream's FP8xFP4 entry points: on SM90 only the FP8 x FP8 path exists.
fp8_fp4_gemm_nt = fp8_gemm_nt
fp8_fp4_gemm_nn = fp8_gemm_nn
fp8_fp4_gemm_tn = fp8_gemm_tn
fp8_fp4_gemm_tt = fp8_gemm_tt


# ---- m-grouped FP8 GEMM (MoE) --------------------------------------------------------

from ._grouped import (  # noqa: E402
    fp8_m_grouped_gemm_nt_masked,
    m_grouped_fp8_gemm_nn_contiguous,
    m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)

__all__ += [
    "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_gemm_nn_contiguous",
    "m_grouped_fp8_gemm_nt_masked",
    "fp8_m_grouped_gemm_nt_masked",
]

# ---- k-grouped FP8 GEMM (MoE weight gradients) -----------------------------------------

from ._k_grouped import k_grouped_fp8_gemm_nt_contiguous, k_grouped_fp8_gemm_tn_contiguous  # noqa: E402

__all__ += ["k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous"]

# SM100-only upstream names: present, and raising a clear error when called.
__all__ += ["SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe", "fp8_fp4_mega_moe",
            "bf16_mega_moe"]
