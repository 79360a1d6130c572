// SM90 TF32 HyperConnection prenorm GEMM:
//   D[split][M, N] = A[M, Ks] @ B[N, Ks]^T (TF32 products, FP32 accumulation)
//   S[split][M]    = sum over Ks of A[m, k]^2 (FP32)
// with A [M, K] bf16 K-major, B [N, K] fp32 K-major, N in {8, 16, 24, 32}, K % 64 == 0, and
// Ks the K blocks of `split` (num_splits balanced ranges of the K / 64 blocks; the first
// K/64 % num_splits splits get one more). A split with no K block writes zeros.
//
// Memory-bound: the floor is reading A once (2 bytes per element for 2N flops). So A goes
// through the TMA into shared memory once and from there into registers, where each
// element is both squared (S) and handed to the wgmma as its register A operand (bf16 ->
// fp32 is a 16-bit shift, exact in TF32). A stays in its TMA layout: an fp32 copy in shared
// memory for an SS wgmma would triple the shared-memory traffic per byte of A.
//
// Grid: one CTA per (64 or 128-row M tile, split, K part). The num_parts CTAs of a (tile,
// split) unit split its K range again, so that small M still streams on every SM. Each
// writes its partial to a global workspace; the last to arrive (a counter per unit, reset
// by that CTA for the next launch) adds all of them in part order, so the sum is the same
// whichever arrives last, and stores. Independent CTAs: clusters of 4 or 8 would do the
// same through distributed shared memory, but fewer of them fit at once than the SMs
// (on the H200, 2026-12-03, 128 CTAs in clusters of 4 took the time of two waves).
// Block: two math warpgroups and one producer warp whose first thread issues the TMA loads
// of A (64 K x kBlockM rows, 128B swizzle) and B (two boxes of 32 K x N rows). 128-row
// tiles: each warpgroup computes its 64-row slab of every K block. 64-row tiles: the two
// take alternate K blocks of the same rows and add up at the end.
//
// A warpgroup's K block is sequential: load its register A, issue the 8 wgmmas, wait for
// them, release the stage. The wgmma reads its register A after issue and PTX forbids
// touching it before the wait, while ptxas does not see the registers as live until then
// (it allocated the next block's loads onto them), so no load may be in flight across a
// wgmma. The two warpgroups (and the producer) overlap instead.
#pragma once
#include <deep_gemm/common/sm90_pipeline.cuh>
#include <deep_gemm/epilogue/sm90_store_fp32.cuh>
#include <deep_gemm/mma/wgmma_tf32.cuh>
#include <deep_gemm/ptx/wgmma.cuh>

namespace deep_gemm {

namespace sm90_hc {

constexpr uint32_t kBlockK = 64;  // bf16 elements of K per stage: one 128-byte row of A

// Dynamic shared memory from a 1024-byte aligned base:
//   [A x STAGES] [B x STAGES] [warpgroup 1's partial (64-row tiles)] [full, empty barriers]
//   [the last-part flag]
// A stage of B is two 128B-swizzled halves [N][32 fp32]. A partial (here and in the global
// workspace) is (N / 2 accumulators + 2 row sums) x kResultThreads floats, thread-minor.
// The host mirrors this in its shared-memory count (heuristics/sm90_hc_prenorm.hpp).
template <uint32_t kBlockM, uint32_t kN, uint32_t kStages>
struct SmemLayout {
    static constexpr uint32_t kResultThreads = kBlockM * 2;  // the math threads that hold results
    static constexpr uint32_t kPartialFloats = kN / 2 + 2;
    static constexpr uint32_t kABytes = kBlockM * kBlockK * 2;
    static constexpr uint32_t kBHalfBytes = kN * 128;
    static constexpr uint32_t kBBytes = 2 * kBHalfBytes;
    static constexpr uint32_t kAOff = 0;
    static constexpr uint32_t kBOff = kStages * kABytes;
    static constexpr uint32_t kPartialBytes = kPartialFloats * kResultThreads * 4;
    static constexpr uint32_t kXferOff = kBOff + kStages * kBBytes;
    static constexpr uint32_t kXferBytes = kBlockM == 64 ? kPartialBytes : 0;
    static constexpr uint32_t kBarOff = kXferOff + kXferBytes;
    static constexpr uint32_t kFlagOff = kBarOff + 2 * kStages * 8;
    static constexpr uint32_t kTotalBytes = kFlagOff + 16;
    static constexpr uint32_t kDynamicBytes = kTotalBytes + 1024;  // room to align the base
    static constexpr uint32_t kStageTxBytes = kABytes + kBBytes;
    static_assert(kABytes % 1024 == 0 && kBHalfBytes % 1024 == 0, "tiles must keep 1024-byte alignment");
    static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KB per-block limit");

    uint8_t* base;
    __device__ __forceinline__ explicit SmemLayout(uint8_t* raw)
        : base(raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u)) {}
    __device__ __forceinline__ uint8_t* a(uint32_t s) const { return base + kAOff + s * kABytes; }
    __device__ __forceinline__ uint8_t* b(uint32_t s) const { return base + kBOff + s * kBBytes; }
    __device__ __forceinline__ float* xfer() const { return reinterpret_cast<float*>(base + kXferOff); }
    __device__ __forceinline__ uint64_t* full(uint32_t s) const {
        return reinterpret_cast<uint64_t*>(base + kBarOff) + s;
    }
    __device__ __forceinline__ uint64_t* empty(uint32_t s) const {
        return reinterpret_cast<uint64_t*>(base + kBarOff) + kStages + s;
    }
    __device__ __forceinline__ volatile uint32_t* flag() const {
        return reinterpret_cast<volatile uint32_t*>(base + kFlagOff);
    }
};

// The balanced share of `total` items that part `i` of `parts` gets: [first, first + count).
__device__ __forceinline__ void balanced_range(uint32_t total, uint32_t parts, uint32_t i, uint32_t& first,
                                               uint32_t& count) {
    const uint32_t per = total / parts, extra = total % parts;
    first = i * per + min(i, extra);
    count = per + (i < extra ? 1u : 0u);
}

// bf16 at `p` (shared memory) as the bits of the fp32 of the same value. A plain load, so
// the compiler may batch them; the full-barrier wait before it is a compiler memory barrier.
__device__ __forceinline__ uint32_t lds_bf16_as_f32(const uint8_t* p) {
    return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p)) << 16;
}

// The partial of thread t (N / 2 accumulators, then the row sums of rows r and r + 8) in a
// thread-minor buffer of kThreads threads: written, and (from shared memory) read back and
// added. The last part reads the global workspace's partials itself, several parts at once.
template <uint32_t kNumAccum, uint32_t kThreads>
__device__ __forceinline__ void put_partial(float* buf, uint32_t t, const float (&acc)[kNumAccum], float sq_lo,
                                            float sq_hi) {
#pragma unroll
    for (uint32_t j = 0; j < kNumAccum; ++j) buf[j * kThreads + t] = acc[j];
    buf[kNumAccum * kThreads + t] = sq_lo;
    buf[(kNumAccum + 1) * kThreads + t] = sq_hi;
}
template <uint32_t kNumAccum, uint32_t kThreads>
__device__ __forceinline__ void add_partial(const float* buf, uint32_t t, float (&acc)[kNumAccum], float& sq_lo,
                                            float& sq_hi) {
#pragma unroll
    for (uint32_t j = 0; j < kNumAccum; ++j) acc[j] += buf[j * kThreads + t];
    sq_lo += buf[kNumAccum * kThreads + t];
    sq_hi += buf[(kNumAccum + 1) * kThreads + t];
}

}  // namespace sm90_hc

// kN: N (8, 16, 24 or 32: the wgmma's N). kBlockM: 64 or 128 rows per CTA. num_parts: CTAs
// that split one split's K blocks; with more than one, `workspace` holds (units x num_parts)
// partials and `counters` one zero int per unit (tile, split) (left zero again).
// d_split_stride / s_split_stride: elements between the splits of D and S (0 when
// num_splits == 1); ld_d: D's row pitch.
template <uint32_t kN, uint32_t kBlockM, uint32_t kStages>
__device__ __forceinline__ void sm90_tf32_hc_prenorm_gemm_impl(uint32_t m, uint32_t num_k_blocks,
                                                               uint32_t num_splits, uint32_t num_parts,
                                                               const CUtensorMap* tmap_a,
                                                               const CUtensorMap* tmap_b, float* d,
                                                               uint64_t d_split_stride, uint32_t ld_d,
                                                               float* sqr_sum, uint64_t s_split_stride,
                                                               float* workspace, int* counters) {
    using namespace sm90;
    using namespace sm90_hc;
    constexpr uint32_t kNumMathThreads = 256;
    constexpr bool kSplitK = kBlockM == 64;  // the two warpgroups take alternate K blocks
    constexpr uint32_t kResultThreads = kBlockM * 2;
    constexpr uint32_t kNumAccum = kN / 2;
    static_assert(kBlockM == 64 || kBlockM == 128, "BLOCK_M is 64 or 128");
    static_assert(kN % 8 == 0 && kN >= 8 && kN <= 32, "N: 8, 16, 24 or 32");
    using Layout = SmemLayout<kBlockM, kN, kStages>;
    static_assert(launch_smem_fits<Layout>(), "the launch allocates less shared memory than this layout");
    using Mma = ptx::WgmmaTF32RS<kN>;

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);
    // A stage is released by the warps that read it: one warpgroup (64-row tiles) or both.
    gemm_kernel_setup<Layout, kStages, kSplitK ? 4 : 8, 1>(smem, kNumMathThreads, tmap_a, tmap_b);

    const uint32_t part = blockIdx.x % num_parts;
    const uint32_t unit = blockIdx.x / num_parts;  // (M tile, split)
    const uint32_t split = unit % num_splits, m_tile = unit / num_splits;
    uint32_t split_first, split_blocks, kb_first, kb_count;
    balanced_range(num_k_blocks, num_splits, split, split_first, split_blocks);
    balanced_range(split_blocks, num_parts, part, kb_first, kb_count);
    kb_first += split_first;

    if (threadIdx.x >= kNumMathThreads) {
        // ---- producer warp: one thread keeps the ring full ----
        if (threadIdx.x == kNumMathThreads) {
            PipeState<kStages> pipe;
            const int32_t m0 = static_cast<int32_t>(m_tile * kBlockM);
            for (uint32_t i = 0; i < kb_count; ++i, pipe.advance()) {
                const uint32_t s = pipe.stage;
                ptx::mbar_wait_watchdog(smem.empty(s), pipe.phase ^ 1u);
                uint64_t* full = smem.full(s);
                ptx::mbar_arrive_expect_tx(full, Layout::kStageTxBytes);
                const int32_t k0 = static_cast<int32_t>((kb_first + i) * kBlockK);
                ptx::tma_load_2d(smem.a(s), tmap_a, full, k0, m0);
                ptx::tma_load_2d(smem.b(s), tmap_b, full, k0, 0);
                ptx::tma_load_2d(smem.b(s) + Layout::kBHalfBytes, tmap_b, full, k0 + 32, 0);
            }
        }
        return;
    }

    // ---- math warpgroups ----
    // Everything that touches the accumulators stays on this side of the role branch: an
    // accumulator read after the branches join made ptxas serialise every wgmma (C7518).
    const MathThread me = math_thread();
    const uint32_t wg = me.wg, lane = me.lane, g = lane / 4, q = lane % 4;
    const uint32_t tile_row = kSplitK ? me.row_lo - wg * 64 : me.row_lo;  // row r in the tile
    float acc[kNumAccum];
#pragma unroll
    for (uint32_t i = 0; i < kNumAccum; ++i) acc[i] = 0.0f;
    float sq_lo = 0.0f, sq_hi = 0.0f;  // this thread's share of the row sums of rows r, r + 8
    // Row r of the 128B-swizzled A tile: 16-byte chunk c of the row sits at position
    // c ^ (r % 8), and r % 8 == g. Column 8i + q is byte 2q of chunk i, column 8i + q + 4
    // byte 2q + 8; row r + 8 is 1024 bytes further.
    const uint32_t a_row_off = tile_row * 128 + 2 * q;
    const uint64_t desc_b0 = ptx::make_smem_desc_sw128(smem.b(0));
    const uint32_t step = kSplitK ? 2 : 1;
    for (uint32_t i = kSplitK ? wg : 0; i < kb_count; i += step) {
        const uint32_t s = i % kStages;
        ptx::mbar_wait_uniform(smem.full(s), (i / kStages) & 1u);
        const uint8_t* a_tile = smem.a(s) + a_row_off;
        uint32_t frag[8][4];
#pragma unroll
        for (uint32_t kk = 0; kk < 8; ++kk) {
            const uint8_t* p = a_tile + ((kk ^ g) << 4);
            frag[kk][0] = lds_bf16_as_f32(p);
            frag[kk][1] = lds_bf16_as_f32(p + 1024);
            frag[kk][2] = lds_bf16_as_f32(p + 8);
            frag[kk][3] = lds_bf16_as_f32(p + 1024 + 8);
        }
        ptx::fence_operands(acc);
        ptx::wgmma_fence();
        const uint32_t b_stage = s * Layout::kBBytes;
#pragma unroll
        for (uint32_t kk = 0; kk < 8; ++kk)
            Mma::mma(frag[kk], ptx::desc_advance(desc_b0, b_stage + (kk / 4) * Layout::kBHalfBytes + (kk % 4) * 32),
                     acc, true);
        ptx::wgmma_commit();
        // The squares while the wgmmas run (they only read the registers).
#pragma unroll
        for (uint32_t kk = 0; kk < 8; ++kk) {
            const float v0 = __uint_as_float(frag[kk][0]), v1 = __uint_as_float(frag[kk][1]);
            const float v2 = __uint_as_float(frag[kk][2]), v3 = __uint_as_float(frag[kk][3]);
            sq_lo = fmaf(v0, v0, fmaf(v2, v2, sq_lo));
            sq_hi = fmaf(v1, v1, fmaf(v3, v3, sq_hi));
        }
        ptx::wgmma_wait<0>();
        ptx::fence_operands(acc);
        release_stage<1>(smem.empty(s), lane, true);
    }
    // The four threads of a row group hold disjoint columns of the same two rows.
    sq_lo += __shfl_xor_sync(0xffffffffu, sq_lo, 1);
    sq_lo += __shfl_xor_sync(0xffffffffu, sq_lo, 2);
    sq_hi += __shfl_xor_sync(0xffffffffu, sq_hi, 1);
    sq_hi += __shfl_xor_sync(0xffffffffu, sq_hi, 2);

    const uint32_t t = threadIdx.x % kResultThreads;  // this thread's slot in a partial
    if constexpr (kSplitK) {
        // Warpgroup 1 hands its K blocks' sums to warpgroup 0.
        if (wg == 1) put_partial<kNumAccum, kResultThreads>(smem.xfer(), t, acc, sq_lo, sq_hi);
        ptx::named_barrier_sync(1, kNumMathThreads);
        if (wg == 1) return;
        add_partial<kNumAccum, kResultThreads>(smem.xfer(), t, acc, sq_lo, sq_hi);
    }

    const uint32_t row = m_tile * kBlockM + tile_row;
    if (num_parts > 1) {
        // Every part stores its partial and counts itself in (the fence makes the partial
        // visible GPU-wide before the count); the last adds all partials in part order.
        // (A variant that skipped the rows past M, a decode-sized M's case, ran slower on the
        // H200, 2026-12-03: 62 parts at M = 1 in 21.5 us against 12.2; not understood.)
        float* parts = workspace + static_cast<size_t>(unit) * num_parts * Layout::kPartialFloats * kResultThreads;
        put_partial<kNumAccum, kResultThreads>(parts + part * Layout::kPartialFloats * kResultThreads, t, acc, sq_lo,
                                               sq_hi);
        __threadfence();
        ptx::named_barrier_sync(2, kResultThreads);
        if (t == 0) {
            const bool last = atomicAdd(counters + unit, 1) == static_cast<int>(num_parts - 1);
            if (last) counters[unit] = 0;  // for the next launch; no other CTA of this one touches it
            *smem.flag() = last ? 1u : 0u;
        }
        ptx::named_barrier_sync(2, kResultThreads);
        if (*smem.flag() == 0) return;
        __threadfence();
#pragma unroll
        for (uint32_t j = 0; j < kNumAccum; ++j) acc[j] = 0.0f;
        sq_lo = sq_hi = 0.0f;
        // Up to 64 partials from L2: kPartBatch of them loaded before any is added, so the
        // loop costs num_parts / kPartBatch L2 round trips, not num_parts (H200, 2026-12-03:
        // 62 parts at M = 1 took 17.0 us one part at a time, 12.2 in batches). Added in part
        // order; the zeros past the last part change no sum. At most ~112 floats in flight: the
        // 288-thread CTA caps a thread at 168 registers, and 8 partials of N = 32 spilled.
        constexpr uint32_t kPartBatch = 112 / Layout::kPartialFloats < 8 ? 112 / Layout::kPartialFloats : 8;
        constexpr uint32_t kPartStride = Layout::kPartialFloats * kResultThreads;
        for (uint32_t r = 0; r < num_parts; r += kPartBatch) {
            float v[kPartBatch][Layout::kPartialFloats];
#pragma unroll
            for (uint32_t p = 0; p < kPartBatch; ++p)
#pragma unroll
                for (uint32_t j = 0; j < Layout::kPartialFloats; ++j)
                    v[p][j] = r + p < num_parts ? __ldcg(parts + (r + p) * kPartStride + j * kResultThreads + t) : 0.0f;
#pragma unroll
            for (uint32_t p = 0; p < kPartBatch; ++p) {
#pragma unroll
                for (uint32_t j = 0; j < kNumAccum; ++j) acc[j] += v[p][j];
                sq_lo += v[p][kNumAccum];
                sq_hi += v[p][kNumAccum + 1];
            }
        }
    }

    epilogue::store_tile<kN>(acc, d + split * d_split_stride, nullptr, ld_d, row, 0, m, kN, lane);
    if (q == 0) {
        float* s = sqr_sum + split * s_split_stride;
        if (row < m) s[row] = sq_lo;
        if (row + 8 < m) s[row + 8] = sq_hi;
    }
}

}  // namespace deep_gemm
