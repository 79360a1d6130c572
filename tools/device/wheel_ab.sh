#!/usr/bin/env bash
# A/B of two builds on the device (carry dist and .whl): dist/*.whl ("new") against
# dist/old/*.whl ("old"), the bench suites without peers in alternating processes, twice
# each, after the GPU tests of the new build.
#   AB_SUITES="grouped" AB_TESTS="test_grouped.py" AB_SANITIZE=1 bash tools/device/wheel_ab.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-index --target /tmp/site_new dist/*.whl .whl/*.whl || exit 1
python3 -m pip install -q --no-deps --no-index --target /tmp/site_old dist/old/*.whl .whl/*.whl || exit 1
if [ -n "${AB_TESTS:-}" ]; then
  echo "== GPU tests (new): $AB_TESTS"
  (cd tests && PYTHONPATH=/tmp/site_new DG_JIT_CACHE_DIR=/tmp/cache_new timeout 300 python3 -m pytest -q \
     -p no:cacheprovider -m gpu $AB_TESTS 2>&1 | tee "$OUT/pytest.txt" | grep -E "passed|failed|FAILED|Error" | head -20)
fi
if [ -n "${AB_SANITIZE:-}" ]; then
  echo "== compute-sanitizer memcheck (new), BLOCK_M 256 edge layouts"
  PYTHONPATH=/tmp/site_new DG_JIT_CACHE_DIR=/tmp/cache_new DG_SM90_FP8_BLOCK_M=256 timeout 240 \
    compute-sanitizer --tool memcheck python3 tests/forced_block_m_child.py 2>&1 | grep -E "ERROR SUMMARY|rror" | tail -4
fi
for round in 1 2; do
  for v in new old; do
    for suite in ${AB_SUITES:-grouped}; do
      echo "== $v $suite (round $round)"
      PYTHONPATH=/tmp/site_$v DG_JIT_CACHE_DIR=/tmp/cache_$v timeout 150 python3 -m deep_gemm.bench --suite "$suite" \
        --no-peers --skip-extras --json "$OUT/ab_${suite}_${v}_${round}.json" 2>&1 | grep -E "^(fp8|grouped) " \
        | awk '{print $2, $3, $4, $5, $6, $7, $8}'
    done
  done
done
