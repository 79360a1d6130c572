#!/usr/bin/env bash
# One device call for the k-grouped wgrad GEMMs (carry `dist` and `.whl`, as gpu_suite.sh):
# their GPU tests (both JIT backends inside), the bench's reference-ops check, a
# compute-sanitizer memcheck of nt and tn on odd shapes, and `bench --suite grouped`.
#   usage (device tool): bash tools/device/k_grouped_check.sh
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh"
python3 -c "import sys, torch, deep_gemm as dg; print(sys.version.split()[0], torch.__version__, dg.__version__, 'num_sms', dg.get_num_sms(), torch.cuda.get_device_name())"
cd tests
echo "== k-grouped GPU tests"
DG_PRINT_CONFIGS=1 python3 -m pytest -q -p no:cacheprovider -m gpu --strict-gpu test_k_grouped.py \
  "test_bench_cli.py::test_suites_pass_with_reference_ops[grouped]" 2>&1 | tee "$OUT/pytest_k_grouped.txt" | tail -25
cd ..
echo "== compute-sanitizer (memcheck)"
cat > /tmp/kg_san.py <<'PY'
import torch, deep_gemm as dg
from deep_gemm.utils import per_channel_cast_to_fp8
for m, n, ks in [(130, 258, [256, 0, 128, 384]), (384, 640, [128] * 35)]:
    xa = torch.randn(sum(ks), m, device="cuda", dtype=torch.bfloat16)
    xb = torch.randn(sum(ks), n, device="cuda", dtype=torch.bfloat16)
    a, b = per_channel_cast_to_fp8(xa, use_ue8m0=False), per_channel_cast_to_fp8(xb, use_ue8m0=False)
    kt = torch.tensor(ks, dtype=torch.int32, device="cuda")
    c = torch.randn(len(ks), m, n, device="cuda")
    d = torch.empty_like(c)
    dg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, kt, c=c)
    dg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, kt, c=d)
torch.cuda.synchronize(); print("sanitizer script done")
PY
timeout 300 compute-sanitizer --tool memcheck python3 /tmp/kg_san.py 2>&1 | tail -4
echo "== bench grouped"
python3 -m deep_gemm.bench --suite grouped --json "$OUT/bench_grouped.json" 2>&1 | tail -20
