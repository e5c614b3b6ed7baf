"""device.py: the one launch helper and the geometry each kernel declares (kernels/_launch.py)."""
import os

import numpy as np
import pytest

from gpu_dedup.runtime.device import kernels, launch, simulator, to_host
from gpu_dedup.kernels import _launch


def test_kernels_picks_the_module_of_a_device_and_family():
    assert kernels("cpu").__name__ == "gpu_dedup.kernels.core_cpu"
    assert kernels("cuda").__name__ == "gpu_dedup.kernels.core_cuda"
    assert kernels("cpu", "bloom").__name__ == "gpu_dedup.kernels.bloom_cpu"
    assert kernels("cuda", "bloom").__name__ == "gpu_dedup.kernels.bloom_cuda"


def test_every_gpu_kernel_declares_a_usable_geometry():
    for family in (None, "bloom"):
        gpu = kernels("cuda", family)
        ks = {n: k for n, k in vars(gpu).items() if isinstance(k, _launch.Kernel)}
        assert ks, family
        for name, k in ks.items():
            blocks, threads = k.grid(1000)
            assert blocks >= 1 and 1 <= threads <= k.tpb, name


def test_plain_block_and_grid_stride_geometries():
    def body(x):  # never launched: only the geometry is read
        pass

    plain = _launch.Kernel(body)
    assert plain.grid(1) == (1, _launch.TPB) and plain.grid(0) == (1, _launch.TPB)
    assert plain.grid(_launch.TPB + 1) == (2, _launch.TPB)
    per_block = _launch.Kernel(body, per_block=True, tpb=64)
    assert per_block.grid(7) == (7, 64)
    stride = _launch.Kernel(body, per_block=True, stride=True)
    cap = _launch.SIM_GRID if simulator() else _launch.MAX_GRID
    assert stride.grid(10 ** 9)[0] == cap


@pytest.mark.skipif(not simulator(), reason="compares the CUDA kernel under the simulator")
def test_launch_runs_the_same_kernel_on_both_targets():
    rng = np.random.default_rng(3)
    sig = rng.integers(0, 2**32, size=(37, 20), dtype=np.uint64).astype(np.uint32)
    sig_bytes = sig.view(np.uint8).reshape(37, -1)
    cpu, gpu = np.empty((37, 4), np.uint64), np.empty((37, 4), np.uint64)
    launch("cpu", "band_keys", 37 * 4, sig_bytes, 4, 5 * 4, cpu)
    from gpu_dedup.runtime.device import to_device, to_host

    out = to_device(gpu, "cuda")
    launch("cuda", "band_keys", 37 * 4, to_device(sig_bytes, "cuda"), 4, 5 * 4, out)
    assert np.array_equal(to_host(out), cpu)


def test_the_first_run_says_it_compiles_the_kernels(tmp_path, caplog, monkeypatch):
    from types import SimpleNamespace

    from gpu_dedup.runtime import device

    def fake(name, index):
        k = SimpleNamespace(__name__=name, _cache=SimpleNamespace(_cache_file=SimpleNamespace(_index_path=index)))
        return k

    monkeypatch.setattr(device, "_compile_seen", set())
    cached = tmp_path / "cpu.cached-1.py311.nbi"
    cached.write_bytes(b"")
    with caplog.at_level("INFO", logger="gpu_dedup.runtime.device"):
        device._note_compiling(fake("cached", str(cached)))
        assert not caplog.records  # machine code cached: nothing to say
        device._note_compiling(fake("fresh", str(tmp_path / "cpu.fresh-2.py311.nbi")))
        device._note_compiling(fake("fresh2", str(tmp_path / "cpu.fresh2-3.py311.nbi")))
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and "compiling 1 kernel (first run only, ~" in msgs[0] and "gpu-dedup warmup" in msgs[0]


@pytest.mark.parametrize("backend", ["numpy", "strict"])
def test_lexsort_radix_gives_lexsorts_order(backend):
    from gpu_dedup.runtime.device import lexsort_radix
    from gpu_dedup.testing.strict import xp as strict_xp

    xp = np if backend == "numpy" else strict_xp
    rng = np.random.default_rng(3)
    n = 500
    small = rng.integers(0, 5, n)                      # many ties: stability decides
    doc = rng.integers(0, 40, n).astype(np.int32)
    big = rng.integers(0, 1 << 63, n, dtype=np.uint64) | np.uint64(1 << 63)
    big[::7] = big[0]                                  # ties in a 64-bit key too
    neg = rng.integers(-3, 3, n)
    cases = [([doc, small], [40, 5]),                  # packed into one uint64 (declared bounds)
             ([doc, small], None),                     # packed, bounds measured
             ([small, big, big[::-1].copy()], [None, 1 << 64, 1 << 64]),  # 3 stable radix sorts
             ([small, neg], None),                     # a negative key: one argsort per key
             ([small[:0], doc[:0]], None)]
    for keys, bounds in cases:
        want = np.lexsort(keys)
        got = to_host(lexsort_radix(xp, [xp.asarray(k) for k in keys], bounds))
        assert got.dtype == np.int64 and np.array_equal(got, want)


def test_cached_kernels_older_than_a_device_function_source_are_dropped(tmp_path, monkeypatch):
    """Numba validates a cached kernel against its own file only; _build.drop_stale_cache also drops those
    older than any device-function source (review P2-1), wherever Numba keeps them, and keeps newer ones."""
    import os

    from gpu_dedup.kernels import _build

    assert os.path.join(_build._HERE, "__pycache__") in _build._cache_dirs()
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(_build, "_cache_dirs", lambda: [str(cache)])
    newest = _build.newest_source()
    old, fresh = cache / "cuda.minhash_chunks-242.py311.nbi", cache / "cpu.normalize_sizes-30.py311.nbc"
    for f, t in ((old, newest - 10), (fresh, newest + 10)):
        f.write_bytes(b"x")
        os.utime(f, (t, t))
    assert _build.drop_stale_cache() == 1
    assert not old.exists() and fresh.exists()




def test_a_stage_says_how_many_kernels_it_compiles_before_its_bar(monkeypatch, caplog):
    """Issue 28 item 8: note_compiling counts the uncached CPU kernels of the stage's kernels once per stage
    and process, and says N and the sum of their measured compile times in one line; a cached stage says
    nothing."""
    from gpu_dedup.runtime import compiling, device

    monkeypatch.setattr(device, "_compile_seen", set())
    names = {"paragraph": ["bloom.span_norm_sizes", "bloom.split_count", "bloom.no_such_kernel"], "lm-score": []}
    monkeypatch.setattr(compiling, "uncached_kernels", lambda stages: [k for f in stages for k in names[f]])
    monkeypatch.setitem(compiling.COMPILE_S, "bloom.span_norm_sizes", 5.2)
    monkeypatch.setitem(compiling.COMPILE_S, "bloom.split_count", 2.6)
    monkeypatch.setattr("gpu_dedup.constants.COMPILE_S_PER_KERNEL", 4.0)
    with caplog.at_level("INFO", logger="gpu_dedup.runtime.device"):
        device.note_compiling("cpu", ("lm-score",))
        device.note_compiling("cpu", ("paragraph", "lm-score"))
        device.note_compiling("cpu", ("paragraph",))
        device.note_compiling("cuda", ("paragraph",))
    msgs = [r.getMessage() for r in caplog.records]
    # 5.2 + 2.6 measured, 4.0 for the kernel the table does not list: ~12 s
    assert len(msgs) == 1 and msgs[0].startswith(
        "compiling 3 kernels (first run only, ~12 s on an idle machine, longer on a busy one"), msgs


def test_the_compile_line_with_a_helper_says_the_longer_half(monkeypatch, caplog):
    """With stages compiled ahead by a second process (compiling.start_ahead), the estimate is the longer of the
    two halves, not their sum, and the line says two processes."""
    from gpu_dedup.runtime import compiling, device

    monkeypatch.setattr(device, "_compile_seen", set())
    names = {"fasttext": ["fasttext.ft_hidden", "fasttext.ft_predict"], "rules": ["features.rule_stats"]}
    monkeypatch.setattr(compiling, "uncached_kernels", lambda stages: [k for f in stages for k in names[f]])
    for k, v in (("fasttext.ft_hidden", 4.0), ("fasttext.ft_predict", 3.0), ("features.rule_stats", 8.5)):
        monkeypatch.setitem(compiling.COMPILE_S, k, v)
    with caplog.at_level("INFO", logger="gpu_dedup.runtime.device"):
        device.note_compiling("cpu", ("fasttext", "rules"), ahead=("rules",))
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and msgs[0].startswith("compiling 3 kernels in two processes (first run only, ~8 s"), msgs


def test_every_kernel_a_stage_compiles_has_a_measured_compile_time():
    """compiling.COMPILE_S (benchmarks/first_runs.py --table) lists exactly the kernels of KERNELS: a kernel
    added to a stage without a measurement, or a measurement of a kernel no stage compiles, fails here."""
    from gpu_dedup.runtime import compiling

    listed = {f"{fam}.{name}" for parts in compiling.KERNELS.values() for fam, names in parts for name in names}
    assert set(compiling.COMPILE_S) == listed
    assert all(0 <= v < 30 for v in compiling.COMPILE_S.values())


def test_warmup_lists_every_cpu_kernel_a_stage_launches():
    """Every kernel name in warmup.KERNELS exists; every kernel a module launches by name is in some stage; the
    commands cover every stage; an unknown command is refused."""
    import glob
    import re

    from gpu_dedup.pipeline import warmup
    from gpu_dedup.testing import kernel_check

    listed = {(f, n) for parts in warmup.KERNELS.values() for f, names in parts for n in names}
    for f, n in listed:
        assert n in {k.__name__ for k in warmup.cpu_kernels(f)}, (f, n)
    pkg = os.path.dirname(os.path.dirname(warmup.__file__))  # the whole package
    found = 0
    for path in glob.glob(os.path.join(pkg, "**", "*.py"), recursive=True):
        src = open(path, encoding="utf-8").read()
        for name, fam in re.findall(r'launch\([^,]+, "([a-z_]+)"[^)]*?family="([a-z]+)"', src):
            cpu = {k.__name__ for k in warmup.cpu_kernels(fam)}
            gpu = {k.__name__ for k in kernel_check.module_kernels(f"gpu_dedup.kernels.{fam}_cuda")}
            assert name in cpu | gpu, (path, fam, name)  # a launch names a kernel that exists
            if name in cpu:  # a GPU-only kernel (a cooperative twin) compiles at its launch, not on the CPU
                assert (fam, name) in listed, (path, fam, name)
                found += 1
    # the family front ends (gpu_dedup/ops/<family>.py) launch kernels as attributes of a kernel module; these CPU
    # kernels no stage's default run (what a warm-up runs) launches: they compile at their first use
    first_use = {("core", "utf8_invalid_rows"),  # the device reader's UTF-8 check (a CPU run validates in pyarrow)
                 ("core", "minhash_from_hashes"), ("core", "sketch_from_hashes"),  # signatures_from_hashes
                 ("core", "minhash_signatures"),  # the exact family's (the default preset's is sketch_signatures)
                 ("core", "jaccard_pairs"),  # policy="components" and the semantic comparison
                 ("bloom", "hash128"), ("bloom", "contains128"), ("bloom", "lower_bound128"),  # the exact seen-set
                 ("substring", "lcp_kasai")}  # the GPU Kasai's CPU twin: a CPU run takes pydivsufsort's
    for path in glob.glob(os.path.join(pkg, "ops", "*.py")):
        fam = os.path.basename(path)[:-3]
        if fam in ("__init__", "types"):  # ops/types.py: the boundary's types, no kernel family
            continue
        src = open(path, encoding="utf-8").read()
        cpu = {k.__name__ for k in warmup.cpu_kernels(fam)}
        gpu = {k.__name__ for k in kernel_check.module_kernels(f"gpu_dedup.kernels.{fam}_cuda")}
        for name in re.findall(r'run_kernel\([^,]+, (?:[a-z_]+|_target\(device\))\.([a-z_0-9]+)', src):
            assert name in cpu | gpu, (path, fam, name)
            if name in cpu and (fam, name) not in first_use:
                assert (fam, name) in listed, (path, fam, name)
                found += 1
    assert found >= 25  # the patterns still find the launches
    assert {s for stages in warmup.COMMANDS.values() for s in stages} == set(warmup.KERNELS)
    assert set(warmup.STEPS) == set(warmup.COMMANDS)
    with pytest.raises(ValueError, match="unknown command 'nope'; choose from run, paragraph"):
        warmup.warmup(("nope",))


def test_no_gpu_device_is_decided_without_numba_cuda(tmp_path, monkeypatch):
    """Without any NVIDIA device path "auto" is the CPU, said with the paths looked for, and numba.cuda is not
    imported for it; with one, numba.cuda probes as before (the simulator always probes)."""
    from gpu_dedup.runtime import device

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.delenv("NUMBA_CUDA_DRIVER", raising=False)
    monkeypatch.setattr(device, "GPU_DEVICE_PATHS", (str(tmp_path / "nvidiactl"),))
    monkeypatch.setattr(device.sys, "platform", "linux")
    assert device._no_gpu_device() == f"no NVIDIA device or driver on this machine (none of {tmp_path}/nvidiactl)"
    (tmp_path / "nvidiactl").touch()
    assert device._no_gpu_device() is None
    (tmp_path / "nvidiactl").unlink()
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert device._no_gpu_device() is None


def test_a_cpu_machine_never_imports_numba_cuda_to_choose(tmp_path):
    import subprocess
    import sys

    code = ("import sys\nfrom gpu_dedup.runtime import device\n"
            f"device.GPU_DEVICE_PATHS = ({str(tmp_path / 'nvidiactl')!r},)\n"
            "print(device.resolve_device('auto'), device.gpu_status()[0], 'numba.cuda' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_CUDA_DRIVER")}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["cpu", "False", "False"]
