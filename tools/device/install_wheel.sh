# Sourced by the device scripts (the device tool carries `dist` and `.whl`): the output
# folder, unbuffered Python, one JIT cache, and the wheel built on the CPU machine (with
# the CCCL wheel NVRTC needs) installed into /tmp/site, first on the import path.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/dgcache}
python3 -m pip install -q --no-deps --no-index --target /tmp/site dist/*.whl .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
