// Ops: scale-factor layouts (API.md P0 layout helpers) on the GPU. The Python
// facade (deep_gemm/_sf_layout.py) routes CPU tensors to plain torch and CUDA
// or meta tensors here.
#include <torch/csrc/stable/library.h>

#include "../torch/sf_layout.hpp"

namespace deep_gemm::ops {
namespace {

// Always a fresh tensor (the facade returns already-aligned inputs unchanged).
Tensor get_mn_major_tma_aligned_tensor(Tensor sf) {
  return mn_major_tma_aligned_copy(sf, "get_mn_major_tma_aligned_tensor");
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("get_mn_major_tma_aligned_tensor(Tensor sf) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("get_mn_major_tma_aligned_tensor", TORCH_BOX(&deep_gemm::ops::get_mn_major_tma_aligned_tensor));
}
