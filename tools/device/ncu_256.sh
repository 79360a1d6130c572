#!/usr/bin/env bash
# Nsight Compute profile of the dense FP8 GEMM on 4096x7168x16384 (the heuristics' choice,
# 256x128 since 2026-11-30): SM clock, throughputs, warp stall reasons per issued
# instruction, shared-memory traffic. Clocks left alone. Carry dist and .whl.
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
python3 tools/device/backend_speed.py   # compile outside the profiler, and time it
ncu --clock-control none -k regex:dg_entry --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio \
    python3 tools/device/backend_speed.py > "$OUT/ncu_256.txt" 2>&1
grep -E "SM Frequency|Duration|Throughput|Busy|Hit Rate|Warp Cycles|Eligible|Issued Warp|No Eligible|Shared|Bank" \
    "$OUT/ncu_256.txt" | head -40
echo "== stall reasons (warps per issued instruction, > 0.05)"
grep -E "smsp__average_warps_issue_stalled" "$OUT/ncu_256.txt" | awk '$NF+0 > 0.05' | sort -k3 -g -r | head -20
