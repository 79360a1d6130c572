#!/usr/bin/env bash
# Nsight Compute profile of one launch of the FP8 GEMM kernel (dg_entry) per bench case:
# speed of light (tensor pipe, shared memory, L2, DRAM), memory tables, stall reasons.
# Clocks left alone. Carry dist and .whl. The scale-layout kernel is a dg_entry too and
# runs before each GEMM (per-token scales): skip 3 lands on a GEMM.
#   NCU_CASES="dense:4096,7168,16384 contig:1 masked:1" bash tools/device/ncu_cases.sh
# A case may end in "@MxN" (DG_TILE: block sizes that are multiples of M, N) or "@bmB"
# (DG_SM90_FP8_BLOCK_M=B), e.g. "dense:4096,7168,16384@128x192".
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
metrics="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for spec in ${NCU_CASES:-dense:4096,7168,16384 contig:1 masked:1}; do
  c=${spec%@*}; opt=""; [ "$spec" != "$c" ] && opt=${spec#*@}
  tile=""; bm=""
  case "$opt" in bm*) bm=${opt#bm};; ?*) tile=$opt;; esac
  export DG_TILE=$tile
  if [ -n "$bm" ]; then export DG_SM90_FP8_BLOCK_M=$bm; else unset DG_SM90_FP8_BLOCK_M; fi
  f="$OUT/ncu_$(echo "$spec" | tr ':,@' '___').txt"
  DG_PRINT_CONFIGS=1 DG_CASE=$c python3 tools/device/profile_case.py 2 2>&1 | grep -E -- "-> block|rror|wrong result"  # compile and check outside the profiler
  DG_CASE=$c ncu --clock-control none -k regex:dg_entry --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      --section ComputeWorkloadAnalysis \
      --metrics "$metrics" python3 tools/device/profile_case.py 4 > "$f" 2>&1
  echo "== $spec"
  grep -E "SM Frequency|Duration|Throughput|Busy|Hit Rate|Shared|Bank|==ERR|rror" "$f" | head -30
  echo "-- stalls (> 0.1 warps per issued instruction)"
  grep -E "issue_stalled" "$f" | awk '$NF+0 > 0.1' | sort -k3 -g -r | head -8
done
