#!/usr/bin/env bash
# compute-sanitizer's other tools (carry dist and .whl): initcheck, synccheck and racecheck
# over tools/device/sanitize_new_paths.py (dense bf16/FP32-out and contiguous paths, PDL on
# and off) and tests/forced_block_m_child.py at BLOCK_M 256 (dense and m-grouped edge
# layouts). One allocation per tensor (PYTORCH_NO_CUDA_MEMORY_CACHING) so that initcheck
# sees each tensor's bounds.
#   SAN_TOOLS="racecheck" bash tools/device/sanitize_tools.sh
set -uo pipefail
. "$(dirname "$0")/install_wheel.sh" >/dev/null 2>&1 || exit 1
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
for tool in ${SAN_TOOLS:-initcheck synccheck racecheck}; do
  echo "== $tool: sanitize_new_paths.py"
  timeout 110 compute-sanitizer --tool "$tool" python3 tools/device/sanitize_new_paths.py > "$OUT/san_${tool}_paths.txt" 2>&1
  echo "rc $?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitizer script done" "$OUT/san_${tool}_paths.txt"
  echo "== $tool: forced BLOCK_M 256"
  DG_DEV_SM90_FP8_BLOCK_M=256 timeout 90 compute-sanitizer --tool "$tool" python3 tests/forced_block_m_child.py \
    > "$OUT/san_${tool}_bm256.txt" 2>&1
  echo "rc $?"
  grep -cE "^CASE .* OK" "$OUT/san_${tool}_bm256.txt" | sed 's/^/cases ok: /'
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_${tool}_bm256.txt"
done
