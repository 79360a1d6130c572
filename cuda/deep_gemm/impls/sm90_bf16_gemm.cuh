// SM90 BF16 GEMM: D[M,N] = C + A @ B^T with FP32 accumulation in the wgmma accumulators.
//   A   [M, K] bf16, K-major or MN-major (kMnMajorA: stored [K][M], M contiguous)
//   B   [N, K] bf16, K-major or MN-major (kMnMajorB: stored [K][N], N contiguous)
//   D   [M, N] bf16 (TMA store through a swizzled staging tile) or fp32 (direct stores);
//   C   null, or of D's dtype and layout (may be D itself: accumulate in place).
// wgmma reads either majorness from shared memory (its transpose bits), so every layout
// loads straight from global memory with the TMA: no transpose pass. Any K > 0 for dense
// GEMMs (the last K block's boxes read zeros past K); the m-grouped forms need K % 64 == 0
// (an MN-major B's K rows of one group are followed by the next group's).
//
// One pipeline stage holds 64 K of A and B: one 128-byte swizzle row of bf16. K-major
// tiles are [rows][64 K] (128-byte rows); MN-major tiles are [rows / 64 chunks][64 K][64 MN]
// (a chunk per 64-column TMA box), which the wgmma descriptor walks with LBO = chunk bytes.
// Block: the producer warpgroup (one thread issues the TMA loads) after kBlockM / 64 math
// warpgroups, each computing a 64-row slab of the tile. The math warpgroups walk the same
// tile sequence as the producer. m-grouped forms (MoE) use the FP8 kernels' scheduler.
#pragma once
#include <cuda_bf16.h>
#include <deep_gemm/common/sm90_pipeline.cuh>
#include <deep_gemm/epilogue/sm90_store_bf16.cuh>
#include <deep_gemm/epilogue/sm90_store_fp32.cuh>
#include <deep_gemm/mma/wgmma_bf16.cuh>
#include <deep_gemm/ptx/wgmma.cuh>

namespace deep_gemm {

namespace sm90_bf16 {

constexpr uint32_t kBlockK = 64;  // bf16 elements per stage: one 128-byte row
constexpr uint32_t kWgmmaK = 16;  // K of one bf16 wgmma
constexpr uint32_t kChunkBytes = kBlockK * 128;  // an MN-major chunk: 64 K rows of 64 columns

// Dynamic shared memory from a 1024-byte aligned base:
//   [D staging tile (bf16 D)] [A x STAGES] [B x STAGES] [full, empty barriers]
// The host mirrors this in its shared-memory count (kDynamicBytes).
template <uint32_t kBlockM, uint32_t kBlockN, uint32_t kStages, uint32_t kDStageBytes>
struct SmemLayout {
    static constexpr uint32_t kDBytes = align_up(kDStageBytes, 1024u);
    static constexpr uint32_t kABytes = kBlockM * kBlockK * 2;
    static constexpr uint32_t kBBytes = kBlockN * kBlockK * 2;
    static constexpr uint32_t kAOff = kDBytes;
    static constexpr uint32_t kBOff = kAOff + kStages * kABytes;
    static constexpr uint32_t kBarOff = kBOff + kStages * kBBytes;
    static constexpr uint32_t kTotalBytes = kBarOff + 2 * kStages * 8;
    static constexpr uint32_t kDynamicBytes = kTotalBytes + 1024;  // room to align the base
    static constexpr uint32_t kStageTxBytes = kABytes + kBBytes;
    static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "tiles must keep 1024-byte alignment");
    static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KB per-block limit");

    uint8_t* base;
    __device__ __forceinline__ explicit SmemLayout(uint8_t* raw)
        : base(raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u)) {}
    __device__ __forceinline__ uint8_t* d() const { return base; }
    __device__ __forceinline__ uint8_t* a(uint32_t s) const { return base + kAOff + s * kABytes; }
    __device__ __forceinline__ uint8_t* b(uint32_t s) const { return base + kBOff + s * kBBytes; }
    __device__ __forceinline__ uint64_t* full(uint32_t s) const {
        return reinterpret_cast<uint64_t*>(base + kBarOff) + s;
    }
    __device__ __forceinline__ uint64_t* empty(uint32_t s) const {
        return reinterpret_cast<uint64_t*>(base + kBarOff) + kStages + s;
    }
};

// wgmma descriptor of an MN-major 128B-swizzled tile: 8-K-row groups 1024 bytes apart
// (SBO), 64-column chunks kChunkBytes apart (LBO).
__device__ __forceinline__ uint64_t make_desc_mn_major(const void* tile) {
    uint64_t desc = ptx::make_smem_desc_sw128(tile);
    desc |= static_cast<uint64_t>(kChunkBytes >> 4) << 16;
    return desc;
}

// Descriptor of an operand tile, and the start-address step of one wgmma K (16 elements):
// 32 bytes along a K-major row, or 16 rows of 128 bytes in an MN-major chunk.
template <bool kMnMajor>
__device__ __forceinline__ uint64_t make_desc(const void* tile) {
    if constexpr (kMnMajor) return make_desc_mn_major(tile);
    else return ptx::make_smem_desc_sw128(tile);
}
template <bool kMnMajor>
constexpr uint32_t kKStepBytes = kMnMajor ? kWgmmaK * 128 : kWgmmaK * 2;

// The TMA loads of one operand tile (rows [row0, row0 + kRows) of the operand, K from k0):
// K-major: one box of 64 K x kRows; MN-major: kRows / 64 boxes of 64 columns x 64 K rows.
// `k_row0` offsets the K coordinate of an MN-major operand (m-grouped B: group * K).
// kEvictFirst: under the L2 policy `policy` (ptx::l2_evict_first).
template <bool kMnMajor, uint32_t kRows, bool kEvictFirst = false>
__device__ __forceinline__ void load_tile(uint8_t* dst, const CUtensorMap* map, uint64_t* full, int32_t k0,
                                          int32_t row0, int32_t k_row0, uint64_t policy = 0) {
    if constexpr (kMnMajor) {
        static_assert(kRows % 64 == 0, "MN-major tiles are whole 64-column chunks");
#pragma unroll
        for (uint32_t c = 0; c < kRows / 64; ++c)
            ptx::tma_load_2d<kEvictFirst>(dst + c * kChunkBytes, map, full, row0 + static_cast<int32_t>(c * 64),
                                          k_row0 + k0, policy);
    } else {
        ptx::tma_load_2d<kEvictFirst>(dst, map, full, k0, row0, policy);
    }
}

// Split K's epilogue (see kSplitK): `acc` is this CTA's partial sum of the tile, `park` its
// stage memory. Pair p of math thread t (acc[2p], acc[2p + 1]: row r + 8 (p % 2), columns
// n0 + 8 (p / 2) + 2 (lane % 4) + {0, 1}, the wgmma layout) is parked at park[p * T + t];
// cluster CTA `rank` then sums pairs [rank P / S, (rank + 1) P / S) of every thread position
// over the S CTAs in rank order, adds C and stores D (rows >= M and columns >= N untouched).
template <uint32_t kBlockN, uint32_t kNumMathThreads, typename OutT>
__device__ __forceinline__ void reduce_split_tile(const float (&acc)[kBlockN / 2], float2* park, OutT* d,
                                                  const OutT* c, uint32_t ld, uint32_t r, uint32_t n0, uint32_t m,
                                                  uint32_t n, uint32_t lane, uint32_t num_splits) {
    constexpr uint32_t kPairs = kBlockN / 4;
    const uint32_t t = threadIdx.x;
    // Every math warpgroup's wgmmas are done with the stage memory before any parks there
    // (ids 1.. kNumMathThreads / 128 are the warpgroups' own barriers).
    ptx::named_barrier_sync(kNumMathThreads / 128 + 1, kNumMathThreads);
#pragma unroll
    for (uint32_t p = 0; p < kPairs; ++p) park[p * kNumMathThreads + t] = make_float2(acc[2 * p], acc[2 * p + 1]);
    ptx::cluster_sync();  // every CTA's partials parked
    const uint32_t rank = ptx::cluster_cta_rank();
    const uint32_t p_end = (rank + 1) * kPairs / num_splits;
    for (uint32_t p = rank * kPairs / num_splits; p < p_end; ++p) {
        const uint32_t row = r + 8 * (p % 2), col = n0 + 8 * (p / 2) + 2 * (lane % 4);
        const uint32_t local = ptx::smem_addr(park + p * kNumMathThreads + t);
        float2 sum = make_float2(0.0f, 0.0f);
        for (uint32_t s = 0; s < num_splits; ++s) {
            const float2 v = ptx::ld_shared_cluster_f32x2(local, s);
            sum.x += v.x;
            sum.y += v.y;
        }
        if (row >= m || col >= n) continue;
        const size_t idx = static_cast<size_t>(row) * ld + col;
        const bool pair = col + 1 < n;
        if constexpr (sizeof(OutT) == 2) {
            if (c != nullptr) {
                const float2 cv = pair ? __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(c + idx))
                                       : make_float2(__bfloat162float(c[idx]), 0.0f);
                sum.x += cv.x;
                sum.y += cv.y;
            }
            if (pair) *reinterpret_cast<uint32_t*>(d + idx) = epilogue::pack_bf16x2(sum.x, sum.y);
            else d[idx] = __float2bfloat16_rn(sum.x);
        } else {
            if (c != nullptr) {
                const float2 cv = epilogue::load_pair(c, ld, row, col, m, n);
                sum.x += cv.x;
                sum.y += cv.y;
            }
            epilogue::store_pair(d, ld, row, col, m, n, sum);
        }
    }
    ptx::cluster_sync();  // no CTA leaves while another still reads its partials
}

// Where a tile's rows go in D: the first row in D's map (the group's own rows for the
// masked GEMM's rank-3 map), the map's group coordinate, and the base of the direct stores.
template <typename OutT>
struct DRows {
    uint32_t row0;
    int32_t z;
    OutT* d;
};

}  // namespace sm90_bf16

// kShapeM/N/K: compiled dimensions (0 = runtime argument). OutT: __nv_bfloat16 or float.
// kWithC: C is read (D = C + A B^T; c may equal d). kGemmType: dense or an m-grouped form
// (grouped_layout, num_groups, align_m as for the FP8 kernels; A K-major [M_sum, K] or
// [G][max_m][K], B [G, N, K] K-major or [G, K, N] MN-major). Masked A and D go through
// rank-3 maps [G][max_m][.] (Scheduler::kRank3Groups), so their groups may lie at any
// stride: D's group g starts at d + g * d_group_stride (the direct row stores), and a null
// grouped_layout gives every group all max_m rows (einsum's per-head GEMMs).
// kBatchedK (einsum bmk,bnk->mn): D = C + sum over `num_batches` batches of A_b B_b^T, A and B
// K-major rank-3 maps [batch][rows][K] (K a multiple of 64): the K loop walks every batch's
// K blocks, so the sum stays in the accumulators.
// kSplitK (where a few output tiles cannot fill the SMs): the K loop is cut into splits of
// `split_units` units (batches, or K blocks of a dense GEMM), one CTA per (tile, split),
// grid = tiles x splits (no persistence). Two ways to sum the splits:
//  - a cluster per tile (launched with cluster size = splits, dense GEMMs): each CTA parks its
//    FP32 partial sums in its own stage memory, then every CTA of the cluster sums a share of
//    the tile over all the cluster's partials through distributed shared memory, in split
//    order (deterministic), adds C and stores D: one kernel, no workspace;
//  - clusters of 1 (more splits than a cluster holds: einsum bmk,bnk->mn's thousands of
//    batches over 4 tiles): split s stores its partial sums into the FP32 slice
//    d + s * m * ld_d of a workspace (FP32 D, no C) that the host reduces.
// kPairB (a developer knob for now): clusters of 2 CTAs on the two m-blocks of one n-block
// (tiles numbered m-blocks first, an even count of m-blocks, an even grid), each loading half
// of the B tile's rows and multicasting it to both; a stage is refilled once the math warps
// of both CTAs released it. B's tensor map box is kBlockN / 2 rows.
// kEvictFirstB (where a dense GEMM reads B once: heuristics::sm90_b_read_once): B's loads are
// the first lines L2 evicts, so streaming the weights does not push out other data (A, which
// every n-block reads, or lines still to be written back). Not with batched K.
template <uint32_t kShapeM, uint32_t kShapeN, uint32_t kShapeK, uint32_t kBlockM, uint32_t kBlockN,
          uint32_t kStages, uint32_t kGroupN, bool kMnMajorA, bool kMnMajorB, typename OutT, bool kWithC,
          GemmType kGemmType = GemmType::kNormal, bool kBatchedK = false, bool kSplitK = false,
          bool kDirectD = false, bool kPairB = false, bool kEvictFirstB = false>
__device__ __forceinline__ void sm90_bf16_gemm_impl(uint32_t shape_m, uint32_t shape_n, uint32_t shape_k,
                                                    const CUtensorMap* tmap_a, const CUtensorMap* tmap_b,
                                                    const CUtensorMap* tmap_d, OutT* d, const OutT* c,
                                                    uint32_t ld_d, const int* grouped_layout = nullptr,
                                                    uint32_t num_groups = 1, uint32_t align_m = 1,
                                                    uint32_t num_batches = 1, uint32_t split_units = 0,
                                                    uint64_t d_group_stride = 0) {
    using namespace sm90;
    using namespace sm90_bf16;
    constexpr bool kBf16Out = sizeof(OutT) == 2;
    constexpr uint32_t kNumMathWG = kBlockM / 64;
    constexpr uint32_t kNumMathThreads = kNumMathWG * 128;
    static_assert(kBlockM == 64 || kBlockM == 128, "BLOCK_M is 64 or 128");
    static_assert(kBlockN % 16 == 0 && kBlockN >= 16 && kBlockN <= 256, "BLOCK_N: multiple of 16 in [16, 256]");
    static_assert(!kMnMajorA || kGemmType == GemmType::kNormal, "m-grouped A is K-major");
    static_assert(kGemmType == GemmType::kNormal || (kBf16Out && !kWithC), "m-grouped: bf16 D, no C");
    static_assert(!kBatchedK || (kGemmType == GemmType::kNormal && !kMnMajorA && !kMnMajorB),
                  "batched K: dense, K-major operands");
    constexpr uint32_t kProdRegs = producer_regs(kNumMathWG);
    static_assert(register_budgets_fit(kNumMathThreads, kProdRegs, kMathRegs), "setmaxnreg budgets over the entry allocation");
    static_assert(!kSplitK || kGemmType == GemmType::kNormal, "split K: dense or batched K");
    // A bf16 D without C goes through the staging tile and the TMA; otherwise (or kDirectD:
    // the staging tile's shared memory spent on pipeline stages) direct stores.
    static_assert(!kDirectD || (kBf16Out && !kWithC && !kSplitK && kGemmType == GemmType::kNormal),
                  "direct D: a dense bf16 D without C");
    constexpr bool kStagedD = kBf16Out && !kWithC && !kSplitK && !kDirectD;
    static_assert(!kPairB || (kGemmType == GemmType::kNormal && !kBatchedK && !kSplitK && !kMnMajorB),
                  "pair B: a dense GEMM, K-major B, not split");
    static_assert(!kEvictFirstB || !kBatchedK, "evict-first B: not with batched K");
    constexpr uint32_t kCluster = kPairB ? 2 : 1;
    using Layout = SmemLayout<kBlockM, kBlockN, kStages, kStagedD ? kBlockM * kBlockN * 2 : 0>;
    static_assert(launch_smem_fits<Layout>(), "the launch allocates less shared memory than this layout");
    static_assert(!kSplitK || kStages * Layout::kStageTxBytes >= kBlockM * kBlockN * 4,
                  "split K parks the FP32 tile in the stage memory");
    // Pair B: groups of one n-block number the m-blocks first, so the tiles a pair runs
    // together (t even, t + 1) are the two m-blocks of one n-block.
    using Scheduler = TileScheduler<kGemmType, kBlockM, kBlockN, kPairB ? 1 : kGroupN, 1>;
    constexpr bool kRank3 = Scheduler::kRank3Groups;
    // A tile's first output row in D's map (its group's rows for kRank3), the group (the
    // map's third coordinate) and the D base its direct row stores index from.
    const auto d_rows_of = [&](const Scheduler& sched, const TileInfo& tile, uint32_t m0) {
        if constexpr (kRank3) {
            const uint32_t g = sched.group(tile);
            return DRows<OutT>{sched.row_in_group(tile, m0), static_cast<int32_t>(g), d + g * d_group_stride};
        } else {
            return DRows<OutT>{m0, 0, d};
        }
    };
    using Mma = ptx::WgmmaBF16<kBlockN, kMnMajorA, kMnMajorB>;
    // Half tiles (m-grouped forms): a tile whose second 64-row slab starts past its group's
    // rows (a masked group's or a contiguous group's last rows) would leave one warpgroup
    // computing rows that are never stored. Instead both warpgroups compute the first slab,
    // each over half of the columns (m64 n(kBlockN / 2) wgmmas on B's rows kBlockN / 2 apart),
    // so such a tile costs half a tile. Needs half tiles that keep the staging atoms' width
    // and, for an MN-major B, whole 64-column chunks. Its stages load A's first 64 rows only.
    constexpr uint32_t kHalfN = kBlockN / 2;
    constexpr bool kSplitHalfTiles = kGemmType != GemmType::kNormal && kBlockM == 128 && kHalfN % 16 == 0 &&
                                     epilogue_swizzle_bytes(kHalfN * 2) == epilogue_swizzle_bytes(kBlockN * 2) &&
                                     (!kMnMajorB || kHalfN % 64 == 0);
    using MmaHalf = ptx::WgmmaBF16<kSplitHalfTiles ? kHalfN : kBlockN, kMnMajorA, kMnMajorB>;
    // A's loads: the m-grouped forms (K-major A) in boxes of 64 rows (the host's A map), so
    // that a half tile loads only the rows it computes; dense A in one tile load.
    constexpr uint32_t kABoxes = kGemmType != GemmType::kNormal ? kBlockM / 64 : 1;
    constexpr uint32_t kABoxBytes = Layout::kABytes / kABoxes;

    const uint32_t m = shape_dim<kShapeM>(shape_m);
    const uint32_t n = shape_dim<kShapeN>(shape_n);
    const uint32_t k = shape_dim<kShapeK>(shape_k);
    const uint32_t k_blocks_per_batch = ceil_div(k, kBlockK);
    // The units a split is cut from: batches (batched K) or K blocks.
    const uint32_t num_units = kBatchedK ? num_batches : k_blocks_per_batch;
    const uint32_t k_blocks_per_unit = kBatchedK ? k_blocks_per_batch : 1;
    const uint32_t split_size = kSplitK ? split_units : num_units;
    const uint32_t num_splits = kSplitK ? ceil_div(num_units, split_size) : 1;
    const uint32_t m_blocks = ceil_div(m, kBlockM);
    // Split K over a cluster: CTA x is split x % splits (its cluster rank) of tile x / splits.
    // Over a workspace (clusters of 1): CTA x is split x / tiles of tile x % tiles, so the CTAs
    // that read one split's A and B rows are neighbours (einsum bmk,bnk->mn on the H200,
    // 2026-12-03: 4096 x 256^3 452 / 399 -> 278 us with 33 splits of 4 tiles). m-blocks first.
    const uint32_t num_tiles = m_blocks * ceil_div(n, kBlockN);
    const bool split_in_cluster = kSplitK && ptx::cluster_num_ctas() > 1;
    const uint32_t split_tile = !kSplitK ? 0 : split_in_cluster ? blockIdx.x / num_splits : blockIdx.x % num_tiles;
    const auto next_tile = [&](auto& sched, TileInfo& tile, bool& taken) {
        if constexpr (kSplitK) {
            if (taken) return false;
            taken = true;
            tile.m_block = split_tile % m_blocks;
            tile.n_block = split_tile / m_blocks;
            return true;
        } else {
            return sched.next(tile);
        }
    };
    // A tile's K blocks and first unit.
    const uint32_t split = !kSplitK ? 0 : split_in_cluster ? blockIdx.x % num_splits : blockIdx.x / num_tiles;
    const uint32_t first_unit = split * split_size;
    const uint32_t num_k_blocks = min(split_size, num_units - first_unit) * k_blocks_per_unit;

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);
    gemm_kernel_setup<Layout, kStages, kNumMathWG * 4, kCluster>(smem, kNumMathThreads, tmap_a, tmap_b,
                                                                 kStagedD ? tmap_d : nullptr);

    if (threadIdx.x >= kNumMathThreads) {
        // ---- producer warpgroup: one thread keeps the ring full ----
        ptx::setmaxnreg_dec<kProdRegs>();
        if (threadIdx.x == kNumMathThreads) {
            Scheduler sched(m, n, grouped_layout, num_groups, align_m);
            PipeState<kStages> pipe;
            const uint64_t b_policy = kEvictFirstB ? ptx::l2_evict_first() : 0;
            TileInfo tile{};
            bool taken = false;
            while (next_tile(sched, tile, taken)) {
                const int32_t m0 = static_cast<int32_t>(sched.a_row(tile));
                const int32_t n0 = static_cast<int32_t>(tile.n_block * kBlockN);
                // m-grouped B: K-major rows group * N + n0; MN-major K rows group * K + k0.
                const int32_t b_row = static_cast<int32_t>(kMnMajorB ? n0 : sched.b_row(tile, n0));
                const int32_t b_k_row0 = static_cast<int32_t>(kMnMajorB ? sched.group(tile) * k : 0);
                // Masked A: the group's rows through the rank-3 map.
                const int32_t a_y = kRank3 ? static_cast<int32_t>(sched.row_in_group(tile, m0)) : m0;
                const int32_t a_z = kRank3 ? static_cast<int32_t>(sched.group(tile)) : 0;
                // A half tile computes A's first 64 rows only (the math warpgroups' test).
                uint32_t a_boxes = kABoxes;
                if constexpr (kSplitHalfTiles) {
                    if (!sched.row_valid(tile, static_cast<uint32_t>(m0) + 64)) a_boxes = 1;
                }
                const uint32_t tx_bytes = Layout::kStageTxBytes - (kABoxes - a_boxes) * kABoxBytes;
                // Kept rolled: with K compiled in, the unrolled loop's addresses outgrew the
                // producer's 40 registers (MN-major operands at K = 512: up to 76 bytes spilled).
                const uint32_t producer_k_blocks = ptx::opaque(num_k_blocks);
                for (uint32_t kb = 0; kb < producer_k_blocks; ++kb, pipe.advance()) {
                    const uint32_t s = pipe.stage;
                    ptx::mbar_wait_watchdog(smem.empty(s), pipe.phase ^ 1u);
                    uint64_t* full = smem.full(s);
                    ptx::mbar_arrive_expect_tx(full, tx_bytes);
                    if constexpr (kBatchedK) {
                        const uint32_t rel = kb / k_blocks_per_batch;
                        const uint32_t batch = first_unit + rel;
                        const int32_t k0 = static_cast<int32_t>((kb - rel * k_blocks_per_batch) * kBlockK);
                        ptx::tma_load_3d(smem.a(s), tmap_a, full, k0, m0, static_cast<int32_t>(batch));
                        ptx::tma_load_3d(smem.b(s), tmap_b, full, k0, n0, static_cast<int32_t>(batch));
                    } else {
                        const int32_t k0 = static_cast<int32_t>((first_unit + kb) * kBlockK);
                        if constexpr (kGemmType != GemmType::kNormal) {  // 64-row boxes
                            for (uint32_t i = 0; i < a_boxes; ++i) {
                                const int32_t dy = static_cast<int32_t>(i * 64);
                                if constexpr (kRank3) ptx::tma_load_3d(smem.a(s) + i * kABoxBytes, tmap_a, full, k0,
                                                                       a_y + dy, a_z);
                                else ptx::tma_load_2d(smem.a(s) + i * kABoxBytes, tmap_a, full, k0, m0 + dy);
                            }
                        } else {
                            load_tile<kMnMajorA, kBlockM>(smem.a(s), tmap_a, full, k0, m0, 0);
                        }
                        if constexpr (kPairB) {  // this CTA's half of B's rows, into both CTAs
                            constexpr uint32_t kHalfRows = kBlockN / 2;
                            const uint32_t rank = ptx::cluster_cta_rank();
                            ptx::tma_load_2d_multicast<kEvictFirstB>(smem.b(s) + rank * kHalfRows * 128, tmap_b, full,
                                                                     k0, b_row + static_cast<int32_t>(rank * kHalfRows),
                                                                     0b11, b_policy);
                        } else {
                            load_tile<kMnMajorB, kBlockN, kEvictFirstB>(smem.b(s), tmap_b, full, k0, b_row, b_k_row0,
                                                                        b_policy);
                        }
                    }
                }
            }
        }
        __syncwarp();
        if constexpr (kSplitK) {  // the math warpgroups' two cluster barriers (reduce_split_tile)
            if (ptx::cluster_num_ctas() > 1) {
                ptx::cluster_sync();
                ptx::cluster_sync();
            }
        }
    } else {
        // ---- math warpgroups ----
        ptx::setmaxnreg_inc<kMathRegs>();
        const MathThread me = math_thread();
        const uint32_t wg = me.wg, lane = me.lane, row_lo = me.row_lo;
        // This warpgroup's 64-row slab of A: rows wg * 64 (K-major), or chunk wg (MN-major).
        const uint64_t desc_a0 = make_desc<kMnMajorA>(smem.a(0) + wg * (kMnMajorA ? kChunkBytes : 64 * 128));
        const uint64_t desc_b0 = make_desc<kMnMajorB>(smem.b(0));
        Scheduler sched(m, n, grouped_layout, num_groups, align_m);
        PipeState<kStages> pipe;
        TileInfo tile;
        bool taken = false;
        float acc[kBlockN / 2];
#pragma unroll
        for (uint32_t i = 0; i < kBlockN / 2; ++i) acc[i] = 0.0f;
        // A half tile's accumulators: the first kHalfN / 2 of `acc`.
        float(&acc_half)[MmaHalf::kNumAccum] = *reinterpret_cast<float(*)[MmaHalf::kNumAccum]>(&acc[0]);
        // The whole K loop accumulates in `accum`: each K block's wgmmas are issued as one
        // group; the previous block's stage is handed back once that group is done.
        const auto k_loop = [&](auto mma, auto& accum, uint64_t da0, uint64_t db0) {
            using M = decltype(mma);
            uint32_t prev_stage = 0;
            for (uint32_t kb = 0; kb < num_k_blocks; ++kb, pipe.advance()) {
                const uint32_t s = pipe.stage;
                ptx::mbar_wait_uniform(smem.full(s), pipe.phase);
                const uint64_t da = ptx::desc_advance(da0, s * Layout::kABytes);
                const uint64_t db = ptx::desc_advance(db0, s * Layout::kBBytes);
                ptx::fence_operands(accum);
                ptx::wgmma_fence();
#pragma unroll
                for (uint32_t kk = 0; kk < kBlockK / kWgmmaK; ++kk)
                    M::mma(ptx::desc_advance(da, kk * kKStepBytes<kMnMajorA>),
                           ptx::desc_advance(db, kk * kKStepBytes<kMnMajorB>), accum, kb > 0 || kk > 0);
                ptx::wgmma_commit();
                if (kb > 0) {
                    ptx::wgmma_wait<1>();
                    release_stage<kCluster>(smem.empty(prev_stage), lane, true);
                }
                prev_stage = s;
            }
            ptx::wgmma_wait<0>();
            ptx::fence_operands(accum);
            release_stage<kCluster>(smem.empty(prev_stage), lane, true);
        };
        while (next_tile(sched, tile, taken)) {
            const uint32_t m0 = sched.a_row(tile), n0 = tile.n_block * kBlockN;
            if constexpr (kSplitHalfTiles) {
                if (!sched.row_valid(tile, m0 + 64)) {
                    // Slab 0's rows (A at the tile's first row), columns [wg kHalfN, +kHalfN).
                    constexpr uint32_t kBHalfBytes = kMnMajorB ? kHalfN / 64 * kChunkBytes : kHalfN * 128;
                    k_loop(MmaHalf{}, acc_half, make_desc<kMnMajorA>(smem.a(0)),
                           ptx::desc_advance(desc_b0, wg * kBHalfBytes));
                    const uint32_t row = m0 + row_lo - wg * 64;
                    const bool lo_ok[1] = {sched.row_valid(tile, row)};
                    const bool hi_ok[1] = {sched.row_valid(tile, row + 8)};
                    const float(&slab)[1][kHalfN / 2] = reinterpret_cast<const float(&)[1][kHalfN / 2]>(acc_half);
                    const DRows<OutT> dr = d_rows_of(sched, tile, m0);
                    epilogue::store_tile_bf16_rows<kHalfN, 1, kRank3>(slab, smem.d() + wg * 64 * kBlockN * 2, tmap_d,
                                                                      1 + wg, dr.row0, 64, n0 + wg * kHalfN, lo_ok,
                                                                      hi_ok, dr.d, ld_d, n, dr.z);
                    continue;
                }
            }
            k_loop(Mma{}, acc, desc_a0, desc_b0);

            const uint32_t row = m0 + row_lo;
            const uint32_t bar_id = 1 + wg;  // named barrier per math warpgroup (0 = __syncthreads)
            if constexpr (kSplitK) {
                if (ptx::cluster_num_ctas() > 1) {
                    reduce_split_tile<kBlockN, kNumMathThreads>(acc, reinterpret_cast<float2*>(smem.a(0)), d,
                                                                kWithC ? c : nullptr, ld_d, row, n0, m, n, lane,
                                                                num_splits);
                } else if constexpr (!kBf16Out && !kWithC) {  // the workspace slice of this split
                    epilogue::store_tile<kBlockN>(acc, d + static_cast<size_t>(split) * m * ld_d, nullptr, ld_d, row,
                                                  n0, m, n, lane);
                }
            } else if constexpr (kStagedD) {
                uint8_t* stage_wg = smem.d() + wg * 64 * kBlockN * 2;
                const float(&slab)[1][kBlockN / 2] = reinterpret_cast<const float(&)[1][kBlockN / 2]>(acc);
                if constexpr (kGemmType == GemmType::kNormal) {
                    epilogue::store_tile_bf16<kBlockN, 1>(slab, stage_wg, tmap_d, bar_id, m0 + wg * 64, 64, n0);
                } else {
                    const bool lo_ok[1] = {sched.row_valid(tile, row)};
                    const bool hi_ok[1] = {sched.row_valid(tile, row + 8)};
                    const DRows<OutT> dr = d_rows_of(sched, tile, m0 + wg * 64);
                    epilogue::store_tile_bf16_rows<kBlockN, 1, kRank3>(slab, stage_wg, tmap_d, bar_id, dr.row0, 64, n0,
                                                                       lo_ok, hi_ok, dr.d, ld_d, n, dr.z);
                }
            } else if constexpr (kBf16Out) {
                epilogue::store_tile_bf16_direct<kBlockN>(acc, d, ld_d, row, n0, m, n, lane, kWithC ? c : nullptr);
            } else {
                epilogue::store_tile<kBlockN>(acc, d, kWithC ? c : nullptr, ld_d, row, n0, m, n, lane);
            }
        }
        if constexpr (kStagedD) {
            if (threadIdx.x % 128 == 0) ptx::tma_store_wait<0>();
        }
    }
    // Pair B: neither CTA leaves while the other may still multicast into it or arrive on
    // its barriers.
    if constexpr (kPairB) ptx::cluster_sync();
}

}  // namespace deep_gemm
