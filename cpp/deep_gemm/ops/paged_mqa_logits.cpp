// Ops: the DeepSeek V3.2 indexer's paged (decode) MQA logits on SM90 (API.md:
// get_paged_mqa_logits_metadata, fp8_paged_mqa_logits / fp8_fp4_paged_mqa_logits; the
// Python facade is deep_gemm/_paged_mqa_logits.py, which also rejects the SM100-only forms).
//   get_paged_mqa_logits_metadata: context_lens int32 [B] or [B, next_n] -> int32
//     [num_sms + 1, 2], the schedule (impls/paged_mqa_logits_metadata.cuh), on the GPU.
//   fp8_paged_mqa_logits: q e4m3 [B, next_n, H, D], kv_cache uint8 [blocks, block_kv, 1, D + 4],
//     weights fp32 [B * next_n, H], context_lens as above, block_table int32 [B, max_blocks],
//     schedule_meta from the metadata op -> logits [B * next_n, max_context_len] (fp32 or bf16),
//     a view of rows padded to align(align(max_context_len, 256), 1024 bytes).
// Neither op reads device memory on the host: both can be captured in one CUDA graph.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <string>
#include <vector>

#include "../launch/sm90_paged_mqa_logits.hpp"
#include "op_args.hpp"
#include "../torch/sf_layout.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

constexpr const char* kMetaOp = "get_paged_mqa_logits_metadata";
constexpr const char* kOp = "fp8_paged_mqa_logits";
constexpr int64_t kBelow31 = int64_t(1) << 31;
constexpr int64_t kMaxCtas = 65535;

// Row-major with no gaps (dimensions of size 1, and empty tensors, may have any strides).
bool packed_row_major(const Tensor& t) {
  if (t.numel() == 0) return true;
  int64_t step = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    if (t.size(d) != 1 && t.stride(d) != step) return false;
    step *= t.size(d);
  }
  return true;
}

// context_lens: int32, [B] (the last token's length) or [B, next_n] (one per token), contiguous.
// Returns whether it is the 2-D form.
bool check_context_lens(const ArgChecker& chk, const Tensor& lens, int64_t batch, int64_t next_n, const char* op) {
  chk.dtype({lens, "context_lens"}, ScalarType::Int);
  check_arg(lens.dim() == 1 || lens.dim() == 2, op, "context_lens must be 1-D [B] or 2-D [B, next_n], got shape ",
            shape_str(lens));
  if (batch >= 0) chk.size({lens, "context_lens"}, 0, batch, "B, from q.shape[0]");
  if (lens.dim() == 2 && next_n > 0) chk.size({lens, "context_lens"}, 1, next_n, "next_n, from q.shape[1]");
  check_arg(packed_row_major(lens), op, "context_lens must be contiguous, got strides ", stride_str(lens));
  return lens.dim() == 2;
}

Tensor get_paged_mqa_logits_metadata(Tensor context_lens, int64_t block_kv, int64_t num_sms) {
  const ArgChecker chk(kMetaOp);
  const bool lens_2d = check_context_lens(chk, context_lens, -1, -1, kMetaOp);
  const int64_t batch = context_lens.size(0), next_n = lens_2d ? context_lens.size(1) : 1;
  check_arg(next_n >= 1, kMetaOp, "context_lens.shape[1] (next_n) must be at least 1, got shape ", shape_str(context_lens));
  chk.below_2_31({{"B", batch}});
  check_arg(block_kv == 32 || block_kv == 64, kMetaOp, "block_kv must be 32 or 64 on SM90, got ", block_kv);
  check_arg(num_sms >= 1 && num_sms <= kMaxCtas, kMetaOp, "num_sms must be in [1, ", kMaxCtas, "], got ", num_sms);
  if (!is_meta(context_lens))
    check_arg(context_lens.is_cuda(), kMetaOp, "context_lens must be a CUDA tensor, got a tensor on ",
              context_lens.is_cpu() ? "the CPU" : "a non-CUDA device");
  const int64_t shape[2] = {num_sms + 1, 2};
  Tensor meta = empty_on_device_of(context_lens, shape, 2, aoti_torch_dtype_int32());
  if (is_meta(context_lens)) return meta;
  launch::Sm90PagedMqaLauncher::get().run_metadata(static_cast<const int*>(context_lens.data_ptr()), int(batch),
                                                   int(next_n), lens_2d, int(num_sms),
                                                   static_cast<int*>(meta.data_ptr()), context_lens.get_device_index());
  return meta;
}

// The row pitch of the logits (elements), as upstream pads it: a whole number of 256-token
// splits, then of 1024 bytes.
int64_t logits_row_pitch(int64_t max_context_len, bool bf16) {
  const int64_t per_kb = bf16 ? 512 : 256;
  const int64_t splits = ceil_div(max_context_len, 256) * 256;
  return ceil_div(splits, per_kb) * per_kb;
}

Tensor fp8_paged_mqa_logits(Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, Tensor block_table,
                            Tensor schedule_meta, int64_t max_context_len, bool clean_logits, bool bf16_logits) {
  const ArgChecker chk(kOp);
  chk.dim({q, "q"}, 4);
  chk.dtype({q, "q"}, ScalarType::Float8_e4m3fn);
  const int64_t batch = q.size(0), next_n = q.size(1), heads = q.size(2), dim = q.size(3);
  check_arg(next_n >= 1 && next_n <= 4, kOp, "next_n (q.shape[1]) must be in [1, 4], got shape ", shape_str(q));
  check_arg(heads == 32 || heads == 64, kOp, "the number of heads (q.shape[2]) must be 32 or 64 on SM90, got shape ",
            shape_str(q));
  check_arg(dim == 32 || dim == 64 || dim == 128, kOp, "the head dim (q.shape[3]) must be 32, 64 or 128, got shape ",
            shape_str(q));
  check_arg(packed_row_major(q), kOp, "q must be contiguous, got strides ", stride_str(q));
  chk.below_2_31({{"B * next_n * H", batch * next_n * heads}});

  chk.dim({kv_cache, "kv_cache"}, 4);
  chk.dtype({kv_cache, "kv_cache"}, ScalarType::Byte);
  const int64_t num_blocks = kv_cache.size(0), block_kv = kv_cache.size(1);
  check_arg(block_kv == 32 || block_kv == 64, kOp, "block_kv (kv_cache.shape[1]) must be 32 or 64 on SM90, got shape ",
            shape_str(kv_cache));
  chk.size({kv_cache, "kv_cache"}, 2, 1, "one KV head");
  chk.size({kv_cache, "kv_cache"}, 3, dim + 4, "D + 4: the FP8 row and its FP32 scale");
  check_arg(num_blocks >= 1 && num_blocks < kBelow31, kOp, "kv_cache must hold between 1 and 2^31 - 1 blocks, got shape ",
            shape_str(kv_cache));
  const int64_t page_bytes = block_kv * (dim + 4);
  check_arg(kv_cache.stride(3) == 1 && kv_cache.stride(1) == dim + 4, kOp, "kv_cache must hold each block's bytes packed "
            "(strides (., ", dim + 4, ", ., 1)), got strides ", stride_str(kv_cache));
  check_arg(num_blocks == 1 || kv_cache.stride(0) >= page_bytes, kOp, "kv_cache.stride(0) must be at least one block (",
            page_bytes, " bytes), got strides ", stride_str(kv_cache));
  const int64_t kv_stride = num_blocks == 1 ? ceil_div(page_bytes, 16) * 16 : kv_cache.stride(0);
  check_arg(kv_stride % 16 == 0, kOp, "kv_cache.stride(0) must be a multiple of 16 bytes for the TMA, got strides ",
            stride_str(kv_cache));

  chk.dim({weights, "weights"}, 2);
  chk.dtype({weights, "weights"}, ScalarType::Float);
  chk.size({weights, "weights"}, 0, batch * next_n, "B * next_n");
  chk.size({weights, "weights"}, 1, heads, "H, from q.shape[2]");
  chk.inner_contiguous({weights, "weights"}, "row-major");
  const int64_t w_stride = batch * next_n > 1 ? weights.stride(0) : heads;
  check_arg(w_stride >= heads && w_stride < kBelow31, kOp, "weights' rows must not overlap, got strides ",
            stride_str(weights));

  const bool lens_2d = check_context_lens(chk, context_lens, batch, next_n, kOp);

  chk.dim({block_table, "block_table"}, 2);
  chk.dtype({block_table, "block_table"}, ScalarType::Int);
  chk.size({block_table, "block_table"}, 0, batch, "B, from q.shape[0]");
  const int64_t max_blocks = block_table.size(1);
  check_arg(block_table.stride(1) == 1 || max_blocks <= 1, kOp, "block_table's rows must be contiguous, got strides ",
            stride_str(block_table));
  check_arg(max_blocks < kBelow31 && block_table.stride(0) >= 0, kOp, "block_table of shape ", shape_str(block_table),
            " and strides ", stride_str(block_table), " is not supported");

  chk.dim({schedule_meta, "schedule_meta"}, 2);
  chk.dtype({schedule_meta, "schedule_meta"}, ScalarType::Int);
  const int64_t num_ctas = schedule_meta.size(0) - 1;
  check_arg(schedule_meta.size(1) == 2 && num_ctas >= 1 && num_ctas <= kMaxCtas, kOp, "schedule_meta must be "
            "[num_sms + 1, 2] with num_sms in [1, ", kMaxCtas, "] (get_paged_mqa_logits_metadata's), got shape ",
            shape_str(schedule_meta));
  check_arg(packed_row_major(schedule_meta), kOp, "schedule_meta must be contiguous, got strides ",
            stride_str(schedule_meta));
  check_arg(max_context_len >= 0 && max_context_len < kBelow31, kOp, "max_context_len must be in [0, 2^31), got ",
            max_context_len);

  chk.same_cuda_device({{q, "q"}, {kv_cache, "kv_cache"}, {weights, "weights"}, {context_lens, "context_lens"},
                        {block_table, "block_table"}, {schedule_meta, "schedule_meta"}});
  if (!is_meta(q)) {
    chk.tma_aligned({q, "q"});
    check_arg(reinterpret_cast<uintptr_t>(kv_cache.data_ptr()) % 16 == 0, kOp,
              "kv_cache's data must be 16-byte aligned for the TMA");
  }

  const int64_t rows = batch * next_n, pitch = logits_row_pitch(max_context_len, bf16_logits);
  const int64_t shape[2] = {rows, pitch};
  Tensor storage = empty_on_device_of(q, shape, 2, bf16_logits ? aoti_torch_dtype_bfloat16() : aoti_torch_dtype_float32());
  Tensor logits = torch::stable::narrow(storage, 1, 0, max_context_len);
  if (is_meta(q) || rows == 0 || max_context_len == 0) return logits;

  launch::Sm90PagedMqaProblem p;
  p.batch_size = int(batch);
  p.next_n = int(next_n);
  p.num_heads = int(heads);
  p.head_dim = int(dim);
  p.block_kv = int(block_kv);
  p.num_kv_blocks = int(num_blocks);
  p.max_blocks = int(max_blocks);
  p.kv_stride_bytes = static_cast<uint64_t>(kv_stride);
  p.weights_stride = static_cast<uint64_t>(w_stride);
  p.block_table_stride = static_cast<uint64_t>(batch > 1 ? block_table.stride(0) : 0);
  p.logits_stride = static_cast<uint64_t>(pitch);
  p.max_context_len = int(max_context_len);
  p.num_ctas = int(num_ctas);
  p.lens_2d = lens_2d;
  p.bf16_logits = bf16_logits;
  p.device = q.get_device_index();
  p.q = q.data_ptr();
  p.kv_cache = kv_cache.data_ptr();
  p.weights = weights.data_ptr();
  p.context_lens = static_cast<const int*>(context_lens.data_ptr());
  p.block_table = static_cast<const int*>(block_table.data_ptr());
  p.schedule_meta = static_cast<const int*>(schedule_meta.data_ptr());
  p.logits = storage.data_ptr();
  auto& launcher = launch::Sm90PagedMqaLauncher::get();
  launcher.run(p, kOp);
  if (clean_logits) launcher.run_clean(p);
  return logits;
}

// Compiles (no GPU needed) the kernels fp8_paged_mqa_logits and the metadata op use for
// this shape: "<kernel name>\t<cubin path>" per kernel (logits, clean, metadata). For
// warmup and the ptxas / SASS checks of the tests.
std::vector<std::string> paged_mqa_logits_build(int64_t next_n, int64_t num_heads, int64_t head_dim,
                                                std::string logits_dtype) {
  constexpr const char* op = "paged_mqa_logits_build";
  check_arg(next_n >= 1 && next_n <= 4, op, "next_n must be in [1, 4], got ", next_n);
  check_arg(num_heads == 32 || num_heads == 64, op, "num_heads must be 32 or 64, got ", num_heads);
  check_arg(head_dim == 32 || head_dim == 64 || head_dim == 128, op, "head_dim must be 32, 64 or 128, got ", head_dim);
  check_arg(logits_dtype == "float32" || logits_dtype == "bfloat16", op,
            "logits_dtype must be 'float32' or 'bfloat16', got '", logits_dtype, "'");
  const bool bf16 = logits_dtype == "bfloat16";
  const launch::detail::PagedMqaKey key{int(next_n), int(num_heads), int(head_dim), 0, bf16};
  auto [spec, src] = launch::plan_sm90_paged_mqa(key, heuristics::kSm90MaxSmemBytes);
  auto& rt = deep_jit::Runtime::get();
  const auto clean = launch::Sm90PagedMqaLauncher::clean_source(bf16);
  const auto meta = launch::Sm90PagedMqaLauncher::metadata_source();
  return {src.name + "\t" + rt.build(src), clean.name + "\t" + rt.build(clean), meta.name + "\t" + rt.build(meta)};
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("get_paged_mqa_logits_metadata(Tensor context_lens, int block_kv, int num_sms) -> Tensor");
  m.def("fp8_paged_mqa_logits(Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, Tensor block_table, "
        "Tensor schedule_meta, int max_context_len, bool clean_logits=False, bool bf16_logits=False) -> Tensor");
  m.def("paged_mqa_logits_build(int next_n, int num_heads, int head_dim, str logits_dtype) -> str[]");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  using namespace deep_gemm::ops;
  m.impl("get_paged_mqa_logits_metadata", TORCH_BOX(&get_paged_mqa_logits_metadata));
  m.impl("fp8_paged_mqa_logits", TORCH_BOX(&fp8_paged_mqa_logits));
  m.impl("paged_mqa_logits_build", TORCH_BOX(&paged_mqa_logits_build));
}
