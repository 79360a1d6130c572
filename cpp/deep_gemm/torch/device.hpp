// Which CUDA device an op with no tensor arguments refers to: torch's current
// one. On a CPU-only torch there is no current CUDA device; we then ask about
// device 0, so the driver layer reports the real problem (no driver, no GPU).
#pragma once

#include <torch/csrc/stable/accelerator.h>

namespace deep_gemm {

inline int current_cuda_device() {
  try {
    const auto index = torch::stable::accelerator::getCurrentDeviceIndex();
    return index >= 0 ? static_cast<int>(index) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace deep_gemm
