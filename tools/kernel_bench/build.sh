#!/usr/bin/env bash
# Builds the harness and every kernel of its case list (cubins), and reports per kernel:
# registers, spills/stack (ptxas -v), and SASS counts (QGMMA, LDL/STL) when cuobjdump exists.
# Usage: tools/kernel_bench/build.sh [JOBS]     (run from anywhere; no GPU needed)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda-13.0/bin/nvcc)}
JOBS=${1:-$(nproc)}
B=$HERE/build
mkdir -p "$B/kernels"
ARCH="-gencode=arch=compute_90a,code=sm_90a"

"$NVCC" -std=c++17 -O2 $ARCH -o "$B/kernel_bench" "$HERE/kernel_bench.cu"
rm -f "$B"/kernels/*.cu "$B"/kernels/*.log
"$B/kernel_bench" gen "$B/kernels"

compile_one() {
    local name=$1
    "$NVCC" -std=c++17 -cubin $ARCH -DDG_MBAR_TIMEOUT -Xptxas -v -I"$ROOT/cuda" \
        -o "$B/kernels/$name.cubin" "$B/kernels/$name.cu" > "$B/kernels/$name.log" 2>&1 \
        || { echo "COMPILE FAILED: $name"; cat "$B/kernels/$name.log"; return 1; }
}
export -f compile_one; export NVCC ARCH ROOT B
xargs -P "$JOBS" -I{} bash -c 'compile_one {}' < "$B/kernels/kernels.txt"

# Resource report: any stack frame or spill is a failure.
bad=0
while read -r name; do
    log="$B/kernels/$name.log"
    if grep -q "bytes stack frame" "$log" && ! grep -q " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" "$log"; then
        echo "SPILL/STACK: $name"; grep "stack frame" "$log"; bad=1
    fi
    if grep -q "C7508\|setmaxnreg.*ignored" "$log"; then echo "SETMAXNREG IGNORED: $name"; bad=1; fi
    # C7514: ptxas serialised the wgmmas (since v4 the overlap (_o) variant must be clean too).
    if grep -q "C7514" "$log"; then echo "WGMMA SERIALISED: $name"; bad=1; fi
done < "$B/kernels/kernels.txt"
if command -v cuobjdump > /dev/null; then
    printf "%-60s %6s %4s %4s %5s\n" kernel QGMMA LDL STL STSM > "$B/sass_summary.txt"
    while read -r name; do
        s=$(cuobjdump --dump-sass "$B/kernels/$name.cubin")
        printf "%-60s %6d %4d %4d %5d\n" "$name" "$(grep -c QGMMA <<< "$s")" "$(grep -c 'LDL' <<< "$s")" \
            "$(grep -c 'STL' <<< "$s")" "$(grep -c STSM <<< "$s")" >> "$B/sass_summary.txt"
    done < "$B/kernels/kernels.txt"
    awk 'NR > 1 && ($2 == 0 || $3 > 0 || $4 > 0) { print "SASS BAD: " $0; bad = 1 } END { exit bad }' "$B/sass_summary.txt" || bad=1
    echo "SASS: $(($(wc -l < "$B/sass_summary.txt") - 1)) kernels checked (QGMMA present, no LDL/STL)"
fi
echo "kernels: $(wc -l < "$B/kernels/kernels.txt"), resource check: $([ $bad = 0 ] && echo clean || echo PROBLEMS)"
exit $bad
