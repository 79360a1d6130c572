// Scale factors in the layout the SM90 GEMMs load: fp32, MN-major, each column
// padded to a multiple of 4 rows (16 bytes). Shared by the GEMM ops (which
// convert on the fly, as upstream does) and the get_mn_major_tma_aligned_tensor op.
#pragma once

#include <torch/csrc/stable/ops.h>

#include "../launch/sf_layout.hpp"
#include "tensor_checks.hpp"

namespace deep_gemm {

inline int64_t tma_align4(int64_t x) { return (x + 3) / 4 * 4; }

// True when sf ([mn, kb] or [g, mn, kb]) already has the required strides.
inline bool is_mn_major_tma_aligned(const Tensor& sf) {
  const int64_t r = sf.dim();
  const int64_t mn = sf.size(r - 2), kb = sf.size(r - 1), pad = tma_align4(mn);
  const bool inner = (sf.stride(r - 2) == 1 || mn <= 1) && (sf.stride(r - 1) == pad || kb <= 1);
  return inner && (r == 2 || sf.size(0) <= 1 || sf.stride(0) == pad * kb);
}

// Fresh, uninitialised, contiguous fp32 storage of shape[0, ndim) (ndim <= 3) on sf's
// device. Through the C shim's empty_strided (one unboxed call) rather than
// torch::stable::new_empty, which at our target ABI (2.11) goes through the boxed dispatcher;
// shape and strides stay on the stack: this runs on every GEMM call that converts its scales.
inline Tensor empty_on_device_of(const Tensor& sf, const int64_t* shape, int64_t ndim, int32_t dtype) {
  int64_t strides[3];
  check_arg(ndim >= 1 && ndim <= 3, "empty_on_device_of", "expected 1 to 3 dimensions, got ", ndim);
  int64_t step = 1;
  for (int64_t i = ndim - 1; i >= 0; --i) {
    strides[i] = step;
    step *= shape[i];
  }
  int32_t device_type = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(sf.get(), &device_type));
  AtenTensorHandle out = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(
      aoti_torch_empty_strided(ndim, shape, strides, dtype, device_type, sf.get_device_index(), &out));
  return Tensor(out);
}

inline Tensor empty_f32_on_device_of(const Tensor& sf, const int64_t* shape, int64_t ndim) {
  return empty_on_device_of(sf, shape, ndim, aoti_torch_dtype_float32());
}

inline void check_sf(const Tensor& sf, const char* op) {
  check_arg(sf.dim() == 2 || sf.dim() == 3, op, "scale factors must be 2-D or 3-D, got shape ", shape_str(sf));
  check_arg(sf.scalar_type() == ScalarType::Float, op, "scale factors must be torch.float32 on SM90, got ",
            dtype_name(sf.scalar_type()));
}

// Fresh storage [g, kb, pad] (or [kb, pad]) holding `sf` in the required layout, filled by
// the layout kernel on the current stream. valid_rows (device int32 [g], nullptr: all rows):
// only rows below valid_rows[g] of group g are converted, the rest is left unwritten
// (see the impl; for the masked GEMM, which never stores those rows' results).
// zero_word (device int32, nullptr: none): set to 0 by the layout kernel.
inline Tensor mn_major_tma_aligned_storage(const Tensor& sf, const char* op, const int* valid_rows = nullptr,
                                           int* zero_word = nullptr) {
  check_sf(sf, op);
  const bool batched = sf.dim() == 3;
  const int64_t g = batched ? sf.size(0) : 1, mn = sf.size(batched), kb = sf.size(batched + 1), pad = tma_align4(mn);
  const int64_t storage_shape[3] = {g, kb, pad};  // [kb, pad] when not batched
  Tensor storage = empty_f32_on_device_of(sf, storage_shape + (batched ? 0 : 1), batched ? 3 : 2);
  if (is_meta(sf) || sf.numel() == 0) return storage;
  check_arg(sf.is_cuda(), op, "scale factors must be a CUDA tensor here, got one on ", sf.is_cpu() ? "the CPU" : "another device");
  launch::MnMajorSfProblem p;
  p.in = static_cast<const float*>(sf.data_ptr());
  p.out = static_cast<float*>(storage.data_ptr());
  p.groups = g;
  p.mn = mn;
  p.kb = kb;
  p.stride_g = batched ? sf.stride(0) : 0;
  p.stride_mn = sf.stride(batched);
  p.stride_k = sf.stride(batched + 1);
  p.out_ld = pad;
  p.valid_rows = valid_rows;
  p.zero_word = zero_word;
  p.device = sf.get_device_index();
  launch::MnMajorSfLauncher::get().run(p);
  return storage;
}

// A converted copy of `sf` with sf's shape: the [.., mn, kb] view of the storage above.
inline Tensor mn_major_tma_aligned_copy(const Tensor& sf, const char* op) {
  const bool batched = sf.dim() == 3;
  Tensor storage = mn_major_tma_aligned_storage(sf, op);
  Tensor transposed = torch::stable::transpose(storage, batched, batched + 1);
  return torch::stable::narrow(transposed, batched, 0, sf.size(batched));
}

// For the kernels, which only take the address: `sf` itself when it already has the
// required layout, else the storage of a converted copy (no views built on the call path).
// valid_rows, zero_word: as for mn_major_tma_aligned_storage (zero_word is left alone when
// no conversion runs: the caller can tell by the returned address).
inline Tensor mn_major_tma_aligned_buffer(const Tensor& sf, const char* op, const int* valid_rows = nullptr,
                                          int* zero_word = nullptr) {
  check_sf(sf, op);
  return is_mn_major_tma_aligned(sf) ? sf : mn_major_tma_aligned_storage(sf, op, valid_rows, zero_word);
}

}  // namespace deep_gemm
