"""The scale-factor layout kernel (cuda/deep_gemm/impls/sf_layout.cuh; the GEMM ops and
get_mn_major_tma_aligned_tensor use it). On the CPU: the launcher's JIT entry compiles for
sm_90a without spills, the kernel's index math run as host C++ (one std::thread per CUDA
thread) matches a reference, and the op's shapes and strides are unchanged. On an SM90 GPU:
the converted layout equals torch's copy for K-major, MN-major and odd-strided inputs."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import deep_gemm
from deep_gemm import _jit

REPO = Path(__file__).resolve().parent.parent
LAUNCHER = REPO / "cpp" / "deep_gemm" / "launch" / "sf_layout.hpp"
HAS_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")
CXX = shutil.which("g++") or shutil.which("c++")


def _launcher_source() -> str:
    """The JIT source the launcher compiles: the C++ string literals of its source() call."""
    text = LAUNCHER.read_text()
    call = text[text.index('source(\n          "sf_mn_major",'): text.index('"sf_mn_major");')]
    literals = re.findall(r'"((?:[^"\\]|\\.)*)"', call)[1:]  # [0] is the kernel name
    return "".join(ast.literal_eval('"%s"' % lit) for lit in literals)


# ---- CPU ---------------------------------------------------------------------------


@pytest.mark.skipif(not LAUNCHER.exists(), reason="needs the source tree")
def test_launcher_entry_takes_valid_rows():
    src = _launcher_source()
    assert "#include <deep_gemm/impls/sf_layout.cuh>" in src and "__launch_bounds__(256)" in src
    assert "const int* valid_rows" in src and "int* zero_word" in src and "out_ld, valid_rows," in src
    # The block the launcher launches is the one the entry is bounded for.
    text = LAUNCHER.read_text()
    assert "lc.block[0] = 32;" in text and "lc.block[1] = 8;" in text


@pytest.mark.skipif(not (HAS_NVCC and LAUNCHER.exists()), reason="needs nvcc and the source tree")
def test_launcher_entry_compiles_without_spills(tmp_path):
    env = dict(os.environ, DG_JIT_CACHE_DIR=str(tmp_path), DG_JIT_PTXAS_CHECK="1")
    code = ("import sys, torch, deep_gemm\n"
            "print(torch.ops.deep_gemm.jit_build('sf_mn_major_check', sys.stdin.read(), 'sf_mn_major'))\n")
    out = subprocess.run([sys.executable, "-c", code], input=_launcher_source(), env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    path = out.stdout.strip().splitlines()[-1]
    assert path.startswith(str(tmp_path)) and Path(path).read_bytes()[:4] == b"\x7fELF"


# The impl compiled as host C++: the CUDA built-ins it uses are shimmed (blockIdx, threadIdx,
# __syncthreads as a barrier over the block's std::threads, __shared__ as one static tile,
# the griddepcontrol asm statement as nothing). Every grid block of every case runs, in the
# launcher's grid, and each output element is compared; unwritten ones keep a sentinel.
EMULATOR = r"""
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

struct Dim3 { uint32_t x, y, z; };
static thread_local Dim3 threadIdx;
static Dim3 blockIdx;

struct Barrier {
  std::mutex mu;
  std::condition_variable cv;
  unsigned n, waiting = 0, phase = 0;
  explicit Barrier(unsigned count) : n(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    const unsigned my_phase = phase;
    if (++waiting == n) { waiting = 0; ++phase; cv.notify_all(); return; }
    cv.wait(lock, [&] { return phase != my_phase; });
  }
};
static Barrier* g_barrier;

#define __device__
#define __forceinline__ inline
#define __shared__ static
#define asm
#define volatile(x)
inline void __syncthreads() { g_barrier->wait(); }
template <class T> T __ldg(const T* p) { return *p; }
#include <deep_gemm/impls/sf_layout.cuh>
#undef volatile
#undef asm

struct Case { int g, mn, kb, layout; bool masked; };

static int run_case(const Case& c, std::mt19937& rng, int index) {
  auto R = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int64_t smn, sk, sg;
  if (c.layout == 0) { sk = 1; smn = c.kb; sg = int64_t(c.mn) * c.kb; }             // K-major
  else if (c.layout == 1) { smn = 1; sk = c.mn; sg = int64_t(c.mn) * c.kb; }        // MN-major
  else if (c.layout == 2) { sk = 1; smn = c.kb + R(1, 5); sg = smn * c.mn + R(0, 7); }  // K-major, padded rows
  else { sk = R(2, 3); smn = sk * c.kb + R(0, 3); sg = smn * c.mn + R(0, 5); }      // no unit stride
  std::vector<int> valid(c.g);
  for (auto& v : valid) v = R(-3, c.mn + 5);
  std::vector<float> in(size_t(sg) * c.g + size_t(smn) * c.mn + size_t(sk) * c.kb + 1);
  for (auto& x : in) x = float(R(1, 1 << 20));
  const uint32_t out_ld = (c.mn + 3) / 4 * 4;
  const float kSentinel = -1.0f;
  std::vector<float> out(size_t(c.g) * c.kb * out_ld, kSentinel);
  // Every other case also hands the kernel a word to zero (the m-grouped GEMMs' tile counter).
  int word = 12345;
  int* zero_word = index % 2 ? &word : nullptr;
  for (uint32_t z = 0; z < uint32_t(c.g); ++z)
    for (uint32_t y = 0; y < uint32_t(c.kb + 31) / 32; ++y)
      for (uint32_t x = 0; x < (out_ld + 31) / 32; ++x) {
        blockIdx = {x, y, z};
        Barrier barrier(256);
        g_barrier = &barrier;
        std::vector<std::thread> threads;
        for (uint32_t t = 0; t < 256; ++t)
          threads.emplace_back([&, t] {
            threadIdx = {t % 32, t / 32, 0};
            deep_gemm::mn_major_sf_impl(in.data(), out.data(), c.mn, c.kb, sg, smn, sk, out_ld,
                                        c.masked ? valid.data() : nullptr, zero_word);
          });
        for (auto& t : threads) t.join();
      }
  int bad = 0;
  if (word != (zero_word ? 0 : 12345) && bad++ < 5) std::printf("case %d: zero_word holds %d\n", index, word);
  for (int g = 0; g < c.g; ++g) {
    const int v = c.masked ? std::min(std::max(valid[g], 0), c.mn) : c.mn;
    const int written = v == c.mn ? int(out_ld) : v;  // a cut-short group leaves its pad rows too
    for (int j = 0; j < c.kb; ++j)
      for (int i = 0; i < int(out_ld); ++i) {
        const float want = i >= written ? kSentinel : i < c.mn ? in[g * sg + i * smn + j * sk] : 0.0f;
        const float got = out[(size_t(g) * c.kb + j) * out_ld + i];
        if (got != want && bad++ < 5)
          std::printf("case %d (g %d mn %d kb %d layout %d masked %d valid %d): [%d][%d][%d] = %g, want %g\n",
                      index, c.g, c.mn, c.kb, c.layout, int(c.masked), valid[g], g, j, i, got, want);
      }
  }
  return bad;
}

int main() {
  std::mt19937 rng(7);
  std::vector<Case> cases = {{1, 1, 1, 0, false}, {3, 5, 1, 0, true}, {2, 33, 33, 0, true}, {2, 66, 70, 2, true},
                             {1, 130, 7, 1, false}, {2, 7, 40, 3, true}, {1, 4, 32, 0, false}};
  for (int t = 0; t < 24; ++t) {
    auto R = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    cases.push_back({R(1, 3), R(1, 70), R(1, 70), R(0, 3), R(0, 1) == 1});
  }
  int bad = 0;
  for (size_t i = 0; i < cases.size(); ++i) bad += run_case(cases[i], rng, int(i));
  std::printf("%zu cases, %d mismatches\n", cases.size(), bad);
  return bad != 0;
}
"""


@pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
def test_kernel_index_math_on_the_host(tmp_path):
    src = tmp_path / "emulate.cpp"
    src.write_text(EMULATOR)
    exe = tmp_path / "emulate"
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-pthread", "-I", _jit.INCLUDE_ROOT, str(src), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "0 mismatches" in out.stdout, out.stdout[-3000:]


@pytest.mark.parametrize("shape", [(130, 7), (5, 1), (3, 6, 5), (4, 129, 1), (2, 4097, 56)])
def test_op_shapes_and_strides_on_meta(shape):
    sf = torch.empty(*shape[:-1], shape[-1] + 1, device="meta")[..., :-1]  # K-major rows: never in the layout
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    mn, kb = shape[-2:]
    pad = (mn + 3) // 4 * 4
    assert out.shape == sf.shape and out.dtype == torch.float32
    assert out.stride() == ((kb * pad, 1, pad) if len(shape) == 3 else (1, pad))


# ---- GPU ---------------------------------------------------------------------------


def _inputs(g, mn, kb):
    """The same values as K-major, MN-major, K-major with padded rows, and with no unit stride."""
    ref = torch.randn(g, mn, kb, device="cuda")
    wide = torch.zeros(g, mn, kb + 3, device="cuda")
    wide[..., :kb] = ref
    odd = torch.zeros(g + 1, 2 * mn + 1, 3 * kb, device="cuda")
    odd[1:, 1::2, ::3] = ref
    return ref, {"k-major": ref, "mn-major": ref.transpose(1, 2).contiguous().transpose(1, 2),
                 "padded rows": wide[..., :kb], "odd strides": odd[1:, 1::2, ::3]}


@pytest.mark.gpu
@pytest.mark.parametrize("g,mn,kb", [(1, 130, 7), (3, 5, 1), (2, 4097, 56), (4, 66, 33), (32, 4096, 56), (2, 1, 1)])
def test_layout_kernel_matches_torch(g, mn, kb):
    torch.manual_seed(g * 1000 + mn + kb)
    ref, variants = _inputs(g, mn, kb)
    pad = (mn + 3) // 4 * 4
    for name, src in variants.items():
        for x in (src, src[0]):  # batched and 2-D
            out = deep_gemm.get_mn_major_tma_aligned_tensor(x)
            want = ref if x.dim() == 3 else ref[0]
            if out is x:  # already in the layout (MN-major with mn % 4 == 0, or a single element)
                assert torch.equal(out, want), name
                continue
            assert out.shape == want.shape and out.stride()[-2:] == (1, pad), name
            assert torch.equal(out, want), name
            # The pad rows are zeros: the whole [.., kb, pad] buffer is defined.
            storage = out.as_strided((*want.shape[:-2], kb, pad), (*out.stride()[:-2], pad, 1))
            assert not storage[..., mn:].any(), name
