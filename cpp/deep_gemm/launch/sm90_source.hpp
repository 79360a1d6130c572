// What the JIT sources and launch contracts of every SM90 family share, in pure C++17 (no
// CUDA, torch or deep_jit headers, so tests and tools compile it as host code): the
// rendering of an entry's template-argument list, the shared-memory define, and the
// tensor-map spec that launch/common.hpp encodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deep_gemm::launch {

// An impl template's argument list, written in the template's parameter order. Arguments
// added with `trailing` may be left out where they and every later one equal the
// template's defaults: the list stops after the last one that does not (or after the last
// `always` one), so a kernel with all defaults keeps the short spelling its cache key has.
class TemplateArgs {
 public:
  TemplateArgs& always(std::string value) { return add(std::move(value), true); }
  TemplateArgs& trailing(std::string value, bool is_default) { return add(std::move(value), !is_default); }
  TemplateArgs& always(uint32_t value) { return always(std::to_string(value) + "u"); }
  TemplateArgs& always_bool(bool value) { return always(std::string(value ? "true" : "false")); }
  TemplateArgs& trailing_bool(bool value, bool default_value) {
    return trailing(value ? "true" : "false", value == default_value);
  }

  std::string str() const {
    std::string s;
    for (size_t i = 0; i < used_; ++i) s += (i ? ", " : "") + values_[i];
    return s;
  }

 private:
  TemplateArgs& add(std::string value, bool needed) {
    values_.push_back(std::move(value));
    if (needed) used_ = values_.size();
    return *this;
  }
  std::vector<std::string> values_;
  size_t used_ = 0;
};

// The launch's dynamic shared memory, for the kernel's compile-time check that its layout
// fits (sm90::launch_smem_fits): a host mirror that fell behind the layout fails to compile
// instead of overrunning shared memory.
inline std::string smem_bytes_define(int smem_bytes) {
  return "#define DG_SMEM_BYTES " + std::to_string(smem_bytes) + "\n";
}

// One tensor map, in the terms of deep_jit::make_tensor_map_2d (encode_tensor_map in
// launch/common.hpp). All use interleave none, L2 promotion 256B, OOB fill none (zeros),
// element strides 1.
enum class Sm90TmaDtype { kU8 /*e4m3*/, kF32, kBF16 };
struct Sm90TensorMapSpec {
  const char* operand;          // "a", "b", "sfa", "sfb", "d"
  Sm90TmaDtype dtype;
  uint64_t inner_elems;         // contiguous dimension
  uint64_t outer_elems;
  uint64_t outer_stride_bytes;  // multiple of 16
  uint32_t box_inner, box_outer;
  int swizzle_bytes;            // 0 (none), 32, 64 or 128
  // A third (batch) dimension, of box depth 1, where batch_elems > 0: a rank-3 map.
  uint64_t batch_elems = 0;
  uint64_t batch_stride_bytes = 0;
};

}  // namespace deep_gemm::launch
