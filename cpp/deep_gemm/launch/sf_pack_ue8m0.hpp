// Launchers of the packed-UE8M0 layout kernels (cuda/deep_gemm/impls/sf_pack_ue8m0.cuh):
// two tiny JIT kernels, each loaded once per device on first use and then kept, launched
// on torch's current stream (no programmatic dependent launch).
#pragma once

#include <algorithm>

#include "common.hpp"

namespace deep_gemm::launch {

namespace sf_pack_detail {
constexpr int64_t kThreads = 256;           // sf_pack::kThreads
constexpr int64_t kWordsPerThread = 8;      // sf_pack::kWordsPerThread
constexpr int64_t kColumnsPerThread = 4;    // sf_pack::kColumnsPerThread
constexpr int64_t kMaxGridYZ = 65535;
}  // namespace sf_pack_detail

// [groups, mn, sf_k] fp32 -> [groups, packed_k, out_ld] int32 (see the impl).
struct PackUe8m0MnMajorProblem {
  const float* in = nullptr;
  uint32_t* out = nullptr;
  int64_t groups = 1, mn = 0, sf_k = 0, packed_k = 0, out_ld = 0;
  int64_t stride_g = 0, stride_mn = 0, stride_k = 0;
  const int* psum = nullptr;  // device int32 [num_psum] (nullptr: none)
  int64_t num_psum = 0, m_alignment = 1;
  int device = 0;
};

// [sf_rows, mn] fp32 -> [packed_rows, mn] int32 (see the impl).
struct PackUe8m0KGroupedProblem {
  const float* in = nullptr;
  uint32_t* out = nullptr;
  int64_t mn = 0, sf_rows = 0, packed_rows = 0;
  int64_t stride_k = 0, stride_mn = 0;
  const int* layout = nullptr;  // device int32 [num_groups]
  int64_t num_groups = 0, gran_k = 1, k_alignment = 1;
  bool psum = false;
  int device = 0;
};

class PackUe8m0Launcher {
 public:
  static PackUe8m0Launcher& get() {
    static PackUe8m0Launcher instance;
    return instance;
  }

  void run(const PackUe8m0MnMajorProblem& p) {
    using namespace sf_pack_detail;
    deep_jit::LaunchConfig lc;
    lc.grid[0] = static_cast<unsigned>((p.out_ld + kThreads - 1) / kThreads);
    lc.grid[1] = static_cast<unsigned>(std::min((p.packed_k + kWordsPerThread - 1) / kWordsPerThread, kMaxGridYZ));
    lc.grid[2] = static_cast<unsigned>(std::min(p.groups, kMaxGridYZ));
    lc.block[0] = static_cast<unsigned>(kThreads);
    deep_jit::launch(mn_major_kernel(p.device), lc, p.in, p.out, static_cast<uint32_t>(p.groups),
                     static_cast<uint32_t>(p.mn), static_cast<uint32_t>(p.sf_k), static_cast<uint32_t>(p.packed_k),
                     p.stride_g, p.stride_mn, p.stride_k, static_cast<uint32_t>(p.out_ld), p.psum,
                     static_cast<uint32_t>(p.num_psum), static_cast<uint32_t>(p.m_alignment));
  }

  void run(const PackUe8m0KGroupedProblem& p) {
    using namespace sf_pack_detail;
    constexpr int64_t kColumnsPerBlock = kThreads * kColumnsPerThread;
    deep_jit::LaunchConfig lc;
    lc.grid[0] = static_cast<unsigned>((p.mn + kColumnsPerBlock - 1) / kColumnsPerBlock);
    lc.grid[1] = static_cast<unsigned>(std::min(p.packed_rows, kMaxGridYZ));
    lc.block[0] = static_cast<unsigned>(kThreads);
    deep_jit::launch(k_grouped_kernel(p.device), lc, p.in, p.out, static_cast<uint32_t>(p.mn),
                     static_cast<uint32_t>(p.sf_rows), static_cast<uint32_t>(p.packed_rows), p.stride_k, p.stride_mn,
                     p.layout, static_cast<uint32_t>(p.num_groups), static_cast<uint32_t>(p.gran_k),
                     static_cast<uint32_t>(p.k_alignment), p.psum);
  }

  // The kernel sources (also compiled without a GPU by the ops below and the tests).
  static deep_jit::KernelSource mn_major_source() {
    return JitContext::get().source(
          "sf_pack_ue8m0_mn_major",
          "#include <deep_gemm/impls/sf_pack_ue8m0.cuh>\n\n"
          "extern \"C\" __global__ void __launch_bounds__(256)\n"
          "sf_pack_ue8m0_mn_major(const float* in, uint32_t* out, uint32_t groups, uint32_t mn, uint32_t sf_k,\n"
          "         uint32_t packed_k, int64_t stride_g, int64_t stride_mn, int64_t stride_k, uint32_t out_ld,\n"
          "         const int* psum, uint32_t num_psum, uint32_t m_alignment) {\n"
          "    deep_gemm::pack_ue8m0_mn_major_impl(in, out, groups, mn, sf_k, packed_k, stride_g, stride_mn,\n"
          "                                        stride_k, out_ld, psum, num_psum, m_alignment);\n}\n",
          "sf_pack_ue8m0_mn_major");
  }

  static deep_jit::KernelSource k_grouped_source() {
    return JitContext::get().source(
          "sf_pack_ue8m0_k_grouped",
          "#include <deep_gemm/impls/sf_pack_ue8m0.cuh>\n\n"
          "extern \"C\" __global__ void __launch_bounds__(256)\n"
          "sf_pack_ue8m0_k_grouped(const float* in, uint32_t* out, uint32_t mn, uint32_t sf_rows,\n"
          "         uint32_t packed_rows, int64_t stride_k, int64_t stride_mn, const int* layout,\n"
          "         uint32_t num_groups, uint32_t gran_k, uint32_t k_alignment, bool psum) {\n"
          "    deep_gemm::pack_ue8m0_k_grouped_impl(in, out, mn, sf_rows, packed_rows, stride_k, stride_mn, layout,\n"
          "                                         num_groups, gran_k, k_alignment, psum);\n}\n",
          "sf_pack_ue8m0_k_grouped");
  }

 private:
  const deep_jit::Kernel& mn_major_kernel(int device) {
    return mn_major_.get(device, "get_mn_major_tma_aligned_packed_ue8m0_tensor", &PackUe8m0Launcher::mn_major_source);
  }
  const deep_jit::Kernel& k_grouped_kernel(int device) {
    return k_grouped_.get(device, "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
                          &PackUe8m0Launcher::k_grouped_source);
  }

  PerDeviceKernel mn_major_;
  PerDeviceKernel k_grouped_;
};

}  // namespace deep_gemm::launch
