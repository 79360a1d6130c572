#!/usr/bin/env bash
# Kernel-header variants on the device without rebuilding the wheel (carry dist and .whl):
# the wheel is installed once, then for each variant directory (a partial copy of
# cuda/deep_gemm/, e.g. exp/fence/impls/sm90_fp8_gemm_1d1d.cuh) its files replace the
# installed headers, COMMAND runs with a JIT cache of its own (the kernels recompile from
# the variant), and the wheel's headers are put back. The name "wheel" runs the wheel as
# built. Session 23 ran its 1D1D variants this way. Host code (cpp/) needs a wheel build
# (tools/build_variant.sh and wheel_ab.sh).
#   HV_ROUNDS=2 bash tools/device/header_variants.sh "python3 -m deep_gemm.bench --suite grouped --no-peers --skip-extras" wheel exp/fence exp/early
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh" 2>/dev/null
cmd=$1; shift
inc=/tmp/site/deep_gemm/include/deep_gemm
rm -rf /tmp/hv_wheel && cp -r "$inc" /tmp/hv_wheel
for round in $(seq "${HV_ROUNDS:-1}"); do
  for v in "$@"; do
    rm -rf "$inc" && cp -r /tmp/hv_wheel "$inc"
    [ "$v" = wheel ] || cp -r "$v"/. "$inc"/
    name=$(basename "$v")
    echo "== $name (round $round)"
    DG_JIT_CACHE_DIR="/tmp/hv_cache_$name" HV_VARIANT="$name" bash -c "$cmd"
  done
done
rm -rf "$inc" && cp -r /tmp/hv_wheel "$inc"
