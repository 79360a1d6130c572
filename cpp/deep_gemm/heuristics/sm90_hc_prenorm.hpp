// Configuration of the SM90 TF32 HyperConnection prenorm GEMM
// (cuda/deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh): rows per CTA (64 or 128), the
// cluster that splits a split's K blocks again (1, 2, 4 or 8 CTAs), and the pipeline depth.
//
// The kernel reads A once (M x K bf16) and is bound by DRAM: the choice is the one that
// keeps the most SMs streaming with the least time per CTA. Per CTA: its A bytes at its
// share of DRAM bandwidth (capped per SM), B re-read from L2 by every M tile (so 128 rows
// halve that traffic per A byte), plus a fixed fill and epilogue, and the cluster's
// reduction through distributed shared memory. One CTA per SM (the pipeline takes most of
// shared memory); clusters of 4 or 8 pack into the GPCs' 16-SM groups only.
//
// Pure C++17, no CUDA or torch headers.
#pragma once

#include <algorithm>

#include "sm90_common.hpp"

namespace deep_gemm::heuristics {

struct Sm90HcPrenormConfig : Sm90GemmConfig {
    int k_blocks_per_cta = 0;  // the largest K range (in 64-blocks) of one CTA
};

constexpr int kSm90HcBlockK = 64;

constexpr int kSm90HcThreads = 256 + 32;  // two math warpgroups and the producer warp

// The kernel's SmemLayout, mirrored: A and B stages, the peer partials of a cluster's rank 0,
// warpgroup 1's partial (64-row tiles), the barriers, and 1024 bytes to align the base.
inline int sm90_hc_smem_bytes(int block_m, int n, int stages, int cluster) {
    const int a = block_m * kSm90HcBlockK * 2, b = 2 * n * 128;
    const int partial = (n / 2 + 2) * (block_m * 2) * 4;
    return stages * (a + b) + (cluster - 1) * partial + (block_m == 64 ? partial : 0) + 2 * stages * 8 + 1024;
}

// The most stages that fit (at most 16: more is no deeper than DRAM latency needs).
inline int sm90_hc_stages(int block_m, int n, int cluster, int max_smem) {
    int stages = 16;
    while (stages > 2 && sm90_hc_smem_bytes(block_m, n, stages, cluster) > max_smem) --stages;
    return stages;
}

// force_*: developer knobs (0 = choose).
inline Sm90HcPrenormConfig choose_sm90_hc_prenorm_config(int m, int n, int k, int num_splits, int num_sms,
                                                        int max_smem, int force_block_m = 0, int force_cluster = 0) {
    const int k_blocks = sm90_ceil_div(k, kSm90HcBlockK);
    const int split_blocks = sm90_ceil_div(k_blocks, num_splits);  // the largest split
    // Per-SM clocks: DRAM shared by the active SMs, at most ~3x an SM's fair share; L2 -> SM.
    const double sm_cap = 3.0 * kSm90DramBytesPerClk / std::max(num_sms, 1);
    Sm90HcPrenormConfig best;
    double best_cycles = 0.0;
    int best_active = 0;
    for (int block_m : {128, 64}) {
        if (force_block_m && block_m != force_block_m) continue;
        for (int cluster : {1, 2, 4, 8}) {
            if (force_cluster ? cluster != force_cluster : cluster > split_blocks && cluster > 1) continue;
            const long tiles = sm90_ceil_div(m, block_m);
            const long ctas = tiles * num_splits * cluster;
            const int kb_cta = sm90_ceil_div(split_blocks, cluster);
            const int resident = cluster <= 2 ? num_sms : std::max(num_sms / 16 * 16, cluster);
            const long waves = (ctas + resident - 1) / resident;
            const int active = static_cast<int>(std::min<long>(ctas, resident));
            const double a_bytes = static_cast<double>(block_m) * kb_cta * kSm90HcBlockK * 2;
            const double b_bytes = static_cast<double>(n) * kb_cta * kSm90HcBlockK * 4;
            const double per_sm = std::min(kSm90DramBytesPerClk / active, sm_cap);
            const double cta = std::max(a_bytes / per_sm, (a_bytes + b_bytes) / kSm90L2BytesPerClk) + 1500.0 +
                               (cluster > 1 ? 300.0 + 50.0 * cluster : 0.0);
            const double cycles = waves * cta;
            // Within 5%: the one with more SMs streaming, then the larger tile (less B traffic).
            const bool better = best_active == 0 || cycles < 0.95 * best_cycles ||
                                (cycles <= 1.05 * best_cycles && active > best_active);
            if (!better) continue;
            best_cycles = cycles;
            best_active = active;
            best.block_m = block_m;
            best.cluster = cluster;
            best.k_blocks_per_cta = kb_cta;
            best.grid_x = static_cast<int>(ctas);
            best.est_cycles = cycles;
        }
    }
    best.block_n = n;
    best.block_k = kSm90HcBlockK;
    best.num_sms = num_sms;
    best.stages = sm90_hc_stages(best.block_m, n, best.cluster, max_smem);
    best.smem_bytes = sm90_hc_smem_bytes(best.block_m, n, best.stages, best.cluster);
    best.num_math_threads = 256;
    best.num_threads = kSm90HcThreads;
    return best;
}

}  // namespace deep_gemm::heuristics
