#!/usr/bin/env bash
# A/B of builds on the device (carry dist and .whl): dist/*.whl ("new") against
# dist/old/*.whl ("old") and any more builds named in AB_MORE (directories dist/<name>/,
# made with tools/build_variant.sh). The bench suites run without peers, each build in its
# own process, in alternating order, twice; first come the GPU tests (and memcheck) of
# every build that is not "old".
# AB_BUILDS replaces the whole list (e.g. AB_BUILDS="new late": no dist/old needed).
# The benches build their kernels with DG_JIT_PTXAS_CHECK=1: a kernel that spills fails
# loudly instead of being timed (an A/B on 2026-12-02 once timed two spilling kernels of a variant).
#   AB_SUITES="grouped" AB_TESTS="test_grouped.py" AB_SANITIZE=1 AB_MORE="late" bash tools/device/wheel_ab.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
builds="${AB_BUILDS:-new old ${AB_MORE:-}}"
wheel_dir() { case $1 in new) echo dist;; *) echo "dist/$1";; esac; }
for v in $builds; do
  python3 -m pip install -q --no-deps --no-index --target "/tmp/site_$v" "$(wheel_dir "$v")"/*.whl .whl/*.whl || exit 1
done
for v in $builds; do
  [ "$v" = old ] && continue
  if [ -n "${AB_TESTS:-}" ]; then
    echo "== GPU tests ($v): $AB_TESTS"
    (cd tests && PYTHONPATH=/tmp/site_$v DG_JIT_CACHE_DIR=/tmp/cache_$v timeout 300 python3 -m pytest -q \
       -p no:cacheprovider -m gpu $AB_TESTS 2>&1 | tee "$OUT/pytest_$v.txt" | grep -E "passed|failed|FAILED|Error" | head -20)
  fi
  if [ -n "${AB_SANITIZE:-}" ]; then
    echo "== compute-sanitizer memcheck ($v), BLOCK_M 256 edge layouts"
    PYTHONPATH=/tmp/site_$v DG_JIT_CACHE_DIR=/tmp/cache_$v DG_DEV_SM90_FP8_BLOCK_M=256 timeout 240 \
      compute-sanitizer --tool memcheck python3 tests/forced_block_m_child.py 2>&1 | grep -E "ERROR SUMMARY|rror" | tail -4
  fi
done
for round in 1 2; do
  for v in $builds; do
    for suite in ${AB_SUITES:-grouped}; do
      echo "== $v $suite (round $round)"
      PYTHONPATH=/tmp/site_$v DG_JIT_CACHE_DIR=/tmp/cache_$v DG_JIT_PTXAS_CHECK=1 timeout 150 python3 -m deep_gemm.bench --suite "$suite" \
        --no-peers --skip-extras --json "$OUT/ab_${suite}_${v}_${round}.json" 2>&1 | grep -E "^(fp8|grouped) |rror" \
        | awk '/rror/ {print; next} {print $2, $3, $4, $5, $6, $7, $8}'
    done
  done
done
