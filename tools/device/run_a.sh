set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 DG_JIT_CACHE_DIR=/tmp/dgcache
python3 -m pip install -q --no-deps --no-index --target /tmp/site dist/*.whl .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
cd tests
echo "== GPU tests (nvcc)"
timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu 2>&1 | tee "$OUT/pytest_nvcc.txt" | grep -E "passed|failed|FAILED|Error" | head -30
cd ..
echo "== SASS"
for f in /tmp/dgcache/cache/*/kernel.cubin; do
  n=$(basename "$(dirname "$f")"); s=$(cuobjdump --dump-sass "$f")
  echo "$n QGMMA=$(grep -c QGMMA <<<"$s") LDL=$(grep -c 'LDL' <<<"$s") STL=$(grep -c 'STL' <<<"$s")"
done | awk '{print} /LDL=[1-9]|STL=[1-9]/ {bad++} END {print "kernels with local memory:", bad+0}' > "$OUT/sass.txt"; tail -1 "$OUT/sass.txt"; grep -E "_sk|b256|kg" "$OUT/sass.txt" | head -8
echo "== bench fp8"
timeout 200 python3 -m deep_gemm.bench --suite fp8 --json "$OUT/bench_fp8.json" 2>&1 | tail -16
