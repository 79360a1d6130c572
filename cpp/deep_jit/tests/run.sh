#!/bin/sh
# Builds and runs the deep_jit self-test.
#   cpp/deep_jit/tests/run.sh            (from anywhere)
# Environment:
#   CXX                  compiler (default g++)
#   CUDA_INCLUDE         directory holding cuda.h (default /usr/local/cuda/include)
#   PYTHON               a Python whose site-packages may hold the nvidia-cuda-nvrtc wheel
#                        (used to find libnvrtc when DG_JIT_NVRTC_LIBRARY is unset)
#   DG_JIT_*             passed through to the runtime
set -eu
here=$(cd "$(dirname "$0")" && pwd)
include=$(cd "$here/../include" && pwd)
CXX=${CXX:-g++}
CUDA_INCLUDE=${CUDA_INCLUDE:-/usr/local/cuda/include}
if [ -n "${DJ_BUILD_DIR:-}" ]; then
  build=$DJ_BUILD_DIR
else
  build=$(mktemp -d /tmp/deep_jit_selftest_build.XXXXXX)
  trap 'rm -rf "$build"' EXIT
fi

"$CXX" -std=c++20 -O1 -g -Wall -Wextra -Wpedantic -Werror -DDJ_DISABLE_GIL \
  -I"$include" -I"$CUDA_INCLUDE" "$here/selftest.cpp" -o "$build/selftest" -ldl -lpthread

# Find libnvrtc in a Python environment's nvidia wheels (cu13 or cu12 layout).
if [ -z "${DG_JIT_NVRTC_LIBRARY:-}" ]; then
  for py in ${PYTHON:-} python3 /opt/dgdev/bin/python; do
    command -v "$py" >/dev/null 2>&1 || continue
    lib=$("$py" - <<'PY' 2>/dev/null || true
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for pattern in ("nvidia/cu13/lib/libnvrtc.so.*", "nvidia/cuda_nvrtc/lib/libnvrtc.so.*"):
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            if "builtins" not in path and "alt" not in os.path.basename(path):
                print(path); sys.exit(0)
PY
)
    if [ -n "$lib" ]; then export DG_JIT_NVRTC_LIBRARY="$lib"; break; fi
  done
fi
echo "selftest: nvrtc library: ${DG_JIT_NVRTC_LIBRARY:-<none found>}"
"$build/selftest" "$here"
