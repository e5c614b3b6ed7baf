"""Paragraph-level exact dedup: split policy, keep-first and cut rules against hand-computed values and
an independent Python reference (line, paragraph, sentence and three-sentence-span units; keep-first and
remove-all), reversibility, flags, streaming, output files, CPU == GPU (simulator), the measured Bloom
false-positive rate through the stage, the defaults (line units, 32-byte minimum) and the progress bar."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.runtime.device import array_backend, simulator, to_host
from gpu_dedup.runtime.passes import progress as engine_progress
from gpu_dedup.io.text import arrow_text_buffers
from gpu_dedup.text.normalize import normalize_strings
from gpu_dedup.paragraph.bloom import BloomConfig
from gpu_dedup.paragraph.dedup import ParagraphConfig, paragraph_dedup
from gpu_dedup.text.spans import hex128
from gpu_dedup.testing.reference import sentence_spans
from gpu_dedup.text.split import split_units

sim_or_gpu = pytest.mark.skipif(not simulator() and not __import__("gpu_dedup.runtime.device", fromlist=["device"]).gpu_status()[0],
                                reason="needs the CUDA simulator or a GPU")
EXACT = BloomConfig(expected_items=10_000, mode="exact")
TINY = 1  # min_paragraph_bytes for tests about tiny units ("A1", "x")
BLOOM = BloomConfig(expected_items=10_000, fp_rate=1e-9)


def _spans(texts, split, device="cpu"):
    from gpu_dedup.runtime.device import to_device

    data, off = arrow_text_buffers(pa.array(texts, pa.large_string()))
    u = split_units(to_device(data, device), to_device(off, device), split, device)
    off_h = off
    uo, s, e = to_host(u.unit_off), to_host(u.start), to_host(u.end)
    doc = np.repeat(np.arange(len(texts)), np.diff(uo))
    return list(zip(doc.tolist(), (s - off_h[doc]).tolist(), (e - off_h[doc]).tolist()))


DOC = "  Alpha one\nalpha two\n\n\n\tBeta\n \nGamma  "


def test_split_policy_golden():
    # hand-computed byte positions: "Alpha one\nalpha two" = [2, 21), "Beta" = [25, 29), "Gamma" = [32, 37);
    # the line " " is blank (whitespace only) so it separates Beta and Gamma
    assert _spans([DOC, "", "\n \n", "x"], "paragraph") == [(0, 2, 21), (0, 25, 29), (0, 32, 37), (3, 0, 1)]
    assert _spans([DOC], "line") == [(0, 2, 11), (0, 12, 21), (0, 25, 29), (0, 32, 37)]


def _run(texts, cfg=None, ids=None, device="cpu"):
    ids = ids or [f"d{i}" for i in range(len(texts))]
    return paragraph_dedup(pa.table({"id": ids, "text": texts}), cfg or ParagraphConfig(bloom=EXACT), device=device)


def test_keep_first_and_cut_rules_golden():
    docs = ["A1\n\nB2\n\nC3", "B2\n\nD4\n\nA1", "C3\n\nB2", "E5\n\n  c3  \n\nF6"]
    r = _run(docs, ParagraphConfig(split="paragraph", bloom=EXACT, min_paragraph_bytes=TINY, min_doc_bytes=5))
    out = r.documents
    assert out.column("text").to_pylist() == ["A1\n\nB2\n\nC3", "D4", "", "E5  \n\nF6"]
    assert out.column("flag").to_pylist() == ["unchanged", "short", "empty", "cut"]
    assert out.column("units_removed").to_pylist() == [0, 2, 2, 1]
    s = r.spans.to_pydict()
    assert s["id"] == ["d1", "d1", "d2", "d2", "d3"]
    assert list(zip(s["byte_start"], s["byte_end"])) == [(0, 2), (8, 10), (0, 2), (4, 6), (6, 8)]
    assert list(zip(s["cut_start"], s["cut_end"])) == [(0, 4), (6, 10), (0, 4), (4, 6), (2, 8)]
    assert s["cut_text"] == ["B2\n\n", "\n\nA1", "C3\n\n", "B2", "\n\n  c3"]
    # "c3" in d3 matches "C3" of d0 after normalization: same 128-bit key
    assert s["paragraph_hash"][4] == s["paragraph_hash"][2] != s["paragraph_hash"][0]
    assert r.stats["counts"]["units_removed"] == 5 and r.stats["counts"]["documents_changed"] == 3


def test_hex128_format():
    arr = hex128(np.array([0x0123456789ABCDEF], np.uint64), np.array([15], np.uint64))
    assert arr.to_pylist() == ["0123456789abcdef000000000000000f"]


def _ref_units(b, split):
    """Python splitting of one document's bytes: lines, paragraphs, or (sentence / span3) the sentences of
    gpu_dedup.testing.reference's brute-force sentence rule."""
    if split in ("sentence", "span3"):
        return sentence_spans(b)
    units, pos, cur = [], 0, None
    for line in b.split(b"\n"):
        stripped = line.strip(b" \t\r\x0b\x0c")
        if stripped:
            s = pos + (len(line) - len(line.lstrip(b" \t\r\x0b\x0c")))
            e = pos + len(line.rstrip(b" \t\r\x0b\x0c"))
            if split == "line":
                units.append((s, e))
            else:
                cur = (cur[0], e) if cur else (s, e)
        elif cur:
            units.append(cur)
            cur = None
        pos += len(line) + 1
    if cur:
        units.append(cur)
    return units


def _reference(texts, split, min_bytes=1, action="keep-first"):
    """Independent reference: Python splitting + normalize_strings + a set (keep-first) or a count of every key
    over the whole input (remove-all), in input order; keys whose normalized text is shorter than ``min_bytes``
    bytes are neither removed nor remembered. span3: the keys are the windows of 3 consecutive sentences and a
    sentence is removed when any removed window holds it. Returns (id, byte_start, byte_end) of the removed units."""
    docs = []
    for t in texts:
        b = t.encode()
        units = _ref_units(b, split)
        spans = [(units[i][0], units[i + 2][1]) for i in range(len(units) - 2)] if split == "span3" else units
        keys = normalize_strings([b[s:e].decode() for s, e in spans]) if spans else []
        docs.append((units, [k if len(k.encode()) >= max(1, min_bytes) else None for k in keys]))
    count = {}
    for _, keys in docs:
        for k in keys:
            if k is not None:
                count[k] = count.get(k, 0) + 1
    seen, removed = set(), []
    for d, (units, keys) in enumerate(docs):
        gone = []
        for k in keys:
            gone.append(k is not None and (k in seen if action == "keep-first" else count[k] > 1))
            if k is not None:
                seen.add(k)
        cut = [any(gone[w] for w in range(max(0, j - 2), min(j + 1, len(gone)))) for j in range(len(units))] \
            if split == "span3" else gone
        removed += [(f"d{d}", s, e) for (s, e), c in zip(units, cut) if c]
    return removed


def _sentence_corpus(seed=0, n=40):
    """Documents of sentences from a pool (repeats across and inside documents, case and space variants that
    normalize alike, CJK terminals, abbreviations), on one line or several."""
    rng = np.random.default_rng(seed)
    pool = ["The same footer sentence is here.", "Café crème brûlée is served daily!",
            "CAFÉ  crème\tbrûlée is served DAILY!", "日本語のテキストです。", "Subscribe now, e.g. to the list.",
            "Is it true? Yes.", "Read the terms of use.", "Contact us at any time today."]
    docs = []
    for i in range(n):
        k = int(rng.integers(1, 7))
        parts = [pool[j] if rng.random() < 0.75 else f"Unique sentence {i} {j} here." for j in rng.integers(0, 8, k)]
        docs.append("".join(p + (" " if rng.random() < 0.7 else "\n") for p in parts).rstrip())
    return docs


def _corpus(seed=0, n=40):
    rng = np.random.default_rng(seed)
    pool = ["The same footer line.", "Café ☕ crème brûlée", "CAFÉ ☕  crème\tbrûlée", "Übersicht: 日本語のテキスト",
            "Subscribe now!\nSecond line of it", "subscribe NOW! second line of it", "x", "Ünïque"]
    seps = ["\n\n", "\n \n\n", "\r\n\r\n", "\n\t\n"]
    docs = []
    for i in range(n):
        k = int(rng.integers(1, 5))
        parts = [pool[j] if rng.random() < 0.7 else f"unique {i} {j} ünï" for j in rng.integers(0, len(pool), k)]
        body = "".join(p + seps[int(rng.integers(0, len(seps)))] for p in parts[:-1]) + parts[-1]
        docs.append(("  " if rng.random() < 0.3 else "") + body + ("\n" if rng.random() < 0.3 else ""))
    return docs


@pytest.mark.parametrize("min_bytes", [TINY, ParagraphConfig().min_paragraph_bytes])
@pytest.mark.parametrize("split,action", [("paragraph", "keep-first"), ("line", "keep-first"),
                                          ("line", "remove-all"), ("sentence", "keep-first"),
                                          ("sentence", "remove-all"), ("span3", "keep-first"),
                                          ("span3", "remove-all")])
def test_matches_reference_and_is_reversible(split, action, min_bytes):
    docs = _sentence_corpus() if split in ("sentence", "span3") else _corpus()
    r = _run(docs, ParagraphConfig(split=split, action=action, bloom=EXACT, min_paragraph_bytes=min_bytes,
                                   batch_bytes=1024))
    s = r.spans.to_pydict()
    want = _reference(docs, split, min_bytes, action)
    assert s["id"] and list(zip(s["id"], s["byte_start"], s["byte_end"])) == want
    if action == "remove-all":  # every copy goes: no removed key is left in the output
        kf = _reference(docs, split, min_bytes, "keep-first")
        assert set(kf) < set(want)
    assert r.stats["policy"]["action"] == action and r.stats["policy"]["split"] == split
    for i, t in enumerate(docs):  # byte offsets refer to the original text
        for sid, a, b, c0, c1, ct in zip(s["id"], s["byte_start"], s["byte_end"], s["cut_start"], s["cut_end"],
                                         s["cut_text"]):
            if sid == f"d{i}":
                assert c0 <= a < b <= c1 and t.encode()[c0:c1] == ct.encode()
    out = r.documents.column("text").to_pylist()
    for i, t in enumerate(docs):  # re-insert the cut texts in ascending order: the original comes back
        rebuilt = out[i].encode()
        for sid, c0, ct in sorted((x, y, z) for x, y, z in zip(s["id"], s["cut_start"], s["cut_text"])):
            if sid == f"d{i}":
                rebuilt = rebuilt[:c0] + ct.encode() + rebuilt[c0:]
        assert rebuilt == t.encode()


def test_batches_bloom_and_exact_agree():
    docs = _corpus(1, 200)
    one = _run(docs, ParagraphConfig(bloom=EXACT))
    many = _run(docs, ParagraphConfig(bloom=EXACT, batch_bytes=1024))
    bloom = _run(docs, ParagraphConfig(bloom=BLOOM, batch_bytes=1024))
    assert sum(len(d.encode()) for d in docs) > 4 * 1024  # really several batches
    assert one.spans.equals(many.spans) and one.documents.equals(many.documents)
    assert bloom.spans.equals(one.spans)  # p = 1e-9 over a few hundred units: no false positive
    st = bloom.stats["seen_set"]
    assert st["mode"] == "bloom" and st["items_inserted"] == one.stats["seen_set"]["items_inserted"]
    assert bloom.stats["memory"]["seen_set_bytes"] == st["bytes"] == (st["m_bits"] + 31) // 32 * 4


def test_remove_all_golden():
    """Every copy of a repeated unit goes, the first too; the rest is as keep-first cuts it, and reversible."""
    docs = ["A1\n\nB2\n\nC3", "B2\n\nD4\n\nA1", "C3\n\nB2", "E5\n\n  c3  \n\nF6"]
    r = _run(docs, ParagraphConfig(split="paragraph", action="remove-all", bloom=EXACT, min_paragraph_bytes=TINY,
                                   min_doc_bytes=5))
    assert r.documents.column("text").to_pylist() == ["", "D4", "", "E5  \n\nF6"]
    assert r.documents.column("units_removed").to_pylist() == [3, 2, 2, 1]
    assert r.stats["repeated_set"]["items_inserted"] == 3  # a1, b2, c3
    assert r.stats["timings_s"]["count"] >= 0 and r.stats["policy"]["keep"].startswith("none")


def test_span3_golden():
    """Three-sentence windows: a window seen before removes its three sentences; documents of fewer than three
    sentences have no window and are never cut."""
    shared = "One is here. Two is here. Three is here."
    docs = [shared + " Four.", "Intro. " + shared, "One is here. Two is here.", "Three is here."]
    r = _run(docs, ParagraphConfig(split="span3", bloom=EXACT, min_paragraph_bytes=TINY))
    assert r.documents.column("text").to_pylist() == [docs[0], "Intro.", docs[2], docs[3]]
    assert r.stats["counts"]["windows"] == 2 + 2 and r.stats["counts"]["units"] == 4 + 4 + 2 + 1
    s = r.spans.to_pydict()
    assert len(set(s["paragraph_hash"])) == 1  # the three sentences are cut by the one repeated window
    r = _run(docs, ParagraphConfig(split="span3", action="remove-all", bloom=EXACT, min_paragraph_bytes=TINY))
    assert r.documents.column("text").to_pylist() == ["Four.", "Intro.", docs[2], docs[3]]


@pytest.mark.parametrize("action", ["keep-first", "remove-all"])
def test_measured_false_positives_are_the_bloom_runs_extra_removals(action):
    """fp_sample=1 replays every key against exact sets: a Bloom filter never misses a removal (no false
    negative), so its false removals are exactly the units it removes beyond an exact run's. A filter sized
    far too small (20 items at p = 0.2 for about a hundred keys) makes them many; a sample of a fifth is
    counted on the sampled keys only, a subset."""
    docs = _corpus(4, 80)
    small = BloomConfig(expected_items=20, fp_rate=0.2)
    exact = _run(docs, ParagraphConfig(action=action, bloom=EXACT, min_paragraph_bytes=TINY, batch_bytes=2048))
    bloom = _run(docs, ParagraphConfig(action=action, bloom=small, min_paragraph_bytes=TINY, batch_bytes=2048,
                                       fp_sample=1.0))
    a = bloom.stats["fp_audit"]
    extra = bloom.stats["counts"]["units_removed"] - exact.stats["counts"]["units_removed"]
    assert a["missed_removals"] == 0 and a["false_removals"] == extra > 10
    assert a["sampled_units"] == exact.stats["counts"]["units_eligible"]
    assert a["units_kept_by_exact_rule"] == a["sampled_units"] - exact.stats["counts"]["units_removed"]
    assert a["measured_fp_rate"] == extra / a["units_kept_by_exact_rule"]
    lo, hi = a["ci95"]
    assert lo <= a["measured_fp_rate"] <= hi and a["exceeds_target"] == (lo > a["target_fp_rate"])
    part = _run(docs, ParagraphConfig(action=action, bloom=small, min_paragraph_bytes=TINY, batch_bytes=2048,
                                      fp_sample=0.2)).stats["fp_audit"]
    assert 0 < part["sampled_units"] < a["sampled_units"] and part["false_removals"] <= extra
    assert "fp_audit" not in exact.stats  # off unless asked for


def test_min_paragraph_bytes_keeps_short_units():
    docs = ["Ok\n\nreal text here", "ok\n\nother text"]
    assert _run(docs, ParagraphConfig(bloom=EXACT, min_paragraph_bytes=TINY)).spans.num_rows == 1
    assert _run(docs, ParagraphConfig(bloom=EXACT, min_paragraph_bytes=0)).spans.num_rows == 1  # 0 means 1
    r = _run(docs, ParagraphConfig(bloom=EXACT, min_paragraph_bytes=3))
    assert r.spans.num_rows == 0 and r.stats["counts"]["units_eligible"] == 2
    # the minimum counts NORMALIZED bytes: runs of whitespace collapse, so this 3-byte unit is short
    spaced = ["o \t\t k\n\nreal text here", "O K\n\nother text"]
    assert _run(spaced, ParagraphConfig(bloom=EXACT, min_paragraph_bytes=4)).spans.num_rows == 0
    assert _run(spaced, ParagraphConfig(bloom=EXACT, min_paragraph_bytes=3)).spans.num_rows == 1


def test_config_validation():
    with pytest.raises(ValueError, match="split"):
        ParagraphConfig(split="span2")
    with pytest.raises(ValueError, match="action"):
        ParagraphConfig(action="remove")
    for bad in (-0.1, 1.5, "0.1", True):
        with pytest.raises(ValueError, match="fp_sample"):
            ParagraphConfig(fp_sample=bad)
    with pytest.raises(ValueError, match="min_doc_bytes"):
        ParagraphConfig(min_doc_bytes=-1)
    with pytest.raises(ValueError, match="min_paragraph_bytes"):
        ParagraphConfig(min_paragraph_bytes=True)
    with pytest.raises(ValueError, match="progress"):
        ParagraphConfig(progress="yes")


def test_output_files_keep_format_and_columns(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    rows = [{"id": "j0", "text": "Shared para\n\nfirst only", "meta": {"k": [1, 2]}},
            {"id": "j1", "text": "untouched ünï\n\nlines", "meta": None},
            {"id": "j2", "text": "intro\n\nshared PARA", "n": 1.5}]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    (src / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"id": ["p0", "p1"], "text": ["first only\n\nkept", "nothing shared"],
                             "score": [0.5, 0.25]}), src / "b.parquet")
    out = tmp_path / "out"
    cfg = ParagraphConfig(bloom=EXACT, min_paragraph_bytes=TINY)
    r = paragraph_dedup(str(src), cfg, out)
    mem = paragraph_dedup(str(src), cfg)
    got = (out / "paragraph_deduplicated" / "a.jsonl").read_text(encoding="utf-8").splitlines()
    assert got[0] == lines[0] and got[1] == lines[1]  # untouched rows: original bytes
    j2 = json.loads(got[2])
    assert j2 == {"id": "j2", "text": "intro", "n": 1.5}
    t = pq.read_table(out / "paragraph_deduplicated" / "b.parquet")
    assert t.column_names == ["id", "text", "score"] and t.column("score").to_pylist() == [0.5, 0.25]
    assert t.column("text").to_pylist() == ["kept", "nothing shared"]
    assert pq.read_table(out / "removed_spans.parquet").equals(mem.spans)
    docs = pq.read_table(out / "paragraph_docs.parquet")
    assert docs.equals(mem.documents.drop_columns(["text"]))
    assert docs.column("flag").to_pylist() == ["unchanged", "unchanged", "short", "short", "unchanged"]
    stats = json.loads((out / "paragraph_dedup.json").read_text())
    assert stats["written"] == {"files": 2, "rows_written": 5, "rows_changed": 2}
    assert r.spans is None and stats["counts"]["units_removed"] == 2


@sim_or_gpu
@pytest.mark.parametrize("split,action", [("paragraph", "keep-first"), ("line", "keep-first"),
                                          ("sentence", "remove-all"), ("span3", "keep-first")])
def test_cpu_and_gpu_match(split, action):
    docs = _sentence_corpus(2, 8 if split == "sentence" else 25) if split in ("sentence", "span3") else _corpus(2, 25)
    for bloom in (BLOOM, EXACT):
        cfg = ParagraphConfig(split=split, action=action, bloom=bloom, min_paragraph_bytes=TINY,
                              batch_bytes=1024 if split in ("paragraph", "line") else 4096,
                              fp_sample=0.5 if split == "span3" else 0.0)
        c, g = _run(docs, cfg, device="cpu"), _run(docs, cfg, device="cuda")
        assert c.spans.num_rows > 0
        assert c.spans.equals(g.spans) and c.documents.equals(g.documents)
        # CI: the strict CuPy stand-in ran the device branches (a real GPU: CuPy)
        assert (c.stats["array_backend"], g.stats["array_backend"]) == ("numpy", array_backend("cuda"))


def test_capacity_policy_reaches_the_stage(caplog):
    from gpu_dedup.paragraph.bloom import BloomCapacityError

    docs = [f"para {i}\n\nother {i}" for i in range(10)]
    with pytest.raises(BloomCapacityError, match="expected-paragraphs"):
        _run(docs, ParagraphConfig(bloom=BloomConfig(expected_items=5, fp_rate=0.01, on_overflow="refuse"),
                                   min_paragraph_bytes=TINY))
    with caplog.at_level("WARNING", logger="gpu_dedup.paragraph.bloom"):
        r = _run(docs, ParagraphConfig(bloom=BloomConfig(expected_items=5, fp_rate=0.01), min_paragraph_bytes=TINY))
    st = r.stats["seen_set"]
    assert st["over_design"] and st["items_inserted"] == 20 and st["design_items"] == 5
    assert st["estimated_fp_rate_from_fill"] > 0.01 and any("design n=5" in m for m in caplog.messages)


# ----------------------------------------------------------------------------------------------------
# Defaults (issue #14): one unit per line, a 32-byte minimum, no progress bar unless asked for
# ----------------------------------------------------------------------------------------------------

FOOTER = "Copyright 2024 Example Media Group. All rights reserved."
COOKIES = "We use cookies to improve your experience on our website."


def _web_doc(i):
    """Extracted web text: one paragraph per line, no blank lines, shared boilerplate lines."""
    return "\n".join([f"Headline number {i}: the council approves a new budget for {2000 + i}",
                      COOKIES,
                      f"The vote on item {i} passed after a long debate about roads and schools.",
                      FOOTER])


def test_defaults_are_lines_a_32_byte_minimum_and_no_progress():
    d = ParagraphConfig()
    assert (d.split, d.min_paragraph_bytes, d.progress) == ("line", 32, False)


def test_web_document_repeated_lines_are_cut_by_default():
    docs = [_web_doc(i) for i in range(3)]
    r = _run(docs, ParagraphConfig(bloom=EXACT))  # every other field at its default
    s = r.spans.to_pydict()
    assert s["id"] == ["d1", "d1", "d2", "d2"]
    assert s["cut_text"] == [f"\n{COOKIES}", f"\n{FOOTER}"] * 2  # the newline before: the headline is kept
    out = r.documents.column("text").to_pylist()
    assert out[0] == docs[0]
    assert out[1] == "\n".join(docs[1].split("\n")[i] for i in (0, 2))
    assert r.stats["policy"]["split"] == "line" and r.stats["counts"]["units_removed"] == 4
    # the old default (blank-line blocks) sees each web document as ONE unit: nothing repeats, nothing is cut
    blocks = _run(docs, ParagraphConfig(split="paragraph", bloom=EXACT))
    assert blocks.stats["counts"]["units"] == 3 and blocks.spans.num_rows == 0


def test_one_word_heading_repeated_across_documents_is_not_cut_by_default():
    docs = [f"SYNOPSIS\nHome\ngpu-dedup command number {i} reads a corpus and writes its decisions\n{FOOTER}"
            for i in range(3)]
    r = _run(docs, ParagraphConfig(bloom=EXACT))
    out = r.documents.column("text").to_pylist()
    assert all(t.startswith("SYNOPSIS\nHome\n") for t in out)
    assert r.spans.column("cut_text").to_pylist() == [f"\n{FOOTER}"] * 2  # the long boilerplate line still goes
    c = r.stats["counts"]
    assert (c["units"], c["units_eligible"], c["units_removed"]) == (12, 6, 2)
    assert r.stats["policy"]["min_paragraph_bytes"] == 32
    # the minimum is what protects the headings: without it their later copies are cut
    tiny = _run(docs, ParagraphConfig(bloom=EXACT, min_paragraph_bytes=TINY))
    assert tiny.stats["counts"]["units_removed"] == 6
    assert not any(t.startswith("SYNOPSIS") for t in tiny.documents.column("text").to_pylist()[1:])


@pytest.mark.parametrize("on", [True, False])
def test_progress_bar_only_when_asked(on, capsys, monkeypatch):
    import gpu_dedup.paragraph.dedup as stage

    counted = []

    def recording(cfg, desc, total=None, files=None):  # the engine's bar, with its updates recorded
        bar = engine_progress(cfg, desc, total, files)
        update = bar.update
        bar.update = lambda n, *file: (counted.append(n), update(n, *file))[1]
        return bar

    monkeypatch.setattr(stage, "progress", recording)
    docs = [_web_doc(i) for i in range(4)]
    _run(docs, ParagraphConfig(bloom=EXACT, progress=on, batch_bytes=1024))
    assert sum(counted) == 4 and len(counted) > 1  # documents, batch by batch
    err = capsys.readouterr().err
    if on:
        assert "paragraph dedup" in err and "doc" in err  # tqdm on stderr
    else:
        assert err == ""


@sim_or_gpu
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_gpu_split_bit_identical_at_every_cut(chunk):
    """The GPU splits line-aligned pieces of about ``chunk`` bytes and merges the paragraphs that run over a
    cut: one long document (> 4 KB: paragraphs of many lines, blank lines with spaces, CRLF) among short ones
    gives the CPU's units in both modes."""
    from gpu_dedup.runtime.device import to_device

    rng = np.random.default_rng(8)
    paras = ["\n".join(" ".join(rng.choice(["a", "bb", "ccc", "é", "\t"], rng.integers(1, 9)))
                       for _ in range(rng.integers(1, 6))) for _ in range(120)]
    long_doc = "".join(p + rng.choice(["\n\n", "\n \t\n", "\r\n\r\n", "\n\n\n"]) for p in paras) + "tail line"
    assert len(long_doc.encode()) > 4096
    sent_doc = "".join(rng.choice(["Ab", " ", "c", ".", "!", "? ", "。", "\n", "e.g. x", '"', "\r\n", "\t"], 1500))
    texts = ["", "one line", "x\n\ny\n", "\n\n  \n", long_doc, "a\nb\nc", "p1 l1\np1 l2\n\n\np2\n", sent_doc]
    data, offsets = arrow_text_buffers(pa.array(texts, pa.large_string()))
    for split in ("paragraph", "line", "sentence"):
        c = split_units(data, offsets, split, "cpu")
        g = split_units(to_device(data, "cuda"), to_device(offsets, "cuda"), split, "cuda", chunk=chunk)
        for a, b in ((c.unit_off, g.unit_off), (c.start, g.start), (c.end, g.end)):
            assert np.array_equal(a, to_host(b)), split
        assert int(c.unit_off[5] - c.unit_off[4]) >= (120 if split == "paragraph" else 200)
        if split == "sentence":
            assert int(c.unit_off[8] - c.unit_off[7]) > 300


@sim_or_gpu
@pytest.mark.parametrize("chunk", [1, 7])
def test_gpu_span_hashes_bit_identical_at_every_cut(chunk):
    """span_hashes on the GPU (gathered spans, normalized by chunks of ``chunk`` bytes, a block per span for the
    two XXH64) equals the CPU's thread per span: a long paragraph (~800 B of mixed case, accents, runs of
    spaces, punctuation: normalization changes sizes) among short ones, empty and all-space spans, both
    default and case-sensitive normalization, a seed."""
    from gpu_dedup.config import NormalizeConfig
    from gpu_dedup.runtime.device import to_device
    from gpu_dedup.text.spans import span_hashes

    rng = np.random.default_rng(3)
    words = ["Alpha", "ÉCOLE", "naïve", "ﬁne", "x", "  ", "\t", "Straße", "ΣΟΦΙΑ", "—", "...", "42", "😀"]
    long_para = " ".join(rng.choice(words, 120))
    text = ("short one.\n\n" + long_para + "\n\n  \t \n\nB  b\n\n" + long_para[:37]).encode()
    data = np.frombuffer(text, np.uint8).copy()
    paras, pos = [], 0
    for part in text.split(b"\n\n"):
        paras.append((pos, pos + len(part)))
        pos += len(part) + 2
    paras += [(3, 3), (0, 20)]  # an empty span, one across a paragraph break
    start = np.array([p[0] for p in paras], np.int64)
    end = np.array([p[1] for p in paras], np.int64)
    assert end[1] - start[1] > 600
    for cfg, seed in ((NormalizeConfig(), 0), (NormalizeConfig(lowercase=False), 12345)):
        want = span_hashes(data, start, end, cfg, seed, "cpu")
        got = span_hashes(to_device(data, "cuda"), to_device(start, "cuda"), to_device(end, "cuda"), cfg, seed,
                          "cuda", chunk=chunk)
        for a, b in zip(want, got):
            assert np.array_equal(a, to_host(b)), (cfg, seed)
        assert want[2][1] > 500 and want[2][2] == 0 and want[2][5] == 0
