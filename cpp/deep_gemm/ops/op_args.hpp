// Argument helpers shared by the GEMM op families (ops/gemm.cpp, ops/grouped.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <torch/csrc/stable/tensor.h>

#include <optional>

#include "../runtime/device_runtime.hpp"
#include "../common/errors.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Which of M, N, K are baked into the JIT kernel (API.md `compiled_dims`); all
// runtime arguments when set_ignore_compile_dims(True).
struct CompiledDims {
  bool m = false, n = false, k = false;
};

inline CompiledDims parse_compiled_dims(const std::string& dims, const char* op) {
  CompiledDims out;
  for (char ch : dims) {
    check_arg(ch == 'm' || ch == 'n' || ch == 'k', op, "compiled_dims may only contain 'm', 'n' and 'k', got '", dims,
              "'");
    (ch == 'm' ? out.m : ch == 'n' ? out.n : out.k) = true;
  }
  if (DeviceRuntime::get().ignore_compile_dims()) out = {};
  return out;
}

// The row pitch (elements) the kernels step by, for 2-D operands and the [G, rows, K] ones
// alike: the smallest outer stride over a dimension of size > 1 (the ops have checked that
// the outer dimensions are packed on it, and that no two elements share memory). A tensor of
// a single row has no meaningful pitch (its outer strides are arbitrary, 0 included): it
// gets the row's extent rounded up to 16 bytes, never 0, so no launcher ever reads a 0 as
// "default" or hands the TMA an illegal stride.
inline uint64_t tma_row_pitch(const torch::stable::Tensor& t) {
  int64_t pitch = 0;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) > 1 && (pitch == 0 || t.stride(d) < pitch)) pitch = t.stride(d);
  if (pitch > 0) return static_cast<uint64_t>(pitch);
  const int64_t per16 = 16 / static_cast<int64_t>(t.element_size());
  return static_cast<uint64_t>(ceil_div(std::max<int64_t>(t.size(t.dim() - 1), 1), per16) * per16);
}

// Row pitch (elements) of a [G, rows, cols] operand read through a rank-3 map: stride(1), or
// for a single row its width rounded up to 16 bytes (any valid pitch serves then).
// (tma_row_pitch's smallest outer stride would be the group stride where the groups
// interleave.)
inline uint64_t group_row_pitch(const torch::stable::Tensor& t) {
  if (t.size(1) > 1) return static_cast<uint64_t>(t.stride(1));
  const int64_t per16 = 16 / static_cast<int64_t>(t.element_size());
  return static_cast<uint64_t>(ceil_div(std::max<int64_t>(t.size(2), 1), per16) * per16);
}

// The launch fields every FP8 GEMM problem (dense or grouped) shares: shape,
// compiled dims, device, operand pointers and row pitches (tma_row_pitch).
template <class Problem>
void set_gemm_operands(Problem& p, int64_t m, int64_t n, int64_t k, const CompiledDims& cd,
                       const torch::stable::Tensor& a, const torch::stable::Tensor& b,
                       const torch::stable::Tensor& sfa, const torch::stable::Tensor& sfb,
                       const torch::stable::Tensor& d) {
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.compiled_m = cd.m ? p.m : 0;
  p.compiled_n = cd.n ? p.n : 0;
  p.compiled_k = cd.k ? p.k : 0;
  p.device = a.get_device_index();
  p.a = a.data_ptr();
  p.b = b.data_ptr();
  p.sfa = sfa.data_ptr();
  p.sfb = sfb.data_ptr();
  p.d = d.data_ptr();
  p.lda_bytes = tma_row_pitch(a);  // fp8: elements are bytes
  p.ldb_bytes = tma_row_pitch(b);
  p.ld_d = tma_row_pitch(d);
}

// The output of a plain (unscaled) GEMM: d [M, N] bf16 or fp32, and c, when given, of d's
// dtype and shape (the BF16 and cuBLASLt ops).
inline void check_plain_gemm_output(const ArgChecker& chk, const torch::stable::Tensor& d,
                                    const std::optional<torch::stable::Tensor>& c, int64_t m, int64_t n, const char* op) {
  check_arg(d.scalar_type() == ScalarType::BFloat16 || d.scalar_type() == ScalarType::Float, op,
            "d must be torch.bfloat16 or torch.float32, got ", dtype_name(d.scalar_type()));
  if (!c.has_value()) return;
  check_arg(c->scalar_type() == d.scalar_type(), op, "c must have d's dtype ", dtype_name(d.scalar_type()), ", got ",
            dtype_name(c->scalar_type()));
  chk.dim({*c, "c"}, 2);
  chk.size({*c, "c"}, 0, m, "M");
  chk.size({*c, "c"}, 1, n, "N");
}

}  // namespace deep_gemm::ops
