#!/usr/bin/env bash
# One device call: (re)build what is missing, check every case, time the bench shapes,
# dump SASS facts, print a compact table last. Logs go to $OUT (or ./build/out).
# Usage (repo root, on the GPU host): tools/kernel_bench/run_on_device.sh [SUITES...]
#   default suites: check1d2d check1d1d forced bench
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$HERE/build
OUT=${OUT:-$B/out}
mkdir -p "$OUT"
SUITES=${*:-"check1d2d check1d1d forced bench"}
export PATH=/usr/local/cuda/bin:/usr/local/cuda-13.0/bin:$PATH

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader

# The harness is built on the CPU machine; rebuild here if it does not start (other libc)
# or if the cubins are missing.
if ! { "$B/kernel_bench" 2>&1 || true; } | grep -q usage || [ ! -s "$B/kernels/kernels.txt" ]; then
    echo "building on device"; "$HERE/build.sh" "$(nproc)" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi

status=0
for s in $SUITES; do
    echo "== suite $s"
    # A protocol bug traps (watchdog) or hangs: the timeout keeps the other suites alive.
    timeout 240 "$B/kernel_bench" run "$B/kernels" "$s" > "$OUT/$s.log" 2>&1
    rc=$?; [ $rc -ne 0 ] && status=1
    echo "rc=$rc $(grep -c ' ok' "$OUT/$s.log") ok, $(grep -c 'FAIL' "$OUT/$s.log") failed"
    grep -E "FAIL|error|nonfinite" "$OUT/$s.log" | head -20
done

# SASS facts of the kernels the bench chose (device cuobjdump).
if command -v cuobjdump > /dev/null; then
    echo "== SASS (kernel: QGMMA LDL STL STSM UTMALDG UTMASTG)"
    for f in "$B"/kernels/*m0n*b*.cubin; do
        s=$(cuobjdump --dump-sass "$f")
        echo "$(basename "$f" .cubin) $(grep -c QGMMA <<< "$s") $(grep -c LDL <<< "$s") $(grep -c STL <<< "$s") $(grep -c STSM <<< "$s") $(grep -c UTMALDG <<< "$s") $(grep -c UTMASTG <<< "$s")"
    done > "$OUT/sass.txt"
    awk '{ q += ($2 > 0); l += $3 + $4 } END { printf "%d kernels, %d with QGMMA, %d LDL/STL total\n", NR, q, l }' "$OUT/sass.txt"
fi

echo "== table"
for s in $SUITES; do sed -n '/==== summary/,$p' "$OUT/$s.log"; done
exit $status
