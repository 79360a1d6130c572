#!/usr/bin/env bash
# cibuildwheel before-all (inside the manylinux_2_28 image): the CUDA toolkit
# pieces the build and the CPU tests use: cuda.h (types for the extension) and
# nvcc (the JIT compile tests). DG_CUDA_MAJOR picks 12 (12.9) or 13 (13.0).
# x86_64 and aarch64 (NVIDIA's repository calls the server arm64 one "sbsa").
set -euo pipefail
major="${DG_CUDA_MAJOR:-13}"
case "$major" in
  12) ver=12-9 ;;
  13) ver=13-0 ;;
  *) echo "install_cuda.sh: DG_CUDA_MAJOR must be 12 or 13, got $major" >&2; exit 2 ;;
esac
case "$(uname -m)" in
  x86_64) repo_arch=x86_64 ;;
  aarch64) repo_arch=sbsa ;;
  *) echo "install_cuda.sh: no CUDA repository for $(uname -m)" >&2; exit 2 ;;
esac
dnf install -y dnf-plugins-core
dnf config-manager --add-repo "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/$repo_arch/cuda-rhel8.repo"
dnf install -y "cuda-nvcc-$ver" "cuda-cudart-devel-$ver" "cuda-driver-devel-$ver" "cuda-crt-$ver" || \
  dnf install -y "cuda-nvcc-$ver" "cuda-cudart-devel-$ver" "cuda-driver-devel-$ver"
ln -sfn "/usr/local/cuda-${ver/-/.}" /usr/local/cuda
/usr/local/cuda/bin/nvcc --version
