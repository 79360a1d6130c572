// Host side of the SM90 FP8 block-scaled GEMM kernels (1D2D: bf16 out; 1D1D: fp32 out
// with accumulation): configuration choice, JIT entry source, and the launch contract
// (tensor maps and kernel arguments) the launcher must honour.
//
// Pure C++17, no CUDA or torch headers. The device side lives in
// cuda/deep_gemm/impls/sm90_fp8_gemm_{1d2d,1d1d}.cuh; the shared-memory size formula
// below mirrors cuda/deep_gemm/common/sm90_fp8_core.cuh (Fp8SmemLayout).
//
// ---------------------------------------------------------------------------------------
// LAUNCH CONTRACT (what a launcher does with a config `cfg` for shape m, n, k):
//
//   code   = sm90_fp8_gemm_source(cfg, compiled_m, compiled_n, compiled_k)  (0 = runtime)
//   kernel = deep_jit compile {name, code, entry = name, arch sm_90a,
//                              include_dirs = {<cuda/ root>}}
//   grid   = {cfg.grid_x, 1, 1}         (persistent: <= #SMs, a multiple of cfg.cluster,
//                                        balanced: the fewest CTAs for the same waves;
//                                        with cluster 2 also clamp to
//                                        2 * cuOccupancyMaxActiveClusters(kernel, cfg):
//                                        every CTA must be resident. 66 on the H200.)
//   block  = {cfg.num_threads, 1, 1}    (256 for block_m 64, 384 for block_m 128)
//   shared = cfg.smem_bytes             (dynamic; needs MAX_DYNAMIC_SHARED_SIZE_BYTES)
//   cluster_dim = {cfg.cluster, 1, 1}   (pass the cluster attribute even when 1 is fine)
//
//   Tensor maps: sm90_fp8_gemm_tensor_maps(cfg, m, n, k, ...) returns them in argument
//   order; each maps to make_tensor_map_2d(base, dtype, inner, outer, outer_stride_bytes,
//   box_inner, box_outer, swizzle). All use interleave none, L2 promotion 256B,
//   OOB fill none (zeros), element strides 1. Boxes of the rows that exist (cluster 1; the
//   kernel expects that many bytes per stage): with cfg.fit_m (M < BLOCK_M) the A and SFA
//   boxes cover only M rows (sm90_fp8_fit_box_rows); with cfg.tail_m (M > BLOCK_M, where
//   BLOCK_M-row boxes would reach far past M: sm90_fp8_tail_boxes_pay) two more maps, of A
//   and SFA, serve the last m-block with boxes of its rows (sm90_fp8_tail_box_rows).
//
//   Kernel arguments, in order:
//   1D2D: (uint32 m, uint32 n, uint32 k, const float* sfb,
//          CUtensorMap a, CUtensorMap b, CUtensorMap sfa, CUtensorMap d)
//   1D2D, cfg.sfa_from_global (no SFA tensor map; SFA fp32 [M, K/128] at any strides):
//         (uint32 m, uint32 n, uint32 k, const float* sfb, const float* sfa,
//          uint32 sfa_stride_m, uint32 sfa_stride_k /*elements*/, CUtensorMap a, CUtensorMap b, CUtensorMap d)
//   1D1D: (uint32 m, uint32 n, uint32 k, const float* c /*may be d, or null*/, float* d,
//          uint32 ld_d /*elements, even*/,
//          CUtensorMap a, CUtensorMap b, CUtensorMap sfa, CUtensorMap sfb)
//   cfg.tail_m: then CUtensorMap a_tail and (unless sfa_from_global) sfa_tail.
//   (tensor maps by value: the entry declares them const __grid_constant__).
//
//   Preconditions the launcher checks: k > 0 (a partial last K block reads zeros past K), m > 0 (m == 0: skip launch),
//   A/B K-major with row pitch % 16 == 0 bytes, 16-byte aligned bases, SFA (and 1D1D SFB)
//   MN-major fp32 [k/128, align(mn, 4)], 1D2D SFB fp32 row-major [ceil(n/128), k/128],
//   1D2D D bf16 row-major with row pitch % 16 bytes == 0 (n % 8 == 0 if packed),
//   1D1D C/D fp32 row-major, ld_d even, 8-byte aligned.
// ---------------------------------------------------------------------------------------
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace deep_gemm::heuristics {

enum class Sm90Fp8Kind { k1D2D, k1D1D };

struct Sm90Fp8GemmConfig {
    Sm90Fp8Kind kind = Sm90Fp8Kind::k1D2D;
    int block_m = 128;
    int block_n = 128;
    int block_k = 128;           // one scale block; fixed
    int stages = 4;
    int cluster = 1;             // 1, or 2: CTA pairs multicast A (same m-block)
    int group_n = 16;            // scheduler group width (n-blocks), even
    int num_sms = 132;           // SMs available (set_num_sms)
    int grid_x = 132;            // persistent grid: <= num_sms (sm90_fp8_persistent_grid)
    int smem_bytes = 0;          // dynamic shared memory
    int num_math_threads = 256;  // min(block_m / 64, 2) warpgroups (block_m 256: two 64-row slabs each)
    int num_threads = 384;       // math + one TMA producer warpgroup
    int swizzle_d = 0;           // 1D2D: TMA swizzle of the D staging tile (bytes)
    bool mma_overlap = false;    // 1D2D: promote block kb under block kb+1 (block_m <= 128, block_n <= 128)
    int gemm_type = 0;           // 1D2D: 0 dense, else an Sm90GroupedType (m-grouped MoE)
    bool sfa_from_global = false;  // dense 1D2D: per-token SFA read from global (sm90_fp8_sfa_from_global_fits)
    bool dynamic_tiles = false;    // m-grouped 1D2D: tiles claimed from a per-call counter (tile_scheduler.cuh)
    bool fit_m = false;            // dense, cluster 1, M < block_m: A/SFA boxes of the rows that exist (sm90_fp8_fit_box_rows)
    bool tail_m = false;           // dense, cluster 1, M > block_m: the last m-block's own A/SFA maps (sm90_fp8_tail_boxes_pay)
    double est_cycles = 0.0;     // model estimate used for the choice
};

constexpr int sm90_fp8_ceil_div(long a, long b) { return static_cast<int>((a + b - 1) / b); }
constexpr int sm90_fp8_align(long a, long b) { return sm90_fp8_ceil_div(a, b) * static_cast<int>(b); }

// Largest TMA swizzle (128/64/32 bytes) that tiles a row of `row_bytes` exactly.
inline int sm90_fp8_epilogue_swizzle(int row_bytes) {
    return row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : row_bytes % 32 == 0 ? 32 : 0;
}

// Mirrors Fp8SmemLayout<...>::kDynamicBytes (tests/test_smem_layout_mirror.py compares them).
constexpr int sm90_fp8_smem_bytes(Sm90Fp8Kind kind, int bm, int bn, int stages) {
    const bool is_1d1d = kind == Sm90Fp8Kind::k1D1D;
    const int d = is_1d1d ? 0 : sm90_fp8_align(bm * bn * 2, 1024);
    const int stage = bm * 128 + bn * 128 + sm90_fp8_align(bm * 4, 128) +
                      (is_1d1d ? sm90_fp8_align(bn * 4, 128) : 0);
    // 1D2D: a 32-byte tile slot per stage (used by the m-grouped kernels; dense ones leave it).
    const int tile_slots = is_1d1d ? 0 : stages * 32;
    const int reads_words = 8 * 32 * 4;  // one word per math thread (release_stage_after_reads)
    return d + stages * stage + 2 * stages * 8 + tile_slots + reads_words + 1024;
}

constexpr int kSm90MaxSmemBytes = 232448;  // 227 KB opt-in per block
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

// Fraction of cluster pairs (tiles t, t^1) that share an m-block and so multicast A.
inline double sm90_fp8_multicast_fraction(int num_m, int num_n, int group_n) {
    double pairs = 0, shared = 0;
    for (int first = 0; first < num_n; first += group_n) {
        const int w = std::min(group_n, num_n - first);
        const double tiles = static_cast<double>(w) * num_m;
        pairs += tiles;
        shared += (w % 2 == 0) ? tiles : tiles * (1.0 - 1.0 / w);
    }
    return pairs > 0 ? shared / pairs : 0.0;
}

// Whether a dense GEMM with M > BLOCK_M should load its last m-block through tail boxes
// (cfg.tail_m, sm90_fp8_tail_box_rows): where BLOCK_M-row boxes would bring at least 48
// rows per last-block tile, and at least 1/8 of all their rows, from past M. Measured on the
// H200 (2026-12-01; docs/design-notes.md), GPU us per call: 129 x 2112 x 7168 28.9 -> 14.4
// (127 rows past M), 192 x 4096 x 7168 25.9 -> 16.0 (64), 389 x 2112 x 7168 26.1 -> 16.4
// (123), 65 x 2112 x 7168 (64-row tiles, 63) 15.6 -> 13.0; but 96 x 2112 x 7168 (64-row
// tiles, 32) 12.4 -> 12.8. Where few rows lie past M there is little to gain, and the tail
// kernel's code is not the same: ptxas allocates the whole kernel anew, and at 4097 x 2112
// x 7168 (3% of the rows past M) the 128x192 tail kernel ran 5-10% slower.
inline bool sm90_fp8_tail_boxes_pay(int m, int block_m) {
    const long rows = static_cast<long>(sm90_fp8_ceil_div(m, block_m)) * block_m;
    return rows - m >= 48 && (rows - m) * 8 >= rows;
}

// Cycle model of one configuration (per SM clocks; only the ranking matters). Per 128-wide
// K block of a tile:
//   tensor:  each 64-row slab runs four m64nNk32 fp8 wgmmas, ~max(N/2, 16) clk each;
//            1D2D computes only the slabs that hold rows < m (a group's last tile).
//   smem:    ~128 B/clk per SM, shared by the TMA writes (A and B tiles) and the wgmma
//            operand reads (every slab reads its 64 rows of A and all of B). For the
//            common tiles this, not the tensor rate, is the floor (128x128: 640 vs 512 clk).
//   promote: exposed unless other wgmmas run under it. Plain schedule with one slab per
//            warpgroup: both warpgroups wait on the same stage and promote in phase (+N/2
//            + 60 clk). Overlap (two accumulators) and block_m 256 (two slabs per
//            warpgroup, staggered against the other warpgroup): ~30 clk.
//   loads:   L2 -> SM ~64 B/clk per SM; multicast halves A for the pairs that share it.
//   tiles:   waves of grid_x tiles, ~400 clk of epilogue per 64-row slab pair, ~1500 clk of fill.
//   DRAM:    ~2150 B/clk for the whole GPU (4.3 TB/s at ~2 GHz), a floor.
// Calibration (H200, 2026-11-29): 128x128 at 4096x7168x16384 ran ~720 clk per K block with
// overlap and ~815 without (model 670 / 764) at the ~1.6 GHz sustained clock.
// num_groups > 1 (m-grouped): `num_groups` independent m x n x k problems sharing the grid.
inline double sm90_fp8_estimate_cycles(const Sm90Fp8GemmConfig& c, int m, int n, int k, int num_groups = 1) {
    const int num_m = sm90_fp8_ceil_div(m, c.block_m), num_n = sm90_fp8_ceil_div(n, c.block_n);
    const long tiles = static_cast<long>(num_m) * num_n * num_groups;
    const long waves = (tiles + c.grid_x - 1) / c.grid_x;
    const int slabs = c.block_m / 64;
    // 1D2D: slabs whose rows all lie past a group's m (or M) are not computed.
    const double active = c.kind == Sm90Fp8Kind::k1D2D
                              ? static_cast<double>(sm90_fp8_ceil_div(m, 64)) / (static_cast<double>(num_m) * slabs)
                              : 1.0;
    const double tensor = active * slabs * 4.0 * std::max(c.block_n / 2.0, 16.0);
    const double smem = (c.block_m + c.block_n) + active * slabs * (64.0 + c.block_n);
    const bool staggered = c.mma_overlap || c.block_m == 256;
    const double promote = staggered ? 30.0 : c.block_n / 2.0 + 60.0;
    const double mc = c.cluster == 2 ? sm90_fp8_multicast_fraction(num_m, num_n, c.group_n) : 0.0;
    const double a_rows = c.block_m * (1.0 - 0.5 * mc);
    const double load = (a_rows + c.block_n) * 128.0 / 64.0;
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
    const double per_k_block = (std::max({tensor, smem, load}) + promote) * (off_sweet_spot ? 1.2 : 1.0) * one_wg;
    const double tile = sm90_fp8_ceil_div(k, 128) * per_k_block + 400.0 * std::max(1, slabs / 2);
    const double out_bytes = c.kind == Sm90Fp8Kind::k1D1D ? 8.0 : 2.0;  // 1D1D reads C too
    const double dram = (static_cast<double>(m) * k + static_cast<double>(n) * k +
                         static_cast<double>(m) * n * out_bytes) * num_groups / 2150.0;
    // The SM work and the DRAM stream overlap only in part (kernel_bench v5: M = 128 shapes ran
    // 1.5-1.9x their DRAM time): the larger of the two plus 30% of the smaller.
    const double sm_work = waves * tile + 1500.0;
    // One-warpgroup tiles also lose when the DRAM stream bounds the kernel (the 1.25 above
    // then hardly counts): with M = 128, 128-row tiles ran 17% faster at 128x7168x16384
    // (45.5 vs 55.0 us) and 4% at 128x4096x7168, while 64x32 stayed 6% ahead at
    // 128x2112x7168 (H200, 2026-11-30, DG_DEV_SM90_FP8_BLOCK_M A/B).
    const double one_wg_overall = c.block_m == 64 ? 1.1 : 1.0;
    return (std::max(sm_work, dram) + 0.3 * std::min(sm_work, dram)) * one_wg_overall;
}

// The persistent grid for `tiles` tiles on at most `max_grid` CTAs (a multiple of
// `cluster`), never more CTAs than tiles. Balanced: the fewest CTAs that keep the same
// number of waves, so every CTA runs the same number of tiles. On the H200 the dense 1D2D
// bench shapes ran 0.7-2% faster so (896 tiles on 128 CTAs instead of 132, 7 waves either
// way; 352 on 118; measured 2026-12-01); the 1D1D kernel takes it too (same scheduler, not
// timed apart). The contiguous grouped layout does not (see rank_sm90_fp8_grouped_configs).
inline int sm90_fp8_persistent_grid(long tiles, int max_grid, int cluster, bool balanced) {
    if (tiles <= 0) return std::min(max_grid, cluster);
    const long waves = balanced ? (tiles + max_grid - 1) / max_grid : 1;
    return tiles < max_grid || balanced ? sm90_fp8_align((tiles + waves - 1) / waves, cluster) : max_grid;
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
                c.swizzle_d = kind == Sm90Fp8Kind::k1D2D ? sm90_fp8_epilogue_swizzle(bn * 2) : 0;
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
                c.grid_x = sm90_fp8_persistent_grid(
                    static_cast<long>(sm90_fp8_ceil_div(m, bm)) * sm90_fp8_ceil_div(n, bn) * num_groups, c.grid_x,
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

// Diagnostics: DG_DEV_TRACE_TILES=1 (read once per process) builds the 1D2D kernels with tile
// boundary stamps (common/sm90_fp8_core.cuh) and one more entry argument, the stamp buffer,
// which the launchers take from DG_DEV_TRACE_TILES_PTR (a device address, decimal). For
// tools/device/tile_trace.py; never set in production (the stamps cost time).
inline bool trace_tiles() {
    static const bool on = [] {
        if (const char* old = std::getenv("DG_TRACE_TILES"); old && *old)
            throw std::runtime_error("deep_gemm: DG_TRACE_TILES is now named DG_DEV_TRACE_TILES (a developer knob)");
        const char* v = std::getenv("DG_DEV_TRACE_TILES");
        if (!v || !*v) return false;
        const std::string s(v);
        if (s != "0" && s != "1") throw std::runtime_error("deep_gemm: DG_DEV_TRACE_TILES must be 0 or 1, got '" + s + "'");
        return s == "1";
    }();
    return on;
}
inline std::string trace_tiles_define() { return trace_tiles() ? "#define DG_TRACE_TILES 1\n" : ""; }

// The launch's dynamic shared memory, for the kernel's compile-time check that its layout
// fits (sm90::launch_smem_fits): a host mirror that fell behind the layout fails to compile
// instead of overrunning shared memory.
inline std::string smem_bytes_define(const Sm90Fp8GemmConfig& c) {
    return "#define DG_SMEM_BYTES " + std::to_string(c.smem_bytes) + "\n";
}
// Closes the entry's parameter list and opens its body (taking the stamp buffer when tracing).
inline std::string entry_params_close() {
    return trace_tiles() ? ", unsigned long long* trace_tiles_buf) {\n    deep_gemm::sm90::g_trace_tiles = trace_tiles_buf;\n"
                         : ") {\n";
}
inline std::string trace_tiles_suffix() { return trace_tiles() ? "_trace" : ""; }

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

// The JIT entry for `cfg`. compiled_{m,n,k}: a dimension baked into the kernel, or 0 for a
// runtime argument (the API's compiled_dims).
inline std::string sm90_fp8_gemm_name(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n, int compiled_k);

// The JIT source of a dense kernel. Its entry symbol is the kernel's name
// (sm90_fp8_gemm_name), so profilers and deep_gemm.testing.bench_kineto tell kernels apart.
inline std::string sm90_fp8_gemm_source(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n,
                                        int compiled_k) {
    const std::string entry = sm90_fp8_gemm_name(c, compiled_m, compiled_n, compiled_k);
    const bool is_1d1d = c.kind == Sm90Fp8Kind::k1D1D;
    const std::string impl = is_1d1d ? "sm90_fp8_gemm_1d1d" : "sm90_fp8_gemm_1d2d";
    const std::string m_boxes = c.fit_m    ? "deep_gemm::sm90::MBoxes::kFitM"
                                : c.tail_m ? "deep_gemm::sm90::MBoxes::kTail"
                                           : "";
    const std::string targs = std::to_string(compiled_m) + "u, " + std::to_string(compiled_n) + "u, " +
                              std::to_string(compiled_k) + "u, " + std::to_string(c.block_m) + "u, " +
                              std::to_string(c.block_n) + "u, " + std::to_string(c.stages) + "u, " +
                              std::to_string(c.cluster) + "u, " + std::to_string(c.group_n) + "u" +
                              (is_1d1d ? "" : c.mma_overlap ? ", true" : ", false") +
                              (is_1d1d ? (m_boxes.empty() ? "" : ", " + m_boxes)
                               : !m_boxes.empty() ? std::string(", deep_gemm::GemmType::kNormal, ") +
                                                        (c.sfa_from_global ? "true" : "false") + ", false, " + m_boxes
                               : c.sfa_from_global ? ", deep_gemm::GemmType::kNormal, true" : "");
    std::string s = smem_bytes_define(c) + (is_1d1d ? std::string() : trace_tiles_define());
    s += "#include <deep_gemm/impls/" + impl + ".cuh>\n\n";
    // The bound is always 384 threads: a fixed register cap at entry (168) that the
    // setmaxnreg pair then redistributes; block_m 64 kernels launch 256 of them.
    s += "extern \"C\" __global__ void __launch_bounds__(384, 1)\n";
    // cfg.tail_m: the last m-block's tensor maps, after the others.
    const bool tail_sfa = c.tail_m && !c.sfa_from_global;
    const std::string tail_params =
        std::string(c.tail_m ? ",\n         const __grid_constant__ CUtensorMap tmap_a_tail" : "") +
        (tail_sfa ? ", const __grid_constant__ CUtensorMap tmap_sfa_tail" : "");
    const std::string tail_args = c.tail_m ? std::string(", &tmap_a_tail, ") + (tail_sfa ? "&tmap_sfa_tail" : "nullptr") : "";
    if (is_1d1d) {
        s += entry + "(uint32_t m, uint32_t n, uint32_t k, const float* c, float* d, uint32_t ld_d,\n"
             "         const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,\n"
             "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_sfb" +
             tail_params + ") {\n";
        s += "    deep_gemm::" + impl + "_impl<" + targs + ">(\n"
             "        m, n, k, c, d, ld_d, &tmap_a, &tmap_b, &tmap_sfa, &tmap_sfb" + tail_args + ");\n}\n";
    } else if (c.sfa_from_global) {
        s += entry + "(uint32_t m, uint32_t n, uint32_t k, const float* sfb,\n"
             "         const float* sfa, uint32_t sfa_stride_m, uint32_t sfa_stride_k,\n"
             "         const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,\n"
             "         const __grid_constant__ CUtensorMap tmap_d" +
             tail_params + entry_params_close();
        s += "    deep_gemm::" + impl + "_impl<" + targs + ">(\n"
             "        m, n, k, sfb, &tmap_a, &tmap_b, nullptr, &tmap_d, nullptr, 1, 1, nullptr, 0,\n"
             "        {sfa, sfa_stride_m, sfa_stride_k}" + (c.tail_m ? ", nullptr" + tail_args : "") + ");\n}\n";
    } else {
        s += entry + "(uint32_t m, uint32_t n, uint32_t k, const float* sfb,\n"
             "         const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,\n"
             "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_d" +
             tail_params + entry_params_close();
        s += "    deep_gemm::" + impl + "_impl<" + targs + ">(\n"
             "        m, n, k, sfb, &tmap_a, &tmap_b, &tmap_sfa, &tmap_d" +
             (c.tail_m ? ", nullptr, 1, 1, nullptr, 0, {}, nullptr" + tail_args : "") + ");\n}\n";
    }
    return s;
}

// A short, unique kernel name for caches and logs.
inline std::string sm90_fp8_gemm_name(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n, int compiled_k) {
    return std::string(c.kind == Sm90Fp8Kind::k1D1D ? "sm90_fp8_gemm_1d1d" : "sm90_fp8_gemm_1d2d") + "_m" +
           std::to_string(compiled_m) + "n" + std::to_string(compiled_n) + "k" + std::to_string(compiled_k) +
           "_b" + std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "_s" + std::to_string(c.stages) +
           "_c" + std::to_string(c.cluster) + "_g" + std::to_string(c.group_n) + (c.fit_m ? "_fm" : "") + (c.tail_m ? "_tm" : "") +
           (c.mma_overlap ? "_o" : "") + (c.sfa_from_global ? "_sg" : "") +
           (c.kind == Sm90Fp8Kind::k1D1D ? "" : trace_tiles_suffix());
}

// One tensor map, in the terms of deep_jit::make_tensor_map_2d.
enum class Sm90TmaDtype { kU8 /*e4m3*/, kF32, kBF16 };
struct Sm90Fp8TensorMapSpec {
    const char* operand;          // "a", "b", "sfa", "sfb", "d"
    Sm90TmaDtype dtype;
    uint64_t inner_elems;         // contiguous dimension
    uint64_t outer_elems;
    uint64_t outer_stride_bytes;  // multiple of 16
    uint32_t box_inner, box_outer;
    int swizzle_bytes;            // 0 (none), 32, 64 or 128
};

// Rows of A and SFA that exist, as the boxes cover them: A rounded up to 8, SFA to 4. Of
// the whole GEMM (cfg.fit_m), or of its last m-block (cfg.tail_m). Mirror box_rows and
// tail_box_rows in cuda/deep_gemm/common/sm90_fp8_core.cuh, whose comment says why.
inline std::pair<uint32_t, uint32_t> sm90_fp8_fit_box_rows(int rows) {
    return {static_cast<uint32_t>(sm90_fp8_align(rows, 8)), static_cast<uint32_t>(sm90_fp8_align(rows, 4))};
}
inline std::pair<uint32_t, uint32_t> sm90_fp8_tail_box_rows(const Sm90Fp8GemmConfig& c, int m) {
    return sm90_fp8_fit_box_rows(m - (sm90_fp8_ceil_div(m, c.block_m) - 1) * c.block_m);
}

// The tensor maps of a launch, in kernel-argument order (after the scalar arguments).
// Pitches: lda/ldb in bytes (k for packed), ld_d in elements (n for packed).
inline std::vector<Sm90Fp8TensorMapSpec> sm90_fp8_gemm_tensor_maps(const Sm90Fp8GemmConfig& c, int m, int n, int k,
                                                                   uint64_t lda_bytes, uint64_t ldb_bytes,
                                                                   uint64_t ld_d) {
    const uint64_t kb = static_cast<uint64_t>(sm90_fp8_ceil_div(k, 128));
    const uint64_t m_pad = static_cast<uint64_t>(sm90_fp8_align(m, 4));
    const uint64_t n_pad = static_cast<uint64_t>(sm90_fp8_align(n, 4));
    const auto [a_rows, sfa_rows] = c.fit_m ? sm90_fp8_fit_box_rows(m)
                                            : std::pair<uint32_t, uint32_t>(c.block_m / c.cluster, c.block_m);
    std::vector<Sm90Fp8TensorMapSpec> maps;
    maps.push_back({"a", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), static_cast<uint64_t>(m), lda_bytes, 128, a_rows,
                    128});
    maps.push_back({"b", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), static_cast<uint64_t>(n), ldb_bytes, 128,
                    static_cast<uint32_t>(c.block_n), 128});
    if (!c.sfa_from_global)
        maps.push_back({"sfa", Sm90TmaDtype::kF32, m_pad, kb, m_pad * 4, sfa_rows, 1, 0});
    if (c.kind == Sm90Fp8Kind::k1D1D) {
        maps.push_back({"sfb", Sm90TmaDtype::kF32, n_pad, kb, n_pad * 4, static_cast<uint32_t>(c.block_n), 1, 0});
    } else {
        maps.push_back({"d", Sm90TmaDtype::kBF16, static_cast<uint64_t>(n), static_cast<uint64_t>(m), ld_d * 2,
                        static_cast<uint32_t>(c.swizzle_d / 2), 64, c.swizzle_d});
    }
    if (c.tail_m) {
        const auto [tail_a, tail_sfa] = sm90_fp8_tail_box_rows(c, m);
        maps.push_back({"a", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), static_cast<uint64_t>(m), lda_bytes, 128,
                        tail_a, 128});
        if (!c.sfa_from_global) maps.push_back({"sfa", Sm90TmaDtype::kF32, m_pad, kb, m_pad * 4, tail_sfa, 1, 0});
    }
    return maps;
}

// ---------------------------------------------------------------------------------------
// M-grouped FP8 GEMMs (MoE; API.md P1): the 1D2D kernel with an m-grouped scheduler
// (cuda/deep_gemm/scheduler/tile_scheduler.cuh). Always cluster 1.
//
//   Kernel arguments: (uint32 m, uint32 n, uint32 k, const float* sfb, const int* grouped_layout,
//                      uint32 num_groups, uint32 align_m, bf16* d, uint32 ld_d /*elements*/,
//                      CUtensorMap a, CUtensorMap b, CUtensorMap sfa, CUtensorMap d)
//   m: M_sum (contiguous, psum) or max rows per group (masked). Tensor maps:
//   sm90_fp8_grouped_tensor_maps. grid = {cfg.grid_x}: masked and psum launch every SM
//   (their tile count lives on the GPU).
// ---------------------------------------------------------------------------------------
enum class Sm90GroupedType : int { kContiguous = 1, kMasked = 2, kContiguousPsum = 3 };

inline const char* sm90_grouped_type_name(int t) {
    switch (t) {
        case 1: return "kMGroupedContiguous";
        case 2: return "kMGroupedMasked";
        case 3: return "kMGroupedContiguousPsum";
        default: return "kNormal";
    }
}

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

inline std::string sm90_fp8_grouped_name(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n, int compiled_k);

inline std::string sm90_fp8_grouped_source(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n,
                                           int compiled_k) {
    const std::string entry = sm90_fp8_grouped_name(c, compiled_m, compiled_n, compiled_k);  // the entry symbol
    const std::string targs = std::to_string(compiled_m) + "u, " + std::to_string(compiled_n) + "u, " +
                              std::to_string(compiled_k) + "u, " + std::to_string(c.block_m) + "u, " +
                              std::to_string(c.block_n) + "u, " + std::to_string(c.stages) + "u, 1u, " +
                              std::to_string(c.group_n) + "u, " + (c.mma_overlap ? "true" : "false") +
                              ", deep_gemm::GemmType::" + sm90_grouped_type_name(c.gemm_type) +
                              (c.dynamic_tiles ? ", false, true" : "");
    std::string s = smem_bytes_define(c) + trace_tiles_define();
    s += "#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>\n\n";
    s += "extern \"C\" __global__ void __launch_bounds__(384, 1)\n";
    s += entry + "(uint32_t m, uint32_t n, uint32_t k, const float* sfb, const int* grouped_layout,\n"
         "         uint32_t num_groups, uint32_t align_m, __nv_bfloat16* d, uint32_t ld_d,\n"
         "         const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,\n"
         "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_d" +
         std::string(c.dynamic_tiles ? ",\n         int* tile_counter" : "") + entry_params_close();
    s += "    deep_gemm::sm90_fp8_gemm_1d2d_impl<" + targs + ">(\n"
         "        m, n, k, sfb, &tmap_a, &tmap_b, &tmap_sfa, &tmap_d, grouped_layout, num_groups, align_m, d, ld_d" +
         std::string(c.dynamic_tiles ? ", {}, tile_counter" : "") + ");\n}\n";
    return s;
}

inline std::string sm90_fp8_grouped_name(const Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n, int compiled_k) {
    static const char* tags[] = {"", "mgc", "mgm", "mgp"};
    const int t = c.gemm_type >= 1 && c.gemm_type <= 3 ? c.gemm_type : 0;
    return std::string("sm90_fp8_gemm_1d2d_") + tags[t] + "_m" + std::to_string(compiled_m) + "n" +
           std::to_string(compiled_n) + "k" + std::to_string(compiled_k) + "_b" + std::to_string(c.block_m) + "x" +
           std::to_string(c.block_n) + "_s" + std::to_string(c.stages) + "_g" + std::to_string(c.group_n) +
           (c.mma_overlap ? "_o" : "") + (c.dynamic_tiles ? "_dt" : "") + trace_tiles_suffix();
}

// Tensor maps of a grouped launch, in argument order (a, b, sfa, d).
//   rows: rows of A and D as 2-D views (M_sum, or G * max_m for masked)
//   sfa_rows: rows per SFA column block (M_sum, or max_m for masked); sfa_blocks: outer
//   extent of SFA seen as [sfa_blocks][align(sfa_rows, 4)] (k/128, or G * k/128 for masked).
inline std::vector<Sm90Fp8TensorMapSpec> sm90_fp8_grouped_tensor_maps(const Sm90Fp8GemmConfig& c, uint64_t rows,
                                                                      int n, int k, int num_groups,
                                                                      uint64_t sfa_rows, uint64_t sfa_blocks,
                                                                      uint64_t lda_bytes, uint64_t ldb_bytes,
                                                                      uint64_t ld_d) {
    const uint64_t sfa_pad = (sfa_rows + 3) / 4 * 4;
    std::vector<Sm90Fp8TensorMapSpec> maps;
    maps.push_back({"a", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), rows, lda_bytes, 128,
                    static_cast<uint32_t>(c.block_m), 128});
    maps.push_back({"b", Sm90TmaDtype::kU8, static_cast<uint64_t>(k),
                    static_cast<uint64_t>(n) * static_cast<uint64_t>(num_groups), ldb_bytes, 128,
                    static_cast<uint32_t>(c.block_n), 128});
    maps.push_back({"sfa", Sm90TmaDtype::kF32, sfa_pad, sfa_blocks, sfa_pad * 4, static_cast<uint32_t>(c.block_m), 1, 0});
    maps.push_back({"d", Sm90TmaDtype::kBF16, static_cast<uint64_t>(n), rows, ld_d * 2,
                    static_cast<uint32_t>(c.swizzle_d / 2), 64, c.swizzle_d});
    return maps;
}

}  // namespace deep_gemm::heuristics
