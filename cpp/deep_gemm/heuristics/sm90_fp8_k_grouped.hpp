// Configuration ranking of the SM90 k-grouped FP8 GEMM (MoE weight gradients; device code
// in cuda/deep_gemm/impls/sm90_fp8_k_grouped.cuh): the K bucket a launch is costed with and
// the ranking, on the 1D1D model of heuristics/sm90_fp8_gemm.hpp. Pure C++17, no CUDA or
// torch headers. JIT source, tensor maps and the launch contract (a launch takes at most
// kSm90KGroupedMaxGroups groups): launch/sm90_fp8_source.hpp.
#pragma once

#include <algorithm>
#include <vector>

#include "sm90_fp8_gemm.hpp"

namespace deep_gemm::heuristics {

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

}  // namespace deep_gemm::heuristics
