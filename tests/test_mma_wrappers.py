"""The generated wgmma wrappers (cuda/deep_gemm/mma/): current with tools/gen_wgmma.py, and
the BF16 and TF32 forms compile to HGMMA of their dtype (no kernel family uses them yet;
their numerics are tested with the first one that does)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "tools" / "gen_wgmma.py"
HAS_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")


@pytest.mark.skipif(not GENERATOR.exists(), reason="needs the source tree")
def test_generated_wrappers_are_current():
    spec = importlib.util.spec_from_file_location("gen_wgmma", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    rendered = gen.render()
    assert set(rendered) == {f"cuda/deep_gemm/mma/wgmma_{t}.cuh" for t in ("e4m3", "bf16", "tf32")}
    stale = [rel for rel, text in rendered.items() if (REPO / rel).read_text() != text]
    assert not stale, f"re-run tools/gen_wgmma.py: {stale}"


KERNEL = r"""
#include <deep_gemm/mma/wgmma_bf16.cuh>
#include <deep_gemm/mma/wgmma_tf32.cuh>
#include <deep_gemm/ptx/wgmma.cuh>

extern "C" __global__ void __launch_bounds__(128, 1) mma_wrappers_check(float* out, uint64_t da, uint64_t db) {
    using namespace deep_gemm::ptx;
    float d[128], t[16];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) t[i] = 0.0f;
    wgmma_fence();
    WgmmaBF16<256>::mma(da, db, d, false);
    WgmmaBF16<256, true, true>::mma(desc_advance(da, 32), desc_advance(db, 32), d, true);
    WgmmaTF32<32>::mma(da, db, t, false);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 128; ++i) out[threadIdx.x * 144 + i] = d[i];
#pragma unroll
    for (int i = 0; i < 16; ++i) out[threadIdx.x * 144 + 128 + i] = t[i];
}
"""


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_bf16_and_tf32_wrappers_compile_to_hgmma(tmp_path):
    from test_sass import SASS_TOOLS

    if SASS_TOOLS is None:
        pytest.skip("needs cuobjdump")
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    code = ("import sys, torch, deep_gemm\n"
            "print(torch.ops.deep_gemm.jit_build('mma_wrappers_check', sys.stdin.read(), 'mma_wrappers_check'))\n")
    out = subprocess.run([sys.executable, "-c", code], input=KERNEL, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    cubin = out.stdout.strip().splitlines()[-1]
    sass = subprocess.run([os.path.join(SASS_TOOLS, "cuobjdump"), "--dump-sass", cubin], capture_output=True,
                          text=True, timeout=300).stdout
    hgmma = [line for line in sass.splitlines() if "HGMMA" in line]
    assert sum("64x256x16.F32.BF16" in line for line in hgmma) == 2, hgmma
    assert sum("64x32x8.F32.TF32" in line for line in hgmma) == 1, hgmma
