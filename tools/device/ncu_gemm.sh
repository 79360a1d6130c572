#!/usr/bin/env bash
# Nsight Compute profile of the FP8 GEMM on 4096x7168x16384 (the kernel named
# dg_entry; layout kernels are skipped by name). Clocks left alone.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site dist/*.whl .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site DG_JIT_CACHE_DIR=/tmp/dgcache
python3 tools/device/backend_speed.py   # compile outside the profiler
ncu --clock-control none -k regex:dg_entry --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy \
    python3 tools/device/backend_speed.py > "$OUT/ncu.txt" 2>&1
grep -E "Duration|Throughput|Pipe|Busy|Shared|L1/TEX Hit|L2 Hit|Stall|Warp Cycles|Issued|Eligible|Registers|Bank" "$OUT/ncu.txt" | head -60
