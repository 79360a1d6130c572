// deep_jit: umbrella header. Include this one.
//
// A header-only JIT runtime for CUDA kernels: compile CUDA C++ to cubin with
// NVCC or NVRTC, cache the result on disk, load it through the driver API and
// launch it. Links no CUDA library: libcuda and libnvrtc are opened at run
// time. See README.md next to include/.
#pragma once

#include "error.hpp"
#include "types.hpp"
#include "env.hpp"
#include "hash.hpp"
#include "fork.hpp"
#include "fs.hpp"
#include "process.hpp"
#include "driver.hpp"
#include "compiler.hpp"
#include "compiler_nvcc.hpp"
#include "compiler_nvrtc.hpp"
#include "cache.hpp"
#include "runtime.hpp"
#include "launch.hpp"
#include "tma.hpp"
