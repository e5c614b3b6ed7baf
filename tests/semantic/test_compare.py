"""Lexical vs semantic comparison on a corpus whose lexical relations come from its texts and whose
semantic relations come from hand-made embeddings (no model): every region is known in advance, and
the measures compare's pairs carry are checked against independent references (evalcorpus's
blake2b word-shingle sets for Jaccard, a float64 dot product for cosine)."""
import os

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup import RunConfig
from gpu_dedup import semantic as S
from gpu_dedup.lexical.dedup import deduplicate
from gpu_dedup.semantic import compare
from gpu_dedup.testing import reference

VOCAB = [f"w{i}" for i in range(400)]


def _corpus() -> tuple[pa.Table, np.ndarray]:
    """Rows: 0 base A; 1 exact copy of A (both methods); 2 A with its last word changed (Jaccard
    95/97, lexical near duplicate; its embedding is unrelated: lexical only); 3 text B; 4 text C sharing
    B's first half (Jaccard well below 0.8) with an embedding at cosine ~0.999 to B's (semantic only);
    5..9 unrelated texts with unrelated embeddings."""
    rng = np.random.default_rng(11)
    words = lambda k: " ".join(rng.choice(VOCAB, size=k))  # noqa: E731
    a = words(100)
    b = words(60)
    c = " ".join(b.split()[:30]) + " " + words(30)
    texts = [a, a, " ".join(a.split()[:-1] + ["changed"]), b, c] + [words(50) for _ in range(5)]
    d = 16
    emb = rng.normal(size=(len(texts), d))
    emb[1] = emb[0]
    emb[4] = emb[3] + 0.02 * rng.normal(size=d)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    ids = [f"doc{i}" for i in range(len(texts))]
    return pa.table({"id": ids, "text": texts, "score": [float(len(texts) - i) for i in range(len(texts))]}), emb


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp")
    tbl, emb = _corpus()
    path = os.path.join(out, "data.parquet")
    import pyarrow.parquet as pq

    pq.write_table(tbl, path)
    cfg = RunConfig(progress=False)
    deduplicate(path, cfg, out)
    # keep="max:score" (score falls with the row) makes the earlier row of every pair the kept one
    S.semantic_dedup(path, S.SemanticConfig(eps=0.01, keep="max:score"), out, run=cfg, embeddings=emb)
    return str(out), tbl, emb


def test_counts_and_pairs(run_dir):
    out, tbl, emb = run_dir
    res = compare(out, write=False)
    assert res.counts == {"input": 10, "lexical_removed": 2, "semantic_removed": 2, "both": 1, "lexical_only": 1,
                          "semantic_only": 1, "neither": 7}
    pairs = {(p["id"], p["kind"]): p for p in res.pairs.to_pylist()}
    texts = tbl["text"].to_pylist()
    sets = reference.shingle_sets(texts, 5)
    ref_j = lambda i, j: len(sets[i] & sets[j]) / len(sets[i] | sets[j])  # noqa: E731
    # lexical pairs: Jaccard from decisions.parquet, cosine computed from the embeddings
    lex = pairs[("doc2", "lexical")]
    assert lex["matched_id"] == "doc0" and lex["jaccard"] == pytest.approx(95 / 97)
    assert lex["cosine"] == pytest.approx(float(emb[2] @ emb[0]), abs=1e-6)
    assert pairs[("doc1", "lexical")]["jaccard"] == 1.0
    # semantic pairs: cosine from the semantic stage, Jaccard computed from the texts
    sem = pairs[("doc4", "semantic_duplicate")]
    assert sem["matched_id"] == "doc3" and sem["cosine"] == pytest.approx(float(emb[4] @ emb[3]), abs=1e-6)
    assert sem["jaccard"] == pytest.approx(ref_j(4, 3)) and 0.1 < sem["jaccard"] < 0.8
    kept_near = [p for p in res.pairs.to_pylist() if p["kind"] == "semantic_nearest_kept"]
    assert len(kept_near) == 7  # every kept document but the cluster's first has a nearest earlier member
    for p in kept_near:
        i, j = int(p["id"][3:]), int(p["matched_id"][3:])
        assert p["jaccard"] == pytest.approx(ref_j(i, j)) and p["cosine"] < 0.99


def test_examples_and_markdown(run_dir):
    out, _, _ = run_dir
    res = compare(out, write=False)
    ex = {(r["region"], r["id"]): r for r in res.examples.to_pylist()}
    assert set(ex) == {("both", "doc1"), ("lexical_only", "doc2"), ("semantic_only", "doc4")}
    assert ex[("semantic_only", "doc4")]["matched_text"].startswith(" ".join(
        ex[("semantic_only", "doc4")]["text"].split()[:30]))
    md = res.markdown
    assert "| removed by both | 1 | 10.00% |" in md and "| semantic only | 1 | 10.00% |" in md
    assert "### lexical only (1 documents)" in md and "doc2" in md


def test_writes_markdown_and_png(run_dir):
    pytest.importorskip("matplotlib")
    out, _, _ = run_dir
    res = compare(out)
    assert res.markdown_path == os.path.join(out, "compare.md") and res.png_path == os.path.join(out, "compare.png")
    with open(res.png_path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(res.markdown_path, encoding="utf-8") as fh:
        assert fh.read() == res.markdown


def test_missing_inputs_are_clear_errors(tmp_path, run_dir):
    with pytest.raises(FileNotFoundError, match="decisions.parquet"):
        compare(tmp_path)
    out, tbl, emb = run_dir
    lexical_only = tmp_path / "lex"
    deduplicate(tbl, RunConfig(progress=False, write_deduplicated=False), lexical_only)
    with pytest.raises(FileNotFoundError, match="--semantic"):
        compare(lexical_only)
    # an in-memory table cannot be re-read from semantic.json: compare asks for it
    S.semantic_dedup(tbl, S.SemanticConfig(keep="max:score"), lexical_only, run=RunConfig(progress=False),
                     embeddings=emb)
    with pytest.raises(ValueError, match="source="):
        compare(lexical_only, write=False)
    assert compare(lexical_only, source=tbl, write=False).counts["semantic_only"] == 1


def test_compare_reads_merged_decisions(run_dir, tmp_path):
    """After the semantic decisions are merged into decisions.parquet (the one-run layout), the lexical
    reasons still identify the lexical removals: same counts."""
    import shutil

    import pyarrow.parquet as pq

    out, _, _ = run_dir
    merged_dir = tmp_path / "merged"
    shutil.copytree(out, merged_dir)
    lex = pq.read_table(merged_dir / "decisions.parquet")
    sem = pq.read_table(merged_dir / "semantic_decisions.parquet")
    pq.write_table(S.merge_decisions(lex, sem, "beside"), merged_dir / "decisions.parquet")
    assert compare(merged_dir, write=False).counts == compare(out, write=False).counts


@pytest.mark.parametrize("name, damage", [("semantic.json", "{bad"), ("run.json", "[1]"), ("run.json", "")])
def test_a_damaged_run_record_names_the_file(run_dir, tmp_path, name, damage):
    """A run.json / semantic.json cut short or edited: a DataError naming it (a JSONDecodeError or an
    AttributeError traceback before)."""
    import shutil

    from gpu_dedup.errors import DataError

    out = tmp_path / "damaged"
    shutil.copytree(run_dir[0], out)
    (out / name).write_text(damage)
    with pytest.raises(DataError, match=rf"{name}'.*damaged: run it again"):
        compare(out, write=False)


def test_a_run_without_minhash_lsh_is_refused(tmp_path):
    """--no-lexical (or --exact-only) with --semantic-order beside: compare counted every near duplicate as
    semantic-only under a heading naming shingles and a threshold no stage used."""
    import pyarrow.parquet as pq

    from gpu_dedup.errors import DataError

    tbl, emb = _corpus()
    path = str(tmp_path / "data.parquet")
    pq.write_table(tbl, path)
    out = tmp_path / "out"
    cfg = RunConfig(progress=False).replace(cluster__near=False)
    deduplicate(path, cfg, out)
    S.semantic_dedup(path, S.SemanticConfig(eps=0.01, keep="max:score"), out, run=cfg, embeddings=emb)
    with pytest.raises(DataError, match="skipped MinHash/LSH"):
        compare(out, write=False)
