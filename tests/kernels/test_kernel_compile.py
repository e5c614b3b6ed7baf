"""Every GPU kernel through the real CUDA compiler for the H200 (numba-cuda + NVVM, then ptxas -arch=sm_90),
without a GPU: gpu_dedup/testing/kernel_check.py, run in a subprocess because the rest of the suite runs
under the CUDA simulator (conftest.py). The argument types compiled are the ``sigs=`` each ``@kernel``
declares; the simulator tests keep them equal to the real launches (test_an_undeclared_launch_raises)."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu_dedup.testing import kernel_check

ROOT = Path(__file__).resolve().parents[2]
BROKEN = Path(__file__).resolve().parents[1] / "data" / "broken_kernels.py"


def _toolchain_missing() -> str:
    missing = [m for m in ("numba_cuda", "cuda.bindings") if importlib.util.find_spec(m.split(".")[0]) is None]
    try:
        kernel_check.ptxas_path()
    except RuntimeError:
        missing.append("ptxas")
    return ", ".join(missing)


def _run(tmp_path, *args):
    missing = _toolchain_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI lacks the CUDA compiler ({missing}): README's test command installs it (test extra)")
        pytest.skip(f"the CUDA compiler is not installed ({missing}): pip install '.[test]'")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "GPU_DEDUP_STRICT_DEVICE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    out = tmp_path / "compiled.json"
    r = subprocess.run([sys.executable, "-m", "gpu_dedup.testing.kernel_check", "--json", str(out), *args],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    results = json.loads(out.read_text()) if out.exists() else []
    return r, results


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("kernel_check"), "--jobs", "2", "--markdown")


def test_every_kernel_compiles_for_sm90_without_spills_or_float_promotion(compiled):
    r, results = compiled
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-4000:]
    # every Kernel of every kernels/*_cuda.py was compiled, each declared signature once
    modules = kernel_check.kernel_modules()
    assert {m.rsplit(".", 1)[1] for m in modules} >= {"core_cuda", "bloom_cuda", "fasttext_cuda", "lm_cuda",
                                                       "features_cuda", "domain_cuda"}
    want = {(m, k.__name__, i) for m in modules for k in kernel_check.module_kernels(m) for i in range(len(k.sigs))}
    seen = {}
    for c in results:
        seen[(c["module"], c["kernel"])] = seen.get((c["module"], c["kernel"]), 0) + 1
    assert {(m, k, i) for (m, k), count in seen.items() for i in range(count)} == want
    assert all(not c["problems"] and c["registers"] > 0 for c in results)


def test_the_check_catches_what_the_simulator_cannot(tmp_path):
    r, results = _run(tmp_path, "--jobs", "1", "--module", str(BROKEN))
    assert r.returncode == 1, r.stdout + r.stderr
    verdict = {c["kernel"]: " ".join(c["problems"]) for c in results}
    assert verdict["clean"] == ""
    assert "does not compile" in verdict["shape_expression"] and "local.array" in verdict["shape_expression"]
    assert "cvt to/from f64 in an integer kernel" in verdict["float_promotion"]
    assert "declares no argument types" in verdict["undeclared"]


def test_verdicts_on_ptxas_reports():
    report = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    8192 bytes stack frame, 24 bytes spill stores, 24 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 65536 bytes smem, 408 bytes cmem[0]"""
    c = kernel_check.Compiled("m", "k", "()", True, 512, **kernel_check.parse_ptxas(report))
    assert (c.registers, c.stack_bytes, c.spill_stores, c.spill_loads, c.smem_bytes) == (255, 8192, 24, 24, 65536)
    text = " | ".join(kernel_check.problems(c))
    for part in ("register spill", "stack frame 8192 B", "shared memory 65536 B", "255 registers x 512 threads"):
        assert part in text
    ok = kernel_check.Compiled("m", "k", "()", True, 128, registers=40)
    assert kernel_check.problems(ok) == []
    ptx = "\tcvt.rn.f64.u64 \t%fd1, %rd4;\n\tcvt.u32.u64 \t%r1, %rd2;\n\tcvt.rzi.u64.f64 \t%rd5, %fd1;\n"
    assert kernel_check.f64_conversions(ptx) == 2


def test_an_undeclared_launch_raises_under_the_simulator():
    from numba import config

    from gpu_dedup.runtime.device import to_device
    from gpu_dedup.kernels import core_cuda as kc

    if not config.ENABLE_CUDASIM:
        pytest.skip("the declaration check runs under the simulator")
    sig = to_device(np.zeros((2, 8), np.uint8), "cuda")
    kc.band_keys[1, 4](sig, 2, 4, to_device(np.zeros((2, 2), np.uint64), "cuda"))  # declared: runs
    with pytest.raises(TypeError, match="not among its declared sigs"):
        kc.band_keys[1, 4](sig, 2, 4, to_device(np.zeros((2, 2), np.int64), "cuda"))


def test_cache_keys_cover_exactly_the_sources_a_kernel_module_compiles_from():
    import importlib

    mod = importlib.import_module("gpu_dedup.kernels.bloom_cuda")
    files = {Path(p).name for p in kernel_check.source_files(mod.__file__, mod.__package__)}
    assert files == {"bloom_cuda.py", "bloom.py", "core.py", "normalize.py", "_build.py", "_launch.py",
                     "constants.py"}


def test_the_per_thread_minima_array_does_not_spill_at_the_largest_num_perm(compiled):
    """Every kernel whose per-thread local array is sized by MAX_K_PER_THREAD (the MinHash block's minima): the
    array's length is that compile-time constant while K is a runtime argument, so the machine code ptxas reports
    on here is the code that runs at every K up to TILE * MAX_K_PER_THREAD >= MAX_NUM_PERM (9,000, the largest
    MinHashConfig accepts). It must hold the array in its stack frame (>= 8 bytes per entry, within the
    per-thread limit) with no register spill."""
    import inspect

    from gpu_dedup.config import MinHashConfig
    from gpu_dedup.constants import MAX_NUM_PERM
    from gpu_dedup.kernels import core_cuda as kc

    assert kc.TILE * kc.MAX_K_PER_THREAD >= MAX_NUM_PERM
    MinHashConfig(MAX_NUM_PERM, 5, 64)
    with pytest.raises(ValueError):
        MinHashConfig(MAX_NUM_PERM + 1, 5, 64)
    users = {(m, k.__name__) for m in kernel_check.kernel_modules() for k in kernel_check.module_kernels(m)
             if "local.array(MAX_K_PER_THREAD" in inspect.getsource(k.dispatcher.py_func)}
    assert ("gpu_dedup.kernels.core_cuda", "minhash_chunks") in users
    r, results = compiled
    got = [c for c in results if (c["module"], c["kernel"]) in users]
    assert got and len({(c["module"], c["kernel"]) for c in got}) == len(users), r.stdout[-3000:]
    for c in got:
        assert c["spill_stores"] == 0 and c["spill_loads"] == 0 and not c["problems"], c
        assert 8 * kc.MAX_K_PER_THREAD <= c["stack_bytes"] <= kernel_check.LIMITS["stack_bytes"], c
