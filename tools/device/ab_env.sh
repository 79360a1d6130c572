#!/usr/bin/env bash
# A/B of a process-wide knob on the device (carry dist and .whl): the bench suites without
# peers, alternating the knob's values in separate processes, twice each, so clock drift
# shows up as a spread rather than as a difference.
#   AB_VAR=DG_DEV_SM90_FP8_BLOCK_M AB_VALUES="256 128" AB_SUITES="fp8 grouped" \
#   AB_TESTS="test_fp8_gemm.py test_grouped.py" bash tools/device/ab_env.sh
# AB_ONLY=REGEX: only the rows whose label matches (the bench's --only). A value of 0 is
# the knob's "unset" for the DG_DEV_* knobs.
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
if [ -n "${AB_TESTS:-}" ]; then
  echo "== GPU tests: $AB_TESTS"
  (cd tests && timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu $AB_TESTS 2>&1 | tee "$OUT/pytest.txt" \
     | grep -E "passed|failed|FAILED|Error" | head -20)
fi
for round in 1 2; do
  for v in ${AB_VALUES:?}; do
    for suite in ${AB_SUITES:-fp8 grouped}; do
      echo "== $AB_VAR=$v $suite (round $round)"
      env "$AB_VAR=$v" timeout 150 python3 -m deep_gemm.bench --suite "$suite" --no-peers --skip-extras \
          ${AB_ONLY:+--only "$AB_ONLY"} --json "$OUT/ab_${suite}_${v}_${round}.json" 2>&1 \
          | grep -E "^$suite" | cut -c1-112
    done
  done
done
