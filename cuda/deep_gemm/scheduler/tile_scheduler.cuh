// Persistent tile scheduler: a grid of (at most) one CTA per SM walks the output tiles
// with a static stride of gridDim.x. Tiles are numbered in groups of kGroupN n-blocks:
// inside a group the n-block varies fastest, so the ~num_SMs tiles that run at the same
// time cover a few m-blocks (A rows) x kGroupN n-blocks (B rows) and reuse both in L2.
//
// Clusters of 2 CTAs (x-adjacent blocks, gridDim.x even) get tiles t and t^1; when those
// share an m-block (kGroupN even makes that the common case) the pair multicasts A.
//
// The producer thread of each CTA walks the schedule. In the dense kernels the math
// warpgroups walk the same sequence themselves; in the m-grouped 1D2D kernels they receive
// each tile from the producer instead (TileSlot below), so the walk's layout reads stay off
// their path.
//
// The m-grouped variants (MoE) change how a tile index maps to (group, rows, n-block) and
// which tiles are skipped, not the persistent walk; they run without clusters. Every
// grouped quantity below sits behind `if constexpr`, so kNormal compiles to the same code
// as before they existed.
//   kMGroupedContiguous      A [M_sum, K]; layout[row] = group of each row, -1 = padding.
//                            Tiles walk M_sum like a normal GEMM; a tile's group is the
//                            group of its first row, and a tile whose first row is padding
//                            (or an out-of-range group) is skipped. Groups start on
//                            multiples of the alignment (128). With BLOCK_M 256 a tile can
//                            reach into the next group at its middle row: the tile then
//                            stops there (row_end) and the same CTA runs its second half
//                            next as a tile of the other group (a "half tile": it starts
//                            at the middle row and ends 128 rows later).
//   kMGroupedContiguousPsum  A [M_sum, K]; layout[g] = end row (exclusive) of group g, which
//                            starts at align_up(layout[g-1], align_m) (0 for g = 0).
//   kMGroupedMasked          A [G, shape_m, K]; layout[g] = rows of group g to compute
//                            (masked_m), clamped to shape_m. The walk numbers rows as in
//                            a [G*shape_m, K] view, but A and D are loaded and stored
//                            through rank-3 maps [G][shape_m][.] (row_in_group), so the
//                            groups may sit at any stride (fp8_einsum's heads are
//                            interleaved in A's and D's rows). A null layout: every
//                            group has all shape_m rows.
// Masked and psum walk the groups in order: virtual tile t belongs to the group whose
// cumulative tile count passes t. Each CTA's t only grows, so a cursor (group, tile base)
// moves forward and each CTA reads each group's entry once. Nothing is read on the host.
//
// kDynamic (m-grouped only): a CTA's first tile is blockIdx.x, every later one is claimed
// from a per-call counter (zeroed before the launch) a few K blocks before the CTA's current
// tile ends: t = gridDim.x + atomicAdd(counter, 1). A group's last m-block computes only its
// valid 64-row slabs, so tiles differ in cost, and the static stride then leaves some CTAs
// a whole tile more to do than others. Claims still hand the tiles out in order, so the
// tiles in flight at any time stay a window of the walk (L2 reuse of B and A). Only the
// producer thread walks (the math warpgroups read its tile slots), and the claim is made
// early enough for the atomic's round trip to finish under the current tile's loads.
#pragma once
#include <deep_gemm/common/utils.cuh>

namespace deep_gemm {

enum class GemmType : uint32_t {
    kNormal = 0,
    kMGroupedContiguous = 1,
    kMGroupedMasked = 2,
    kMGroupedContiguousPsum = 3,
    // k-grouped (MoE wgrad) walks its own way: KGroupedScheduler in impls/sm90_fp8_k_grouped.cuh.
};

struct TileInfo {
    uint32_t m_block;
    uint32_t n_block;
    bool multicast_a;  // the cluster peer works on the same m-block: A is multicast
    bool peer_alive;   // the cluster peer has a tile this iteration (always true if no cluster)
    // m-grouped only (unset for kNormal):
    uint32_t group;    // the expert: selects B's rows and SFB
    uint32_t m0;       // first row of the tile in A / D (2-D views)
    uint32_t row_end;  // rows >= row_end are neither computed nor stored
    bool uniform;      // contiguous index layout: every row in [m0, row_end) is of `group`
};

// A tile as the producer thread hands it to the math warpgroups, in a shared-memory slot
// of the pipeline stage that holds the tile's first K block (see producer_loop). The math
// warpgroups read the slot instead of walking the schedule themselves: the walk's global
// reads (grouped layouts) and divisions then stay off their path between two tiles.
// lo = (m_block, n_block, group, m0), hi = (row_end, flags, 0, 0).
struct alignas(16) TileSlot {
    uint4 lo, hi;
};
constexpr uint32_t kSlotMulticastA = 1u, kSlotPeerAlive = 2u, kSlotUniform = 4u, kSlotEnd = 8u;

__device__ __forceinline__ void write_tile_slot(TileSlot* slot, const TileInfo& t) {
    const uint32_t flags = (t.multicast_a ? kSlotMulticastA : 0u) | (t.peer_alive ? kSlotPeerAlive : 0u) |
                           (t.uniform ? kSlotUniform : 0u);
    slot->lo = make_uint4(t.m_block, t.n_block, t.group, t.m0);
    slot->hi = make_uint4(t.row_end, flags, 0u, 0u);
}

// The mark after the last tile: the walk is over.
__device__ __forceinline__ void write_end_slot(TileSlot* slot) {
    slot->hi = make_uint4(0u, kSlotEnd, 0u, 0u);
}

// False at the end mark. Two 16-byte loads from a warp-uniform address: the compiler keeps
// the fields (and the tile loop they steer) warp-uniform.
__device__ __forceinline__ bool read_tile_slot(const TileSlot* slot, TileInfo& t) {
    const uint4 hi = slot->hi;
    if (hi.y & kSlotEnd) return false;
    const uint4 lo = slot->lo;
    t.m_block = lo.x;
    t.n_block = lo.y;
    t.group = lo.z;
    t.m0 = lo.w;
    t.row_end = hi.x;
    t.multicast_a = (hi.y & kSlotMulticastA) != 0;
    t.peer_alive = (hi.y & kSlotPeerAlive) != 0;
    t.uniform = (hi.y & kSlotUniform) != 0;
    return true;
}

template <GemmType kGemmType, uint32_t kBlockM, uint32_t kBlockN, uint32_t kGroupN,
          uint32_t kCluster, bool kDynamic = false>
struct TileScheduler {
    static constexpr bool kGrouped = kGemmType != GemmType::kNormal;
    static constexpr bool kWalkGroups =
        kGemmType == GemmType::kMGroupedMasked || kGemmType == GemmType::kMGroupedContiguousPsum;
    static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs");
    static_assert(!kGrouped || kCluster == 1, "the m-grouped variants run without clusters");
    static_assert(kCluster == 1 || kGroupN % 2 == 0, "cluster pairing needs an even group");
    static_assert(!kDynamic || (kGrouped && kCluster == 1), "claimed tiles: the m-grouped walks only");
    static constexpr bool kClaimsTiles = kDynamic;
    // A and D through rank-3 tensor maps, addressed by (row_in_group, group).
    static constexpr bool kRank3Groups = kGemmType == GemmType::kMGroupedMasked;

    uint32_t num_m_blocks, num_n_blocks, num_tiles;
    uint32_t iter = 0;
    // m-grouped state (dead code for kNormal).
    const int* layout = nullptr;
    uint32_t shape_m = 0, shape_n = 0, num_groups = 0, align_m = 1;
    // Cursor of the group walk (kept small: the producer thread runs on 40 registers).
    uint32_t cur_group = 0, cur_base = 0, cur_start = 0, cur_end = 0;
    // Contiguous, BLOCK_M 256: group of the pending second half of the last tile, or -1;
    // bit 30 set: that half is uniform (see TileInfo).
    int pending_group = -1;
    static constexpr int kUniformBit = 1 << 30;
    // kDynamic: the claim counter, and the tile claimed for after the current one (valid
    // while has_claim).
    int* tile_counter = nullptr;
    uint32_t claimed = 0;
    bool has_claim = false;

    // m: rows of A (M_sum; per group for masked). grouped_layout / groups / align: see above.
    __device__ __forceinline__ TileScheduler(uint32_t m, uint32_t n, const int* grouped_layout = nullptr,
                                             uint32_t groups = 1, uint32_t align = 1, int* counter = nullptr)
        : num_m_blocks(ceil_div(m, kBlockM)), num_n_blocks(ceil_div(n, kBlockN)) {
        num_tiles = num_m_blocks * num_n_blocks;
        if constexpr (kDynamic) tile_counter = counter;
        if constexpr (kGrouped) {
            layout = grouped_layout;
            shape_m = m;
            shape_n = n;
            num_groups = groups;
            align_m = align;
            if constexpr (kWalkGroups) load_group();
        }
    }

    // Rows of group cur_group: [cur_start, cur_end) in the 2-D view, and its m-blocks.
    // Psum: the group starts at align_up(previous end, align_m); an end below that start
    // (an empty group, or non-monotonic ends) makes the group empty.
    __device__ __forceinline__ void load_group() {
        // Masked with a null layout: every group has all shape_m rows (einsum's heads).
        const int v = kGemmType != GemmType::kMGroupedMasked || layout != nullptr ? __ldg(layout + cur_group)
                                                                                  : static_cast<int>(shape_m);
        const uint32_t clamped = v > 0 ? min(static_cast<uint32_t>(v), shape_m) : 0u;
        if constexpr (kGemmType == GemmType::kMGroupedMasked) {
            cur_start = cur_group * shape_m;
            cur_end = cur_start + clamped;
        } else {
            cur_start = (cur_end + align_m - 1) & ~(align_m - 1);  // align_m: a power of two
            cur_end = max(clamped, cur_start);
        }
        num_m_blocks = ceil_div(cur_end - cur_start, kBlockM);
    }

    __device__ __forceinline__ void tile_coords(uint32_t t, uint32_t& m_block, uint32_t& n_block) const {
        const uint32_t tiles_per_group = num_m_blocks * kGroupN;
        const uint32_t group = t / tiles_per_group;
        const uint32_t in_group = t - group * tiles_per_group;
        const uint32_t first_n = group * kGroupN;
        const uint32_t width = min(kGroupN, num_n_blocks - first_n);
        m_block = in_group / width;
        n_block = first_n + (in_group - m_block * width);
    }

    // Next tile of this CTA; false once it has none left.
    __device__ __forceinline__ bool next(TileInfo& info) {
        if constexpr (kGemmType == GemmType::kMGroupedContiguous) {
            // Groups are contiguous runs of rows, padding only at their ends: a row range
            // whose first and last rows are of group g holds only rows of g (`uniform`), and
            // the epilogue then needs no per-row layout reads.
            constexpr uint32_t kHalf = kBlockM / 2;
            if (kBlockM > 128 && pending_group >= 0) {
                // The second half of the previous tile (same n-block), of the next group.
                info.group = static_cast<uint32_t>(pending_group & (kUniformBit - 1));
                info.uniform = (pending_group & kUniformBit) != 0;
                info.m0 = info.row_end;
                info.row_end = min(info.m0 + kHalf, shape_m);
                pending_group = -1;
                return true;
            }
            while (true) {
                const uint32_t t = take_tile();
                if (t >= num_tiles) return false;
                tile_coords(t, info.m_block, info.n_block);
                const uint32_t m0 = info.m_block * kBlockM, end = min(m0 + kBlockM, shape_m);
                const bool has_half = kBlockM > 128 && m0 + kHalf < shape_m;
                // All loads of the tile at once (one round trip).
                const int g = __ldg(layout + m0), g_last = __ldg(layout + end - 1);
                int g2 = has_half ? __ldg(layout + m0 + kHalf) : -1;
                const int g_mid_last = has_half ? __ldg(layout + m0 + kHalf - 1) : -1;
                const bool g_ok = g >= 0 && static_cast<uint32_t>(g) < num_groups;
                if (g2 < 0 || static_cast<uint32_t>(g2) >= num_groups || g2 == g) g2 = -1;
                if (!g_ok && g2 < 0) continue;  // padding: skip the tile
                info.multicast_a = false;
                info.peer_alive = true;
                if (!g_ok) {  // only the second half holds rows: run it as a half tile
                    info.group = static_cast<uint32_t>(g2);
                    info.m0 = m0 + kHalf;
                    info.row_end = end;
                    info.uniform = g_last == g2;
                    return true;
                }
                info.group = static_cast<uint32_t>(g);
                info.m0 = m0;
                info.row_end = g2 >= 0 ? m0 + kHalf : end;
                info.uniform = (g2 >= 0 ? g_mid_last : g_last) == g;
                pending_group = g2 >= 0 ? (g2 | (g_last == g2 ? kUniformBit : 0)) : -1;
                return true;
            }
        } else if constexpr (kWalkGroups) {
            const uint32_t t = take_tile();
            while (t >= cur_base + num_m_blocks * num_n_blocks) {
                if (++cur_group >= num_groups) return false;
                cur_base += num_m_blocks * num_n_blocks;
                load_group();
            }
            tile_coords(t - cur_base, info.m_block, info.n_block);
            info.group = cur_group;
            info.m0 = cur_start + info.m_block * kBlockM;
            info.row_end = cur_end;
            info.multicast_a = false;
            info.peer_alive = true;
            return true;
        }
        const uint32_t t = blockIdx.x + (iter++) * gridDim.x;
        if (t >= num_tiles) return false;
        tile_coords(t, info.m_block, info.n_block);
        info.multicast_a = false;
        info.peer_alive = true;
        if constexpr (kCluster == 2) {
            const uint32_t peer = t ^ 1u;
            info.peer_alive = peer < num_tiles;
            if (info.peer_alive) {
                uint32_t pm, pn;
                tile_coords(peer, pm, pn);
                info.multicast_a = (pm == info.m_block);
            }
        }
        return true;
    }

    // The index of this CTA's next tile in the walk: the static stride, or (kDynamic) the
    // CTA's first tile, then the claimed one, or a claim made now (a skipped contiguous
    // tile, whose loads made none).
    __device__ __forceinline__ uint32_t take_tile() {
        if constexpr (kDynamic) {
            if (iter++ == 0) return blockIdx.x;
            if (has_claim) {
                has_claim = false;
                return claimed;
            }
            return gridDim.x + static_cast<uint32_t>(atomicAdd(tile_counter, 1));
        } else {
            return blockIdx.x + (iter++) * gridDim.x;
        }
    }

    // kDynamic: claims the tile after the current one, unless a claim is pending (a
    // contiguous tile's second half takes no new index). Called by the producer during
    // each tile's loads; the result is first read by the next take_tile().
    __device__ __forceinline__ void claim_next() {
        if constexpr (kDynamic) {
            if (!has_claim) {
                claimed = gridDim.x + static_cast<uint32_t>(atomicAdd(tile_counter, 1));
                has_claim = true;
            }
        }
    }

    // ---- operand coordinates of a tile (for kNormal exactly the dense expressions) ----
    // First row of the tile in A and D.
    __device__ __forceinline__ uint32_t a_row(const TileInfo& info) const {
        if constexpr (kGrouped) return info.m0;
        else return info.m_block * kBlockM;
    }
    // kRank3Groups: row `row` (of the [G * shape_m] view) within the tile's group.
    __device__ __forceinline__ uint32_t row_in_group(const TileInfo& info, uint32_t row) const {
        return row - info.group * shape_m;
    }
    // Row of B (seen as [G * N, K]) for n-block start n0. A tile of group g whose columns
    // run past N reads the first rows of group g+1 (or TMA zero fill after the last group):
    // harmless, as those output columns are >= N and never stored (the D tensor map clips
    // at N, the direct-store path checks col < N).
    __device__ __forceinline__ uint32_t b_row(const TileInfo& info, uint32_t n0) const {
        if constexpr (kGrouped) return info.group * shape_n + n0;
        else return n0;
    }
    __device__ __forceinline__ uint32_t group(const TileInfo& info) const {
        if constexpr (kGrouped) return info.group;
        else return 0;
    }
    // SFA tensor-map coordinates (inner = row, outer = K block). Masked SFA is
    // [G][k_blocks][align(shape_m, 4)] seen as [G * k_blocks][align(shape_m, 4)].
    __device__ __forceinline__ uint32_t sfa_x(const TileInfo& info, uint32_t m0) const {
        if constexpr (kGemmType == GemmType::kMGroupedMasked) return m0 - info.group * shape_m;
        else return m0;
    }
    __device__ __forceinline__ uint32_t sfa_y(const TileInfo& info, uint32_t kb, uint32_t num_k_blocks) const {
        if constexpr (kGemmType == GemmType::kMGroupedMasked) return info.group * num_k_blocks + kb;
        else return kb;
    }
    // Whether output row `row` (2-D view) of this tile is stored.
    __device__ __forceinline__ bool row_valid(const TileInfo& info, uint32_t row) const {
        if constexpr (kGemmType == GemmType::kMGroupedContiguous)
            return row < info.row_end && (info.uniform || __ldg(layout + row) == static_cast<int>(info.group));
        else if constexpr (kGrouped) return row < info.row_end;
        else return true;
    }
};

}  // namespace deep_gemm
