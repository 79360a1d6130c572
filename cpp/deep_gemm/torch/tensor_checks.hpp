// Argument checks shared by the ops: each failure names the op, the argument,
// what was expected and what was given (DESIGN.md 7). Checks that need real
// memory (alignment, overlap) are skipped for meta tensors.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../common/errors.hpp"

namespace deep_gemm {

using torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case ScalarType::Float8_e5m2: return "torch.float8_e5m2";
    case ScalarType::BFloat16: return "torch.bfloat16";
    case ScalarType::Half: return "torch.float16";
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Double: return "torch.float64";
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Long: return "torch.int64";
    case ScalarType::Byte: return "torch.uint8";
    default: return "another dtype";
  }
}

// A tensor's shape ("[2, 3]") or strides ("(3, 1)") in an error message, formatted only
// when a message is built. check_arg's arguments are evaluated on every call, pass or fail,
// and the strings once built there cost more host time than the launch: on the H200
// (2026-12-03) bf16_gemm_nt at 16 x 256 x 512 took 45.6 us per call with them and 19.1
// without, torch.matmul 22.1 in the same run.
struct TensorDimsText {
  const Tensor* t;
  bool strides;
};

inline TensorDimsText shape_str(const Tensor& t) { return {&t, false}; }
inline TensorDimsText stride_str(const Tensor& t) { return {&t, true}; }

// Found by deep_jit::detail::cat (argument-dependent lookup).
inline std::string to_piece(const TensorDimsText& d) {
  std::string s = d.strides ? "(" : "[";
  for (int64_t i = 0; i < d.t->dim(); ++i)
    s += (i ? ", " : "") + std::to_string(d.strides ? d.t->stride(i) : d.t->size(i));
  return s + (d.strides ? ")" : "]");
}

inline bool is_meta(const Tensor& t) { return t.device().type() == torch::headeronly::DeviceType::Meta; }

struct TensorArg {
  const Tensor& t;
  const char* name;
};

class ArgChecker {
 public:
  explicit ArgChecker(const char* op) : op_(op) {}

  void dtype(TensorArg a, ScalarType expected) const {
    check_arg(a.t.scalar_type() == expected, op_, a.name, " must be ", dtype_name(expected), ", got ",
              dtype_name(a.t.scalar_type()));
  }
  void dim(TensorArg a, int64_t expected) const {
    check_arg(a.t.dim() == expected, op_, a.name, " must be ", expected, "-D, got shape ", shape_str(a.t));
  }
  void size(TensorArg a, int64_t d, int64_t expected, const char* what) const {
    check_arg(a.t.size(d) == expected, op_, a.name, ".shape[", d, "] must be ", expected, " (", what, "), got shape ",
              shape_str(a.t));
  }
  // All tensors on one CUDA device (or all meta, for fake/meta runs).
  void same_cuda_device(std::initializer_list<TensorArg> args) const {
    const TensorArg& first = *args.begin();
    const bool meta = is_meta(first.t);
    for (const auto& a : args) {
      if (meta) {
        check_arg(is_meta(a.t), op_, a.name, " is not a meta tensor while ", first.name, " is");
        continue;
      }
      check_arg(a.t.is_cuda(), op_, a.name, " must be a CUDA tensor, got a tensor on ",
                a.t.is_cpu() ? "the CPU" : "a non-CUDA device");
      check_arg(a.t.get_device_index() == first.t.get_device_index(), op_, a.name, " is on cuda:",
                static_cast<int>(a.t.get_device_index()), " but ", first.name, " is on cuda:",
                static_cast<int>(first.t.get_device_index()));
    }
  }
  void inner_contiguous(TensorArg a, const char* why) const {
    check_arg(a.t.stride(a.t.dim() - 1) == 1 || a.t.size(a.t.dim() - 1) == 1, op_, a.name, " must be ", why,
              " (last dimension contiguous), got shape ", shape_str(a.t), " with strides ", stride_str(a.t));
  }
  // TMA: base 16-byte aligned, every outer stride a multiple of 16 bytes.
  void tma_aligned(TensorArg a) const {
    const int64_t es = static_cast<int64_t>(a.t.element_size());
    for (int64_t d = 0; d + 1 < a.t.dim(); ++d)
      check_arg(a.t.size(d) <= 1 || (a.t.stride(d) * es) % 16 == 0, op_, a.name, ".stride(", d, ") * ", es,
                " bytes must be a multiple of 16 for TMA, got strides ", stride_str(a.t));
    if (is_meta(a.t)) return;
    check_arg(reinterpret_cast<uintptr_t>(a.t.data_ptr()) % 16 == 0, op_, a.name,
              "'s data pointer must be 16-byte aligned for TMA (a sliced view may break this)");
  }
  // A bf16 output the TMA stores: the TMA writes the 16 bytes that hold a row's last
  // column whole (measured on the H200, 2026-12-01; docs/design-notes.md), so N must fill
  // them. A packed `out` already needs that for its row pitch; a column slice of a wider
  // buffer would otherwise have up to 7 columns past N overwritten.
  void tma_store_columns(TensorArg out, int64_t n) const {
    check_arg(n % 8 == 0, op_, "N (= ", n, ") must be a multiple of 8 for a bf16 ", out.name,
              ": the TMA stores whole 16-byte pieces of a row, which would write past column N of a column slice");
  }
  // Every element has memory of its own: no stride 0 over a dimension of size > 1 (an
  // expanded or broadcast view) and no row pitch below the extent of the dimensions inside
  // it. The kernels address a tensor through its pitch alone (TMA boxes, epilogue stores),
  // so an overlapping view would read or write past its storage. Shape-only: meta tensors too.
  // (Scale factors need not pass it: the kernels take them only in their own layout, which
  // has distinct elements, or read them through their strides; others are copied into it.)
  void distinct_elements(TensorArg a) const {
    int64_t order[8];
    int64_t count = 0;
    for (int64_t d = 0; d < a.t.dim() && count < 8; ++d)
      if (a.t.size(d) > 1) order[count++] = d;
    if (a.t.numel() == 0) return;
    for (int64_t i = 1; i < count; ++i)  // insertion sort by stride (at most a few dims)
      for (int64_t j = i; j > 0 && a.t.stride(order[j]) < a.t.stride(order[j - 1]); --j) std::swap(order[j], order[j - 1]);
    int64_t span = 0;  // offset of the last element spanned by the dims sorted so far
    for (int64_t i = 0; i < count; ++i) {
      const int64_t d = order[i];
      check_arg(a.t.stride(d) > span, op_, a.name, " has overlapping elements (shape ", shape_str(a.t), ", strides ",
                stride_str(a.t), "): dimension ", d, "'s stride ", a.t.stride(d),
                a.t.stride(d) == 0 ? " repeats one slice (an expanded or broadcast view)"
                                   : " is below the extent of the dimensions inside it",
                "; every element needs memory of its own (e.g. pass .contiguous())");
      span += a.t.stride(d) * (a.t.size(d) - 1);
    }
  }
  void distinct_elements(std::initializer_list<TensorArg> args) const {
    for (const auto& a : args) distinct_elements(a);
  }
  // Sizes the kernels index with 32-bit integers (TMA coordinates, kernel arguments).
  void below_2_31(std::initializer_list<std::pair<const char*, int64_t>> sizes) const {
    for (const auto& [name, v] : sizes)
      check_arg(v >= 0 && v < (int64_t(1) << 31), op_, name, " must be in [0, 2^31) (the kernels index it with "
                "32-bit integers), got ", v);
  }
  // `out` must not share memory with any input (results would depend on timing).
  void no_overlap(TensorArg out, std::initializer_list<TensorArg> inputs) const {
    if (is_meta(out.t)) return;
    const auto [lo, hi] = byte_range(out.t);
    for (const auto& in : inputs) {
      const auto [ilo, ihi] = byte_range(in.t);
      check_arg(hi <= ilo || ihi <= lo, op_, out.name, " overlaps ", in.name, " in memory; the output must not alias an input");
    }
  }

 private:
  static std::pair<uintptr_t, uintptr_t> byte_range(const Tensor& t) {
    const auto base = reinterpret_cast<uintptr_t>(t.data_ptr());
    if (t.numel() == 0) return {base, base};
    int64_t extent = 1;
    for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
    return {base, base + static_cast<uintptr_t>(extent) * t.element_size()};
  }

  const char* op_;
};

}  // namespace deep_gemm
