// Configuration ranking of the SM90 FP8 block-scaled GEMM kernels (1D2D: bf16 out; 1D1D:
// fp32 out with accumulation; the m-grouped 1D2D kernels): the FP8 configuration, its
// shared-memory formula and limits, the FP8 terms of the cycle model, and the rankings.
//
// Pure C++17, no CUDA or torch headers. The device side lives in
// cuda/deep_gemm/impls/sm90_fp8_gemm_{1d2d,1d1d}.cuh; the shared-memory size formula
// below mirrors cuda/deep_gemm/common/sm90_fp8_core.cuh (Fp8SmemLayout). What a chosen
// configuration compiles and how it is launched (JIT source, tensor maps, kernel
// arguments): launch/sm90_fp8_source.hpp.
#pragma once

#include <algorithm>
#include <vector>

#include "sm90_common.hpp"

namespace deep_gemm::heuristics {

enum class Sm90Fp8Kind { k1D2D, k1D1D };

// block_k is one scale block (128, fixed); num_math_threads is min(block_m / 64, 2)
// warpgroups (block_m 256: two 64-row slabs each).
struct Sm90Fp8GemmConfig : Sm90GemmConfig {
    Sm90Fp8Kind kind = Sm90Fp8Kind::k1D2D;
    int swizzle_d = 0;           // 1D2D: TMA swizzle of the D staging tile (bytes)
    bool mma_overlap = false;    // 1D2D: promote block kb under block kb+1 (block_m <= 128, block_n <= 128)
    int gemm_type = 0;           // 1D2D: 0 dense, else an Sm90GroupedType (m-grouped MoE)
    bool sfa_from_global = false;  // dense 1D2D: per-token SFA read from global (sm90_fp8_sfa_from_global_fits)
    bool dynamic_tiles = false;    // m-grouped 1D2D: tiles claimed from a per-call counter (tile_scheduler.cuh)
    bool fit_m = false;            // dense, cluster 1, M < block_m: A/SFA boxes of the rows that exist (sm90_fp8_fit_box_rows)
    bool tail_m = false;           // dense, cluster 1, M > block_m: the last m-block's own A/SFA maps (sm90_fp8_tail_boxes_pay)
    bool evict_first_b = false;    // dense 1D2D: B loaded under L2's evict-first policy (sm90_fp8_b_read_once)
};

// Whether a dense 1D2D GEMM loads B under L2's evict-first policy (sm90_b_read_once).
inline bool sm90_fp8_b_read_once(const Sm90Fp8GemmConfig& c, int m, int n, int k) {
    const long m_blocks = sm90_ceil_div(std::max(m, 1), c.block_m);
    return c.kind == Sm90Fp8Kind::k1D2D && c.gemm_type == 0 &&
           sm90_b_read_once(m_blocks, m_blocks * sm90_ceil_div(n, c.block_n), c.grid_x, static_cast<long>(n) * k);
}

// Mirrors Fp8SmemLayout<...>::kDynamicBytes (tests/test_smem_layout_mirror.py compares them).
constexpr int sm90_fp8_smem_bytes(Sm90Fp8Kind kind, int bm, int bn, int stages) {
    const bool is_1d1d = kind == Sm90Fp8Kind::k1D1D;
    const int d = is_1d1d ? 0 : sm90_align(bm * bn * 2, 1024);
    const int stage = bm * 128 + bn * 128 + sm90_align(bm * 4, 128) +
                      (is_1d1d ? sm90_align(bn * 4, 128) : 0);
    // 1D2D: a 32-byte tile slot per stage (used by the m-grouped kernels; dense ones leave it).
    const int tile_slots = is_1d1d ? 0 : stages * 32;
    const int reads_words = 8 * 32 * 4;  // one word per math thread (release_stage_after_reads)
    return d + stages * stage + 2 * stages * 8 + tile_slots + reads_words + 1024;
}

constexpr int kSm90Fp8MaxStages = 12;

// Deepest pipeline worth compiling for a tile. ptxas (CUDA 13.0) spills 56 bytes
// in the 1D2D kernel at block 64x128 with 7+ stages (checked: 4 and 6 stages are
// clean) and at 128x64 with 8 stages (7 is clean); every other tile
// compiled clean at its full depth. Stay below those.
// tests/test_warmup.py compiles the chosen kernels of a shape grid with
// DG_JIT_PTXAS_CHECK=1, so a new case shows up there.
inline int sm90_fp8_max_stages(int block_m, int block_n) {
    if (block_m == 64 && block_n == 128) return 6;
    if (block_m == 128 && block_n == 64) return 7;
    return kSm90Fp8MaxStages;
}

// Whether a dense GEMM with M > BLOCK_M should load its last m-block through tail boxes
// (cfg.tail_m; launch: sm90_fp8_tail_box_rows): where BLOCK_M-row boxes would bring at least 48
// rows per last-block tile, and at least 1/8 of all their rows, from past M. Measured on the
// H200 (2026-12-01; docs/design-notes.md), GPU us per call: 129 x 2112 x 7168 28.9 -> 14.4
// (127 rows past M), 192 x 4096 x 7168 25.9 -> 16.0 (64), 389 x 2112 x 7168 26.1 -> 16.4
// (123), 65 x 2112 x 7168 (64-row tiles, 63) 15.6 -> 13.0; but 96 x 2112 x 7168 (64-row
// tiles, 32) 12.4 -> 12.8. Where few rows lie past M there is little to gain, and the tail
// kernel's code is not the same: ptxas allocates the whole kernel anew, and at 4097 x 2112
// x 7168 (3% of the rows past M) the 128x192 tail kernel ran 5-10% slower.
inline bool sm90_fp8_tail_boxes_pay(int m, int block_m) {
    const long rows = static_cast<long>(sm90_ceil_div(m, block_m)) * block_m;
    return rows - m >= 48 && (rows - m) * 8 >= rows;
}

// Cycle model of one configuration (per SM clocks; only the ranking matters): the generic
// terms of heuristics/sm90_common.hpp for e4m3 wgmmas and 128-wide K blocks (one scale
// block), plus the FP8 kernels' own:
//   tensor:  1D2D computes only the slabs that hold rows < m (a group's last tile).
//   smem:    for the common tiles this, not the tensor rate, is the floor (128x128: 640 vs
//            512 clk).
//   promote: exposed unless other wgmmas run under it. Plain schedule with one slab per
//            warpgroup: both warpgroups wait on the same stage and promote in phase (+N/2
//            + 60 clk). Overlap (two accumulators) and block_m 256 (two slabs per
//            warpgroup, staggered against the other warpgroup): ~30 clk.
// Calibration (H200, 2026-11-29): 128x128 at 4096x7168x16384 ran ~720 clk per K block with
// overlap and ~815 without (model 670 / 764) at the ~1.6 GHz sustained clock.
// num_groups > 1 (m-grouped): `num_groups` independent m x n x k problems sharing the grid.
inline double sm90_fp8_estimate_cycles(const Sm90Fp8GemmConfig& c, int m, int n, int k, int num_groups = 1) {
    const int num_m = sm90_ceil_div(m, c.block_m), num_n = sm90_ceil_div(n, c.block_n);
    const long tiles = static_cast<long>(num_m) * num_n * num_groups;
    const long waves = (tiles + c.grid_x - 1) / c.grid_x;
    const int slabs = c.block_m / 64;
    // 1D2D: slabs whose rows all lie past a group's m (or M) are not computed.
    const double active = c.kind == Sm90Fp8Kind::k1D2D ? sm90_active_slab_fraction(m, num_m, slabs) : 1.0;
    const double mc = c.cluster == 2 ? sm90_multicast_fraction(num_m, num_n, c.group_n) : 0.0;
    const Sm90KBlockTerms t = sm90_k_block_terms(MmaDtype::kE4M3, c.block_m, c.block_n, 128, slabs, active, mc);
    const bool staggered = c.mma_overlap || c.block_m == 256;
    const double promote = staggered ? 30.0 : c.block_n / 2.0 + 60.0;
    // Measured, which the terms above do not capture: with block_m 128, block_n 112 to 192
    // ran 10-25% slower per FLOP than 128 on 4096x7168x16384 (kernel_bench runs 2-3 and v5: 112 0.82x,
    // 144 0.89x, 160 0.91-0.95x, 192 0.93x); with block_m 256, block_n 112 ran 0.85x of 128
    // (kernel_bench v5), while 96 and 64 matched the model. Since the K loop is compiled per
    // straddle point (1D2D, BLOCK_N 160, 192), those two run without the penalty: at 4096x2112x7168
    // 128x192 took 113.6 us against 116.5 for 256x96, and on the other bench shapes the model
    // still puts 256x128 first, as measured (H200, 2026-11-30).
    const bool straddle_fixed =
        c.kind == Sm90Fp8Kind::k1D2D && c.block_m == 128 && (c.block_n == 160 || c.block_n == 192);
    const bool off_sweet_spot = ((c.block_m == 128 && c.block_n > 64 && c.block_n != 128) ||
                                 (c.block_m == 256 && c.block_n > 96 && c.block_n != 128)) &&
                                !straddle_fixed;
    // One math warpgroup (block_m 64) has nothing to hide its own waits and promotion
    // behind: measured ~1.25x the model per K block (masked 32 x ~192 rows, N 4096, K 7168:
    // 64x160 ran 595 TFLOP/s where 128x128 ran 690; H200, 2026-11-30).
    const double one_wg = c.block_m == 64 ? 1.25 : 1.0;
    const double per_k_block = (std::max({t.tensor, t.smem, t.load}) + promote) * (off_sweet_spot ? 1.2 : 1.0) * one_wg;
    // A partial last K block costs a whole one.
    const double tile = sm90_tile_cycles(sm90_ceil_div(k, 128), per_k_block, slabs);
    const double out_bytes = c.kind == Sm90Fp8Kind::k1D1D ? 8.0 : 2.0;  // 1D1D reads C too
    const double dram = sm90_dram_cycles(m, n, k, 1, out_bytes, num_groups);
    // One-warpgroup tiles also lose when the DRAM stream bounds the kernel (the 1.25 above
    // then hardly counts): with M = 128, 128-row tiles ran 17% faster at 128x7168x16384
    // (45.5 vs 55.0 us) and 4% at 128x4096x7168, while 64x32 stayed 6% ahead at
    // 128x2112x7168 (H200, 2026-11-30, DG_DEV_SM90_FP8_BLOCK_M A/B).
    const double one_wg_overall = c.block_m == 64 ? 1.1 : 1.0;
    return sm90_kernel_cycles(waves, tile, dram) * one_wg_overall;
}

// Every legal configuration for an m x n x k problem on `num_sms` SMs, best first by the
// cycle model. fp32_out selects the 1D1D kernel. Deterministic.
// Cluster-2 (A multicast) candidates are listed only with allow_cluster2: on the H200 they
// measured 0-10% slower than cluster 1 in every bench shape (docs/design-notes.md), so the
// automatic choice does not take them until that changes.
inline std::vector<Sm90Fp8GemmConfig> rank_sm90_fp8_gemm_configs(int m, int n, int k, int num_sms, bool fp32_out,
                                                                 int max_smem_bytes = kSm90MaxSmemBytes,
                                                                 bool allow_cluster2 = false, int num_groups = 1,
                                                                 bool balance_grid = true) {
    const Sm90Fp8Kind kind = fp32_out ? Sm90Fp8Kind::k1D1D : Sm90Fp8Kind::k1D2D;
    std::vector<Sm90Fp8GemmConfig> all;
    for (int bm : {64, 128, 256}) {
        // block_m 256 (two 64-row slabs per math warpgroup): 1D2D only.
        if (bm == 256 && kind != Sm90Fp8Kind::k1D2D) continue;
        for (int bn = 16; bn <= 192; bn += 16) {
            // 1D2D: a tile may touch at most two 128-wide SFB blocks.
            if (kind == Sm90Fp8Kind::k1D2D && bn > 128 && 128 % (bn - 128) != 0) continue;
            // Registers of the math warpgroups (232 each): the result and one accumulator,
            // (slabs + 1) x block_n / 2 floats per thread, must stay within 192; the 1D1D
            // kernel also holds its SFB reads (block_n <= 160 measured clean).
            if ((bm == 256 ? 3 : 2) * bn / 2 > 192) continue;
            // 64x192 (one warpgroup): spilled in a variant of the kernel (2026-11-30, run 3's SASS) and
            // never measured faster than 64x128 or 128x192; not offered.
            if (bm == 64 && bn > 160) continue;
            if (kind == Sm90Fp8Kind::k1D1D && bn > 160) continue;
            for (int cluster : {1, 2}) {
                if (cluster == 2 && (num_sms < 2 || !allow_cluster2)) continue;
                Sm90Fp8GemmConfig c;
                c.kind = kind;
                c.block_m = bm;
                c.block_n = bn;
                c.cluster = cluster;
                c.num_sms = num_sms;
                c.grid_x = num_sms / cluster * cluster;
                c.num_math_threads = std::min(bm / 64, 2) * 128;
                c.num_threads = c.num_math_threads + 128;
                c.swizzle_d = kind == Sm90Fp8Kind::k1D2D ? sm90_epilogue_swizzle(bn * 2) : 0;
                // 1D2D: promote block kb while block kb+1 runs (two accumulators, which fit
                // for block_n <= 128). The v4 form is not serialised by ptxas (no C7514).
                c.mma_overlap = kind == Sm90Fp8Kind::k1D2D && bm <= 128 && bn <= 128;
                // Boxes of the rows that exist: M < BLOCK_M, or the last m-block where it pays.
                c.fit_m = cluster == 1 && m < bm;
                c.tail_m = cluster == 1 && m > bm && sm90_fp8_tail_boxes_pay(m, bm);
                int stages = sm90_fp8_max_stages(bm, bn);
                while (stages > 2 && sm90_fp8_smem_bytes(kind, bm, bn, stages) > max_smem_bytes) --stages;
                if (sm90_fp8_smem_bytes(kind, bm, bn, stages) > max_smem_bytes) continue;
                c.stages = stages;
                c.smem_bytes = sm90_fp8_smem_bytes(kind, bm, bn, stages);
                c.est_cycles = sm90_fp8_estimate_cycles(c, m, n, k, num_groups);
                c.grid_x = sm90_persistent_grid(
                    static_cast<long>(sm90_ceil_div(m, bm)) * sm90_ceil_div(n, bn) * num_groups, c.grid_x,
                    cluster, balance_grid);
                all.push_back(c);
            }
        }
    }
    // Clusters couple CTA pairs; take them only when the model says they win by 2%.
    auto score = [](const Sm90Fp8GemmConfig& c) { return c.est_cycles * (c.cluster == 2 ? 1.02 : 1.0); };
    std::stable_sort(all.begin(), all.end(),
                     [&](const Sm90Fp8GemmConfig& a, const Sm90Fp8GemmConfig& b) { return score(a) < score(b); });
    return all;
}

// Picks (block_m, block_n, stages, cluster) for an m x n x k problem (the model's best).
inline Sm90Fp8GemmConfig choose_sm90_fp8_gemm_config(int m, int n, int k, int num_sms, bool fp32_out,
                                                     int max_smem_bytes = kSm90MaxSmemBytes) {
    return rank_sm90_fp8_gemm_configs(m, n, k, num_sms, fp32_out, max_smem_bytes).front();
}

// Completes a hand-picked (kind, block_m, block_n, cluster) into a full config (stages,
// smem, threads, grid) the same way the ranking does. Used by tests and tuning.
inline Sm90Fp8GemmConfig make_sm90_fp8_gemm_config(bool fp32_out, int bm, int bn, int cluster, int m, int n, int k,
                                                   int num_sms, int max_smem_bytes = kSm90MaxSmemBytes) {
    for (const auto& c : rank_sm90_fp8_gemm_configs(m, n, k, num_sms, fp32_out, max_smem_bytes, true))
        if (c.block_m == bm && c.block_n == bn && c.cluster == cluster) return c;
    return Sm90Fp8GemmConfig{};  // block_m 128 / block_n 128 defaults; caller passed an illegal shape
}

// Per-token scales not in the TMA layout are normally converted by a small kernel into
// fresh storage before the GEMM: an allocation and a launch per call, ~5 us of host time
// that dominates a small-M call. Up to this M the dense 1D2D kernel instead reads them
// where they are (each math thread its two rows, one K block ahead, in the overlapped or
// the plain one-slab schedule: block_m <= 128). Cluster 1 only (cluster pairs are a
// tuning knob here, and untested with it). Measured on the H200 against converting, GPU
// time per call (2026-12-01; docs/design-notes.md):
//   - bench protocol (L2 flushed, launches interleaved), 40
//     shapes at M = 1-512: up to 19% less at M <= 384, nowhere more than 2% more (noise);
//   - back to back in a CUDA graph: up to 26% less at M <=
//     384 but for 192 x 7168 x 16384 (9% more, where the same kernel read 7% apart in two
//     processes); at M = 512, 6-11% more in two of five shapes.
// So up to M = 384.
constexpr int kSm90Fp8SfaFromGlobalMaxM = 384;
inline bool sm90_fp8_sfa_from_global_fits(const Sm90Fp8GemmConfig& c, int m) {
    return c.kind == Sm90Fp8Kind::k1D2D && c.gemm_type == 0 && c.block_m <= 128 && c.cluster == 1 &&
           m <= kSm90Fp8SfaFromGlobalMaxM;
}

// ---------------------------------------------------------------------------------------
// M-grouped FP8 GEMMs (MoE; API.md P1): the 1D2D kernel with an m-grouped scheduler
// (cuda/deep_gemm/scheduler/tile_scheduler.cuh). Always cluster 1. Launch contract:
// launch/sm90_fp8_source.hpp.
// ---------------------------------------------------------------------------------------
enum class Sm90GroupedType : int { kContiguous = 1, kMasked = 2, kContiguousPsum = 3 };

// Configurations for `num_groups` groups of about m rows each (m = M_sum and 1 group for
// the contiguous index layout, which is costed as one GEMM), best first. Contiguous layouts
// need BLOCK_M to divide the group alignment align_m, or BLOCK_M 256 with align_m a
// multiple of 128 (a tile then holds at most two groups, split at its middle row).
inline std::vector<Sm90Fp8GemmConfig> rank_sm90_fp8_grouped_configs(int gemm_type, int m, int num_groups, int n,
                                                                    int k, int num_sms, int align_m,
                                                                    int max_smem_bytes = kSm90MaxSmemBytes) {
    std::vector<Sm90Fp8GemmConfig> out;
    // The contiguous layout keeps every SM (no wave balancing): its tiles differ in cost
    // (padding rows skipped, tiles split between two groups), and 130 balanced CTAs measured
    // 0.7% slower than 132 on 4 x ~8192 rows (H200, 2026-12-01).
    for (auto c : rank_sm90_fp8_gemm_configs(std::max(m, 1), n, k, num_sms, false, max_smem_bytes, false,
                                             std::max(num_groups, 1), false)) {
        // block_n 192 spills at the grouped kernels' 224 registers.
        if (c.cluster != 1 || c.block_n > 160) continue;
        if (gemm_type != static_cast<int>(Sm90GroupedType::kMasked) && align_m % std::min(c.block_m, 128) != 0)
            continue;
        c.gemm_type = gemm_type;
        c.fit_m = c.tail_m = false;  // m-grouped tiles keep BLOCK_M boxes (their m is not one GEMM's rows)
        if (gemm_type != static_cast<int>(Sm90GroupedType::kContiguous)) c.grid_x = num_sms;
        // The contiguous index layout walks M_sum like one tall GEMM: a 32-wide scheduler
        // group re-reads A from DRAM half as often as 16 and measured 1-2% faster on 8 x
        // ~4096 rows (N 7168, K 2048), equal on 4 x ~8192 (H200, 2026-11-30 and 2026-12-01).
        // Masked measured best at 16 (the default); psum, not in the bench, keeps it too.
        if (gemm_type == static_cast<int>(Sm90GroupedType::kContiguous)) c.group_n = 32;
        // Masked and psum walk the groups with a cursor (producer on 56 registers, math on
        // 224): a second accumulator spilled 8 bytes there (CUDA 13.0), so they keep the
        // plain schedule. The contiguous index layout runs on the dense budget (40 / 232)
        // and overlaps the promotion like the dense kernel.
        if (c.mma_overlap && gemm_type != static_cast<int>(Sm90GroupedType::kContiguous)) {
            c.mma_overlap = false;
            c.est_cycles = sm90_fp8_estimate_cycles(c, std::max(m, 1), n, k, std::max(num_groups, 1));
        }
        out.push_back(c);
    }
    std::stable_sort(out.begin(), out.end(), [](const Sm90Fp8GemmConfig& a, const Sm90Fp8GemmConfig& b) {
        return a.est_cycles < b.est_cycles;
    });
    return out;
}

}  // namespace deep_gemm::heuristics
