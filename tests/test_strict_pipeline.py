"""The whole pipeline on the simulated GPU under the strict array backend (CuPy's host/device rules,
gpu_dedup/testing/strict.py), against ``device="cpu"``: every preset, the incremental index, the memory budget with
on-disk band keys and key-range partitions, the work dir, and the CLI switched as a whole
(``NUMBA_ENABLE_CUDASIM=1 GPU_DEDUP_STRICT_DEVICE=1 gpu-dedup run ... --device cuda``). Paragraph dedup, the
screen and the Bloom kernels run the same way in their own test files (conftest turns strict mode on)."""
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.runtime.device import simulator, strict_device
from gpu_dedup.testing.evalcorpus import make_corpus

pytestmark = pytest.mark.skipif(not (simulator() and strict_device()),
                                reason="needs NUMBA_ENABLE_CUDASIM=1 GPU_DEDUP_STRICT_DEVICE=1 (conftest's default)")

SMALL = dict(minhash__num_perm=32, lsh__bands=8, lsh__rows=4)  # the simulator runs each GPU thread in Python


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(36, seed=5, mean_words=20, template_families=1, family_size=8, near_dup_frac=0.3).select(["id", "text"])


@pytest.fixture(scope="module")
def shards(tmp_path_factory, corpus):
    src = tmp_path_factory.mktemp("strict_src")
    for k in range(3):
        pq.write_table(corpus.slice(k * 12, 12), src / f"part-{k}.parquet")
    return src


def _both(table, cfg, tmp_path, **kwargs):
    cpu = gpu_dedup.deduplicate(table, cfg.replace(device="cpu"), tmp_path / "cpu", **kwargs)
    gpu = gpu_dedup.deduplicate(table, cfg.replace(device="cuda"), tmp_path / "gpu", **kwargs)
    assert cpu.stats["array_backend"] == "numpy" and gpu.stats["array_backend"] == "strict"
    assert json.loads((tmp_path / "gpu" / "run.json").read_text())["array_backend"] == "strict"
    return cpu, gpu


def _same_outputs(a, b):
    """Byte-identical decisions and kept documents."""
    assert pq.read_table(a / "decisions.parquet").equals(pq.read_table(b / "decisions.parquet"))
    kept_a = sorted(p.name for p in (a / "deduplicated").iterdir())
    assert kept_a == sorted(p.name for p in (b / "deduplicated").iterdir())
    for name in kept_a:
        assert (a / "deduplicated" / name).read_bytes() == (b / "deduplicated" / name).read_bytes() or \
            pq.read_table(a / "deduplicated" / name).equals(pq.read_table(b / "deduplicated" / name))


@pytest.mark.parametrize("preset", ["default", "fineweb", "nemo"])
def test_presets_give_identical_decisions(corpus, tmp_path, preset):
    cfg = RunConfig.preset(preset, progress=False, **SMALL)
    cpu, gpu = _both(corpus, cfg, tmp_path)
    assert gpu.decisions.equals(cpu.decisions)
    assert 0 < cpu.removed < corpus.num_rows
    if cfg.cluster.verify:  # pass 1's normalized text stayed on the device for verification
        assert gpu.stats["stages"]["verify"]["text"] == "kept from pass 1"


def test_components_policy_and_keep_longest(corpus, tmp_path):
    cfg = RunConfig.preset("default", progress=False, cluster__policy="components", cluster__keep="longest", **SMALL)
    cpu, gpu = _both(corpus, cfg, tmp_path)
    assert gpu.decisions.equals(cpu.decisions) and cpu.removed > 0


def test_incremental_index_and_key_ranges_on_disk(shards, tmp_path, monkeypatch):
    """Index saved and used on the device, band keys on disk in a work dir, 4 key ranges per band."""
    import gpu_dedup.lexical.decide as lsh  # the bucket stage picks the partitions

    monkeypatch.setattr(lsh, "partitions_for", lambda m, budget: 4)
    cfg = RunConfig.preset("default", progress=False, memory_budget=1 << 20, batch_bytes=4096, **SMALL)
    files = sorted(str(p) for p in shards.iterdir())
    results = {}
    for dev in ("cpu", "cuda"):
        first = gpu_dedup.deduplicate(files[:2], cfg.replace(device=dev), tmp_path / f"a-{dev}",
                                      work_dir=tmp_path / f"w-{dev}", save_index=tmp_path / f"idx-{dev}")
        assert first.stats["stages"]["lsh"]["band_keys_on_disk"]
        assert first.stats["stages"]["lsh"]["key_range_partitions"] == 4
        second = gpu_dedup.deduplicate(files[2:], cfg.replace(device=dev), tmp_path / f"b-{dev}",
                                       against=tmp_path / f"idx-{dev}")
        results[dev] = (first, second)
    for k in range(2):
        assert results["cuda"][k].decisions.equals(results["cpu"][k].decisions)
    assert not all(results["cpu"][1].decisions["keep"].to_pylist())  # the index removes something


def _cli(args, env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-m", "gpu_dedup.cli", "run", *args, "-q"], capture_output=True,
                          text=True, env=env)


def test_cli_run_switched_to_the_strict_backend(shards, tmp_path):
    """One whole CLI run under the strict backend with a work dir and a memory budget, as the README's
    command line; outputs byte-identical to the CPU run's."""
    common = ["--num-perm", "32", "--bands", "8", "--rows", "4", "--batch-mb", "0.01", "--memory-budget", "1M"]
    sim = {"NUMBA_ENABLE_CUDASIM": "1", "GPU_DEDUP_STRICT_DEVICE": "1"}
    g = _cli([str(shards), "-o", str(tmp_path / "g"), "--device", "cuda", "--work-dir", str(tmp_path / "w"),
              *common], sim)
    assert g.returncode == 0, g.stderr
    c = _cli([str(shards), "-o", str(tmp_path / "c"), "--device", "cpu", *common], {})
    assert c.returncode == 0, c.stderr
    run = json.loads((tmp_path / "g" / "run.json").read_text())
    assert run["device"] == "cuda" and run["array_backend"] == "strict"
    assert json.loads((tmp_path / "c" / "run.json").read_text())["array_backend"] == "numpy"
    _same_outputs(tmp_path / "c", tmp_path / "g")


def test_a_host_array_in_device_code_fails_the_run(corpus, monkeypatch):
    """The point of the backend: a host array slipped into a device branch is an error here, as with CuPy."""
    from gpu_dedup.lexical import decide as exact  # the exact stage groups the hashes

    real = exact.exact_groups

    def leaky(h, rank, xp=np):
        return real(h, rank.get(), xp)  # the rank brought back to the host, then mixed into device code

    monkeypatch.setattr(exact, "exact_groups", leaky)
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        gpu_dedup.deduplicate(corpus.slice(0, 20), RunConfig.preset("default", progress=False, device="cuda", **SMALL))


def test_semantic_stage_gpu_branches(corpus, tmp_path):
    """The semantic stage's GPU path (torch k-means, torch pairwise, fp16 embeddings by default) on the simulated
    GPU; with float32 embeddings and the same k-means backend its decisions equal the CPU path's."""
    pytest.importorskip("sentence_transformers")
    from gpu_dedup import semantic as S
    from gpu_dedup.testing.models import build_random_model

    model = build_random_model(tmp_path / "model", words=sorted({w for t in corpus["text"].to_pylist()
                                                                  for w in t.split()})[:400], max_seq_length=32)
    cfg = RunConfig.preset("default", progress=False, **SMALL)
    sem = S.SemanticConfig(model=model, eps=0.05, n_clusters=3, batch_size=8, precision="float32",
                           kmeans_backend="torch")
    cpu = gpu_dedup.deduplicate(corpus, cfg.replace(device="cpu"), semantic=sem)
    gpu = gpu_dedup.deduplicate(corpus, cfg.replace(device="cuda"), semantic=sem)
    # every decision column byte-identical; the cosine itself comes from torch's matmul on the GPU path and
    # numpy's on the CPU path, which may round the last float32 bit differently
    assert gpu.decisions.drop_columns(["cosine"]).equals(cpu.decisions.drop_columns(["cosine"]))
    np.testing.assert_allclose(gpu.decisions["cosine"].to_numpy(zero_copy_only=False),
                               cpu.decisions["cosine"].to_numpy(zero_copy_only=False), rtol=0, atol=1e-6)
    assert "semantic_duplicate" in cpu.decisions["reason"].to_pylist()
    st = gpu.stats["stages"]["semantic"]
    assert st["pairwise_backend"] == "torch-cpu" and st["clusters"]["backend"] == "torch-cpu"
    # defaults on the GPU path: fp16 embeddings, torch k-means (faiss-cpu has no GPU)
    auto = S.semantic_dedup(corpus, S.SemanticConfig(model=model, n_clusters=3, batch_size=8), None, device="cuda",
                            run=cfg)
    assert auto.stats["model"]["dtype"] == "float16" and auto.stats["clusters"]["backend"] == "torch-cpu"
    assert auto.decisions.num_rows == corpus.num_rows


@pytest.mark.parametrize("overrides", [dict(cluster__exact=False),
                                       dict(cluster__verify=False, cluster__policy="components"),
                                       dict(cluster__exact_verify=True)],
                         ids=["no-exact", "components-unverified", "exact-verify"])
def test_stage_switches(corpus, tmp_path, overrides):
    cfg = RunConfig.preset("default", progress=False, **SMALL, **overrides)
    cpu, gpu = _both(corpus, cfg, tmp_path)
    assert gpu.decisions.equals(cpu.decisions) and cpu.removed > 0


@pytest.mark.parametrize("texts", [[], ["one"], ["two words"] * 5, ["a b c d e f g h"] * 3 + ["short", "short"]],
                         ids=["empty", "single", "all-short-identical", "identical-and-short"])
def test_edge_corpora(tmp_path, texts):
    table = pa.table({"id": pa.array([f"e{i}" for i in range(len(texts))], pa.string()),
                      "text": pa.array(texts, pa.string())})
    cfg = RunConfig.preset("default", progress=False, **SMALL)
    cpu, gpu = _both(table, cfg, tmp_path)
    assert gpu.decisions.equals(cpu.decisions) and cpu.decisions.num_rows == len(texts)


def test_batches_of_an_in_memory_table_copy_only_their_own_bytes(corpus, monkeypatch):
    """Batches of an in-memory table are slices sharing the table's text buffer: each copy to the device
    carries that batch's bytes only (not the whole buffer every time)."""
    from gpu_dedup.lexical import signatures as device  # pass 1 copies each batch to the device

    real, sent = device.to_device, []

    def spy(x, dev):
        if isinstance(x, np.ndarray) and x.dtype == np.uint8:
            sent.append(x.nbytes)
        return real(x, dev)

    monkeypatch.setattr(device, "to_device", spy)
    text_bytes = sum(len(t.encode()) for t in corpus["text"].to_pylist())
    res = gpu_dedup.deduplicate(corpus, RunConfig.preset("default", progress=False, device="cuda",
                                                         batch_bytes=2048, **SMALL))
    # several batches, none carrying more than about its 2 KB (the whole buffer would be text_bytes)
    assert len(sent) >= 4 and max(sent) < 3072 < text_bytes
    assert res.decisions.num_rows == corpus.num_rows


@pytest.mark.parametrize("limit", [0, 3])
def test_giant_candidate_components_run_on_the_host(corpus, tmp_path, monkeypatch, limit, caplog):
    """Components above ops.core.HOST_COMPONENT members go to the CPU kernel during a GPU run (all of them with
    limit 0, the larger ones with 3); decisions stay identical."""
    import gpu_dedup.ops.core as core

    monkeypatch.setattr(core, "HOST_COMPONENT", limit)
    cfg = RunConfig.preset("default", progress=False, **SMALL)
    with caplog.at_level("INFO", logger="gpu_dedup.ops.core"):
        cpu, gpu = _both(corpus, cfg, tmp_path)
    assert gpu.decisions.equals(cpu.decisions) and cpu.removed > 0
    assert any("ran on the host" in m for m in caplog.messages)
    assert gpu.stats["stages"]["policy"] == cpu.stats["stages"]["policy"]
