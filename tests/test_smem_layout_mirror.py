"""The host's shared-memory counts (heuristics: sm90_fp8_smem_bytes and sm90_bf16_smem_bytes,
what a launch asks for) against the kernels' layouts (Fp8SmemLayout and the BF16 kernel's
SmemLayout, kDynamicBytes), over every tile and pipeline depth that fits: compiled with nvcc
as static_asserts (CPU only)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)

SOURCE = r"""
#include <deep_gemm/common/sm90_fp8_core.cuh>
#include "deep_gemm/heuristics/sm90_fp8_gemm.hpp"

namespace h = deep_gemm::heuristics;
using deep_gemm::sm90::Fp8SmemLayout;

// 1D2D: dense kernels leave the tile slots out, which the host counts anyway (more, never
// less); the m-grouped ones use them (equal). 1D1D: equal.
template <int BM, int BN, int ST>
constexpr bool agree() {
    constexpr int d2 = h::sm90_fp8_smem_bytes(h::Sm90Fp8Kind::k1D2D, BM, BN, ST);
    constexpr int d1 = h::sm90_fp8_smem_bytes(h::Sm90Fp8Kind::k1D1D, BM, BN, ST);
    bool ok = true;
    if constexpr (d2 <= h::kSm90MaxSmemBytes) {
        ok = ok && Fp8SmemLayout<BM, BN, ST, false, BM * BN * 2, true>::kDynamicBytes == d2;
        ok = ok && Fp8SmemLayout<BM, BN, ST, false, BM * BN * 2, false>::kDynamicBytes <= d2;
    }
    if constexpr (d1 <= h::kSm90MaxSmemBytes) ok = ok && Fp8SmemLayout<BM, BN, ST, true, 0>::kDynamicBytes == d1;
    return ok;
}
"""

# A translation unit of its own: the BF16 kernel's and the FP8 core's constants share names.
SOURCE_BF16 = r"""
#include <deep_gemm/impls/sm90_bf16_gemm.cuh>
#include "deep_gemm/heuristics/sm90_bf16_gemm.hpp"

namespace h = deep_gemm::heuristics;

// BF16: with and without the staging tile of D.
template <int BM, int BN, int ST, bool kStaged>
constexpr bool agree_bf16_one() {
    constexpr int host = h::sm90_bf16_smem_bytes(BM, BN, ST, kStaged);
    if constexpr (host <= h::kSm90MaxSmemBytes)
        return deep_gemm::sm90_bf16::SmemLayout<BM, BN, ST, kStaged ? BM * BN * 2 : 0>::kDynamicBytes == host;
    return true;
}
template <int BM, int BN, int ST>
constexpr bool agree_bf16() {
    return agree_bf16_one<BM, BN, ST, false>() && agree_bf16_one<BM, BN, ST, true>();
}
"""


def _asserts_fp8():
    lines = []
    for bm in (64, 128, 256):
        for bn in range(16, 257, 8):
            for stages in range(1, 13):
                lines.append(f'static_assert(agree<{bm}, {bn}, {stages}>(), "{bm}x{bn}, {stages} stages");')
    return "\n".join(lines) + "\n"


def _asserts_bf16():
    lines = []
    for bm in (64, 128):
        for bn in range(16, 257, 16):
            for stages in range(2, 17):
                lines.append(f'static_assert(agree_bf16<{bm}, {bn}, {stages}>(), "bf16 {bm}x{bn}, {stages} stages");')
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(NVCC is None, reason="needs nvcc to compile")
@pytest.mark.parametrize("family", ["fp8", "bf16"])
def test_host_shared_memory_count_matches_the_kernel_layout(tmp_path, family):
    src = tmp_path / "mirror.cu"
    src.write_text(SOURCE + _asserts_fp8() if family == "fp8" else SOURCE_BF16 + _asserts_bf16())
    cmd = [NVCC, "-std=c++20", "--expt-relaxed-constexpr", "-arch=sm_90a", "-c", str(src), "-o",
           str(tmp_path / "mirror.o"), "-I", str(ROOT / "cuda"), "-I", str(ROOT / "cpp")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
