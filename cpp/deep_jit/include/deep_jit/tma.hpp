// deep_jit: building TMA tensor maps (CUtensorMap) for kernels.
//
// The driver answers bad tensor-map arguments with a bare
// CUDA_ERROR_INVALID_VALUE, so every documented constraint is checked here
// first and reported by name. The checks need no GPU or driver.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "driver.hpp"
#include "error.hpp"

namespace deep_jit {

// A tiled, non-interleaved tensor map with unit element strides.
struct TensorMapSpec {
  const void* base = nullptr;
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  uint32_t rank = 0;
  uint64_t dims[5] = {};           // elements, innermost first
  uint64_t strides_bytes[4] = {};  // stride of dims[1..rank-1], in bytes
  uint32_t box[5] = {};            // elements per copy, innermost first
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
};

namespace detail {

// Bytes per element; an Error for types this helper does not handle.
inline uint32_t tensor_map_element_bytes(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: fail(cat("Tensor map data type ", static_cast<int>(dtype), " is not supported by deep_jit."));
  }
}

// The swizzle pattern's span in bytes (0 for none); 0 also for modes we do
// not know, which are then left to the driver to judge.
inline uint32_t swizzle_span_bytes(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
    default: return 0;
  }
}

// Throws an Error naming the first constraint `s` breaks (cuTensorMapEncodeTiled's
// documented rules, for non-interleaved maps with unit element strides).
inline void check_tensor_map(const TensorMapSpec& s) {
  const char* who = "Cannot build a TMA tensor map: ";
  if (s.rank < 1 || s.rank > 5) fail(cat(who, "rank ", s.rank, " is outside 1..5."));
  if (!s.base) fail(cat(who, "the base address is null."));
  if (reinterpret_cast<uintptr_t>(s.base) % 16 != 0)
    fail(cat(who, "the base address ", reinterpret_cast<uintptr_t>(s.base), " is not 16-byte aligned."));
  uint32_t elem = tensor_map_element_bytes(s.dtype);
  for (uint32_t i = 0; i < s.rank; ++i) {
    if (s.dims[i] == 0 || s.dims[i] > (1ULL << 32))
      fail(cat(who, "dimension ", i, " has ", s.dims[i], " elements (must be 1..2^32)."));
    if (s.box[i] == 0 || s.box[i] > 256)
      fail(cat(who, "box dimension ", i, " is ", s.box[i], " (must be 1..256)."));
  }
  for (uint32_t i = 0; i + 1 < s.rank; ++i) {
    uint64_t stride = s.strides_bytes[i];
    if (stride % 16 != 0 || stride >= (1ULL << 40))
      fail(cat(who, "the stride of dimension ", i + 1, " is ", stride, " bytes (must be a multiple of 16 below 2^40)."));
  }
  if (s.rank >= 2 && s.dims[1] > 1 && s.strides_bytes[0] < s.dims[0] * elem)
    fail(cat(who, "the stride of dimension 1 (", s.strides_bytes[0], " bytes) is smaller than a row of ", s.dims[0],
             " elements (", s.dims[0] * elem, " bytes)."));
  uint64_t box_inner_bytes = uint64_t(s.box[0]) * elem;
  if (box_inner_bytes % 16 != 0)
    fail(cat(who, "the inner box dimension is ", box_inner_bytes, " bytes (must be a multiple of 16)."));
  uint32_t span = swizzle_span_bytes(s.swizzle);
  if (span != 0 && box_inner_bytes > span)
    fail(cat(who, "the inner box dimension is ", box_inner_bytes, " bytes, more than the ", span,
             "-byte swizzle span."));
}

inline bool same_tensor_map_spec(const TensorMapSpec& a, const TensorMapSpec& b) {
  if (a.base != b.base || a.dtype != b.dtype || a.rank != b.rank || a.swizzle != b.swizzle) return false;
  for (uint32_t i = 0; i < a.rank; ++i) {
    if (a.dims[i] != b.dims[i] || a.box[i] != b.box[i]) return false;
    if (i + 1 < a.rank && a.strides_bytes[i] != b.strides_bytes[i]) return false;
  }
  return true;
}

inline uint64_t tensor_map_spec_hash(const TensorMapSpec& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(reinterpret_cast<uintptr_t>(s.base));
  mix((uint64_t(s.dtype) << 40) | (uint64_t(s.swizzle) << 8) | s.rank);
  for (uint32_t i = 0; i < s.rank && i < 5; ++i) {
    mix(s.dims[i]);
    mix(s.box[i]);
    if (i + 1 < s.rank) mix(s.strides_bytes[i]);
  }
  return h ^ (h >> 29);
}

// The maps a thread encoded recently, by spec (direct-mapped). cuTensorMapEncodeTiled
// costs ~0.5 us of CPU per map, and a GEMM launch needs four: a call that repeats an
// earlier call's operands (same addresses and geometry, as a model's layers do) takes
// them from here. A map is a pure function of its spec, so a hit is always exact.
class TensorMapMemo {
 public:
  static constexpr size_t kSlots = 128;

  const CUtensorMap* find(const TensorMapSpec& s) const {
    const Slot& slot = slots_[tensor_map_spec_hash(s) % kSlots];
    return slot.used && same_tensor_map_spec(slot.spec, s) ? &slot.map : nullptr;
  }

  void put(const TensorMapSpec& s, const CUtensorMap& map) {
    Slot& slot = slots_[tensor_map_spec_hash(s) % kSlots];
    slot.used = true;
    slot.spec = s;
    slot.map = map;
  }

 private:
  struct Slot {
    CUtensorMap map;
    TensorMapSpec spec;
    bool used = false;
  };
  Slot slots_[kSlots] = {};
};

}  // namespace detail

// A tiled tensor map of rank 1..5 (dims innermost first). Zero fill out of
// bounds, 256-byte L2 promotion, no interleave. Memoised per thread (TensorMapMemo).
inline CUtensorMap make_tensor_map(const TensorMapSpec& s) {
  // On the heap (32 KB): a large thread_local in a dlopen'ed library could exhaust static TLS.
  thread_local std::unique_ptr<detail::TensorMapMemo> memo = std::make_unique<detail::TensorMapMemo>();
  if (const CUtensorMap* hit = memo->find(s)) return *hit;
  detail::check_tensor_map(s);
  CUtensorMap map{};
  cuuint64_t dims[5];
  cuuint64_t strides[4];
  cuuint32_t box[5];
  cuuint32_t elem_strides[5];
  for (uint32_t i = 0; i < s.rank; ++i) {
    dims[i] = s.dims[i];
    box[i] = s.box[i];
    elem_strides[i] = 1;
    if (i + 1 < s.rank) strides[i] = s.strides_bytes[i];
  }
  CUresult r = detail::driver().tensor_map_encode_tiled(
      &map, s.dtype, s.rank, const_cast<void*>(s.base), dims, strides, box, elem_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, s.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  detail::check(r, "cuTensorMapEncodeTiled", detail::cat("encoding a rank-", s.rank, " TMA tensor map"));
  memo->put(s, map);
  return map;
}

// A 2-D tensor map over a row-major matrix of `outer_elems` rows of
// `inner_elems` elements, rows `outer_stride_bytes` apart; each TMA copy moves
// a box of `box_outer` rows by `box_inner` elements.
inline CUtensorMap make_tensor_map_2d(const void* base, CUtensorMapDataType dtype, uint64_t inner_elems,
                                      uint64_t outer_elems, uint64_t outer_stride_bytes, uint32_t box_inner,
                                      uint32_t box_outer, CUtensorMapSwizzle swizzle) {
  TensorMapSpec s;
  s.base = base;
  s.dtype = dtype;
  s.rank = 2;
  s.dims[0] = inner_elems;
  s.dims[1] = outer_elems;
  s.strides_bytes[0] = outer_stride_bytes;
  s.box[0] = box_inner;
  s.box[1] = box_outer;
  s.swizzle = swizzle;
  return make_tensor_map(s);
}

}  // namespace deep_jit
