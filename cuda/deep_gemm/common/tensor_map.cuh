// CUtensorMap for kernel parameters. NVCC gets it from cuda.h; NVRTC cannot
// include cuda.h (it pulls in host C headers), so there we declare the same
// opaque, 64-byte-aligned 128-byte struct the driver API defines.
#pragma once

#ifdef __CUDACC_RTC__
typedef struct alignas(64) CUtensorMap_st {
    unsigned long long opaque[16];
} CUtensorMap;
#else
#include <cuda.h>
#endif
