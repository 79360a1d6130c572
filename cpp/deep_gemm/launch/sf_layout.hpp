// Launcher of the scale-factor layout kernel (cuda/deep_gemm/impls/sf_layout.cuh):
// one tiny JIT kernel per device, loaded on first use and then kept.
#pragma once

#include "common.hpp"

namespace deep_gemm::launch {

struct MnMajorSfProblem {
  const float* in = nullptr;
  float* out = nullptr;
  int64_t groups = 1, mn = 0, kb = 0;
  int64_t stride_g = 0, stride_mn = 0, stride_k = 0;
  int64_t out_ld = 0;  // align(mn, 4)
  const int* valid_rows = nullptr;  // device int32 [groups]: convert only rows below it (nullptr: all)
  int* zero_word = nullptr;         // device int32 set to 0 by the kernel (nullptr: none)
  int device = 0;
};

class MnMajorSfLauncher {
 public:
  static MnMajorSfLauncher& get() {
    static MnMajorSfLauncher instance;
    return instance;
  }

  void run(const MnMajorSfProblem& p) {
    // Tiles of 32 rows x 32 k-blocks, 32 x 8 threads (kSfTile, kSfTileRows in the impl).
    constexpr int64_t kTile = 32;
    deep_jit::LaunchConfig lc;
    lc.grid[0] = static_cast<unsigned>((p.out_ld + kTile - 1) / kTile);
    lc.grid[1] = static_cast<unsigned>((p.kb + kTile - 1) / kTile);
    lc.grid[2] = static_cast<unsigned>(p.groups);
    lc.block[0] = 32;
    lc.block[1] = 8;
    deep_jit::launch(kernel(p.device), lc, p.in, p.out, static_cast<uint32_t>(p.mn), static_cast<uint32_t>(p.kb),
                     p.stride_g, p.stride_mn, p.stride_k, static_cast<uint32_t>(p.out_ld), p.valid_rows, p.zero_word);
  }

 private:
  static deep_jit::KernelSource source() {
    return JitContext::get().source(
          "sf_mn_major",
          "#include <deep_gemm/impls/sf_layout.cuh>\n\n"
          "extern \"C\" __global__ void __launch_bounds__(256)\n"
          "sf_mn_major(const float* in, float* out, uint32_t mn, uint32_t kb, int64_t stride_g, int64_t stride_mn,\n"
          "         int64_t stride_k, uint32_t out_ld, const int* valid_rows, int* zero_word) {\n"
          "    deep_gemm::mn_major_sf_impl(in, out, mn, kb, stride_g, stride_mn, stride_k, out_ld, valid_rows,\n"
          "                                zero_word);\n}\n",
          "sf_mn_major");
  }

  const deep_jit::Kernel& kernel(int device) {
    return kernel_.get(device, "get_mn_major_tma_aligned_tensor", &MnMajorSfLauncher::source);
  }

  PerDeviceKernel kernel_;
};

}  // namespace deep_gemm::launch
