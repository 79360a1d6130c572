#!/usr/bin/env bash
# Tail boxes, A/B on the device (carry dist and .whl): dist/*.whl ("new") against
# dist/old/*.whl ("old"). GPU tests of new (TAIL_TESTS), then small_m_tiles.py over
# TAIL_SHAPES for each build, unforced and with each forced BLOCK_M in TAIL_BLOCK_MS; the
# kernels are compiled first by parallel warmup processes, so that the timed processes
# run one at a time on a quiet GPU.
#   TAIL_SHAPES="129,2112,7168 ..." TAIL_BLOCK_MS="64 128" bash tools/device/tail_ab.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
shapes=${TAIL_SHAPES:?}
for v in new old; do
  dir=dist; [ "$v" = old ] && dir=dist/old
  python3 -m pip install -q --no-deps --no-index --target "/tmp/site_$v" "$dir"/*.whl .whl/*.whl || exit 1
done
warm_args=""; for s in $shapes; do warm_args="$warm_args --shape $s"; done
for v in new old; do
  for bm in auto ${TAIL_BLOCK_MS:-}; do
    ( [ "$bm" = auto ] || export DG_SM90_FP8_BLOCK_M=$bm
      PYTHONPATH=/tmp/site_$v DG_JIT_CACHE_DIR=/tmp/cache_$v python3 -m deep_gemm.warmup --num-sms 132 $warm_args \
        > "$OUT/warm_${v}_$bm.txt" 2>&1 ) &
  done
done
wait
echo "== warmup done"
if [ -n "${TAIL_TESTS:-}" ]; then
  (cd tests && PYTHONPATH=/tmp/site_new DG_JIT_CACHE_DIR=/tmp/cache_new timeout ${TAIL_TEST_TIMEOUT:-240} python3 -m pytest -q \
     -p no:cacheprovider -m gpu $TAIL_TESTS 2>&1 | tee "$OUT/pytest_new.txt" | grep -E "passed|failed|FAILED|Error" | head -20)
fi
for round in 1 2; do
  for bm in auto ${TAIL_BLOCK_MS:-}; do
    for v in new old; do
      ( [ "$bm" = auto ] || export DG_SM90_FP8_BLOCK_M=$bm
        PYTHONPATH=/tmp/site_$v DG_JIT_CACHE_DIR=/tmp/cache_$v DG_PRINT_CONFIGS=1 DG_SHAPES="$shapes" timeout 120 \
          python3 tools/device/small_m_tiles.py 2> "$OUT/cfg_${v}_${bm}_$round.txt" | sed "s/^/$v r$round /" )
    done
  done
done
