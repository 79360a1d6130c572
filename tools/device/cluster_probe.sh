#!/usr/bin/env bash
# Why cluster-2 multicast measures slower (carry dist and .whl):
#  1. how many 2-CTA clusters of our size fit on the GPU at once;
#  2. sustained clock and power of the 4096x7168x16384 GEMM with cluster 1 and 2, back
#     to back for a few seconds each, alternating processes (nvidia-smi sampled alongside);
#  3. PC-sampling profiles (ncu source page) of cluster 1, cluster 2 and PROBE_EXTRA_CASE.
# Files in $OUT: smi_*.csv, source_*.csv, details_*.txt, sass_*.sass.
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
cat > /tmp/occ.cu <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
__global__ void probe() { extern __shared__ char s[]; if (threadIdx.x == 1023) s[0] = 0; }
int main() {
    const int sizes[] = {100000, 200000, 227000};
    for (int smem : sizes) for (int cs = 1; cs <= 4; cs *= 2) {
        cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(132); cfg.blockDim = dim3(384); cfg.dynamicSmemBytes = smem;
        cudaLaunchAttribute a; a.id = cudaLaunchAttributeClusterDimension;
        a.val.clusterDim.x = cs; a.val.clusterDim.y = 1; a.val.clusterDim.z = 1;
        cfg.attrs = &a; cfg.numAttrs = 1;
        int n = 0; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, probe, &cfg);
        printf("smem %6d B, cluster %d: at most %d clusters at once (%d CTAs) %s\n", smem, cs, n, n * cs,
               e == cudaSuccess ? "" : cudaGetErrorString(e));
    }
}
CU
nvcc -arch=sm_90a -o /tmp/occ /tmp/occ.cu && /tmp/occ
echo "== sustained (5 s each), median SM clock / power over the last 3 s"
for round in 1 2; do
  for c in 1 2; do
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 \
      > "$OUT/smi_c${c}_r${round}.csv" &
    smi=$!
    DG_SM90_FP8_CLUSTER=$c DG_PRINT_CONFIGS=$([ $round = 1 ] && echo 1 || echo 0) DG_CASE=dense:4096,7168,16384 \
      python3 tools/device/profile_case.py --steady 5 2>&1 | grep -E "steady|block|wrong|Error"
    kill $smi; wait $smi 2>/dev/null
    python3 - "$OUT/smi_c${c}_r${round}.csv" <<'PY'
import statistics, sys
rows = [[float(x) for x in l.split(",")] for l in open(sys.argv[1]) if l.strip()]
tail = rows[-30:]
print(f"   cluster file {sys.argv[1].split('/')[-1]}: {len(rows)} samples; last 3 s: SM clock median "
      f"{statistics.median(r[0] for r in tail):.0f} MHz, power median {statistics.median(r[1] for r in tail):.0f} W, "
      f"temp {tail[-1][2]:.0f} C")
PY
  done
done
profile() {  # name, env assignments...
  local name=$1; shift
  env "$@" python3 tools/device/profile_case.py 2 > /dev/null 2>&1  # compile outside the profiler
  env "$@" ncu --clock-control none -k regex:dg_entry --launch-skip 3 --launch-count 1 \
      --section SourceCounters --section WarpStateStats --section SpeedOfLight -o /tmp/prof_$name -f \
      python3 tools/device/profile_case.py 6 > "$OUT/ncu_$name.txt" 2>&1
  ncu --import /tmp/prof_$name.ncu-rep --page source --csv --print-source sass > "$OUT/source_$name.csv" 2>/dev/null
  ncu --import /tmp/prof_$name.ncu-rep --page details > "$OUT/details_$name.txt" 2>&1
  echo "== profile $name"; grep -E "Duration|SM Frequency|Compute \(SM\)|L2 Cache Throughput|DRAM Through" "$OUT/details_$name.txt" | head -6
}
profile c1 DG_SM90_FP8_CLUSTER=1 DG_CASE=dense:4096,7168,16384
profile c2 DG_SM90_FP8_CLUSTER=2 DG_CASE=dense:4096,7168,16384
[ -n "${PROBE_EXTRA_CASE:-}" ] && profile extra DG_CASE=$PROBE_EXTRA_CASE
for f in /tmp/dgcache/cache/*/kernel.cubin; do
  n=$(basename "$(dirname "$f")"); case $n in sm90_fp8*) cuobjdump --dump-sass "$f" > "$OUT/sass_$n.sass";; esac
done
ls "$OUT" | head -30
