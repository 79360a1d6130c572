#!/usr/bin/env bash
# One device call: install the wheel built on the CPU machine (carry `dist`),
# then GPU tests, SASS check, NVRTC run, sanitizer, and the benchmark.
#   usage (device tool): [DG_BENCH_SUITES="fp8 grouped"] bash tools/device/gpu_suite.sh [pytest -k expr]
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
python3 -c "import sys, torch, deep_gemm as dg; print(sys.version.split()[0], torch.__version__, dg.__version__, 'num_sms', dg.get_num_sms(), torch.cuda.get_device_name())"
cd tests
echo "== GPU tests (nvcc)"
python3 -m pytest -q -p no:cacheprovider -m gpu ${1:+-k "$1"} 2>&1 | tee "$OUT/pytest_nvcc.txt" | tail -15
echo "== NVRTC backend"
DG_JIT_USE_NVRTC=1 DG_JIT_CACHE_DIR=/tmp/dgcache_nvrtc python3 -m pytest -q -p no:cacheprovider -m gpu \
  -k "deterministic or 1d1d or layout_views or 4097" 2>&1 | tee "$OUT/pytest_nvrtc.txt" | tail -6
echo "== kernel speed by backend"
for nvrtc in 0 1; do DG_JIT_USE_NVRTC=$nvrtc DG_JIT_CACHE_DIR=/tmp/dgcache_b$nvrtc python3 ../tools/device/backend_speed.py; done
cd ..
echo "== SASS"
for f in $(ls /tmp/dgcache/cache/*/kernel.cubin | head -3); do
  n=$(basename "$(dirname "$f")"); s=$(cuobjdump --dump-sass "$f")
  echo "$n QGMMA=$(grep -c QGMMA <<<"$s") LDL=$(grep -c 'LDL' <<<"$s") STL=$(grep -c 'STL' <<<"$s")"
done
echo "== compute-sanitizer"
cat > /tmp/san.py <<'PY'
import torch, deep_gemm as dg
from deep_gemm.utils import per_token_cast_to_fp8, per_block_cast_to_fp8
for m, n, k in [(129, 576, 512), (7, 2112, 1024)]:
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    dg.fp8_gemm_nt(a, b, d)
torch.cuda.synchronize(); print("sanitizer script done")
PY
timeout 240 compute-sanitizer --tool memcheck python3 /tmp/san.py 2>&1 | tail -3
for suite in ${DG_BENCH_SUITES:-fp8}; do
  echo "== bench $suite"
  python3 -m deep_gemm.bench --suite "$suite" --json "$OUT/bench_$suite.json" 2>&1 | tail -32
done
