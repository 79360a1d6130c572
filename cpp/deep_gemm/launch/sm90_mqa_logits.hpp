// Launcher of the SM90 FP8 MQA logits kernel (cuda/deep_gemm/impls/sm90_fp8_mqa_logits.cuh):
// its kernel spec, JIT source, tensor maps, key, plan and launch, on launch/common.hpp.
//
// LAUNCH CONTRACT: grid {min(num_sms, ceil(S / block_q))} (persistent; each CTA takes one
// token block per round of the grid, last blocks first: QBlockOrder), block 384 (two math
// warpgroups, then the TMA warpgroup), shared smem_bytes, cluster 1. block_q = N / H, N = 256
// (128 at H = 8). Kernel arguments:
//   (uint32 seq_len, uint32 seq_len_kv, uint32 max_seqlen_k, const int* ks, const int* ke,
//    const float* weights, uint32 ld_weights /*elements*/, OutT* logits, uint64 ld_logits,
//    CUtensorMap q, CUtensorMap kv, CUtensorMap kv_sf)
//   Tensor maps: q e4m3 [S * H][D] box D x N (swizzle D bytes); kv e4m3 [S_kv][D] (row
//   pitch kv_ld_bytes) box D x 128 (swizzle D bytes); kv_sf fp32 [1][S_kv] box 128 x 1.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common.hpp"

namespace deep_gemm::launch {

struct Sm90MqaLogitsProblem {
  int seq_len = 0, seq_len_kv = 0, heads = 0, head_dim = 0;
  int max_seqlen_k = 0;  // > 0: the compressed form
  bool clean = false, bf16_out = false;
  int device = 0;
  const void* q = nullptr;
  const void* kv = nullptr;
  const void* kv_sf = nullptr;
  const void* weights = nullptr;
  const int* ks = nullptr;
  const int* ke = nullptr;
  void* logits = nullptr;
  uint64_t kv_ld_bytes = 0, ld_weights = 0, ld_logits = 0;
};

struct Sm90MqaLogitsKernelSpec {
  uint32_t heads = 64, head_dim = 128, stages = 8, q_columns = 128;
  bool bf16_out = false, compressed = false, clean = false;
  int smem_bytes = 0;
};

constexpr int kSm90MqaBlockKV = 128;   // KV rows per stage (the kernel's kBlockKV)

// The kernel's SmemLayout, mirrored (the kernel's launch_smem_fits check keeps them equal).
constexpr int sm90_mqa_logits_smem_bytes(int head_dim, int stages, int q_columns) {
  const int q = 2 * q_columns * head_dim;
  const int kv = stages * (kSm90MqaBlockKV * head_dim + kSm90MqaBlockKV * 4);
  return q + kv + 256 * 4 + (2 * stages + 4) * 8 + 1024;
}

inline std::string sm90_mqa_logits_kernel_name(const Sm90MqaLogitsKernelSpec& s) {
  const auto u = [](uint32_t v) { return std::to_string(v); };
  return "sm90_fp8_mqa_logits_h" + u(s.heads) + "_d" + u(s.head_dim) + "_n" + u(s.q_columns) + "_s" + u(s.stages) +
         (s.bf16_out ? "_bf16" : "_f32") + (s.compressed ? "_compressed" : s.clean ? "_clean" : "");
}

inline std::string sm90_mqa_logits_kernel_source(const Sm90MqaLogitsKernelSpec& s) {
  const char* out_t = s.bf16_out ? "__nv_bfloat16" : "float";
  TemplateArgs t;
  t.always(s.heads).always(s.head_dim).always(s.stages).always(std::string(out_t));
  t.always_bool(s.compressed).always_bool(s.clean).trailing(std::to_string(s.q_columns) + "u", s.q_columns == 128);
  std::string code = smem_bytes_define(s.smem_bytes);
  code += "#include <deep_gemm/impls/sm90_fp8_mqa_logits.cuh>\n\n";
  code += "extern \"C\" __global__ void __launch_bounds__(384, 1)\n";
  code += sm90_mqa_logits_kernel_name(s) +
          "(uint32_t seq_len, uint32_t seq_len_kv, uint32_t max_seqlen_k, const int* ks, const int* ke,\n"
          "         const float* weights, uint32_t ld_weights, " + out_t + "* logits, uint64_t ld_logits,\n"
          "         const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_kv,\n"
          "         const __grid_constant__ CUtensorMap tmap_sf) {\n";
  code += "    deep_gemm::sm90_fp8_mqa_logits_impl<" + t.str() +
          ">(\n        seq_len, seq_len_kv, max_seqlen_k, ks, ke, weights, ld_weights, logits, ld_logits, &tmap_q, "
          "&tmap_kv, &tmap_sf);\n}\n";
  return code;
}

// The tensor maps of a launch, in argument order (q, kv, kv_sf).
inline std::vector<Sm90TensorMapSpec> sm90_mqa_logits_tensor_maps(const Sm90MqaLogitsProblem& p, uint32_t q_columns) {
  const auto d = static_cast<uint32_t>(p.head_dim);
  const uint64_t skv = static_cast<uint64_t>(p.seq_len_kv);
  std::vector<Sm90TensorMapSpec> maps;
  maps.push_back({"q", Sm90TmaDtype::kU8, d, static_cast<uint64_t>(p.seq_len) * p.heads, d, d, q_columns,
                  static_cast<int>(d)});
  maps.push_back({"kv", Sm90TmaDtype::kU8, d, skv, p.kv_ld_bytes, d, kSm90MqaBlockKV, static_cast<int>(d)});
  maps.push_back({"kv_sf", Sm90TmaDtype::kF32, skv, 1, (skv * 4 + 15) / 16 * 16, kSm90MqaBlockKV, 1, 0});
  return maps;
}

namespace detail {

struct MqaLogitsKey {
  int heads, head_dim, num_sms, device;
  bool bf16_out, compressed, clean;
  int q_columns = 0;  // 0: the default (sm90_mqa_logits_q_columns)
  bool operator==(const MqaLogitsKey&) const = default;
  size_t hash() const {
    return hash_fields({heads, head_dim, num_sms, device, int(bf16_out), int(compressed), int(clean), q_columns});
  }
};

}  // namespace detail

// Eight KV stages (at most 199 KB, at D = 128 and N = 256): a KV block is ~0.3 us of tensor
// work, so eight cover an L2 miss with room; the key needs no heuristics beyond it.
inline Plan<h::Sm90GemmConfig> plan_sm90_mqa_logits(const detail::MqaLogitsKey& key, int max_smem) {
  Sm90MqaLogitsKernelSpec s;
  s.heads = static_cast<uint32_t>(key.heads);
  s.head_dim = static_cast<uint32_t>(key.head_dim);
  // N = 256 (block_q = 256 / H) reads half the shared memory per FLOP of N = 128 with its
  // double-buffered accumulators, and ran 9% faster at S = 4096, S_kv = 16384, H = 64, D = 128
  // (972 against 891 TFLOP/s, causal windows; H = 32: 754 against 718; H200, 2026-12-03).
  // H = 8 keeps 128: at most 16 tokens per block.
  s.q_columns = static_cast<uint32_t>(key.q_columns ? key.q_columns : 256);
  if (key.heads < 16) s.q_columns = 128;
  s.stages = 8;
  const int qc = static_cast<int>(s.q_columns);
  while (s.stages > 2 && sm90_mqa_logits_smem_bytes(key.head_dim, static_cast<int>(s.stages), qc) > max_smem) --s.stages;
  s.bf16_out = key.bf16_out;
  s.compressed = key.compressed;
  s.clean = key.clean;
  s.smem_bytes = sm90_mqa_logits_smem_bytes(key.head_dim, static_cast<int>(s.stages), qc);
  h::Sm90GemmConfig cfg;
  cfg.block_n = qc;  // the wgmma's N: block_q * H
  cfg.stages = static_cast<int>(s.stages);
  cfg.num_sms = key.num_sms;
  cfg.grid_x = key.num_sms;
  cfg.smem_bytes = s.smem_bytes;
  cfg.num_math_threads = 256;
  cfg.num_threads = 384;
  const std::string name = sm90_mqa_logits_kernel_name(s);
  return {cfg, JitContext::get().source(name, sm90_mqa_logits_kernel_source(s), name)};
}

class Sm90MqaLogitsLauncher {
 public:
  static Sm90MqaLogitsLauncher& get() {
    static Sm90MqaLogitsLauncher instance;
    return instance;
  }

  void run(const Sm90MqaLogitsProblem& p, const char* op) {
    const auto& rt = DeviceRuntime::get();
    const detail::MqaLogitsKey key{p.heads, p.head_dim, rt.num_sms(p.device), p.device, p.bf16_out,
                                   p.max_seqlen_k > 0, p.clean, q_columns_knob()};
    const auto& e = cache_.get(key, p.device, op, plan_sm90_mqa_logits, [&](const h::Sm90GemmConfig& c) {
      return deep_jit::detail::cat(op, " H=", p.heads, " D=", p.head_dim, " -> N ", c.block_n, ", ", c.stages,
                                   " stages, smem ", c.smem_bytes, " B");
    });
    const auto specs = sm90_mqa_logits_tensor_maps(p, static_cast<uint32_t>(e.cfg.block_n));
    const CUtensorMap mq = encode_tensor_map(specs[0], p.q);
    const CUtensorMap mkv = encode_tensor_map(specs[1], p.kv);
    const CUtensorMap msf = encode_tensor_map(specs[2], p.kv_sf);
    h::Sm90GemmConfig cfg = e.cfg;
    const int block_q = e.cfg.block_n / p.heads;
    cfg.grid_x = std::max(1, std::min(cfg.num_sms, (p.seq_len + block_q - 1) / block_q));
    const auto lc = persistent_launch(cfg, rt.pdl());
    deep_jit::launch(*e.kernel, lc, static_cast<uint32_t>(p.seq_len), static_cast<uint32_t>(p.seq_len_kv),
                     static_cast<uint32_t>(p.max_seqlen_k), p.ks, p.ke, static_cast<const float*>(p.weights),
                     static_cast<uint32_t>(p.ld_weights), p.logits, p.ld_logits, mq, mkv, msf);
  }

 private:
  // DG_DEV_MQA_Q_COLUMNS=128|256: the wgmma's N (block_q * H), for measuring; unset: 256 (128 at H = 8).
  static int q_columns_knob() {
    static const int v = detail::env_int_knob("DG_DEV_MQA_Q_COLUMNS", [](int x) { return x == 0 || x == 128 || x == 256; },
                                              "128 or 256");
    return v;
  }
  KernelCache<detail::MqaLogitsKey, h::Sm90GemmConfig> cache_;
};

}  // namespace deep_gemm::launch
