// What the configuration ranking of every SM90 GEMM family shares: the configuration's
// common fields, the shared-memory limit, integer helpers, the persistent grid, and the
// generic terms of the cycle model (tensor, shared-memory, L2 and DRAM rates, tile waves),
// parameterised by the wgmma input type so a family of another dtype reuses them.
//
// Pure C++17, no CUDA or torch headers. What a chosen configuration compiles and launches
// (JIT source, tensor maps) is the launch side's (launch/).
#pragma once

#include <algorithm>

namespace deep_gemm::heuristics {

constexpr int kSm90MaxSmemBytes = 232448;  // 227 KB opt-in per block

constexpr int sm90_ceil_div(long a, long b) { return static_cast<int>((a + b - 1) / b); }
constexpr int sm90_align(long a, long b) { return sm90_ceil_div(a, b) * static_cast<int>(b); }

// The fields every family's configuration has; a family's config derives from it and adds
// its own (launch/common.hpp's persistent_launch reads grid_x, num_threads, smem_bytes, cluster).
struct Sm90GemmConfig {
    int block_m = 128;
    int block_n = 128;
    int block_k = 128;
    int stages = 4;
    int cluster = 1;             // 1, or 2: CTA pairs multicast A (same m-block)
    int group_n = 16;            // scheduler group width (n-blocks), even
    int num_sms = 132;           // SMs available (set_num_sms)
    int grid_x = 132;            // persistent grid: <= num_sms (sm90_persistent_grid)
    int smem_bytes = 0;          // dynamic shared memory
    int num_math_threads = 256;  // math warpgroups x 128
    int num_threads = 384;       // math + one TMA producer warpgroup
    double est_cycles = 0.0;     // model estimate used for the choice
};

// L2 of the H100 and H200 (50 MB).
constexpr long kSm90L2Bytes = 50L << 20;

// Whether a dense GEMM reads each B element once, so that its B loads may take L2's
// evict-first policy (the kernels' kEvictFirstB): one m-block, or two whose `ctas` CTAs all
// run in one wave of `grid` (both readers of a B tile then load it at about the same time)
// and whose B (`b_bytes`) fits in L2 (a larger B under the policy lost the second reader's
// hits: BF16 256 x 4096 x 7168 4% slower on an H100). Evicting those lines first keeps A (read
// by every n-block) and lines still to be written back in L2. Measured in
// docs/design-notes.md ("Loading B under L2's evict-first policy").
constexpr bool sm90_b_read_once(long m_blocks, long ctas, long grid, long b_bytes) {
    return m_blocks == 1 || (m_blocks == 2 && ctas <= grid && b_bytes <= kSm90L2Bytes);
}

// Largest TMA swizzle (128/64/32 bytes) that tiles a row of `row_bytes` exactly.
inline int sm90_epilogue_swizzle(int row_bytes) {
    return row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : row_bytes % 32 == 0 ? 32 : 0;
}

// The persistent grid for `tiles` tiles on at most `max_grid` CTAs (a multiple of
// `cluster`), never more CTAs than tiles. Balanced: the fewest CTAs that keep the same
// number of waves, so every CTA runs the same number of tiles. On the H200 the dense FP8
// 1D2D bench shapes ran 0.7-2% faster so (896 tiles on 128 CTAs instead of 132, 7 waves
// either way; 352 on 118; measured 2026-12-01); the FP8 1D1D kernel takes it too (same
// scheduler, not timed apart). The FP8 contiguous grouped layout does not (see
// rank_sm90_fp8_grouped_configs).
inline int sm90_persistent_grid(long tiles, int max_grid, int cluster, bool balanced) {
    if (tiles <= 0) return std::min(max_grid, cluster);
    const long waves = balanced ? (tiles + max_grid - 1) / max_grid : 1;
    return tiles < max_grid || balanced ? sm90_align((tiles + waves - 1) / waves, cluster) : max_grid;
}

// Fraction of cluster pairs (tiles t, t^1) that share an m-block and so multicast A, under
// the tile scheduler's groups of `group_n` n-blocks.
inline double sm90_multicast_fraction(int num_m, int num_n, int group_n) {
    double pairs = 0, shared = 0;
    for (int first = 0; first < num_n; first += group_n) {
        const int w = std::min(group_n, num_n - first);
        const double tiles = static_cast<double>(w) * num_m;
        pairs += tiles;
        shared += (w % 2 == 0) ? tiles : tiles * (1.0 - 1.0 / w);
    }
    return pairs > 0 ? shared / pairs : 0.0;
}

// ---- the cycle model's generic terms (per SM clocks; only the ranking matters) ----------
//
// Per K block of a tile (block_k elements of K):
//   tensor:  each 64-row slab runs block_k / wgmma_k m64nNk(wgmma_k) wgmmas, ~max(N/2, 16)
//            clk each; a kernel may compute only the slabs that hold rows < m (`active`).
//   smem:    ~128 B/clk per SM, shared by the TMA writes (A and B tiles) and the wgmma
//            operand reads (every slab reads its 64 rows of A and all of B).
//   loads:   L2 -> SM ~64 B/clk per SM; multicast halves A for the pairs that share it.
// Per tile: ~400 clk of epilogue per 64-row slab pair; per kernel ~1500 clk of fill, waves
// of grid_x tiles, and DRAM at ~2150 B/clk for the whole GPU (4.3 TB/s at ~2 GHz), a floor
// that the SM work overlaps only in part.
// Calibrated on the FP8 kernels (H200; heuristics/sm90_fp8_gemm.hpp says where).

// The wgmma input types. The dense tensor rate halves with each doubling of the element
// width, and the instruction's K shrinks with it (32 bytes of K each), so every one of
// them takes ~N/2 clk: measured for e4m3, taken from the rate ratio for the others.
enum class MmaDtype { kE4M3, kBF16, kTF32 };

constexpr int mma_dtype_bytes(MmaDtype t) { return t == MmaDtype::kE4M3 ? 1 : t == MmaDtype::kBF16 ? 2 : 4; }
constexpr int wgmma_k(MmaDtype t) { return 32 / mma_dtype_bytes(t); }
inline double wgmma_clk(MmaDtype, int block_n) { return std::max(block_n / 2.0, 16.0); }

constexpr double kSm90SmemBytesPerClk = 128.0;
constexpr double kSm90L2BytesPerClk = 64.0;
constexpr double kSm90DramBytesPerClk = 2150.0;

// Fraction of a problem's 64-row slabs that hold rows < m (the others are not computed by a
// kernel that skips them): m rows in num_m tiles of `slabs` slabs.
inline double sm90_active_slab_fraction(int m, int num_m, int slabs) {
    return static_cast<double>(sm90_ceil_div(m, 64)) / (static_cast<double>(num_m) * slabs);
}

struct Sm90KBlockTerms {
    double tensor, smem, load;
};

// The three rates' clocks per K block of a block_m x block_n tile with `slabs` 64-row
// slabs, `active` of them computed, and multicast fraction `mc` (sm90_multicast_fraction).
inline Sm90KBlockTerms sm90_k_block_terms(MmaDtype t, int block_m, int block_n, int block_k, int slabs, double active,
                                          double mc) {
    const double wgmmas = static_cast<double>(block_k / wgmma_k(t));
    const double row_bytes = static_cast<double>(block_k * mma_dtype_bytes(t));
    Sm90KBlockTerms r;
    r.tensor = active * slabs * wgmmas * wgmma_clk(t, block_n);
    r.smem = ((block_m + block_n) + active * slabs * (64.0 + block_n)) * row_bytes / kSm90SmemBytesPerClk;
    const double a_rows = block_m * (1.0 - 0.5 * mc);
    r.load = (a_rows + block_n) * row_bytes / kSm90L2BytesPerClk;
    return r;
}

// One tile: `k_blocks` K blocks of `per_k_block` clk, then the epilogue.
inline double sm90_tile_cycles(int k_blocks, double per_k_block, int slabs) {
    return k_blocks * per_k_block + 400.0 * std::max(1, slabs / 2);
}

// The DRAM floor: A and B once (`in_bytes` per element), D (and C where read) of
// `out_bytes` per element, for `num_groups` problems.
inline double sm90_dram_cycles(int m, int n, int k, int in_bytes, double out_bytes, int num_groups) {
    return (static_cast<double>(m) * k * in_bytes + static_cast<double>(n) * k * in_bytes +
            static_cast<double>(m) * n * out_bytes) * num_groups / kSm90DramBytesPerClk;
}

// The kernel: `waves` waves of `tile` clk plus the fill, against the DRAM floor. They
// overlap only in part (FP8 kernel_bench v5: M = 128 shapes ran 1.5-1.9x their DRAM
// time): the larger of the two plus 30% of the smaller.
inline double sm90_kernel_cycles(long waves, double tile, double dram) {
    const double sm_work = waves * tile + 1500.0;
    return std::max(sm_work, dram) + 0.3 * std::min(sm_work, dram);
}

}  // namespace deep_gemm::heuristics
