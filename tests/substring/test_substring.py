"""Exact-substring dedup against independent brute-force references (Python lists, every pair of positions)."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.runtime.device import array_backend, to_device, to_host
from gpu_dedup.substring import SubstringConfig, substring_dedup
from gpu_dedup.substring.suffix import lcp_array, suffix_and_lcp, suffix_array, suffix_array_doubling
from gpu_dedup.substring.tokens import CJK_RANGES


# ----------------------------------------------------------------------------------------------------
# references
# ----------------------------------------------------------------------------------------------------

def brute_sa(t):
    return sorted(range(len(t)), key=lambda i: list(t[i:]))


def brute_lcp(t, sa):
    out = []
    for r in range(len(sa)):
        if r + 1 == len(sa):
            out.append(0)
            continue
        a, b, h = sa[r], sa[r + 1], 0
        while a + h < len(t) and b + h < len(t) and t[a + h] == t[b + h]:
            h += 1
        out.append(h)
    return out


def brute_cut(docs, k, order):
    """docs: lists of token strings; order: documents in keep order. Returns per document the set of cut token
    offsets: tokens covered by a window equal to one at an earlier (keep rank, offset) position."""
    pos = {d: r for r, d in enumerate(order)}
    windows = [(pos[d], i, tuple(docs[d][i:i + k]), d) for d in range(len(docs)) for i in range(len(docs[d]) - k + 1)]
    cut = [set() for _ in docs]
    for (r, i, w, d) in windows:
        if any(w2 == w and (r2, i2) < (r, i) for (r2, i2, w2, _) in windows):
            cut[d].update(range(i, i + k))
    return cut


def words(text):
    """The word units of tokens.py's rule, written over Python characters: runs of characters that are not
    ASCII whitespace or U+3000, each character of CJK_RANGES a unit of its own; lowercased (NFKC-lowercase on
    these texts)."""
    out, cur = [], ""
    for ch in text:
        own = any(a <= ord(ch) <= b for a, b in CJK_RANGES)
        if ch in " \t\n\x0b\x0c\r\u3000" or own:
            out += [cur] if cur else []
            cur = ""
            out += [ch] if own else []
        else:
            cur += ch
    return [w.lower() for w in out + ([cur] if cur else [])]


def cut_tokens(res):
    """Cut token offsets per document from the spans table."""
    n = res.documents.num_rows
    cut = [set() for _ in range(n)]
    for s in res.spans.to_pylist():
        cut[s["row"]].update(range(s["token_start"], s["token_end"]))
    return cut


def restore(text, spans):
    """Re-insert cut_text at cut_start in ascending order."""
    b = text.encode("utf-8")
    for s in sorted(spans, key=lambda s: s["cut_start"]):
        b = b[:s["cut_start"]] + s["cut_text"].encode("utf-8") + b[s["cut_start"]:]
    return b.decode("utf-8")


def run(texts, device="cpu", **kw):
    t = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts})
    return substring_dedup(t, SubstringConfig(**kw), device=device)


def check_all(texts, k, keep="first", **kw):
    res = run(texts, min_tokens=k, keep=keep, **kw)
    docs = [words(t) for t in texts]
    if keep == "first":
        order = list(range(len(texts)))
    else:  # longest: most bytes first, ties in input order
        order = sorted(range(len(texts)), key=lambda d: (-len(texts[d].encode()), d))
    assert cut_tokens(res) == brute_cut(docs, k, order)
    pos = {d: r for r, d in enumerate(order)}
    for s in res.spans.to_pylist():  # the kept copy: the earliest window equal to the span's first one
        w = tuple(docs[s["row"]][s["token_start"]:s["token_start"] + k])
        earliest = min((pos[d], i) for d in range(len(docs)) for i in range(len(docs[d]) - k + 1)
                       if tuple(docs[d][i:i + k]) == w)
        assert (pos[s["kept_row"]], s["kept_token"]) == earliest
        assert words(texts[s["kept_row"]].encode()[s["kept_byte"]:].decode())[0] == w[0]
    hashes = {}
    for s in res.spans.to_pylist():  # equal token sequences, equal hashes
        seq = tuple(docs[s["row"]][s["token_start"]:s["token_end"]])
        assert hashes.setdefault(seq, s["span_hash"]) == s["span_hash"]
    got = res.documents.column("text").to_pylist()
    for i, t in enumerate(texts):
        mine = [s for s in res.spans.to_pylist() if s["row"] == i]
        assert restore(got[i], mine) == t
        kept = [w for j, w in enumerate(words(t)) if j not in cut_tokens(res)[i]]
        assert words(got[i]) == kept
    return res


def vocab_text(rng, n, v=6):
    return " ".join(f"t{x}" for x in rng.integers(0, v, n))


# ----------------------------------------------------------------------------------------------------
# suffix arrays
# ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("alphabet", [1, 2, 5, 1000])
def test_suffix_arrays_equal_brute_force(alphabet):
    rng = np.random.default_rng(alphabet)
    for n in (1, 2, 3, 17, 200):
        t = rng.integers(0, alphabet, n).astype(np.int32)
        ref = brute_sa(t.tolist())
        assert suffix_array(t).tolist() == ref
        assert suffix_array_doubling(t).tolist() == ref
        sa = np.array(ref, np.int64)
        assert lcp_array(t, sa).tolist() == brute_lcp(t.tolist(), ref)
        assert lcp_array(t, sa, kernel=True).tolist() == brute_lcp(t.tolist(), ref)


def test_gpu_suffix_and_lcp_bit_for_bit():
    """The device path (prefix doubling over the strict CuPy stand-in, the Kasai kernel under the simulator)
    equals pydivsufsort's arrays, over ranges of several KASAI_RANGE positions."""
    rng = np.random.default_rng(7)
    t = rng.integers(0, 3, 9000).astype(np.int32)
    t[5000:5600] = t[100:700]  # a long LCP across a range boundary
    sa_c, lcp_c = suffix_and_lcp(t, "cpu")
    sa_g, lcp_g = (to_host(a) for a in suffix_and_lcp(to_device(t, "cuda"), "cuda"))
    assert sa_g.dtype == sa_c.dtype and np.array_equal(sa_c, sa_g)
    assert np.array_equal(lcp_c, lcp_g) and lcp_c.max() >= 600


# ----------------------------------------------------------------------------------------------------
# what is cut
# ----------------------------------------------------------------------------------------------------

def test_49_tokens_stay_50_are_cut():
    rng = np.random.default_rng(1)
    shared = " ".join(f"s{i}" for i in range(50))
    a = f"alpha beta {shared} gamma"
    b = f"delta {shared} epsilon"
    res = check_all([a, b], 50)
    assert res.stats["counts"]["tokens_cut"] == 50
    shared49 = " ".join(f"s{i}" for i in range(49))
    res = check_all([f"alpha {shared49} x", f"y {shared49} z"], 50)
    assert res.spans.num_rows == 0
    check_all([vocab_text(rng, 120, 3), vocab_text(rng, 90, 3)], 5)


def test_repeats_inside_one_document_starts_ends_and_overlaps():
    block = " ".join(f"b{i}" for i in range(8))
    docs = [
        f"{block} middle {block} tail {block}",          # repeated inside one document, at start and end
        f"{block}",                                        # a whole document that is a copy
        f"x {block} {block[:11]} y",                       # overlapping partial repeat
        "p q p q p q p q p q p q",                         # periodic
        "one",                                             # one token
        "",                                                # no token
    ]
    res = check_all(docs, 4)
    flags = res.documents.column("flag").to_pylist()
    assert flags[1] == "empty" and flags[4] == "unchanged" and flags[5] == "unchanged"


@pytest.mark.parametrize("seed", range(6))
def test_random_corpora_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    texts = [vocab_text(rng, int(rng.integers(0, 40)), 3 + seed % 3) for _ in range(8)]
    texts[3] = texts[1][: len(texts[1]) // 2] + " " + texts[5]
    for k in (1, 3, 6):
        check_all(texts, k)
        check_all(texts, k, keep="longest")


def test_unicode_and_whitespace():
    shared = "Straße Ünïcødé 東京 ✓ naïve café Ωmega"
    texts = [f"première\tligne {shared}\n\n  fin", f"ÉCOLE {shared.title()}  ", f"{shared}",
             f"x {shared.upper()}"]  # upper(): STRASSE is another word than straße
    res = check_all(texts, 7)
    # 東京 is two units (CJK characters stand alone): the upper-cased copy shares 7 units from ÜNÏCØDÉ on
    assert res.stats["counts"]["spans_cut"] == 3 and res.spans.column("row").to_pylist() == [1, 2, 3]


def test_cjk_characters_are_units_of_their_own():
    """Issue 36 item 13: Chinese and Japanese have no spaces between words, so a paragraph was one "word" and a
    copied passage was never cut. Each CJK character is a unit now (tokens.CJK_RANGES; the ideographic space
    separates): a passage of 40 characters shared by two Chinese and two Japanese documents is cut from the
    later copies, as the brute-force reference over those units says; Korean (spaced) keeps its words."""
    zh = "数据去重是大规模语言模型预训练的重要步骤，它删除重复的网页和段落，提高训练效率和模型质量。"
    ja = "これは日本語のテストです。重複した文章は削除されるべきです。ひらがなとカタカナ、そして漢字。"
    texts = [f"前言：{zh}结束", f"另一篇文章开头不同。{zh}", f"はじめに　{ja}おわり", f"別の文書：{ja}",
             "한국어 문장은 띄어쓰기를 합니다 한국어 문장은 띄어쓰기를 합니다"]
    res = check_all(texts, 20)
    assert res.spans.column("row").to_pylist() == [1, 3]
    gpu = run(texts, "cuda", min_tokens=20)  # the device's array operations (strict stand-in): the same cuts
    assert gpu.spans.equals(res.spans) and gpu.documents.equals(res.documents)
    assert res.documents.column("text").to_pylist()[1:4:2] == ["另一篇文章开头不同。", "別の文書："]
    assert words("東京タワー is tall　ｶﾀ") == ["東", "京", "タ", "ワ", "ー", "is", "tall", "ｶ", "ﾀ"]


def test_cjk_ranges_hold_the_scripts_without_spaces_and_nothing_else():
    """The table against Unicode's own character names (unicodedata): every Han ideograph, kana and Bopomofo
    letter, and every ideographic mark of the CJK blocks, is in CJK_RANGES (but for the telegraph symbols of
    the CJK Compatibility block, which mixes squared Latin units, and the counting rods' tally marks); no
    Latin, Greek, Cyrillic, Hangul, Thai or emoji is."""
    import unicodedata

    def own(cp):
        return any(a <= cp <= b for a, b in CJK_RANGES)

    assert all(a <= b < c for (a, b), (c, _) in zip(CJK_RANGES, CJK_RANGES[1:]))  # sorted and disjoint
    scripts = ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA LETTER", "KATAKANA LETTER",
               "HALFWIDTH KATAKANA LETTER", "BOPOMOFO LETTER", "IDEOGRAPHIC ")
    other = ("LATIN", "GREEK", "CYRILLIC", "HANGUL", "THAI", "ARABIC", "DEVANAGARI", "FACE", "DIGIT")
    named = [(cp, unicodedata.name(chr(cp), "")) for cp in range(0x40000)]
    assert all(own(cp) for cp, name in named if name.startswith(scripts) and cp != 0x3000
               and "TELEGRAPH" not in name and "TALLY" not in name)
    assert not any(own(cp) for cp, name in named if name.startswith(other) or "LATIN" in name.split()[:2])
    assert not own(0x3000) and own(0x3002) and own(0x20000)  # the ideographic space separates; 。 and 𠀀 stand alone


def test_seams_recorded():
    shared = " ".join(f"s{i}" for i in range(10))
    res = run([f"keep {shared} end", f"Intro line.\n{shared}\nNext line."], min_tokens=10)
    (s,) = res.stats["seams"]
    assert (s["before"], s["after"]) == ("Intro line.\n", "Next line.")
    assert res.documents.column("text").to_pylist()[1] == "Intro line.\nNext line."
    assert "next token" in res.stats["policy"]["seam"]


def test_chunked_runs_equal_one_suffix_array():
    rng = np.random.default_rng(3)
    texts = [vocab_text(rng, int(rng.integers(1, 30)), 4) for _ in range(12)]
    texts[9] = texts[0] + " " + texts[2]
    one = run(texts, min_tokens=4)
    for chunk in (1, 7, 25, 60):
        many = run(texts, min_tokens=4, chunk_tokens=chunk)
        assert many.spans.equals(one.spans) and many.documents.equals(one.documents)
        assert many.stats["suffix_arrays"]["chunks"] > 1 or chunk == 60


def test_word_tokens_on_the_device_equal_the_host():
    """--device cuda tokenizes with device array operations and the span kernels (strict stand-in, simulator):
    the same documents' offsets, byte ranges and identities as the host."""
    from gpu_dedup.config import NormalizeConfig
    from gpu_dedup.io.text import arrow_text_buffers
    from gpu_dedup.substring.tokens import word_tokens

    texts = ["", "  Straße\tÜnïcødé  東京\n", "x", "\u200b zero\u200bwidth ", "a  b\r\nc ", "   ", "ＦＵＬＬ full",
             "東京タワーis tall\u3000ｶﾀ𠀀😀x。", "日本", "\u3000", "한국어 띄어쓰기"]
    data, offsets = arrow_text_buffers(pa.array(texts, pa.large_string()))
    c, g = word_tokens(data, offsets, NormalizeConfig()), word_tokens(data, offsets, NormalizeConfig(), "cuda")
    for f in ("doc_off", "start", "end", "ident"):
        assert np.array_equal(getattr(c, f), getattr(g, f)) and getattr(g, f).dtype == getattr(c, f).dtype, f
    assert c.doc_off[7] == 11 and c.ident[10] == c.ident[9]  # a lone U+200B is no token; ＦＵＬＬ is full
    for d, t in enumerate(texts):  # the units and byte ranges of the rule (the reference `words`, bytes here)
        raw = t.encode()
        got = [raw[s:e].decode().lower() for s, e in zip(c.start[c.doc_off[d]:c.doc_off[d + 1]],
                                                          c.end[c.doc_off[d]:c.doc_off[d + 1]])]
        assert got == [w for w in words(t) if w.strip("\u200b")], (t, got)


def test_memory_budget_spills_and_equals_one_suffix_array(tmp_path, monkeypatch):
    """With a budget the tokens go to files in work_dir (removed after), the budget picks tiny chunks (the
    per-position figure raised so that 1 MiB holds 60 positions), and the outputs equal one array's, in memory
    and written."""
    from gpu_dedup import constants as C

    rng = np.random.default_rng(5)
    texts = [vocab_text(rng, int(rng.integers(1, 25)), 4) for _ in range(14)]
    texts[11] = texts[1] + " " + texts[4]
    one = run(texts, min_tokens=4)
    monkeypatch.setattr(C, "SUBSTRING_BYTES_PER_POSITION", (1 << 20) // 60)
    work = tmp_path / "work"
    work.mkdir()
    many = run(texts, min_tokens=4, memory_budget=1 << 20, work_dir=str(work))
    assert many.spans.equals(one.spans) and many.documents.equals(one.documents)
    assert many.stats["suffix_arrays"]["chunks"] > 3 and many.stats["suffix_arrays"]["largest_array"] <= 60
    assert many.stats["memory"]["spilled_to_disk"] and list(work.iterdir()) == []
    t = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts})
    substring_dedup(t, SubstringConfig(min_tokens=4, memory_budget=1 << 20, work_dir=str(work)), tmp_path / "out")
    assert pq.read_table(tmp_path / "out" / "substring_spans.parquet").equals(one.spans)
    assert pq.read_table(tmp_path / "out" / "substring_docs.parquet").equals(one.documents.drop_columns(["text"]))
    big = texts + [vocab_text(rng, 40, 4)]  # fits one array (60 positions), not a pair of chunks (2 x 30)
    with pytest.raises(ValueError, match=r"document row 14 \(id 'd14'\) has 40 tokens.*raise --memory-budget"):
        run(big, min_tokens=4, memory_budget=1 << 20, work_dir=str(work))
    with pytest.raises(ValueError, match=r"document row 1 \(id 'd1'\) has 80 tokens.*raise --memory-budget"):
        run(["x y", vocab_text(rng, 80, 4)] + texts, min_tokens=4, memory_budget=1 << 20, work_dir=str(work))
    assert list(work.iterdir()) == []  # refused while reading (longer than one whole array), files removed


def test_cpu_equals_gpu_simulated():
    rng = np.random.default_rng(4)
    texts = [vocab_text(rng, int(rng.integers(1, 40)), 4) for _ in range(10)]
    c, g = run(texts, min_tokens=3), run(texts, "cuda", min_tokens=3)
    assert c.spans.equals(g.spans) and c.documents.equals(g.documents) and c.spans.num_rows > 3
    gc = run(texts, "cuda", min_tokens=3, chunk_tokens=40)
    assert gc.spans.equals(c.spans) and gc.stats["suffix_arrays"]["chunks"] > 2
    assert (c.stats["array_backend"], g.stats["array_backend"]) == ("numpy", array_backend("cuda"))


def test_keep_max_column(tmp_path):
    shared = " ".join(f"s{i}" for i in range(6))
    t = pa.table({"id": ["a", "b"], "text": [f"x {shared}", f"y {shared}"], "q": [0.1, 0.9]})
    res = substring_dedup(t, SubstringConfig(min_tokens=6, keep="max:q"))
    assert res.spans.column("id").to_pylist() == ["a"] and res.spans.column("kept_id").to_pylist() == ["b"]


# ----------------------------------------------------------------------------------------------------
# outputs, tokenizer, bad input
# ----------------------------------------------------------------------------------------------------

def test_outputs_and_restore(tmp_path):
    shared = " ".join(f"s{i}" for i in range(12))
    rows = [{"id": "a", "text": f"A {shared} a", "meta": 1}, {"id": "b", "text": f"B {shared} b", "meta": 2},
            {"id": "c", "text": "none", "meta": 3}]
    src = tmp_path / "in" / "x.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    res = substring_dedup(str(src.parent), SubstringConfig(min_tokens=12), out)
    assert res.spans is None
    spans = pq.read_table(out / "substring_spans.parquet").to_pylist()
    docs = pq.read_table(out / "substring_docs.parquet")
    assert docs.column("id").to_pylist() == ["a", "b", "c"]
    assert docs.column("flag").to_pylist() == ["unchanged", "short", "unchanged"]
    written = [json.loads(x) for x in (out / "substring_deduplicated" / "x.jsonl").read_text().splitlines()]
    assert [w["meta"] for w in written] == [1, 2, 3] and written[1]["text"] == "B b"
    assert (out / "substring_deduplicated" / "x.jsonl").read_text().splitlines()[0] == json.dumps(rows[0])
    for w, r in zip(written, rows):
        assert restore(w["text"], [s for s in spans if s["id"] == w["id"]]) == r["text"]
    stats = json.loads((out / "substring_dedup.json").read_text())
    assert stats["counts"]["spans_cut"] == 1 and spans[0]["kept_id"] == "a" and spans[0]["kept_byte"] == 2
    html = (out / "substring_report.html").read_text()
    assert "B ⟦…⟧b" in html and "seam rule" in html


def test_tokenizer_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(20)}, "é": 21}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    shared = " ".join(f"w{i}" for i in range(8)) + " é"
    res = run([f"é {shared} w1", f"w2 {shared}"], min_tokens=9, tokenizer=str(path))
    (s,) = res.spans.to_pylist()
    assert (s["row"], s["token_start"], s["token_end"]) == (1, 1, 10)
    assert s["cut_text"] == " " + shared and s["byte_start"] == 3  # byte offsets after a 2-byte character
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(ValueError, match="not a Hugging Face tokenizer.json"):
        run(["a b"], tokenizer=str(bad))


def test_byte_level_bpe_tokenizer_unicode(tmp_path):
    """A GPT-2-style byte-level BPE trained here (never downloaded): multi-byte characters split across tokens
    still give cuts on character boundaries, and the originals are restored."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    shared = "Größe 東京タワー naïve café — ✓ emoji 😀 end of the shared passage"
    tok.train_from_iterator(["plain ascii words only", "other words"],
                            trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    texts = [f"first {shared} tail", f"Ünïcode start {shared}", "unrelated"]
    res = run(texts, min_tokens=20, tokenizer=str(path))
    assert res.spans.num_rows == 1 and res.spans.column("row").to_pylist() == [1]
    got = res.documents.column("text").to_pylist()
    for i, t in enumerate(texts):
        assert restore(got[i], [s for s in res.spans.to_pylist() if s["row"] == i]) == t
    assert "東京" in res.spans.column("cut_text")[0].as_py()


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="min_tokens must be an int >= 1"):
        SubstringConfig(min_tokens=0)
    with pytest.raises(ValueError, match="no such file"):
        SubstringConfig(tokenizer=str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="chunk_tokens"):
        SubstringConfig(chunk_tokens=0)
    with pytest.raises(ValueError, match="at least 1 MiB"):
        SubstringConfig(memory_budget=1000)
    with pytest.raises(ValueError, match="not both"):
        SubstringConfig(memory_budget=1 << 20, chunk_tokens=10)
    with pytest.raises(ValueError, match="work_dir must be an existing directory"):
        SubstringConfig(work_dir=str(tmp_path / "nowhere"))
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\xff not json")
    with pytest.raises(ValueError, match="not a Hugging Face tokenizer.json"):
        run(["a b"], tokenizer=str(garbage))
    empty = tmp_path / "empty" / "e.jsonl"
    empty.parent.mkdir()
    empty.write_text("")
    with pytest.raises(ValueError, match="no documents") as e:
        substring_dedup(str(empty))
    # one line naming what was read (not the read report's dict) and the fix
    assert "(1 file(s) without a single document: e.jsonl)" in str(e.value) and "--text-field" in str(e.value)
    assert "{" not in str(e.value)
    res = run(["", "  \n ", "x"], min_tokens=1)  # documents without tokens: only separators in the array
    assert res.documents.column("flag").to_pylist() == ["unchanged"] * 3 and res.spans.num_rows == 0
    with pytest.raises(ValueError, match="keep must be"):
        SubstringConfig(keep="best")
    with pytest.raises(ValueError, match="no documents"):
        substring_dedup(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}))
    res = run(["a", "a", "b"], min_tokens=1)  # documents of one token
    assert res.documents.column("flag").to_pylist() == ["unchanged", "empty", "unchanged"]
    assert res.documents.column("id").to_pylist() == ["d0", "d1", "d2"]


def test_cli_substring_and_run_stage(tmp_path, capsys):
    from gpu_dedup.cli import main

    shared = " ".join(f"s{i}" for i in range(12))
    src = tmp_path / "in" / "x.jsonl"
    src.parent.mkdir()
    rows = [{"id": "a", "text": f"A one {shared} a"}, {"id": "b", "text": f"B two three {shared} b"},
            {"id": "c", "text": "something else entirely"}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    assert main(["substring", str(src.parent), "-o", str(out), "--min-tokens", "12"]) == 0
    assert "1 spans" in capsys.readouterr().out
    assert pq.read_table(out / "substring_spans.parquet").column("id").to_pylist() == ["b"]
    assert main(["substring", str(src.parent), "-o", str(out), "--min-tokens", "0", "--overwrite"]) == 1
    assert "--min-tokens must be >= 1" in capsys.readouterr().err
    assert main(["substring", str(src.parent), "-o", str(out), "--min-tokens", "12", "--memory-budget", "64M",
                 "--work-dir", str(tmp_path), "--overwrite"]) == 0
    assert pq.read_table(out / "substring_spans.parquet").column("id").to_pylist() == ["b"]
    assert json.loads((out / "substring_dedup.json").read_text())["memory"]["spilled_to_disk"]
    run_out = tmp_path / "run"
    assert main(["run", str(src.parent), "-o", str(run_out), "--substring-dedup", "--substring-min-tokens", "12",
                 "-q"]) == 0
    spans = pq.read_table(run_out / "substring_spans.parquet")
    assert spans.column("id").to_pylist() == ["b"]
    texts = [json.loads(x)["text"] for x in (run_out / "substring_deduplicated" / "x.jsonl").read_text().splitlines()]
    assert texts[1] == "B two three b"
    assert main(["report", str(run_out)]) == 0  # the run report gains the stage's section
    assert "Exact-substring dedup: cuts and seams" in (run_out / "report.html").read_text()


def test_invalid_utf8_as_elsewhere(tmp_path):
    """Invalid bytes are replaced with U+FFFD and counted (io.read's policy); byte offsets refer to the repaired
    text, and every row is in substring_docs.parquet once."""
    shared = " ".join(f"s{i}" for i in range(6))
    src = tmp_path / "in" / "bad.jsonl"
    src.parent.mkdir()
    src.write_bytes(b'{"id": "a", "text": "x ' + shared.encode() + b'"}\n{"id": "b", "text": "z\xff ' + shared.encode()
                    + b' w"}\n')
    res = substring_dedup(str(src), SubstringConfig(min_tokens=6), tmp_path / "out")
    docs = pq.read_table(tmp_path / "out" / "substring_docs.parquet").to_pylist()
    assert [d["id"] for d in docs] == ["a", "b"] and docs[1]["flag"] == "short"
    assert res.stats["read"]["invalid_utf8_rows"] == 1
    (w,) = [json.loads(x) for x in (tmp_path / "out" / "substring_deduplicated" / "bad.jsonl").read_text().splitlines()
            if '"b"' in x]
    assert w["text"] == "z\ufffd w"


@pytest.mark.gpu
def test_real_gpu_suffix_array_and_cuts_equal_cpu():
    """On a real GPU (GPU_DEDUP_REAL_GPU=1): CuPy's doubling and the compiled Kasai kernel give pydivsufsort's
    arrays on a larger text, and the whole stage the CPU's outputs."""
    rng = np.random.default_rng(11)
    t = rng.integers(0, 50, 300_000).astype(np.int32)
    t[200_000:210_000] = t[1000:11000]
    sa_c, lcp_c = suffix_and_lcp(t, "cpu")
    sa_g, lcp_g = (to_host(a) for a in suffix_and_lcp(to_device(t, "cuda"), "cuda"))
    assert np.array_equal(sa_c, sa_g) and np.array_equal(lcp_c, lcp_g)
    texts = [vocab_text(rng, int(rng.integers(1, 400)), 5) for _ in range(300)]
    c, g = run(texts, min_tokens=8), run(texts, "cuda", min_tokens=8)
    assert c.spans.equals(g.spans) and c.documents.equals(g.documents) and g.stats["array_backend"] == "cupy"


def test_every_stage_says_it_starts_and_how_far_it_is(tmp_path, monkeypatch, caplog):
    """Issue 36 item 11: `substring` ran 25 s without a word. Each stage now says it starts, and the loops
    (read batches, suffix arrays, cut batches) say every HEARTBEAT_S how far they are (a clock moving 31 s per
    reading here); the result is the same."""
    import itertools
    import logging

    from gpu_dedup.runtime import heartbeat

    rng = np.random.default_rng(7)
    texts = [vocab_text(rng, int(rng.integers(10, 30)), 5) for _ in range(40)]
    texts[30] = texts[3] + " " + texts[8]
    t = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts})
    cfg = SubstringConfig(min_tokens=4, chunk_tokens=200, batch_bytes=1024)
    quiet = substring_dedup(t, cfg)
    ticks = itertools.count()
    monkeypatch.setattr(heartbeat, "clock", lambda: next(ticks) * 31.0)
    with caplog.at_level(logging.INFO, logger="gpu_dedup"):
        res = substring_dedup(t, cfg, tmp_path / "out")
    said = [r.getMessage() for r in caplog.records]
    pairs = res.stats["suffix_arrays"]["suffix_arrays"]
    tokens = quiet.stats["counts"]["tokens"]
    assert pairs > 3 and res.stats["counts"] == quiet.stats["counts"]

    def first(prefix):
        return next(i for i, m in enumerate(said) if m.startswith(prefix))

    order = [first("substring: reading and tokenizing the input ..."),
             first("substring: reading and tokenizing the input: "),
             first(f"substring: suffix arrays over {tokens:,} tokens ({pairs} suffix arrays) ..."),
             first(f"substring: suffix arrays over {tokens:,} tokens: 1 of {pairs} suffix arrays ("),
             first("substring: cutting the spans (the input read again) (40 documents) ..."),
             first("substring: cutting the spans (the input read again): "),
             first("substring: writing substring_deduplicated/ (the input read a third time) ..."),
             first("substring: writing the report in ")]
    assert order == sorted(order), said
    assert " documents so far (" in said[order[1]] and " of 40 documents (" in said[order[5]]
