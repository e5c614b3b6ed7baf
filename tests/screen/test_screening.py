"""Contamination screening: the seed's "solve this exact problem" fixture, the default-n limitation, the
common-phrase false alarm (stop-list and item-frequency policy), original byte offsets, benchmark
formats, an independent reference, output files and CPU == GPU (simulator)."""
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.config import NormalizeConfig
from gpu_dedup.errors import DataError
from gpu_dedup.runtime.device import array_backend, simulator, to_device, to_host
from gpu_dedup.text.normalize import normalize_text
from gpu_dedup.screen.screening import (MATCHES_SCHEMA, ScreenConfig, load_phrases, ngram_hashes, read_benchmarks, screen,
                              word_spans)

sim_or_gpu = pytest.mark.skipif(not simulator() and not __import__("gpu_dedup.runtime.device", fromlist=["device"]).gpu_status()[0],
                                reason="needs the CUDA simulator or a GPU")


def _corpus(pairs):
    return pa.table({"id": [p[0] for p in pairs], "text": [p[1] for p in pairs]})


SEED_DOCS = [("leak", "prefix solve this exact problem suffix"), ("clean", "a genuinely separate example")]


@pytest.fixture
def seed_bench(tmp_path):
    p = tmp_path / "seed_bench.txt"
    p.write_text("solve this exact problem\n")
    return str(p)


def test_seed_fixture_at_n3(seed_bench):
    r = screen(_corpus(SEED_DOCS), [seed_bench], ScreenConfig(ngram=3, min_ngram=3))
    assert r.flagged_ids == {"leak"}
    m = r.matches.to_pylist()[0]
    # the seed's answer: {'leak': [('solve','this','exact'), ('this','exact','problem')]}
    assert m["matched_ngrams"] == 2 and m["sample_ngrams"] == ["solve this exact", "this exact problem"]
    assert (m["sample_byte_start"], m["sample_byte_end"]) == ([7, 13], [23, 31])
    assert m["item_id"] == "seed_bench.txt:1" and m["benchmark"] == "seed_bench.txt"


def test_seed_fixture_not_flagged_at_default_n(seed_bench):
    # a 4-word item has no 13-gram: 13-gram screening cannot see it (reported, not silently passed)
    r = screen(_corpus(SEED_DOCS), [seed_bench])
    assert r.matches.num_rows == 0
    c = r.counts["seed_bench.txt"]
    assert c["items"] == 1 and c["items_too_short"] == 1 and c["items_screened"] == 0


def test_short_ngram_needs_explicit_min_ngram():
    with pytest.raises(ValueError, match="min_ngram"):
        ScreenConfig(ngram=3)
    assert ScreenConfig(ngram=8).min_ngram == 8


MIT = ("Permission is hereby granted, free of charge, to any person obtaining a copy of this software and "
       "associated documentation files")
TASK = "Write a function that returns the median of three integers without using any sorting routine from the library."


def _write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def test_common_phrase_false_alarm(tmp_path):
    bench = _write_jsonl(tmp_path / "code.jsonl", [
        {"id": "code-1", "prompt": MIT + ". " + TASK, "solution": "def median3(a, b, c): return a + b + c - "
                                                                  "max(a, b, c) - min(a, b, c)"},
        {"id": "code-2", "prompt": "Reverse a linked list in place and return the new head node of the list "
                                   "without allocating new nodes."}])
    docs = _corpus([("license", "MIT License\n\n" + MIT + ", to deal in the Software without restriction."),
                    ("leak", "Homework: write a function that returns the median of three integers without using "
                             "any sorting routine from the library."),
                    ("clean", "An unrelated page about gardening and tomatoes in the spring.")])
    base = ScreenConfig(max_items_per_ngram=None)
    assert screen(docs, [bench], base).flagged_ids == {"license", "leak"}  # the false alarm
    phrases = tmp_path / "common.txt"
    phrases.write_text(MIT + "\n\nshort phrase\n")
    cfg = ScreenConfig(max_items_per_ngram=None, common_phrases=load_phrases(phrases))
    r = screen(docs, [bench], cfg)
    assert r.flagged_ids == {"leak"}
    c = r.counts["code.jsonl"]
    assert c["ngrams_ignored_common_phrase"] == 20 - 13 + 1  # the 20-word phrase has 8 13-grams
    assert r.stats["policy"]["common_phrases_shorter_than_n"] == 1


def test_template_shared_by_many_items_is_ignored(tmp_path):
    header = ("The following are multiple choice questions with answers about high school physics please choose "
              "exactly one option.")
    qs = ["What is the acceleration of a ball dropped from rest near the surface of the earth in a vacuum",
          "Which quantity stays constant for an object moving in a circle at steady speed along its path",
          "How much work is done by a constant force perpendicular to the displacement of a sliding box"]
    bench = _write_jsonl(tmp_path / "mc.jsonl",
                         [{"id": f"q{i}", "question": header + " " + q} for i, q in enumerate(qs)])
    docs = _corpus([("quiz-site", "Welcome! " + header + " Good luck with your own questions today."),
                    ("leak", "Q: " + qs[1] + "? A: velocity magnitude")])
    assert screen(docs, [bench], ScreenConfig(max_items_per_ngram=None)).flagged_ids == {"quiz-site", "leak"}
    r = screen(docs, [bench], ScreenConfig(max_items_per_ngram=2))
    assert r.flagged_ids == {"leak"}
    assert r.matches.to_pylist()[0]["item_id"] == "q1"
    assert r.counts["mc.jsonl"]["ngrams_ignored_frequent"] == 3 * (17 - 13 + 1)


def test_offsets_refer_to_original_text(seed_bench):
    doc = "Intro… «Ｓolve, THIS exact — problem!» end"
    r = screen(_corpus([("u", doc)]), [seed_bench], ScreenConfig(ngram=3, min_ngram=3))
    m = r.matches.to_pylist()[0]
    assert m["sample_ngrams"] == ["Ｓolve, THIS exact", "THIS exact — problem"]
    raw = doc.encode()
    for s, e, t in zip(m["sample_byte_start"], m["sample_byte_end"], m["sample_ngrams"]):
        assert raw[s:e].decode() == t


def test_min_matches(tmp_path):
    bench = tmp_path / "b.txt"
    bench.write_text("one two three four five six seven eight nine ten\n")
    docs = _corpus([("a", "zero one two three four five six seven eight x"),
                    ("b", "one two three four five six seven eight nine y")])
    assert screen(docs, [str(bench)], ScreenConfig(ngram=8)).flagged_ids == {"a", "b"}
    r = screen(docs, [str(bench)], ScreenConfig(ngram=8, min_matches=2))
    assert r.flagged_ids == {"b"} and r.matches.to_pylist()[0]["matched_ngrams"] == 2


def test_benchmark_formats(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", [{"id": 7, "prompt": "p one", "answer": "a one", "choices": ["x"]},
                                        {"prompt": "p two"}, {"other": "no field"}])
    pq.write_table(pa.table({"question": ["q"], "solution": ["s"]}), tmp_path / "b.parquet")
    (tmp_path / "c.json").write_text(json.dumps([{"problem": "pb", "id": "c0"}]))
    (tmp_path / "d.txt").write_text("line one\n\n  \nline two\n")
    paths = [str(tmp_path / n) for n in ("a.jsonl", "b.parquet", "c.json", "d.txt")]
    items = read_benchmarks(paths, ScreenConfig())
    assert items.item_ids == ["7", "a.jsonl:1", "b.parquet:0", "c0", "d.txt:1", "d.txt:4"]
    assert items.piece_text == ["p one", "a one", "p two", "q", "s", "pb", "line one", "line two"]
    assert items.no_field["a.jsonl"] == 1
    whole = read_benchmarks([str(tmp_path / "d.txt")], ScreenConfig(text_unit="file"))
    assert whole.item_ids == ["d.txt"] and whole.piece_text == ["line one\n\n  \nline two\n"]
    with pytest.raises(ValueError, match="no record has any of the fields"):
        read_benchmarks([paths[0]], ScreenConfig(fields=("missing",)))


@pytest.mark.parametrize("name", ["b.jsonl.gz", "b.parquet", "b.json"])
def test_damaged_benchmark_file_is_named(tmp_path, name):
    """A truncated gzip stream or Parquet file, a broken JSON array: a DataError naming the file (was the bare
    'Truncated compressed stream' of the decompressor, or pyarrow's / json's own error)."""
    import gzip

    p = tmp_path / name
    if name.endswith(".gz"):
        data = gzip.compress(b"".join(json.dumps({"prompt": f"item {i}"}).encode() + b"\n" for i in range(300)))
        p.write_bytes(data[:len(data) // 2])
    elif name.endswith(".parquet"):
        pq.write_table(pa.table({"prompt": [f"item {i}" for i in range(300)]}), p)
        p.write_bytes(p.read_bytes()[:200])
    else:
        p.write_text('[{"prompt": "one"},\n{"prompt": ')
    with pytest.raises(DataError, match=f"benchmark file {re.escape(str(p))}: not readable"):
        read_benchmarks([str(p)], ScreenConfig())


def test_items_are_named_by_a_known_id_field(tmp_path, caplog, capsys):
    """Issue 36 item 14: HumanEval's records name their items by task_id, not id: the item ids are those
    (found among ITEM_ID_FIELDS, said in the log, recorded in counts.json); a file with none of them is named
    by record position, said too; --benchmark-id-field picks another field."""
    import logging

    from gpu_dedup.cli import main

    _write_jsonl(tmp_path / "HumanEval.jsonl", [
        {"task_id": f"HumanEval/{i}", "entry_point": f"f{i}", "prompt": p} for i, p in enumerate(
            ("compute the factorial of n", "reverse the given string now", "sort the list of numbers"))])
    _write_jsonl(tmp_path / "plain.jsonl", [{"question": "what is two plus two"}])
    paths = [str(tmp_path / "HumanEval.jsonl"), str(tmp_path / "plain.jsonl")]
    with caplog.at_level(logging.INFO, logger="gpu_dedup.screen"):
        items = read_benchmarks(paths, ScreenConfig())
    assert items.item_ids == ["HumanEval/0", "HumanEval/1", "HumanEval/2", "plain.jsonl:0"]
    assert "benchmark HumanEval.jsonl: items named by their field 'task_id'" in caplog.text
    assert "benchmark plain.jsonl: no id field (none of id, task_id" in caplog.text
    assert read_benchmarks(paths[:1], ScreenConfig(item_id_field="entry_point")).item_ids == ["f0", "f1", "f2"]

    corpus = tmp_path / "corpus.jsonl"
    _write_jsonl(corpus, [{"id": "leak", "text": "please reverse the given string now"}])
    assert main(["screen", str(corpus), "--benchmark", paths[0], "-o", str(tmp_path / "o"), "--ngram", "3",
                 "--min-ngram", "3", "-q", "--device", "cpu"]) == 0
    assert pq.read_table(tmp_path / "o" / "matches.parquet")["item_id"].to_pylist() == ["HumanEval/1"]
    assert json.loads((tmp_path / "o" / "counts.json").read_text())["HumanEval.jsonl"]["item_id_field"] == "task_id"
    assert main(["screen", str(corpus), "--benchmark", paths[0], "-o", str(tmp_path / "o2"), "--ngram", "3",
                 "--min-ngram", "3", "-q", "--device", "cpu", "--benchmark-id-field", "entry_point"]) == 0
    assert pq.read_table(tmp_path / "o2" / "matches.parquet")["item_id"].to_pylist() == ["f1"]


def _seed_shingles(text, n):  # the seed's definition
    words = text.lower().split()
    return {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}


def _random_case(seed=0, n_docs=30):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12)]
    items = [" ".join(rng.choice(vocab, 14)) for _ in range(4)]
    docs = []
    for d in range(n_docs):
        words = list(rng.choice(vocab, 25))
        if d % 3 == 0:  # plant a piece of an item
            it = items[d % 4].split()
            k = int(rng.integers(8, 14))
            words[3:3 + k] = it[:k]
        docs.append((f"doc{d}", " ".join(words)))
    return items, docs


def test_matches_independent_reference(tmp_path):
    items, docs = _random_case()
    bench = tmp_path / "r.txt"
    bench.write_text("\n".join(items) + "\n")
    r = screen(_corpus(docs), [str(bench)], ScreenConfig(ngram=8, max_items_per_ngram=None))
    expect = {}
    for did, text in docs:
        for i, it in enumerate(items):
            k = len(_seed_shingles(text, 8) & _seed_shingles(it, 8))
            if k:
                expect[(did, f"r.txt:{i + 1}")] = k
    got = {(m["id"], m["item_id"]): m["matched_ngrams"] for m in r.matches.to_pylist()}
    assert got == expect and len(expect) >= 5
    assert len({d for d, _ in expect}) < len(docs)  # some documents stay clean


def test_output_files(tmp_path, seed_bench):
    out = tmp_path / "out"
    r = screen(_corpus(SEED_DOCS), [seed_bench], ScreenConfig(ngram=3, min_ngram=3), output_dir=out)
    t = pq.read_table(out / "matches.parquet")
    assert t.schema.names[0] == "id" and t.schema.equals(MATCHES_SCHEMA) and t.equals(r.matches)
    counts = json.loads((out / "counts.json").read_text())
    assert counts["seed_bench.txt"]["documents_flagged"] == 1 and counts["seed_bench.txt"]["items_matched"] == 1
    stats = json.loads((out / "screen.json").read_text())
    assert stats["totals"] == {"documents": 2, "bytes": sum(len(t.encode()) for _, t in SEED_DOCS),
                               "documents_flagged": 1, "match_rows": 1}


@sim_or_gpu
def test_cpu_and_gpu_match(tmp_path):
    items, docs = _random_case(1, 12)
    bench = tmp_path / "r.txt"
    bench.write_text("\n".join(items) + "\n")
    docs.append(("uni", "Intro… «" + items[0].upper().replace(" ", ", ", 3) + "» end"))
    cfg = ScreenConfig(ngram=8, max_items_per_ngram=None, batch_bytes=1024)
    c = screen(_corpus(docs), [str(bench)], cfg, device="cpu")
    g = screen(_corpus(docs), [str(bench)], cfg, device="cuda")
    assert c.matches.num_rows > 0 and "uni" in c.flagged_ids
    assert c.matches.equals(g.matches) and c.counts == g.counts
    assert (c.stats["array_backend"], g.stats["array_backend"]) == ("numpy", array_backend("cuda"))


@sim_or_gpu
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_gpu_ngram_hashes_bit_identical_at_every_chunk_boundary(chunk):
    """The GPU cuts documents into chunks of ``chunk`` n-grams (and 4 KB of text for the word starts): one
    long document (> 4 KB) among short ones (fewer words than n included) gives the CPU's hashes."""
    rng = np.random.default_rng(6)
    long_doc = " ".join(rng.choice(["solve", "This", "exäct", "日本語", "problem,", "x.y"], 800))
    texts = ["", "one two", "a b c d e", long_doc, "  spaced   out\ttext here  ", "q " * 9]
    assert len(long_doc.encode()) > 4096
    c = normalize_text(pa.array(texts), NormalizeConfig(), "cpu")
    g = normalize_text(pa.array(texts), NormalizeConfig(), "cuda")
    for n in (1, 3):
        hc, bc = ngram_hashes(c, n, 11, "cpu")
        hg, bg = ngram_hashes(g, n, 11, "cuda", chunk=chunk)
        assert np.array_equal(to_host(bg), bc) and np.array_equal(to_host(hg), hc)
        assert bc[4] - bc[3] > 500  # the long document's n-grams span many chunks


@sim_or_gpu
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_gpu_word_spans_bit_identical_at_every_chunk_boundary(chunk):
    """The GPU cuts documents into chunks of ``chunk`` bytes (moved to normalization entry points): a long
    document among short ones, with images that are empty (soft hyphen, zero-width space), start with a space
    (U+00A8: "x¨y" is the words "x" and "¨y") or hold several codepoints (U+00BC), gives the CPU's spans and
    normalize_text's word counts; the documents are a non-contiguous subset of the batch, as screening passes its
    flagged ones."""
    long_doc = "  ab\u00adcd \u200b\u200bx\u00a8y ¼ «日本語» e\u00ad\u00ad\u00ad fin\u200b " * 4 + "tail\u00ad"
    texts = ["skip me", "", "one", long_doc, "  spaced \u200b  out\ttext  ", "\u00ad\u00ad", "last. word"]
    cfg = NormalizeConfig()
    words = to_host(normalize_text(pa.array(texts), cfg, "cpu").words)
    raw = [t.encode() for t in texts]
    off = np.concatenate([[0], np.cumsum([len(b) for b in raw])]).astype(np.int64)
    data = np.frombuffer(b"".join(raw), np.uint8).copy()
    pick = np.array([1, 2, 3, 4, 5, 6], np.int64)
    starts, ends, want = off[pick], off[pick + 1], words[pick].astype(np.int64)
    bc, sc, ec = word_spans(data, starts, ends, want, cfg, "cpu")
    dev = [to_device(a, "cuda") for a in (data, starts, ends, want)]
    bg, sg, eg = word_spans(*dev, cfg, "cuda", chunk=chunk)
    assert np.array_equal(to_host(bg), bc) and np.array_equal(to_host(sg), sc) and np.array_equal(to_host(eg), ec)
    k = 2  # the long document: its words are the normalized ones, their spans cover each word's bytes
    got = [data[s:e].tobytes().decode() for s, e in zip(sc[bc[k]:bc[k + 1]], ec[bc[k]:bc[k + 1]])]
    assert len(got) == 4 * 7 + 1 and got[:7] == ["ab\u00adcd", "x", "\u00a8y", "¼", "«日本語»", "e", "fin"]
