#!/usr/bin/env bash
# Nsight Compute profile of the FP8 GEMM on 4096x7168x16384 (the kernel named
# dg_entry; layout kernels are skipped by name), with the heuristics' choice and
# with DG_SM90_FP8_CLUSTER=2 (TMA multicast). Clocks left alone.
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
for cluster in "" 2; do
  export DG_SM90_FP8_CLUSTER=$cluster
  python3 tools/device/backend_speed.py   # compile outside the profiler, and time it
  ncu --clock-control none -k regex:dg_entry --launch-skip 5 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats \
      python3 tools/device/backend_speed.py > "$OUT/ncu_cluster${cluster:-auto}.txt" 2>&1
  echo "== cluster ${cluster:-auto}"
  grep -E "dg_entry|Duration|Throughput|Busy|Hit Rate|Warp Cycles|Eligible|Issued Warp|No Eligible|Active Warps" \
      "$OUT/ncu_cluster${cluster:-auto}.txt" | head -30
done
