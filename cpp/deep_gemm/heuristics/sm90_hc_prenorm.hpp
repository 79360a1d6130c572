// Configuration of the SM90 TF32 HyperConnection prenorm GEMM
// (cuda/deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh): rows per CTA (64 or 128), the K parts
// that split each (tile, split) unit's K blocks again over independent CTAs, and the
// pipeline depth.
//
// The kernel reads A once (M x K bf16) and is bound by DRAM: the choice is the one that
// keeps the most SMs streaming with the least time per CTA. Per CTA: its A bytes at its
// share of DRAM bandwidth (capped per SM), B re-read from L2 by every M tile (so 128 rows
// halve that traffic per A byte), plus a fixed fill and epilogue, and the K parts' reduction
// through the workspace (a fixed cost, a cost per part, and the partials' bytes the last part
// reads), and the warpgroups' serial K blocks. One CTA per SM (the pipeline takes most of
// shared memory).
//
// Pure C++17, no CUDA or torch headers.
#pragma once

#include <algorithm>

#include "sm90_common.hpp"

namespace deep_gemm::heuristics {

struct Sm90HcPrenormConfig : Sm90GemmConfig {
    int num_parts = 1;         // CTAs per (tile, split) unit, each a balanced share of its K blocks
    int k_blocks_per_cta = 0;  // the largest K range (in 64-blocks) of one CTA
};

constexpr int kSm90HcBlockK = 64;
constexpr int kSm90HcThreads = 256 + 32;  // two math warpgroups and the producer warp
constexpr double kSm90HcBlockLatency = 450.0;  // clocks of one warpgroup's K block (loads, wgmmas, wait)

// One partial of a CTA: (N / 2 accumulators + 2 row sums) per result thread (2 per row).
inline long sm90_hc_partial_bytes(int block_m, int n) { return static_cast<long>(n / 2 + 2) * block_m * 2 * 4; }

// The kernel's SmemLayout, mirrored: A and B stages, warpgroup 1's partial (64-row tiles),
// the barriers, the last-part flag, and 1024 bytes to align the base.
inline int sm90_hc_smem_bytes(int block_m, int n, int stages) {
    const int a = block_m * kSm90HcBlockK * 2, b = 2 * n * 128;
    const int xfer = block_m == 64 ? static_cast<int>(sm90_hc_partial_bytes(block_m, n)) : 0;
    return stages * (a + b) + xfer + 2 * stages * 8 + 16 + 1024;
}

// The most stages that fit (at most 16: more is no deeper than DRAM latency needs).
inline int sm90_hc_stages(int block_m, int n, int max_smem) {
    int stages = 16;
    while (stages > 2 && sm90_hc_smem_bytes(block_m, n, stages) > max_smem) --stages;
    return stages;
}

// The global workspace of a launch with K parts: one int counter per unit in a region of fixed
// size at its start, then units x parts partials; 0 without K parts. The region is the same
// for every configuration: the workspace of a stream is reused by launches of any shape, whose
// partials must never land on counters that a later launch expects to find zero.
constexpr int kSm90HcMaxPartUnits = 4096;  // units (tile, split) of a launch that splits K
constexpr long kSm90HcCounterBytes = kSm90HcMaxPartUnits * 4;
inline long sm90_hc_workspace_bytes(const Sm90HcPrenormConfig& c, int m, int num_splits) {
    if (c.num_parts <= 1) return 0;
    const long units = static_cast<long>(sm90_ceil_div(m, c.block_m)) * num_splits;
    return kSm90HcCounterBytes + units * c.num_parts * sm90_hc_partial_bytes(c.block_m, c.block_n);
}

// force_*: developer knobs (0 = choose).
inline Sm90HcPrenormConfig choose_sm90_hc_prenorm_config(int m, int n, int k, int num_splits, int num_sms,
                                                        int max_smem, int force_block_m = 0, int force_parts = 0) {
    const int k_blocks = sm90_ceil_div(k, kSm90HcBlockK);
    const int split_blocks = std::max(sm90_ceil_div(k_blocks, num_splits), 1);  // the largest split
    // Per-SM clocks: DRAM shared by the active SMs, at most ~2x an SM's fair share (H200: 64
    // CTAs streamed 4096 x 7168 ~10% slower than 128); L2 -> SM.
    const double sm_cap = 2.0 * kSm90DramBytesPerClk / std::max(num_sms, 1);
    Sm90HcPrenormConfig best;
    double best_cycles = 0.0;
    int best_active = 0;
    for (int block_m : {128, 64}) {
        if (force_block_m && block_m != force_block_m) continue;
        const long units = static_cast<long>(sm90_ceil_div(m, block_m)) * num_splits;
        const int rows = std::min(m, block_m);  // a tile's rows that A has (the TMA reads no others)
        // K parts need a counter per unit (kSm90HcMaxPartUnits of them); so many units fill the
        // GPU without them.
        const int max_parts = units > kSm90HcMaxPartUnits ? 1 : force_parts ? force_parts : std::min(split_blocks, 64);
        for (int parts = force_parts && max_parts > 1 ? force_parts : 1; parts <= max_parts; ++parts) {
            const long ctas = units * parts;
            const int kb_cta = sm90_ceil_div(split_blocks, parts);
            const long waves = (ctas + num_sms - 1) / num_sms;
            const int active = static_cast<int>(std::min<long>(ctas, num_sms));
            const double a_bytes = static_cast<double>(rows) * kb_cta * kSm90HcBlockK * 2;
            const double b_bytes = static_cast<double>(n) * kb_cta * kSm90HcBlockK * 4;
            const double per_sm = std::min(kSm90DramBytesPerClk / active, sm_cap);
            // K parts: a fence and a counter round trip, then the last part reads every part's
            // partial from L2; each part costs ~150 clocks more (H200, 2026-12-03: M = 1 in
            // 8.7 us with 16 parts, 9.7 with 32, 12.2 with 62).
            const double reduce =
                parts > 1 ? 800.0 + 150.0 * parts +
                                static_cast<double>(parts) * sm90_hc_partial_bytes(block_m, n) / kSm90L2BytesPerClk
                          : 0.0;
            // A warpgroup's K block is a serial chain (its loads, 8 wgmmas, the wait): 128-row
            // tiles put both warpgroups on every block, 64-row tiles alternate them.
            const double math = kSm90HcBlockLatency * (block_m == 64 ? sm90_ceil_div(kb_cta, 2) : kb_cta);
            const double cta =
                std::max({a_bytes / per_sm, (a_bytes + b_bytes) / kSm90L2BytesPerClk, math}) + 1500.0 + reduce;
            const double cycles = waves * cta;
            // Within 5%: the one with clearly more SMs streaming, else the larger tile (less B
            // traffic) and the fewer parts (the loop order).
            const bool better = best_active == 0 || cycles < 0.95 * best_cycles ||
                                (cycles <= 1.05 * best_cycles && active > 1.1 * best_active);
            if (!better) continue;
            best_cycles = cycles;
            best_active = active;
            best.block_m = block_m;
            best.num_parts = parts;
            best.k_blocks_per_cta = kb_cta;
            best.grid_x = static_cast<int>(ctas);
            best.est_cycles = cycles;
        }
    }
    best.block_n = n;
    best.block_k = kSm90HcBlockK;
    best.num_sms = num_sms;
    best.cluster = 1;
    best.stages = sm90_hc_stages(best.block_m, n, max_smem);
    best.smem_bytes = sm90_hc_smem_bytes(best.block_m, n, best.stages);
    best.num_math_threads = 256;
    best.num_threads = kSm90HcThreads;
    return best;
}

}  // namespace deep_gemm::heuristics
