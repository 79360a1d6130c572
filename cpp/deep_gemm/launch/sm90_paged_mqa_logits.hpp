// Launchers of the paged MQA logits (the V3.2 indexer's decode step): the schedule
// (cuda/deep_gemm/impls/paged_mqa_logits_metadata.cuh), the SM90 logits kernel and the
// -inf clean kernel (cuda/deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh): their kernel
// specs, JIT sources, tensor maps and argument packing, on the framework of launch/common.hpp.
//
// LAUNCH CONTRACTS
//   metadata: grid 1, block 1024, no dynamic shared memory.
//     (const int* context_lens, uint32 batch_size, uint32 next_n, uint32 lens_2d,
//      uint32 num_ctas, int* schedule_meta /*[num_ctas + 1][2]*/)
//   logits: grid {num_ctas} (the schedule's rows - 1), block 384, shared smem_bytes.
//     (uint32 batch_size, uint32 block_kv, uint32 num_kv_blocks, uint32 lens_2d,
//      const int* context_lens, const int* block_table, uint64 block_table_stride /*elements*/,
//      uint32 max_blocks, const int* schedule_meta, const float* weights, uint64 weights_stride
//      /*elements*/, OutT* logits, uint64 logits_stride /*elements*/, uint32 max_context_len,
//      CUtensorMap q, CUtensorMap kv, CUtensorMap sf)
//     Tensor maps: q u8 [B * next_n * H][D] box D x (1, or next_n rounded up to even) * H, swizzle D
//     bytes; kv u8 rank 3 [num_kv_blocks][block_kv][D] (pitches D, kv_stride) box D x block_kv
//     x 1, swizzle D bytes; sf f32 [num_kv_blocks][block_kv] (pitch kv_stride, base +
//     block_kv * D) box block_kv x 1.
//   clean: grid {B * next_n, ceil(max_context_len / 4096)}, block 256.
//     (const int* context_lens, uint32 next_n, uint32 lens_2d, OutT* logits,
//      uint64 logits_stride, uint32 max_context_len)
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common.hpp"

namespace deep_gemm::launch {

namespace paged_mqa_detail {
constexpr unsigned kMetaThreads = 1024;  // paged_mqa::kMetaThreads
constexpr unsigned kCleanThreads = 256;  // sm90_paged_mqa::kCleanThreads
constexpr uint64_t kCleanChunk = 4096;   // sm90_paged_mqa::kCleanChunk
constexpr int kTileKV = 64;              // sm90_paged_mqa::kTileKV
constexpr int kMaxStages = 12;
}  // namespace paged_mqa_detail

struct Sm90PagedMqaProblem {
  int batch_size = 0, next_n = 1, num_heads = 64, head_dim = 128;
  int block_kv = 64, num_kv_blocks = 0, max_blocks = 0;
  uint64_t kv_stride_bytes = 0;       // kv_cache.stride(0): one page
  uint64_t weights_stride = 0;       // elements
  uint64_t block_table_stride = 0;    // elements
  uint64_t logits_stride = 0;         // elements
  int max_context_len = 0;
  int num_ctas = 0;                   // schedule_meta.shape[0] - 1
  bool lens_2d = false, bf16_logits = false;
  int device = 0;
  const void* q = nullptr;
  const void* kv_cache = nullptr;
  const void* weights = nullptr;
  const int* context_lens = nullptr;
  const int* block_table = nullptr;
  const int* schedule_meta = nullptr;
  void* logits = nullptr;
};

// What one compiled logits kernel is.
struct Sm90PagedMqaKernelSpec {
  int next_n = 1, num_heads = 64, head_dim = 128, stages = 8;
  bool bf16_logits = false;
  int smem_bytes = 0;
};

// The query tokens of one wgmma: 1, or next_n rounded up to even (sm90_paged_mqa::padded_tokens).
inline int sm90_paged_mqa_tokens(int next_n) { return next_n == 1 ? 1 : next_n + next_n % 2; }

// The dynamic shared memory of impls/sm90_fp8_paged_mqa_logits.cuh's SmemLayout (mirror).
inline int sm90_paged_mqa_smem_bytes(int next_n, int num_heads, int head_dim, int stages) {
  const int n = sm90_paged_mqa_tokens(next_n) * num_heads;
  // q: 2 slots per math warpgroup; scratch: a word per math thread; q barriers: 2 per slot.
  const int fixed = 2 * 2 * n * head_dim + 2 * 128 * 4 + 2 * 2 * 2 * 8;
  const int per_stage = paged_mqa_detail::kTileKV * (head_dim + 4) + 2 * 8;
  return fixed + stages * per_stage + 1024;
}

// The most stages that fit (DG_DEV_PAGED_MQA_STAGES, for tuning, caps them).
inline Sm90PagedMqaKernelSpec sm90_paged_mqa_spec(int next_n, int num_heads, int head_dim, bool bf16_logits,
                                                  int max_smem) {
  static const int knob = detail::env_int_knob(
      "DG_DEV_PAGED_MQA_STAGES", [](int v) { return v == 0 || (v >= 2 && v <= 32); }, "in [2, 32]");
  Sm90PagedMqaKernelSpec s;
  s.next_n = next_n;
  s.num_heads = num_heads;
  s.head_dim = head_dim;
  s.bf16_logits = bf16_logits;
  s.stages = knob ? knob : paged_mqa_detail::kMaxStages;
  // Even: the kernel gives each math warpgroup its own half of the ring.
  s.stages -= s.stages % 2;
  while (s.stages > 2 && sm90_paged_mqa_smem_bytes(next_n, num_heads, head_dim, s.stages) > max_smem) s.stages -= 2;
  s.smem_bytes = sm90_paged_mqa_smem_bytes(next_n, num_heads, head_dim, s.stages);
  return s;
}

inline std::string sm90_paged_mqa_kernel_name(const Sm90PagedMqaKernelSpec& s) {
  const auto u = [](int v) { return std::to_string(v); };
  return "sm90_fp8_paged_mqa_logits_n" + u(s.next_n) + "_h" + u(s.num_heads) + "_d" + u(s.head_dim) + "_s" +
         u(s.stages) + (s.bf16_logits ? "_bf16" : "_f32");
}

inline std::string sm90_paged_mqa_kernel_source(const Sm90PagedMqaKernelSpec& s) {
  const char* out_t = s.bf16_logits ? "__nv_bfloat16" : "float";
  TemplateArgs t;
  t.always(static_cast<uint32_t>(s.next_n)).always(static_cast<uint32_t>(s.num_heads));
  t.always(static_cast<uint32_t>(s.head_dim)).always(static_cast<uint32_t>(s.stages)).always(std::string(out_t));
  std::string code = smem_bytes_define(s.smem_bytes);
  code += "#include <deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh>\n\n";
  code += "extern \"C\" __global__ void __launch_bounds__(384, 1)\n";
  code += sm90_paged_mqa_kernel_name(s) +
          "(uint32_t batch_size, uint32_t block_kv, uint32_t num_kv_blocks, uint32_t lens_2d,\n"
          "         const int* context_lens, const int* block_table, uint64_t block_table_stride,\n"
          "         uint32_t max_blocks, const int* schedule_meta, const float* weights, uint64_t weights_stride,\n"
          "         " + out_t + "* logits, uint64_t logits_stride, uint32_t max_context_len,\n"
          "         const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_kv,\n"
          "         const __grid_constant__ CUtensorMap tmap_sf) {\n";
  code += "    deep_gemm::sm90_fp8_paged_mqa_logits_impl<" + t.str() +
          ">(\n        batch_size, block_kv, num_kv_blocks, lens_2d != 0, context_lens, block_table, "
          "block_table_stride, max_blocks,\n        schedule_meta, weights, weights_stride, logits, logits_stride, "
          "max_context_len, &tmap_q, &tmap_kv, &tmap_sf);\n}\n";
  return code;
}

// The tensor maps of a launch, in argument order (q, kv, sf), with their base pointers.
inline std::vector<std::pair<Sm90TensorMapSpec, const void*>> sm90_paged_mqa_tensor_maps(const Sm90PagedMqaProblem& p) {
  const uint64_t d = static_cast<uint64_t>(p.head_dim), bkv = static_cast<uint64_t>(p.block_kv);
  const uint64_t n = static_cast<uint64_t>(sm90_paged_mqa_tokens(p.next_n)) * p.num_heads;
  const uint64_t tokens = static_cast<uint64_t>(p.batch_size) * p.next_n;
  const auto b = static_cast<uint32_t>(bkv);
  const int swizzle = p.head_dim;  // one swizzle row per FP8 row: 32, 64 or 128 bytes
  std::vector<std::pair<Sm90TensorMapSpec, const void*>> maps;
  maps.push_back({{"q", Sm90TmaDtype::kU8, d, tokens * p.num_heads, d, static_cast<uint32_t>(d), static_cast<uint32_t>(n),
                   swizzle}, p.q});
  maps.push_back({{"kv", Sm90TmaDtype::kU8, d, bkv, d, static_cast<uint32_t>(d), b, swizzle,
                   static_cast<uint64_t>(p.num_kv_blocks), p.kv_stride_bytes}, p.kv_cache});
  maps.push_back({{"sf", Sm90TmaDtype::kF32, bkv, static_cast<uint64_t>(p.num_kv_blocks), p.kv_stride_bytes, b, 1, 0},
                  static_cast<const uint8_t*>(p.kv_cache) + bkv * d});
  return maps;
}

namespace detail {

struct PagedMqaKey {
  int next_n, num_heads, head_dim, device;
  bool bf16_logits;
  bool operator==(const PagedMqaKey&) const = default;
  size_t hash() const { return hash_fields({next_n, num_heads, head_dim, device, int(bf16_logits)}); }
};

inline std::string paged_mqa_clean_name(bool bf16) {
  return std::string("paged_mqa_clean_logits_") + (bf16 ? "bf16" : "f32");
}

}  // namespace detail

inline Plan<Sm90PagedMqaKernelSpec> plan_sm90_paged_mqa(const detail::PagedMqaKey& key, int max_smem) {
  const auto s = sm90_paged_mqa_spec(key.next_n, key.num_heads, key.head_dim, key.bf16_logits, max_smem);
  const std::string name = sm90_paged_mqa_kernel_name(s);
  return {s, JitContext::get().source(name, sm90_paged_mqa_kernel_source(s), name)};
}

class Sm90PagedMqaLauncher {
 public:
  static Sm90PagedMqaLauncher& get() {
    static Sm90PagedMqaLauncher instance;
    return instance;
  }

  void run_metadata(const int* context_lens, int batch_size, int next_n, bool lens_2d, int num_ctas, int* out,
                    int device) {
    deep_jit::LaunchConfig lc;
    lc.block[0] = paged_mqa_detail::kMetaThreads;
    deep_jit::launch(metadata_.get(device, "get_paged_mqa_logits_metadata", &metadata_source), lc, context_lens,
                     static_cast<uint32_t>(batch_size), static_cast<uint32_t>(next_n), static_cast<uint32_t>(lens_2d),
                     static_cast<uint32_t>(num_ctas), out);
  }

  void run(const Sm90PagedMqaProblem& p, const char* op) {
    const detail::PagedMqaKey key{p.next_n, p.num_heads, p.head_dim, p.device, p.bf16_logits};
    const auto& e = logits_.get(key, p.device, op, plan_sm90_paged_mqa, [&](const Sm90PagedMqaKernelSpec& s) {
      return deep_jit::detail::cat(op, " next_n=", s.next_n, " heads=", s.num_heads, " head_dim=", s.head_dim, " -> ",
                                   s.stages, " stages, smem ", s.smem_bytes, " B");
    });
    const auto maps = sm90_paged_mqa_tensor_maps(p);
    const CUtensorMap mq = encode_tensor_map(maps[0].first, maps[0].second);
    const CUtensorMap mkv = encode_tensor_map(maps[1].first, maps[1].second);
    const CUtensorMap msf = encode_tensor_map(maps[2].first, maps[2].second);
    deep_jit::LaunchConfig lc;
    lc.grid[0] = static_cast<unsigned>(p.num_ctas);
    lc.block[0] = 384;
    lc.shared_bytes = static_cast<unsigned>(e.cfg.smem_bytes);
    lc.pdl = DeviceRuntime::get().pdl();
    deep_jit::launch(*e.kernel, lc, static_cast<uint32_t>(p.batch_size), static_cast<uint32_t>(p.block_kv),
                     static_cast<uint32_t>(p.num_kv_blocks), static_cast<uint32_t>(p.lens_2d), p.context_lens,
                     p.block_table, p.block_table_stride, static_cast<uint32_t>(p.max_blocks), p.schedule_meta,
                     static_cast<const float*>(p.weights), p.weights_stride, p.logits, p.logits_stride,
                     static_cast<uint32_t>(p.max_context_len), mq, mkv, msf);
  }

  void run_clean(const Sm90PagedMqaProblem& p) {
    using namespace paged_mqa_detail;
    deep_jit::LaunchConfig lc;
    lc.grid[0] = static_cast<unsigned>(p.batch_size * p.next_n);
    lc.grid[1] = static_cast<unsigned>((static_cast<uint64_t>(p.max_context_len) + kCleanChunk - 1) / kCleanChunk);
    lc.block[0] = kCleanThreads;
    auto& cache = p.bf16_logits ? clean_bf16_ : clean_f32_;
    const auto& k = cache.get(p.device, "fp8_paged_mqa_logits", p.bf16_logits ? &clean_bf16_source : &clean_f32_source);
    deep_jit::launch(k, lc, p.context_lens, static_cast<uint32_t>(p.next_n), static_cast<uint32_t>(p.lens_2d), p.logits,
                     p.logits_stride, static_cast<uint32_t>(p.max_context_len));
  }

  // The sources of the configuration-free kernels (also compiled without a GPU by the build op).
  static deep_jit::KernelSource metadata_source() {
    return JitContext::get().source(
        "paged_mqa_logits_metadata",
        "#include <deep_gemm/impls/paged_mqa_logits_metadata.cuh>\n\n"
        "extern \"C\" __global__ void __launch_bounds__(1024, 1)\n"
        "paged_mqa_logits_metadata(const int* context_lens, uint32_t batch_size, uint32_t next_n, uint32_t lens_2d,\n"
        "         uint32_t num_ctas, int* schedule_meta) {\n"
        "    deep_gemm::paged_mqa_logits_metadata_impl(context_lens, batch_size, next_n, lens_2d != 0, num_ctas,\n"
        "                                              schedule_meta);\n}\n",
        "paged_mqa_logits_metadata");
  }
  static deep_jit::KernelSource clean_source(bool bf16) {
    const std::string name = detail::paged_mqa_clean_name(bf16);
    const std::string out_t = bf16 ? "__nv_bfloat16" : "float";
    return JitContext::get().source(
        name,
        "#include <deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh>\n\n"
        "extern \"C\" __global__ void __launch_bounds__(256)\n" + name +
            "(const int* context_lens, uint32_t next_n, uint32_t lens_2d, " + out_t +
            "* logits,\n         uint64_t logits_stride, uint32_t max_context_len) {\n"
            "    deep_gemm::paged_mqa_logits_clean_impl<" + out_t +
            ">(context_lens, next_n, lens_2d != 0, logits, logits_stride,\n"
            "                                               max_context_len);\n}\n",
        name);
  }
  static deep_jit::KernelSource clean_f32_source() { return clean_source(false); }
  static deep_jit::KernelSource clean_bf16_source() { return clean_source(true); }

 private:
  PerDeviceKernel metadata_, clean_f32_, clean_bf16_;
  KernelCache<detail::PagedMqaKey, Sm90PagedMqaKernelSpec> logits_;
};

}  // namespace deep_gemm::launch
