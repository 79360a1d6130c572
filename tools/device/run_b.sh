# The full device check (carry dist and .whl): GPU tests, SASS of
# every cached kernel, then the benches.
#   DG_TESTS="test_fp8_gemm.py test_grouped.py"  test files (default: all of tests/)
#   DG_BENCH_SUITES="fp8 grouped"                 bench suites ("none" to skip)
#   DG_SANITIZE=1                                 also compute-sanitizer memcheck of the new paths
#   DG_TEST_TIMEOUT=420                           seconds for the tests (default 330)
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
cd tests
echo "== GPU tests (nvcc)"
timeout "${DG_TEST_TIMEOUT:-330}" python3 -m pytest -q -p no:cacheprovider -m gpu ${DG_TESTS:-} 2>&1 | tee "$OUT/pytest_nvcc.txt" | grep -E "passed|failed|FAILED|Error" | head -30
cd ..
echo "== SASS"
# Per kernel, one disassembly: QGMMA and local-memory counts, and the stage releases issued
# with a shared-memory read still in flight (tools/sass_release_check.py; expected none).
: > "$OUT/sass_releases.txt"
for f in /tmp/dgcache/cache/*/kernel.cubin; do
  n=$(basename "$(dirname "$f")"); s=$(cuobjdump --dump-sass "$f")
  echo "$n QGMMA=$(grep -c QGMMA <<<"$s") LDL=$(grep -c 'LDL' <<<"$s") STL=$(grep -c 'STL' <<<"$s")"
  python3 tools/sass_release_check.py "${n%%-*}" <<<"$s" >> "$OUT/sass_releases.txt"
done > "$OUT/sass.txt"; grep -E "LDL=[1-9]|STL=[1-9]" "$OUT/sass.txt"; echo "$(wc -l < "$OUT/sass.txt") kernels checked"
echo "stage releases with an LDS in flight (expected 0): $(wc -l < "$OUT/sass_releases.txt") $(cut -d: -f1 "$OUT/sass_releases.txt" | sort -u | tr '\n' ' ')"
if [ -n "${DG_SANITIZE:-}" ]; then
  # memcheck of the 256-row m-grouped paths (contiguous tiles split at their middle row,
  # slabs skipped, direct row stores) and of the dense paths of tools/device/sanitize_new_paths.py.
  echo "== compute-sanitizer (memcheck)"
  DG_DEV_SM90_FP8_BLOCK_M=256 timeout 240 compute-sanitizer --tool memcheck python3 tests/forced_block_m_child.py 2>&1 \
    | grep -E "CASE|ERROR SUMMARY|Error|error" | tail -12
  timeout 200 compute-sanitizer --tool memcheck python3 tools/device/sanitize_new_paths.py 2>&1 | tail -2
fi
for suite in ${DG_BENCH_SUITES:-fp8 grouped}; do
  [ "$suite" = none ] && continue
  echo "== bench $suite"
  timeout 200 python3 -m deep_gemm.bench --suite "$suite" --json "$OUT/bench_$suite.json" 2>&1 | grep -v "^\[deep_gemm.bench\]" | tail -16
done
