// Configuration ranking of the SM90 BF16 GEMM kernel (cuda/deep_gemm/impls/sm90_bf16_gemm.cuh):
// dense and m-grouped, K- or MN-major operands, bf16 or fp32 D. Pure C++17.
//
// The kernel keeps the whole K loop in the wgmma accumulators (no promotion), so per 64-wide
// K block a tile costs the larger of its tensor, shared-memory and L2 terms
// (sm90_k_block_terms with MmaDtype::kBF16) plus a small wait; tiles, waves and the DRAM
// floor as in the FP8 model. Not yet calibrated on the H200: the FP8 kernels' constants.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "sm90_common.hpp"

namespace deep_gemm::heuristics {

constexpr int kSm90Bf16BlockK = 64;  // bf16 elements of K per pipeline stage (one 128-byte row)
constexpr int kSm90Bf16MaxStages = 16;  // the deepest ring the kernel is built with (the stages knob's bound)
constexpr int kSm90Bf16RankStages = 8;  // the deepest ring the ranking gives a tile

struct Sm90Bf16GemmConfig : Sm90GemmConfig {
    bool staged_d = false;  // bf16 D without C: through the staging tile and TMA stores
    int swizzle_d = 0;      // staged_d: TMA swizzle of the staging tile (bytes)
    int gemm_type = 0;      // 0 dense, else an m-grouped GemmType (1 contiguous, 2 masked, 3 psum)
    int splits = 1;         // split K: CTAs per tile (a cluster, or clusters of 1 with a workspace)
    int split_units = 0;    // split K: units (K blocks, or batches) per split
    bool pair_b = false;    // clusters of 2 on one n-block's two m-blocks, B multicast (kPairB)
    bool evict_first_b = false;  // B's loads evicted first from L2 (kEvictFirstB)
};

// Mirrors sm90_bf16::SmemLayout<...>::kDynamicBytes (tests/test_smem_layout_mirror.py).
constexpr int sm90_bf16_smem_bytes(int block_m, int block_n, int stages, bool staged_d) {
    const int d = staged_d ? sm90_align(block_m * block_n * 2, 1024) : 0;
    return d + stages * (block_m + block_n) * kSm90Bf16BlockK * 2 + 2 * stages * 8 + 1024;
}

// The most pipeline stages (at most max_stages) whose layout fits max_smem_bytes; below 2:
// the tile does not fit.
constexpr int sm90_bf16_fit_stages(int block_m, int block_n, bool staged_d, int max_smem_bytes,
                                   int max_stages = kSm90Bf16MaxStages) {
    int stages = max_stages;
    while (stages >= 2 && sm90_bf16_smem_bytes(block_m, block_n, stages, staged_d) > max_smem_bytes) --stages;
    return stages;
}

// A block_m x block_n tile of `stages` stages: its block sizes, threads (a math warpgroup per
// 64 rows and the producer's) and shared memory; the caller sets its walk and grid.
inline Sm90Bf16GemmConfig sm90_bf16_tile_config(int block_m, int block_n, int stages, bool staged_d, int num_sms) {
    Sm90Bf16GemmConfig c;
    c.block_m = block_m;
    c.block_n = block_n;
    c.block_k = kSm90Bf16BlockK;
    c.staged_d = staged_d;
    c.swizzle_d = staged_d ? sm90_epilogue_swizzle(block_n * 2) : 0;
    c.num_sms = num_sms;
    c.num_math_threads = block_m / 64 * 128;
    c.num_threads = c.num_math_threads + 128;
    c.stages = stages;
    c.smem_bytes = sm90_bf16_smem_bytes(block_m, block_n, stages, staged_d);
    return c;
}

inline double sm90_bf16_estimate_cycles(const Sm90Bf16GemmConfig& c, int m, int n, int k, int num_groups,
                                        int out_bytes) {
    const int num_m = sm90_ceil_div(m, c.block_m), num_n = sm90_ceil_div(n, c.block_n);
    const long tiles = static_cast<long>(num_m) * num_n * num_groups;
    const long waves = (tiles + c.grid_x - 1) / c.grid_x;
    const int slabs = c.block_m / 64;
    const auto t = sm90_k_block_terms(MmaDtype::kBF16, c.block_m, c.block_n, kSm90Bf16BlockK, slabs, 1.0, 0.0);
    // One warpgroup has nothing to overlap its waits with (as in the FP8 model).
    const double one_wg = c.block_m == 64 ? 1.25 : 1.0;
    const double per_k_block = (std::max({t.tensor, t.smem, t.load}) + 20.0) * one_wg;
    double tile = sm90_tile_cycles(sm90_ceil_div(k, kSm90Bf16BlockK), per_k_block, slabs);
    // A staged D whose rows are not whole 128-byte swizzle rows (BLOCK_N not a multiple of
    // 64) is staged in narrow atoms, each its own TMA store. Measured on the H200
    // (2026-12-03), 128 x 240 tiles (32-byte atoms) against 128 x 256: dense 4096 x 24576 x
    // 1536 took as long per tile (415.7 us in 25 waves against 399.5 in 24: ~1900 clk more
    // than their work), masked 6 x ~1024 x 7168 x 3072 8% longer in the same 11 waves (~10000
    // clk). 4000 clk at 32-byte atoms picks 256 for both and keeps 176 for N = 2112 (12 whole
    // tiles, 0.98x torch, against 0.94x at 192; 6000 would pick 192).
    if (c.staged_d && c.swizzle_d < 128) tile += 4000.0 * (128 / std::max(c.swizzle_d, 32) - 1) / 3.0;
    const double dram = sm90_dram_cycles(m, n, k, 2, out_bytes, num_groups);
    return sm90_kernel_cycles(waves, tile, dram);
}

// The walk's group width for `n_blocks` n-blocks (dense GEMMs and the contiguous layouts, which
// walk M_sum like one tall GEMM): 8, or, where 8-wide groups would leave a narrower last group
// holding at least a quarter of the tiles, equal groups of at most 8. Measured on an H100 on
// 2026-12-07 (DG_DEV_SM90_BF16_GROUP_N, two rounds): 4096 x 2112 x 7168 (12 n-blocks of 176)
// 163.5 / 166.9 us at 8 (groups of 8 and 4), 160.5 / 160.4 at 6, 162.4 / 162.5 at 4, 163.2 /
// 163.9 at 12; 4096 x 7168 x 2048 (28 n-blocks, the last group of 4 a seventh of the tiles)
// 159.3 / 159.6 at 8, 160.4 / 160.6 at 7, so it keeps 8. Contiguous, same GPU and day (128 x
// 256 tiles): 4 x ~8192 x 4096 x 7168 2833 / 2822 us at 16, 2631 / 2659 at 8, 2553 / 2554 at
// 4, 2847 / 2839 at 32; 8 x ~4096 x 7168 x 2048 1370 / 1380 at 16, 1323 / 1331 at 8, 1328 /
// 1337 at 4, 1479 / 1501 at 32; 2 x 8192 x 4096 x 7168 1295 at 16, 1223 at 8, 1226 at 4.
// Likely why: a wave of ~128 tiles 8 n-blocks wide spans as many A rows as B rows (16 m-blocks
// of 128, 8 n-blocks of 256), the fewest rows a wave reads; 16 wide, each wave of the
// contiguous rows reads its group's whole B (59 MB at N 4096, K 7168: more than L2 holds).
constexpr int sm90_bf16_walk_group_n(int n_blocks) {
    const int rest = n_blocks % 8;
    if (rest == 0 || rest * 4 < n_blocks) return 8;
    const int groups = (n_blocks + 7) / 8;
    return (n_blocks + groups - 1) / groups;
}

// Every legal configuration for `num_groups` problems of m x n x k on `num_sms` SMs, best
// first. mn_major_b: B's tile is loaded in 64-column chunks (block_n a multiple of 64).
// staged_d: a bf16 D without C (a staging tile in shared memory). gemm_type / align_m: the
// m-grouped forms (contiguous layouts need block_m to divide align_m). with_c: the epilogue
// reads C (direct stores).
inline std::vector<Sm90Bf16GemmConfig> rank_sm90_bf16_gemm_configs(int m, int n, int k, int num_sms, bool mn_major_a,
                                                                   bool mn_major_b, bool staged_d, int out_bytes,
                                                                   int max_smem_bytes = kSm90MaxSmemBytes,
                                                                   int num_groups = 1, int gemm_type = 0,
                                                                   int align_m = 128, bool with_c = false) {
    std::vector<Sm90Bf16GemmConfig> out;
    for (int bm : {64, 128}) {
        if (gemm_type != 0 && gemm_type != 2 && align_m % bm != 0) continue;
        for (int bn = 16; bn <= 256; bn += 16) {
            if (mn_major_b && bn % 64 != 0) continue;
            // Reading C keeps a second tile of values in registers beside the accumulators:
            // ptxas (CUDA 13.0) spilled 472 bytes at 128 x 256 (fp32 D), none at 192.
            if (with_c && bn > 192) continue;
            int stages = sm90_bf16_fit_stages(bm, bn, staged_d, max_smem_bytes, kSm90Bf16RankStages);
            if (stages < 2) continue;
            // Tiles of a few K blocks, fewer than the stages: a multiple of them. Timed for
            // 2 blocks only, on an H100 on 2026-12-07 (einsum bhd,hdr->bhr, B = 4096, H = 128,
            // K = 128, N = 512; 128 x 256 tiles, two rounds each): 3 stages 272.1 / 270.7 us
            // and 166.8 MB read from DRAM (ncu), 2 stages 265.2 / 265.5 us and 151.2 MB, A's
            // 134 MB read once as cuBLAS reads it (the two CTAs of an m-block share A in L2).
            // Why the third stage costs that sharing is not established.
            const int k_blocks = sm90_ceil_div(std::max(k, 1), kSm90Bf16BlockK);
            if (k_blocks >= 2 && k_blocks < stages) stages -= stages % k_blocks;
            Sm90Bf16GemmConfig c = sm90_bf16_tile_config(bm, bn, stages, staged_d, num_sms);
            c.gemm_type = gemm_type;
            // Masked groups have a few m-blocks each, and each group reads its own B: with
            // 2-wide n-block groups the m-blocks that share a B tile run on neighbouring CTAs.
            // H200, 2026-12-03 (DG_DEV_SM90_BF16_GROUP_N, two rounds): masked 32 x ~192 x 4096
            // x 7168 826.6 / 807.0 -> 692.5 us at 2 (688.9 / 692.4 at 1), 6 x ~1024 x 7168 x
            // 3072 413.7 / 416.0 -> 403.9; the contiguous rows were as fast or slower at 2
            // (1328-1352 -> 1439 us at 8 x ~4096 x 7168 x 2048).
            if (gemm_type == 2) c.group_n = 2;
            // Dense and contiguous: 8-wide groups (the ~132 tiles in flight cover ~16 m-blocks
            // x 8 n-blocks) measured 0.5-2% faster than 16 at M = 4096 on every N, K of the
            // bf16 suite, 32 slower (H200, 2026-12-04, DG_DEV_SM90_BF16_GROUP_N: 7168 x 16384
            // 1189 / 1191 -> 1166 us, 4096 x 7168 302.8 / 307.0 -> 297.3, 7168 x 2048 160.3 /
            // 164.2 -> 158.2); contiguous: see sm90_bf16_walk_group_n.
            if (gemm_type != 2) c.group_n = sm90_bf16_walk_group_n(sm90_ceil_div(n, bn));
            const long tiles = static_cast<long>(sm90_ceil_div(std::max(m, 1), bm)) * sm90_ceil_div(n, bn) * num_groups;
            // Masked and psum tile counts live on the GPU: every SM runs.
            c.grid_x = gemm_type == 2 || gemm_type == 3 ? num_sms : sm90_persistent_grid(tiles, num_sms, 1, true);
            c.est_cycles = sm90_bf16_estimate_cycles(c, std::max(m, 1), n, k, num_groups, out_bytes);
            out.push_back(c);
        }
    }
    (void)mn_major_a;  // A's majorness does not change the ranking (its tile is always whole chunks)
    std::stable_sort(out.begin(), out.end(), [](const Sm90Bf16GemmConfig& a, const Sm90Bf16GemmConfig& b) {
        return a.est_cycles < b.est_cycles;
    });
    return out;
}

// Masked groups of 129-256 expected rows (two m-blocks, the second often partial; masked_m
// given, not einsum's heads) take 128 x 192 tiles first, whose 4-stage ring the model does not
// credit. H100, 2026-12-07 (knob DG_DEV_SM90_BF16_BLOCK_N, interleaved with torch._grouped_mm,
// two rounds, us at 256 / 192 / 128): 32 x ~192 x 4096 x 7168 778.6 / 761.4 / 794.0 and 775.1 /
// 759.8 / 794.0; 16 x ~256 458.7 / 453.5 / 550.0 and 458.4 / 451.9 / 567.0; 32 x ~192 x 7168 x
// 2048 416.0 / 402.8 / 385.9 and 415.4 / 405.2 / 384.6. Outside the band 192 lost or the sweep
// disagreed: 8 x ~512 391.6 / 408.0, 6 x ~1024 400.9 / 415.6, 64 x ~96 1278.7 / 1317.5, while
// 32 x ~128 went 753.2 -> 734.0 (717.1 at 128); docs/design-notes.md.
inline void prefer_sm90_bf16_masked_tile(std::vector<Sm90Bf16GemmConfig>& ranked, int expected_m) {
    if (expected_m <= 128 || expected_m > 256) return;
    std::stable_partition(ranked.begin(), ranked.end(),
                          [](const Sm90Bf16GemmConfig& c) { return c.block_m == 128 && c.block_n == 192; });
}

// einsum's per-head GEMMs (the masked layout without masked_m: every group has all its rows)
// walk one n-block at a time: the CTAs in flight then take consecutive m-blocks of one head
// and n-block. H100, 2026-12-07 (DG_DEV_SM90_BF16_GROUP_N, one process per setting, three
// rounds, no peers; B = 4096, H = 128, 128 x 256 tiles): bhd,hdr->bhr (K = 128, N = 512)
// 261.2 / 261.3 / 261.7 us at 1 against 265.0 / 265.2 / 264.9 at 2; bhr,hdr->bhd (K = 512,
// N = 128) and 8 heads of 4096 x 1024 x 4096 unchanged (242.6-243.9, 346.0-346.9).
inline void walk_sm90_bf16_heads_by_n_block(std::vector<Sm90Bf16GemmConfig>& ranked) {
    for (auto& c : ranked) c.group_n = 1;
}

// Whether a dense GEMM loads B under L2's evict-first policy (sm90_b_read_once; a CTA pair
// sharing B counts as one m-block, and each split of a tile is a CTA). Not with batched K.
inline bool sm90_bf16_b_read_once(const Sm90Bf16GemmConfig& c, int m, int n, int k, bool batched_k) {
    const long m_blocks = sm90_ceil_div(std::max(m, 1), c.pair_b ? 2 * c.block_m : c.block_m);
    const long ctas = m_blocks * sm90_ceil_div(n, c.block_n) * (c.pair_b ? 2 : 1) * std::max(c.splits, 1);
    return c.gemm_type == 0 && !batched_k && sm90_b_read_once(m_blocks, ctas, c.grid_x, 2L * n * k);
}

// A dense configuration as CTA pairs sharing B (the kernel's kPairB; an even number of
// m-blocks is the caller's to check): clusters of 2 on an even grid, tiles numbered m-blocks
// first so that a pair's tiles t (even) and t + 1 share their n-block.
inline void sm90_bf16_pair_up(Sm90Bf16GemmConfig& c) {
    c.pair_b = true;
    c.cluster = 2;
    c.group_n = 1;
    c.grid_x -= c.grid_x % 2;
}

// CTA pairs sharing B (the kernel's kPairB) for a dense GEMM of two 64-row blocks (64 < M <=
// 128) whose 64 x 64 tiles fill the SMs in one wave (at least 90% of them, at most all): 64 x
// 64 tiles, the deepest ring that fits, the two m-blocks of each n-block on a cluster of 2, each
// CTA loading half of B's rows into both. Measured on the H200 on 2026-12-07 at 128 x 4096 x
// 7168 (128 tiles on 132 SMs): 27.4 / 27.5 us against 28.6 / 28.6 for the split the ranking
// picks (128 x 64 in 2), 29.4 / 29.1 unpaired at 13 stages, 31.4 / 31.5 at 8 stages. With half
// the SMs (N = 2112) or two waves (N = 7168) the splits stay ahead, so this is taken only in
// the band measured and tested: long K (at least 32 K blocks), K-major A and B, a bf16 D
// through the staging tile (docs/design-notes.md, "Small-M dense BF16").
inline std::optional<Sm90Bf16GemmConfig> sm90_bf16_pair_b_config(int m, int n, int k, int num_sms, bool mn_major_a,
                                                                 bool mn_major_b, bool staged_d, int max_smem_bytes) {
    constexpr int kTile = 64;
    const long tiles = 2L * sm90_ceil_div(n, kTile);
    if (m <= 64 || m > 128 || mn_major_a || mn_major_b || !staged_d || sm90_ceil_div(k, kSm90Bf16BlockK) < 32)
        return std::nullopt;
    if (tiles > num_sms || tiles * 10 < static_cast<long>(num_sms) * 9) return std::nullopt;
    const int stages = sm90_bf16_fit_stages(kTile, kTile, true, max_smem_bytes);
    if (stages < 2) return std::nullopt;
    Sm90Bf16GemmConfig c = sm90_bf16_tile_config(kTile, kTile, stages, true, num_sms);
    c.grid_x = static_cast<int>(tiles);  // one tile per CTA
    sm90_bf16_pair_up(c);
    return c;
}

// Split K (the kernel's kSplitK): where the output's tiles cannot fill the SMs (small M and
// N, long K: 128 x 2112 x 7168 has 17 tiles of 128 x 128 for 132 SMs), the K loop of each
// tile is cut into runs of whole units (K blocks of a dense GEMM, batches of einsum
// bmk,bnk->mn), each run at least kSm90Bf16MinSplitKBlocks K blocks (shorter ones spend more
// on the reduction than their SMs save).
constexpr int kSm90Bf16MinSplitKBlocks = 8;

// Dense GEMMs: a cluster of 2, 4 or 8 CTAs per tile, reduced through distributed shared
// memory, and only as many clusters as stay resident at once (a cluster runs within one
// GPC, so clusters of more CTAs fit fewer per GPU). Measured on the H200 (132 SMs,
// 2026-12-03, bf16_gemm_nt): 64 clusters of 2 (128 x 7168 x 16384) and 15 of 8 (128 x 2112
// x 7168) ran in one wave; 32 of 4 (128 x 4096 x 7168) took two (39 us against 31 unsplit).
// Scaled by the SM count for other Hopper parts; a per-device residency query would be exact.
inline long sm90_bf16_resident_clusters(int cluster, int num_sms) {
    const long on_h200 = cluster == 2 ? 64 : 16;
    return std::max(1L, on_h200 * num_sms / 132);
}

// Whether a split-K configuration may use this tile: at most 192 wide, and room in the stage
// memory to park the FP32 tile. The width cap dates from d07aa75, when ptxas (CUDA 13.0) spilled
// the reduction's epilogue at 128 x 224 and 128 x 256; at 0b30b35 it compiles those (bf16 and
// fp32 D, every layout, 8 splits) without spills or local memory, but no split tile wider than
// 192 has been timed, so the ranking keeps the cap until one is.
inline bool sm90_bf16_split_tile_ok(const Sm90Bf16GemmConfig& c) {
    return c.block_n <= 192 && c.stages * (c.block_m + c.block_n) * kSm90Bf16BlockK * 2 >= c.block_m * c.block_n * 4;
}

// einsum bmk,bnk->mn (thousands of batches over a handful of tiles): more splits than a
// cluster holds, one CTA each (clusters of 1), their FP32 partial sums in a workspace that
// the op reduces. units_per_split 0: not split.
struct Sm90Bf16WorkspaceSplit {
    int units_per_split = 0, splits = 1;
};
inline Sm90Bf16WorkspaceSplit sm90_bf16_workspace_split(long m, long n, long units, long k_blocks_per_unit,
                                                        int num_sms) {
    const long tiles = static_cast<long>(sm90_ceil_div(static_cast<int>(std::max(m, 1L)), 128)) *
                       sm90_ceil_div(static_cast<int>(std::max(n, 1L)), 128);
    if (units < 2 || tiles * 2 > num_sms) return {};
    const long want = std::min({units, num_sms / tiles, units * k_blocks_per_unit / kSm90Bf16MinSplitKBlocks});
    if (want < 2) return {};
    const long per = (units + want - 1) / want;  // then no split is empty
    return {static_cast<int>(per), static_cast<int>((units + per - 1) / per)};
}

// The best dense configuration for `units` K blocks, split over a cluster or not (splits 1):
// `unsplit` ranked first by rank_sm90_bf16_gemm_configs for the whole K.
inline Sm90Bf16GemmConfig choose_sm90_bf16_split(const Sm90Bf16GemmConfig& unsplit, int m, int n, long units,
                                                 int k_blocks_per_unit, int num_sms, bool mn_major_a,
                                                 bool mn_major_b, int out_bytes, int max_smem_bytes, bool with_c,
                                                 int mult_m, int mult_n, int force_splits = 0,
                                                 int force_block_n = 0, int force_block_m = 0) {
    // force_splits / force_block_n / force_block_m (developer knobs): that split count and
    // tile only, past the residency cap and the model's choice.
    Sm90Bf16GemmConfig best = unsplit;
    if (force_splits) best.est_cycles = 1e30;
    for (int want : {2, 3, 4, 5, 6, 7, 8}) {
        if (force_splits ? want != force_splits : (want != 2 && want != 4 && want != 8)) continue;
        const long per = (units + want - 1) / want;
        const long splits = (units + per - 1) / per;  // no empty split
        if (splits < 2 || per * k_blocks_per_unit < kSm90Bf16MinSplitKBlocks) continue;
        const int k = static_cast<int>(per * k_blocks_per_unit * kSm90Bf16BlockK);
        for (auto c : rank_sm90_bf16_gemm_configs(m, n, k, num_sms, mn_major_a, mn_major_b, false, out_bytes,
                                                  max_smem_bytes, static_cast<int>(splits), 0, 128, with_c)) {
            const long tiles = static_cast<long>(sm90_ceil_div(std::max(m, 1), c.block_m)) * sm90_ceil_div(n, c.block_n);
            if (c.block_m % mult_m != 0 || c.block_n % mult_n != 0) continue;
            if ((force_block_n && c.block_n != force_block_n) || (force_block_m && c.block_m != force_block_m))
                continue;
            if (!force_splits &&
                (tiles * splits > num_sms || tiles > sm90_bf16_resident_clusters(static_cast<int>(splits), num_sms)))
                continue;
            if (!sm90_bf16_split_tile_ok(c)) continue;
            c.splits = static_cast<int>(splits);
            c.split_units = static_cast<int>(per);
            c.cluster = c.splits;
            c.grid_x = static_cast<int>(tiles * splits);
            // The reduction: the tile's partials over DSMEM (~64 bytes/cycle) and two cluster barriers.
            c.est_cycles += static_cast<double>(c.block_m) * c.block_n * 4 / 64.0 + 1000.0;
            if (c.est_cycles < best.est_cycles) best = c;
            break;  // the best of this split count
        }
    }
    return best;
}

}  // namespace deep_gemm::heuristics
