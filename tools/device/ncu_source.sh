#!/usr/bin/env bash
# PC-sampling profile of one dense FP8 GEMM (DG_SHAPE="m,n,k", default 4096,7168,2048):
# per-SASS-instruction stall samples (ncu source page, CSV) to see where the warps wait,
# plus the SASS of the kernel. Carry dist and .whl. Files: $OUT/source.csv, $OUT/kernel.sass.
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
export DG_SHAPE=${DG_SHAPE:-4096,7168,2048}
python3 tools/device/backend_speed.py
ncu --clock-control none -k regex:dg_entry --launch-skip 5 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight -o /tmp/prof -f \
    python3 tools/device/backend_speed.py > "$OUT/ncu_run.txt" 2>&1
ncu --import /tmp/prof.ncu-rep --page source --csv --print-source sass > "$OUT/source.csv" 2> "$OUT/source.err"
ncu --import /tmp/prof.ncu-rep --page details > "$OUT/details.txt" 2>&1
grep -E "Duration|SM Frequency|Compute \(SM\)" "$OUT/details.txt" | head -5
for f in /tmp/dgcache/cache/*/kernel.cubin; do n=$(basename "$(dirname "$f")"); case $n in sm90_fp8*) cuobjdump --dump-sass "$f" > "$OUT/kernel.sass";; esac; done
echo "source.csv: $(wc -l < "$OUT/source.csv") lines; $(head -c 300 "$OUT/source.csv" | head -2)"
