#!/usr/bin/env bash
# One call on the lent GPU machine runs everything the GPU issue needs measured (see ../shared/device/NOTES.md):
#   locally, once:  bash ../shared/device/fetch-wheels.sh xxhash==3.5.0 zstandard==0.25.0 tqdm==4.67.1
#   device tool:    run(command="bash benchmarks/device_run.sh", carry=[".whl"], timeout_s=600)
# It installs the carried wheels (numba 0.68.1 + numpy 2.4.6 fix the image's numba import), runs the
# real-GPU tests, the GPU==CPU check and the throughput table, and leaves logs in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/gd-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GPU_DEDUP_REAL_GPU=1
nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv | tee "$OUT/gpu.txt"
python3 -c "import numba, numpy, cupy; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cupy', cupy.__version__)"
rc=0
timeout 150 python3 -m pytest -q -x tests/test_cuda_sim.py tests/test_gpu.py tests/test_gpu_io.py 2>&1 | tee "$OUT/pytest_gpu.log" | tail -5 || rc=1
timeout 150 python3 benchmarks/gpu_check.py --docs 20000 2>&1 | tee "$OUT/gpu_check.log" | tail -40 || rc=1
timeout 270 python3 benchmarks/gpu_bench.py --docs 2000000 --cpu-docs 20000 --out "$OUT" 2>&1 | tee "$OUT/gpu_bench.log" | tail -40 || rc=1
exit $rc
