"""gpu_dedup/runtime/compiling.py: the kernels a command's stages list are the ones its run compiles, so that a warm run
announces no compilation."""
import pytest

from gpu_dedup.pipeline import warmup
from gpu_dedup.runtime import compiling


def test_a_warm_substring_run_has_no_kernel_left_to_compile():
    """Issue 28 item 8: after ``warmup substring`` every kernel its stage lists has cached machine code (the CPU
    Kasai is pydivsufsort's: listing the GPU Kasai's CPU twin made every substring run say "compiling 1 kernel")."""
    warmup.warmup(("substring",))
    assert compiling.uncached(compiling.COMMANDS["substring"]) == 0


def test_compile_clock_counts_top_level_compiles_once():
    """compile_clock: a fresh function's first call adds its compile time (the callee compiled inside it is not
    counted a second time: the total is at most the call's wall time); a second call adds nothing."""
    import time

    from numba import njit

    @njit(cache=False)
    def inner(x):
        return x + 1

    @njit(cache=False)
    def outer(x):
        return inner(x) * 2

    c0 = compiling.compile_clock()
    t = time.perf_counter()
    assert outer(1) == 4
    wall = time.perf_counter() - t
    spent = compiling.compile_clock() - c0
    assert 0.01 < spent <= wall
    c1 = compiling.compile_clock()
    assert outer(2) == 6 and compiling.compile_clock() == c1


def test_start_ahead_only_when_it_overlaps_and_a_launch_waits_for_it(monkeypatch):
    """start_ahead starts nothing on one core, with GPU_DEDUP_COMPILE_AHEAD=0, or when either side has nothing
    to compile; a kernel launch of a stage being compiled ahead waits for the helper (its wait counted as
    compiling), a launch of any other kernel does not."""
    import time

    import numpy as np

    from gpu_dedup.runtime import device
    from gpu_dedup.kernels import core_cpu

    todo = {"rules": ["features.rule_stats"], "fasttext": ["fasttext.ft_hidden"], "dsir": []}
    monkeypatch.setattr(compiling, "uncached_kernels", lambda stages: [k for s in stages for k in todo[s]])
    monkeypatch.setattr(compiling, "_cores", lambda: 2)
    sleep = "import time; time.sleep(1.0)"
    data, offsets, out = np.frombuffer(b"ab", np.uint8), np.array([0, 1, 2]), np.zeros(2, np.uint8)
    device.run_kernel("cpu", core_cpu.utf8_invalid_rows, 2, data, offsets, out)  # compiled or loaded before
    assert compiling.start_ahead(("rules",), ("dsir",), sleep, {}) is None  # nothing to overlap with
    monkeypatch.setenv(compiling.AHEAD_ENV, "0")
    assert compiling.start_ahead(("rules",), ("fasttext",), sleep, {}) is None
    monkeypatch.delenv(compiling.AHEAD_ENV)
    monkeypatch.setattr(compiling, "_cores", lambda: 1)
    assert compiling.start_ahead(("rules",), ("fasttext",), sleep, {}) is None
    monkeypatch.setattr(compiling, "_cores", lambda: 2)
    ahead = compiling.start_ahead(("rules",), ("fasttext",), sleep, {})
    assert ahead is not None and "features.rule_stats" in compiling._awaiting
    assert compiling.start_ahead(("rules",), ("fasttext",), sleep, {}) is None  # one helper per kernel
    device.run_kernel("cpu", core_cpu.utf8_invalid_rows, 2, data, offsets, out)  # not one of the helper's
    assert ahead.process.poll() is None and "features.rule_stats" in compiling._awaiting  # it did not wait
    c0 = compiling.compile_clock()
    t = time.perf_counter()
    compiling.await_ahead("features", "rule_stats")  # what run_kernel calls before features_cpu.rule_stats
    waited = time.perf_counter() - t
    assert waited > 0.2 and ahead.process.returncode == 0 and not compiling._awaiting
    assert compiling.compile_clock() - c0 == pytest.approx(waited, abs=0.05)
    slow = compiling.start_ahead(("rules",), ("fasttext",), "import time; time.sleep(30)", {})
    t = time.perf_counter()
    slow.kill()  # a failed or interrupted run stops its helper at once, without a "failed" line
    assert time.perf_counter() - t < 5 and slow.process.returncode != 0 and not compiling._awaiting


def test_the_warm_up_sample_runs_every_dedup_kernel(tmp_path, monkeypatch):
    """A precompile or warm-up run reads write_sample's file: every CPU kernel of the dedup stage must run on it,
    or that kernel stays uncached and every later run compiles the sample again (compact_sets ran only for a
    candidate with a repeated shingle, which the bundled sample lacks: 0.5 s lost per run)."""
    from gpu_dedup import RunConfig, deduplicate
    from gpu_dedup.ops import core as core_ops
    from gpu_dedup.runtime.compiling import KERNELS, write_sample

    ran = set()
    real = core_ops.run_kernel

    def recording(device, kernel, *args, **kwargs):
        ran.add(kernel.__name__)
        return real(device, kernel, *args, **kwargs)

    monkeypatch.setattr(core_ops, "run_kernel", recording)
    deduplicate(write_sample(str(tmp_path / "sample.jsonl")), RunConfig.preset("default", device="cpu"),
                str(tmp_path / "run"))
    wanted = {k for fam, names in KERNELS["dedup"] if fam == "core" for k in names}
    launched_by_ops = {"normalize_sizes", "normalize_write", "exact_hashes", "shingle_sets", "compact_sets",
                       "sketch_signatures", "band_keys"}
    assert launched_by_ops <= wanted and launched_by_ops <= ran, sorted(launched_by_ops - ran)
