// Persistent tile scheduler: a grid of (at most) one CTA per SM walks the output tiles
// with a static stride of gridDim.x. Tiles are numbered in groups of kGroupN n-blocks:
// inside a group the n-block varies fastest, so the ~num_SMs tiles that run at the same
// time cover a few m-blocks (A rows) x kGroupN n-blocks (B rows) and reuse both in L2.
//
// Clusters of 2 CTAs (x-adjacent blocks, gridDim.x even) get tiles t and t^1; when those
// share an m-block (kGroupN even makes that the common case) the pair multicasts A.
//
// Later variants (m-grouped contiguous / masked, k-grouped) plug in as other GemmType
// values: they change how a tile index maps to (group, m_block, n_block) and which
// tiles are skipped, not the persistent walk or the cluster pairing.
#pragma once
#include <deep_gemm/common/utils.cuh>

namespace deep_gemm {

enum class GemmType : uint32_t {
    kNormal = 0,
    // kMGroupedContiguous, kMGroupedMasked, kKGrouped: not implemented yet.
};

struct TileInfo {
    uint32_t m_block;
    uint32_t n_block;
    bool multicast_a;  // the cluster peer works on the same m-block: A is multicast
    bool peer_alive;   // the cluster peer has a tile this iteration (always true if no cluster)
};

template <GemmType kGemmType, uint32_t kBlockM, uint32_t kBlockN, uint32_t kGroupN,
          uint32_t kCluster>
struct TileScheduler {
    static_assert(kGemmType == GemmType::kNormal, "only the normal GEMM is implemented");
    static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs");
    static_assert(kCluster == 1 || kGroupN % 2 == 0, "cluster pairing needs an even group");

    uint32_t num_m_blocks, num_n_blocks, num_tiles;
    uint32_t iter = 0;

    __device__ __forceinline__ TileScheduler(uint32_t m, uint32_t n)
        : num_m_blocks(ceil_div(m, kBlockM)), num_n_blocks(ceil_div(n, kBlockN)) {
        num_tiles = num_m_blocks * num_n_blocks;
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
};

}  // namespace deep_gemm
