// Fixed-width integer types for device code under both compilers. NVRTC has no
// <cstdint>; CCCL's <cuda/std/cstdint> provides the same types in cuda::std,
// which we lift into the global namespace as <cstdint> would.
#pragma once

#ifdef __CUDACC_RTC__
#include <cuda/std/cstdint>
using cuda::std::int8_t;
using cuda::std::int16_t;
using cuda::std::int32_t;
using cuda::std::int64_t;
using cuda::std::uint8_t;
using cuda::std::uint16_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
using cuda::std::uintptr_t;
#else
#include <cstdint>
#endif
