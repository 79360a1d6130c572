#!/usr/bin/env bash
# Nsight Compute profile of one launch of the FP8 GEMM kernel (dg_entry) per bench case:
# speed of light (tensor pipe, shared memory, L2, DRAM), memory tables, stall reasons.
# Clocks left alone. Carry dist and .whl. The scale-layout kernel is a dg_entry too and
# runs before each GEMM (per-token scales): skip 3 lands on a GEMM.
#   NCU_CASES="dense:4096,7168,16384 contig:1 masked:1" bash tools/device/ncu_cases.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site dist/*.whl .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site DG_JIT_CACHE_DIR=/tmp/dgcache
metrics="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for c in ${NCU_CASES:-dense:4096,7168,16384 contig:1 masked:1}; do
  f="$OUT/ncu_${c//[:,]/_}.txt"
  DG_CASE=$c python3 tools/device/profile_case.py 2   # compile and check outside the profiler
  DG_CASE=$c ncu --clock-control none -k regex:dg_entry --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      --section ComputeWorkloadAnalysis \
      --metrics "$metrics" python3 tools/device/profile_case.py 4 > "$f" 2>&1
  echo "== $c"
  grep -E "SM Frequency|Duration|Throughput|Busy|Hit Rate|Shared|Bank|==ERR|rror" "$f" | head -30
  echo "-- stalls (> 0.1 warps per issued instruction)"
  grep -E "issue_stalled" "$f" | awk '$NF+0 > 0.1' | sort -k3 -g -r | head -8
done
