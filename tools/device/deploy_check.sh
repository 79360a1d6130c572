#!/usr/bin/env bash
# The warm-cache deploy path on a GPU host (root; the wheel built on a CPU machine in dist/,
# the CCCL wheel in .whl/, as install_wheel.sh wants):
#   1. python -m deep_gemm.doctor exits 0;
#   2. a workload over every kernel family runs with DG_JIT_RECORD (tools/device/deploy_workload.py);
#   3. python -m deep_gemm.warmup --from-record fills a fresh cache with no GPU visible;
#   4-6. the workload runs against that cache with 0 compiles (get_jit().compiles and the
#        DG_JIT_DEBUG "compiling kernel" lines): same install, a copy of the install at another
#        path, and a non-root user with the cache read-only (and unchanged afterwards);
#   7. torch.library.opcheck over every op with CUDA tensors, and a MoE block under
#      torch.compile(fullgraph=True) against eager (tools/device/opcheck_moe.py).
# $OUT gets summary.txt and each step's output. Exit 1 on any FAIL. About 3-5 minutes.
#   usage (device tool, carry dist and .whl): bash tools/device/deploy_check.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/install_wheel.sh"
unset DG_JIT_CACHE_DIR DG_JIT_RECORD DG_JIT_USE_NVRTC
export TORCHINDUCTOR_CACHE_DIR=/tmp/dg-deploy-inductor
PY=$(command -v python3)
S=$OUT/summary.txt
: > "$S"
fails=0
pass() { echo "PASS  $*" | tee -a "$S"; }
fail() { echo "FAIL  $*" | tee -a "$S"; fails=$((fails + 1)); }
field() { "$PY" -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])' "$1" "$2" 2>/dev/null || echo "?"; }
step() { echo; echo "== $* (${SECONDS}s)"; }

# The Python parts where another user can read them.
T=/tmp/dg-deploy-tools
rm -rf "$T" /tmp/site2
mkdir -p "$T" && cp "$here/deploy_workload.py" "$here/opcheck_moe.py" "$T/" && chmod -R a+rX "$T"
REC=/tmp/dg-deploy-record-cache WARM=/tmp/dg-deploy-warm-cache RECORD=$OUT/kernels.jsonl
[ -d "$WARM" ] && chmod -R u+w "$WARM"
rm -rf "$REC" "$WARM" "$RECORD" /tmp/dg-deploy-op-cache
"$PY" -c "import sys, torch, deep_gemm; print(sys.version.split()[0], 'torch', torch.__version__, 'CUDA', torch.version.cuda, deep_gemm.__file__)"

step "1. doctor"
"$PY" -m deep_gemm.doctor > "$OUT/doctor.txt" 2>&1
rc=$?
cat "$OUT/doctor.txt"
if [ $rc = 0 ]; then pass "doctor: exit 0"; else fail "doctor: exit $rc (doctor.txt)"; fi
"$PY" -m deep_gemm.doctor --json --no-compile > "$OUT/doctor.json" 2>&1

step "2. record the kernels a workload uses (DG_JIT_RECORD)"
DG_JIT_RECORD=$RECORD DG_JIT_CACHE_DIR=$REC "$PY" "$T/deploy_workload.py" --label record > "$OUT/record.json" 2> "$OUT/record.err"
rc=$?
n=$(wc -l < "$RECORD" 2>/dev/null || echo 0)
tail -3 "$OUT/record.err"
if [ $rc = 0 ] && [ "$n" -gt 0 ]; then
  pass "record: $n kernels recorded, $(field "$OUT/record.json" compiles) compiled into a fresh cache"
else
  fail "record: exit $rc, $n kernels recorded (record.err)"
fi

step "3. warm a fresh cache from the record, no GPU visible"
CUDA_VISIBLE_DEVICES= DG_JIT_CACHE_DIR=$WARM "$PY" -m deep_gemm.warmup --from-record "$RECORD" > "$OUT/warmup.txt" 2>&1
rc=$?
cat "$OUT/warmup.txt"
warmed=$(grep -c '^\[' "$OUT/warmup.txt")
if [ $rc = 0 ] && [ "$warmed" = "$n" ] && [ "$(grep -c 'key=recorded' "$OUT/warmup.txt")" = "$n" ]; then
  pass "warmup --from-record: $warmed kernels, every key as recorded"
else
  fail "warmup --from-record: exit $rc, $warmed of $n kernels (warmup.txt)"
fi

# serve LABEL [env...]: the workload against $WARM (or as the env says), expecting 0 compiles.
serve() {
  local label=$1
  shift
  env DG_JIT_DEBUG=1 DG_JIT_CACHE_DIR="$WARM" "$@" "$PY" "$T/deploy_workload.py" --label "$label" --max-compiles 0 \
    > "$OUT/serve-$label.json" 2> "$OUT/serve-$label.err"
  local rc=$? c d h
  c=$(field "$OUT/serve-$label.json" compiles)
  d=$(grep -c 'deep_jit: compiling kernel' "$OUT/serve-$label.err")
  h=$(grep -c 'deep_jit: cache hit' "$OUT/serve-$label.err")
  grep -v '^deep_jit: cache hit' "$OUT/serve-$label.err" | tail -5
  if [ $rc = 0 ] && [ "$c" = 0 ] && [ "$d" = 0 ] && [ "$h" -gt 0 ]; then
    pass "serve ($label): 0 compiles (get_jit and DG_JIT_DEBUG), $h cache hits"
  else
    fail "serve ($label): exit $rc, get_jit compiles $c, DG_JIT_DEBUG compiles $d, hits $h (serve-$label.err)"
  fi
}

step "4. serve from the warmed cache"
serve same-install

step "5. serve from a second install path (a copy of the site dir)"
cp -a /tmp/site /tmp/site2
serve second-install PYTHONPATH=/tmp/site2
where=$(field "$OUT/serve-second-install.json" deep_gemm)
case "$where" in /tmp/site2/*) ;; *) fail "second install: deep_gemm came from $where, not /tmp/site2" ;; esac

step "6. serve as a non-root user, the cache read-only"
chmod -R a-w "$WARM"
touch /tmp/dg-deploy-mark
user=dgdeploy
id "$user" > /dev/null 2>&1 || useradd -M -r -s /bin/bash "$user" > "$OUT/useradd.txt" 2>&1
ENVS="HOME=/tmp PYTHONPATH=/tmp/site DG_JIT_DEBUG=1 DG_JIT_CACHE_DIR=$WARM"
WL="'$PY' '$T/deploy_workload.py' --max-compiles 0"
if id "$user" > /dev/null 2>&1 && su "$user" -s /bin/bash -c "cd /tmp && '$PY' -c 'import torch'" > "$OUT/user-probe.txt" 2>&1; then
  who="uid $(id -u "$user") ($user)"
  su "$user" -s /bin/bash -c "cd /tmp && env $ENVS $WL --label user" > "$OUT/serve-user.json" 2> "$OUT/serve-user.err"
  rc=$?
else
  # This Python is not usable by another user (e.g. it lives under /root): the same check as
  # root without the capabilities that bypass file modes, on a cache owned by another uid, so
  # that only its "other" permission bits apply, as for any other user.
  who="uid 0 without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH/CAP_FOWNER, cache owned by uid 4242 ($user cannot run $PY: user-probe.txt)"
  chown -R 4242:4242 "$WARM"
  (cd /tmp && env $ENVS "$PY" -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for cap in (1, 2, 3):  # PR_CAPBSET_DROP: gone from the exec below
    assert libc.prctl(24, cap, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
os.execv(sys.argv[1], sys.argv[1:])' "$PY" "$T/deploy_workload.py" --max-compiles 0 --label other-uid) \
    > "$OUT/serve-user.json" 2> "$OUT/serve-user.err"
  rc=$?
  chown -R 0:0 "$WARM"
fi
c=$(field "$OUT/serve-user.json" compiles)
d=$(grep -c 'deep_jit: compiling kernel' "$OUT/serve-user.err")
changed=$(find "$WARM" -newer /tmp/dg-deploy-mark | wc -l)
grep -v '^deep_jit: cache hit' "$OUT/serve-user.err" | tail -5
if [ $rc = 0 ] && [ "$c" = 0 ] && [ "$d" = 0 ] && [ "$changed" = 0 ]; then
  pass "serve as $who, read-only cache: 0 compiles, nothing written to the cache"
else
  fail "serve as $who, read-only cache: exit $rc, compiles $c / $d, $changed paths changed (serve-user.err)"
fi
chmod -R u+w "$WARM"

step "7. opcheck over every op, MoE block under torch.compile(fullgraph=True)"
(cd "$T" && DG_JIT_CACHE_DIR=/tmp/dg-deploy-op-cache:$WARM "$PY" opcheck_moe.py) > "$OUT/opcheck.txt" 2>&1
rc=$?
grep -E '^(PASS|FAIL|SKIP)|^opcheck_moe' "$OUT/opcheck.txt"
if [ $rc = 0 ]; then pass "opcheck + torch.compile MoE: $(grep -c '^PASS' "$OUT/opcheck.txt") checks"; else fail "opcheck + torch.compile MoE (opcheck.txt)"; fi

echo
echo "== summary (${SECONDS}s)"
cat "$S"
[ $fails = 0 ] && echo "deploy_check: all passed" || echo "deploy_check: $fails failed"
exit $((fails > 0))
