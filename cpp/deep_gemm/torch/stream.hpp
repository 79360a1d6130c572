// torch's current CUDA stream, for kernels launched by deep_jit.
//
// Targeting torch 2.11's stable ABI, torch::stable::Stream has no native
// handle; the AOTI C shim's aoti_torch_get_current_cuda_stream does, but it
// lives in libtorch_cuda, which a CPU torch lacks and which torch loads with
// RTLD_LOCAL. So we find it at run time in the already-loaded library
// (RTLD_NOLOAD) instead of linking to it (DESIGN.md 1).
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>

#include "../common/errors.hpp"

namespace deep_gemm {

using GetCurrentCudaStreamFn = int32_t (*)(int32_t device_index, void** ret_stream);

inline GetCurrentCudaStreamFn find_current_stream_getter() {
  for (const char* lib : {"libtorch_cuda.so", "libtorch_hip.so"}) {
    if (void* handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD)) {
      if (void* sym = dlsym(handle, "aoti_torch_get_current_cuda_stream"))
        return reinterpret_cast<GetCurrentCudaStreamFn>(sym);
    }
  }
  return nullptr;
}

// Registered with deep_jit::set_stream_provider: every launch goes to the
// stream torch would use (side streams and graph capture included).
inline CUstream torch_current_stream(int device) {
  static const GetCurrentCudaStreamFn getter = find_current_stream_getter();
  if (!getter)
    throw std::runtime_error(
        "deep_gemm: this torch has no CUDA support (libtorch_cuda is not loaded); install a CUDA build of torch");
  void* stream = nullptr;
  if (getter(device, &stream) != 0)
    throw std::runtime_error(deep_jit::detail::cat("deep_gemm: torch could not report the current CUDA stream of device ", device));
  return static_cast<CUstream>(stream);
}

}  // namespace deep_gemm
