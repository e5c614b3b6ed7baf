"""Tests that need a real CUDA GPU (marker `gpu`; skipped without one). Run them on a GPU machine with
GPU_DEDUP_REAL_GPU=1 (benchmarks/device_run.sh does), which keeps conftest from enabling the simulator."""
import numpy as np
import pytest

import gpu_dedup
from gpu_dedup import RunConfig

pytestmark = pytest.mark.gpu


def test_pinned_host_to_device_copy_round_trips():
    from gpu_dedup.runtime.device import to_device, to_host

    x = np.random.default_rng(0).integers(0, 255, 5 << 20, dtype=np.uint8)  # above the pinned threshold
    d = to_device(x, "cuda")
    assert type(d).__module__.startswith("cupy")
    assert np.array_equal(to_host(d), x)
    y = x[::-1].copy()  # reuses the staging buffer: the first copy must be complete and intact
    assert np.array_equal(to_host(to_device(y, "cuda")), y) and np.array_equal(to_host(d), x)


def test_batch_size_follows_free_device_memory():
    from gpu_dedup.runtime.device import CPU_BATCH_BYTES, batch_bytes

    b = batch_bytes(None, "cuda")
    assert CPU_BATCH_BYTES <= b <= 2 << 30
    assert batch_bytes(12345, "cuda") == 12345


@pytest.mark.parametrize("preset", ["default", "fineweb", "nemo"])
def test_decisions_identical_on_the_gpu(preset):
    from gpu_dedup.testing.evalcorpus import make_corpus

    table = make_corpus(3000, seed=9, mean_words=300).select(["id", "text"])
    cfg = RunConfig.preset(preset, progress=False)
    cpu = gpu_dedup.deduplicate(table, cfg.replace(device="cpu")).decisions
    gpu = gpu_dedup.deduplicate(table, cfg.replace(device="cuda", batch_bytes=1 << 20)).decisions
    assert gpu.equals(cpu)


def test_cudf_reader_gives_identical_decisions(tmp_path):
    pytest.importorskip("pylibcudf")
    import pyarrow.parquet as pq

    from gpu_dedup.testing.evalcorpus import make_corpus

    table = make_corpus(3000, seed=5, mean_words=200).select(["id", "text"])
    path = tmp_path / "c.parquet"
    pq.write_table(table, path, row_group_size=500)
    cfg = RunConfig.preset("default", progress=False, write_deduplicated=False)
    cpu = gpu_dedup.deduplicate(str(path), cfg.replace(device="cpu"))
    gpu = gpu_dedup.deduplicate(str(path), cfg.replace(device="cuda", reader="cudf", batch_bytes=256 << 10))
    assert gpu.decisions.equals(cpu.decisions) and gpu.stats["read"] == cpu.stats["read"]


def test_cugraph_components_equal_label_propagation():
    pytest.importorskip("cugraph")
    import cupy

    from gpu_dedup.lexical.policy import cugraph_components
    from gpu_dedup.kernels import core_cpu as cpu

    rng = np.random.default_rng(0)
    m = 100_000
    u, v = rng.integers(0, m, 80_000), rng.integers(0, m, 80_000)
    got = cugraph_components(m, cupy.asarray(u), cupy.asarray(v), cupy)
    assert np.array_equal(cupy.asnumpy(got), cpu.union_find(m, u, v))
