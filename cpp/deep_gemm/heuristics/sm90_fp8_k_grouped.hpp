// Host side of the SM90 k-grouped FP8 GEMM (MoE weight gradients; device code in
// cuda/deep_gemm/impls/sm90_fp8_k_grouped.cuh): configuration choice, JIT entry source and
// the launch contract. Pure C++, no CUDA or torch headers.
//
// LAUNCH CONTRACT (per launch of at most kSm90KGroupedMaxGroups groups):
//   code   = sm90_fp8_k_grouped_source(cfg, compiled_m, compiled_n)   (0 = runtime)
//   grid   = {cfg.grid_x}  (<= #SMs and <= the launch's tile count), block = {cfg.num_threads},
//   shared = cfg.smem_bytes, cluster 1.
//   Kernel arguments: (uint32 m, uint32 n, const float* c /*group g0's slice, may be d, or null*/,
//                      float* d /*group g0's slice*/, CUtensorMap sfa, CUtensorMap sfb,
//                      KGroupedArgs args /*by value, ~8.5 KB*/)
//   Tensor maps: sm90_fp8_k_grouped_tensor_maps. A and B maps are per group (row pitch k_g)
//   and go into args; SFA / SFB cover the whole call ([sum_k/128, align(mn, 4)]) and the
//   kernel offsets their K-block row by args.kb_offset[g].
//   Preconditions: every k_g % 128 == 0, N even (8-byte stores), C/D fp32 [G, M, N]
//   contiguous, A/B flat nt layout with 16-byte aligned bases.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sm90_fp8_gemm.hpp"

namespace deep_gemm::heuristics {

// Groups per launch: the capacity of KGroupedArgs (the device struct is instantiated with
// it). 32 keeps the parameter at ~8.5 KB (the limit is 32 KB); more groups take more launches.
constexpr int kSm90KGroupedMaxGroups = 32;

// K per group the configuration is costed with: the mean k_g of a launch rounded to the
// nearest power of two in log scale (at least 128), so that the set of configurations (and
// compiled kernels) a training run meets stays small while the token split moves from step
// to step: means of 0.71x to 1.41x of 4096 all cost as 4096.
inline int sm90_k_grouped_k_bucket(long sum_k, int num_groups) {
    const double mean = num_groups > 0 ? static_cast<double>(sum_k) / num_groups : 0.0;
    int k = 128;
    while (k < (1 << 30) && mean > k * 1.4142135623730951) k *= 2;
    return k;
}

// Configurations for `num_groups` GEMMs of m x n x k (k: the bucketed mean), best first. The
// 1D1D model of the dense ranking, cluster 1 only (no multicast path in this kernel).
inline std::vector<Sm90Fp8GemmConfig> rank_sm90_fp8_k_grouped_configs(int m, int n, int k, int num_groups,
                                                                      int num_sms,
                                                                      int max_smem_bytes = kSm90MaxSmemBytes) {
    std::vector<Sm90Fp8GemmConfig> out;
    for (const auto& c : rank_sm90_fp8_gemm_configs(std::max(m, 1), std::max(n, 1), std::max(k, 128), num_sms, true,
                                                    max_smem_bytes, false, std::max(num_groups, 1))) {
        if (c.cluster != 1) continue;
        out.push_back(c);
    }
    // Wgrad shapes with little K per group sit on the model's DRAM floor (C is read and D
    // written in fp32), where many tiles tie exactly. Among equals take the one the model
    // prefers once compute dominates (the same problem at K = 16384 per group), rather than
    // the first one listed (a tiny tile).
    const int m1 = std::max(m, 1), n1 = std::max(n, 1), g1 = std::max(num_groups, 1);
    auto compute_key = [&](const Sm90Fp8GemmConfig& c) {
        return sm90_fp8_estimate_cycles(c, m1, n1, std::max(k, 16384), g1);
    };
    std::stable_sort(out.begin(), out.end(), [&](const Sm90Fp8GemmConfig& a, const Sm90Fp8GemmConfig& b) {
        if (a.est_cycles != b.est_cycles) return a.est_cycles < b.est_cycles;
        return compute_key(a) < compute_key(b);
    });
    return out;
}

inline std::string sm90_fp8_k_grouped_name(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n) {
    return "sm90_fp8_gemm_1d1d_kg_m" + std::to_string(compiled_m) + "n" + std::to_string(compiled_n) + "_b" +
           std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "_s" + std::to_string(c.stages) + "_g" +
           std::to_string(c.group_n) + "_x" + std::to_string(kSm90KGroupedMaxGroups);
}

inline std::string sm90_fp8_k_grouped_source(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n) {
    const std::string targs = std::to_string(compiled_m) + "u, " + std::to_string(compiled_n) + "u, " +
                              std::to_string(c.block_m) + "u, " + std::to_string(c.block_n) + "u, " +
                              std::to_string(c.stages) + "u, " + std::to_string(c.group_n) + "u, " +
                              std::to_string(kSm90KGroupedMaxGroups) + "u";
    std::string s = smem_bytes_define(c);
    s += "#include <deep_gemm/impls/sm90_fp8_k_grouped.cuh>\n\n";
    // Same fixed 384-thread bound as the dense kernels (block_m 64 launches 256 of them).
    s += "extern \"C\" __global__ void __launch_bounds__(384, 1)\n";
    s += sm90_fp8_k_grouped_name(c, compiled_m, compiled_n) + "(uint32_t m, uint32_t n, const float* c, float* d,\n"
         "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_sfb,\n"
         "         const __grid_constant__ deep_gemm::KGroupedArgs<" +
         std::to_string(kSm90KGroupedMaxGroups) + "> args) {\n";
    s += "    deep_gemm::sm90_fp8_k_grouped_impl<" + targs + ">(m, n, c, d, &tmap_sfa, &tmap_sfb, args);\n}\n";
    return s;
}

// The per-call scale maps (SFA, SFB) in kernel-argument order: MN-major fp32
// [sum_kb, align(mn, 4)], box BLOCK_M / BLOCK_N x 1.
inline std::vector<Sm90Fp8TensorMapSpec> sm90_fp8_k_grouped_sf_maps(const Sm90Fp8GemmConfig& c, int m, int n,
                                                                    uint64_t sum_kb) {
    const uint64_t m_pad = static_cast<uint64_t>(sm90_fp8_align(m, 4));
    const uint64_t n_pad = static_cast<uint64_t>(sm90_fp8_align(n, 4));
    const uint64_t rows = std::max<uint64_t>(sum_kb, 1);  // an all-empty call still needs a valid map
    return {{"sfa", Sm90TmaDtype::kF32, m_pad, rows, m_pad * 4, static_cast<uint32_t>(c.block_m), 1, 0},
            {"sfb", Sm90TmaDtype::kF32, n_pad, rows, n_pad * 4, static_cast<uint32_t>(c.block_n), 1, 0}};
}

// Group g's operand maps: A_g [m, k_g] and B_g [n, k_g], K-major, row pitch k_g bytes.
inline std::vector<Sm90Fp8TensorMapSpec> sm90_fp8_k_grouped_group_maps(const Sm90Fp8GemmConfig& c, int m, int n,
                                                                       uint64_t k_g) {
    return {{"a", Sm90TmaDtype::kU8, k_g, static_cast<uint64_t>(m), k_g, 128, static_cast<uint32_t>(c.block_m), 128},
            {"b", Sm90TmaDtype::kU8, k_g, static_cast<uint64_t>(n), k_g, 128, static_cast<uint32_t>(c.block_n), 128}};
}

}  // namespace deep_gemm::heuristics
