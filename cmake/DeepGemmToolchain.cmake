# Finds what the extension builds against, without find_package(Torch) (which
# drags in CUDA/cuDNN discovery we do not need):
#   DG_TORCH_INCLUDE_DIRS  torch's headers (stable ABI headers live there)
#   DG_TORCH_LIBRARIES     libtorch_cpu and libc10 (the stable C shim lives in
#                          them; both are loaded by `import torch` before us)
#   DG_CUDA_INCLUDE_DIR    a directory holding cuda.h (types only)
#   DG_TORCH_TARGET_VERSION  the oldest torch whose stable ABI we target

find_package(Threads REQUIRED)
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Module)

# torch 2.11: the oldest release we verify on a GPU (DESIGN.md 1).
set(DG_TORCH_TARGET_VERSION "0x020b000000000000" CACHE STRING "TORCH_TARGET_VERSION for the stable ABI")

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import os, torch; print(os.path.dirname(torch.__file__))"
  OUTPUT_VARIABLE DG_TORCH_ROOT OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _dg_rc)
if(NOT _dg_rc EQUAL 0 OR NOT EXISTS "${DG_TORCH_ROOT}/include/torch/csrc/stable/library.h")
  message(FATAL_ERROR "deep_gemm: torch with stable-ABI headers not found for ${Python_EXECUTABLE}; "
                      "install torch>=2.11 in the build environment.")
endif()
set(DG_TORCH_INCLUDE_DIRS "${DG_TORCH_ROOT}/include")
find_library(DG_TORCH_CPU torch_cpu PATHS "${DG_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
find_library(DG_C10 c10 PATHS "${DG_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
set(DG_TORCH_LIBRARIES "${DG_TORCH_CPU}" "${DG_C10}")
message(STATUS "deep_gemm: torch at ${DG_TORCH_ROOT}, target ABI ${DG_TORCH_TARGET_VERSION}")

# cuda.h: from CUDAToolkit_ROOT / CUDA_HOME / CUDA_PATH / /usr/local/cuda, or the
# nvidia-cuda-runtime wheel. Only its declarations are used.
set(_dg_cuda_hints "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}" "${CUDAToolkit_ROOT}" /usr/local/cuda)
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
    "import importlib.util as u, os; s=u.find_spec('nvidia'); print(';'.join(os.path.join(p, d, 'include') for p in (s.submodule_search_locations if s else []) for d in ('cu13','cuda_runtime')))"
  OUTPUT_VARIABLE _dg_wheel_includes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
find_path(DG_CUDA_INCLUDE_DIR cuda.h
  HINTS ${_dg_cuda_hints} PATH_SUFFIXES include targets/x86_64-linux/include targets/sbsa-linux/include
  PATHS ${_dg_wheel_includes})
if(NOT DG_CUDA_INCLUDE_DIR)
  message(FATAL_ERROR "deep_gemm: cuda.h not found. Set CUDA_HOME to a CUDA toolkit, or pip install nvidia-cuda-runtime.")
endif()
message(STATUS "deep_gemm: cuda.h from ${DG_CUDA_INCLUDE_DIR}")
