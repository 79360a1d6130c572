// SM90 k-grouped FP8 GEMM (MoE weight gradients), "1D1D" scaling, FP32 output with
// accumulation. For each group g of one launch (at most kMaxGroups):
//   D[g] (fp32 [M, N]) = C[g] + (A_g * SFA_g) @ (B_g * SFB_g)^T   (C may be D, or null: 0)
//   A_g  [M, k_g] e4m3, K-major   (its own TMA map: the row pitch k_g differs per group)
//   B_g  [N, k_g] e4m3, K-major   (likewise)
//   SFA  fp32 [sum_k/128, align(M,4)]  MN-major, shared by all groups: group g's K block kb
//        is row kb_offset[g] + kb (TMA)
//   SFB  fp32 [sum_k/128, align(N,4)]  likewise
//   C, D fp32 [G, M, N] contiguous (group stride M * N, row pitch N, N even)
// k_g is a multiple of 128 and may be 0: such a group's tiles run no K block, and the
// epilogue still writes C[g] (or zeros). The math is the 1D1D kernel's (promotion with both
// scales after every 128-wide K block, FP32 result, epilogue adding C); only the tile walk
// and the per-tile operand maps differ.
//
// Tiles enumerate (group, m-block, n-block), group-major; inside a group they follow the
// dense kNormal order (groups of kGroupN n-blocks). The persistent grid walks them with a
// stride of gridDim.x. The producer and the math warpgroups walk the same sequence and read
// the same k_blocks[g], so they agree on every tile's K-block count.
//
// Per-group tensor maps live in one `const __grid_constant__` kernel parameter
// (KGroupedArgs, ~8.5 KB for 32 groups: needs CUDA >= 12.1 and its 32 KB parameter limit);
// the host splits more groups into several launches. Nothing here reads ks on the GPU.
#pragma once
#include <deep_gemm/common/sm90_fp8_1d1d_k_loop.cuh>
#include <deep_gemm/epilogue/sm90_store_fp32.cuh>

namespace deep_gemm {

// Per-launch group table, passed by value as one kernel parameter. The host mirrors this
// struct byte for byte (cpp/deep_gemm/launch/sm90_fp8_k_grouped.hpp, static_asserts on
// both sides).
template <uint32_t kMaxGroups>
struct KGroupedArgs {
    CUtensorMap a[kMaxGroups];         // group g: [M, k_g] K-major, box 128 x BLOCK_M, 128B swizzle
    CUtensorMap b[kMaxGroups];         // group g: [N, k_g] K-major, box 128 x BLOCK_N, 128B swizzle
    uint32_t k_blocks[kMaxGroups];     // k_g / 128 (0: empty group)
    uint32_t kb_offset[kMaxGroups];    // o_g / 128: group g's first row of SFA / SFB
    uint32_t num_groups;               // groups of this launch (<= kMaxGroups)
};
// The host mirror asserts the member offsets (a: 0, b: 4096, k_blocks: 8192, kb_offset: 8320,
// num_groups: 8448 for 32 groups); they follow from these sizes (NVRTC has no offsetof). The
// struct's tail padding may differ: cuda.h aligns CUtensorMap to 128 bytes since CUDA 12.x,
// our NVRTC declaration to 64.
static_assert(sizeof(CUtensorMap) == 128 && alignof(CUtensorMap) >= 64, "CUtensorMap is 128 bytes, >= 64-aligned");
static_assert(sizeof(KGroupedArgs<32>) >= 8452 && sizeof(KGroupedArgs<32>) <= 8452 + 124,
              "KGroupedArgs<32> layout changed: update the host mirror");

// Tile walk of a k-grouped launch: group-major, kNormal order inside a group (the dense
// scheduler's tile_coords, reused as is).
template <uint32_t kBlockM, uint32_t kBlockN, uint32_t kGroupN>
struct KGroupedScheduler {
    TileScheduler<GemmType::kNormal, kBlockM, kBlockN, kGroupN, 1> dense;  // one group's tiles
    uint32_t num_tiles;
    uint32_t iter = 0;

    __device__ __forceinline__ KGroupedScheduler(uint32_t m, uint32_t n, uint32_t num_groups)
        : dense(m, n), num_tiles(dense.num_tiles * num_groups) {}

    __device__ __forceinline__ bool next(uint32_t& group, uint32_t& m_block, uint32_t& n_block) {
        const uint32_t t = blockIdx.x + (iter++) * gridDim.x;
        if (t >= num_tiles) return false;
        group = t / dense.num_tiles;
        dense.tile_coords(t - group * dense.num_tiles, m_block, n_block);
        return true;
    }
};

// Template parameters: compiled M / N (0 = runtime), tile, pipeline depth, scheduler group
// width, and the capacity of KGroupedArgs.
template <uint32_t kShapeM, uint32_t kShapeN, uint32_t kBlockM, uint32_t kBlockN, uint32_t kStages,
          uint32_t kGroupN, uint32_t kMaxGroups>
__device__ __forceinline__ void sm90_fp8_k_grouped_impl(uint32_t shape_m, uint32_t shape_n, const float* c,
                                                        float* d, const CUtensorMap* tmap_sfa,
                                                        const CUtensorMap* tmap_sfb,
                                                        const KGroupedArgs<kMaxGroups>& args) {
    using namespace sm90;
    constexpr uint32_t kNumMathWG = kBlockM / 64;
    constexpr uint32_t kNumMathThreads = kNumMathWG * 128;
    static_assert(register_budgets_fit(kNumMathThreads, kProducerRegs, kMathRegs), "setmaxnreg budgets over the entry allocation");
    static_assert(kBlockM == 64 || kBlockM == 128, "BLOCK_M is 64 or 128");
    static_assert(kBlockN % 8 == 0 && kBlockN >= 8 && kBlockN <= 256, "BLOCK_N: multiple of 8 in [8, 256]");
    using Layout = Fp8SmemLayout<kBlockM, kBlockN, kStages, true, 0>;
    static_assert(kNumMathWG * 4 <= Layout::kMaxMathWarps, "reads_done words for every math thread");
    static_assert(launch_smem_fits<Layout>(), "the launch allocates less shared memory than this layout");
    using Scheduler = KGroupedScheduler<kBlockM, kBlockN, kGroupN>;

    const uint32_t m = shape_dim<kShapeM>(shape_m);
    const uint32_t n = shape_dim<kShapeN>(shape_n);
    const uint32_t num_groups = args.num_groups;

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);

    // The per-group A and B maps are prefetched by the producer below.
    gemm_kernel_setup<Layout, kStages, kNumMathWG * 4, 1>(smem, kNumMathThreads, tmap_sfa, tmap_sfb);

    if (threadIdx.x >= kNumMathThreads) {
        ptx::setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x == kNumMathThreads) {
            // Every group's maps up front: the first TMA of a group then finds its
            // descriptor cached. Empty groups have no valid map.
            for (uint32_t g = 0; g < num_groups; ++g) {
                if (args.k_blocks[g] == 0) continue;
                ptx::tma_prefetch_map(&args.a[g]);
                ptx::tma_prefetch_map(&args.b[g]);
            }
            Scheduler sched(m, n, num_groups);
            PipeState<kStages> pipe;
            uint32_t g, m_block, n_block;
            while (sched.next(g, m_block, n_block)) {
                const uint32_t num_k_blocks = args.k_blocks[g];
                const int32_t sf_row0 = static_cast<int32_t>(args.kb_offset[g]);
                const CUtensorMap* tmap_a = &args.a[g];
                const CUtensorMap* tmap_b = &args.b[g];
                const int32_t m0 = static_cast<int32_t>(m_block * kBlockM);
                const int32_t n0 = static_cast<int32_t>(n_block * kBlockN);
                for (uint32_t kb = 0; kb < num_k_blocks; ++kb, pipe.advance()) {
                    const uint32_t s = pipe.stage;
                    ptx::mbar_wait_watchdog(smem.empty(s), pipe.phase ^ 1u);
                    uint64_t* full = smem.full(s);
                    ptx::mbar_arrive_expect_tx(full, Layout::stage_tx_bytes(kBlockM, kBlockM));
                    const int32_t k0 = static_cast<int32_t>(kb * kBlockK);
                    ptx::tma_load_2d(smem.a(s), tmap_a, full, k0, m0);
                    ptx::tma_load_2d(smem.b(s), tmap_b, full, k0, n0);
                    ptx::tma_load_2d(smem.sfa(s), tmap_sfa, full, m0, sf_row0 + static_cast<int32_t>(kb));
                    ptx::tma_load_2d(smem.sfb(s), tmap_sfb, full, n0, sf_row0 + static_cast<int32_t>(kb));
                }
            }
        }
        __syncwarp();
    } else {
        ptx::setmaxnreg_inc<kMathRegs>();
        const MathThread me = math_thread();
        const uint32_t wg = me.wg, warp = me.warp, lane = me.lane, row_lo = me.row_lo;
        const StageDescs<Layout> descs(smem, wg);
        const size_t group_elems = static_cast<size_t>(m) * n;
        Scheduler sched(m, n, num_groups);
        PipeState<kStages> pipe;
        uint32_t g, m_block, n_block;
        float result[kBlockN / 2], acc[kBlockN / 2];
        while (sched.next(g, m_block, n_block)) {
            const uint32_t num_k_blocks = args.k_blocks[g];
            const uint32_t m0 = m_block * kBlockM, n0 = n_block * kBlockN;
            sm90_1d1d::accumulate_tile<kBlockN, kStages, 1>(result, acc, smem, descs, pipe, num_k_blocks, row_lo,
                                                            wg * 4 + warp, lane, true);
            // Group g's slice of C / D; an empty group stores C (or zeros).
            float* d_g = d + g * group_elems;
            const float* c_g = c != nullptr ? c + g * group_elems : nullptr;
            epilogue::store_tile<kBlockN>(result, d_g, c_g, n, m0 + row_lo, n0, m, n, lane);
        }
    }
}

}  // namespace deep_gemm
