#!/usr/bin/env bash
# cibuildwheel before-all (inside the manylinux_2_28 image): the CUDA toolkit
# pieces the build and the CPU tests use: cuda.h (types for the extension) and
# nvcc (the JIT compile tests). DG_CUDA_MAJOR picks 12 (12.9) or 13 (13.0).
set -euo pipefail
major="${DG_CUDA_MAJOR:-13}"
case "$major" in
  12) ver=12-9 ;;
  13) ver=13-0 ;;
  *) echo "install_cuda.sh: DG_CUDA_MAJOR must be 12 or 13, got $major" >&2; exit 2 ;;
esac
dnf install -y dnf-plugins-core
dnf config-manager --add-repo "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/$(uname -m)/cuda-rhel8.repo"
dnf install -y "cuda-nvcc-$ver" "cuda-cudart-devel-$ver" "cuda-driver-devel-$ver" "cuda-crt-$ver" || \
  dnf install -y "cuda-nvcc-$ver" "cuda-cudart-devel-$ver" "cuda-driver-devel-$ver"
ln -sfn "/usr/local/cuda-${ver/-/.}" /usr/local/cuda
/usr/local/cuda/bin/nvcc --version
