"""C4, FineWeb, character and URL rules (gpu_dedup/filters/rulesets.py, through rules.rule_scores): every column
against a brute-force Python reference written from the published procedure (C4 / FineWeb: datatrove's loops with
their early returns, a codepoint walk for sentences and URLs), on handmade and random documents; the decisions;
blocklist files and their errors; presets, --rule-threshold and the filter command's run.json."""
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.errors import ConfigError, MissingColumnError, MissingFileError
from gpu_dedup.filters import rulesets as RS
from gpu_dedup.filters.config import FilterConfig
from gpu_dedup.filters.rules import RulesConfig, describe, rule_decisions, rule_scores, rules, with_thresholds, without

ENDS = ".!?"
CLOSERS = "\"')]\u2019\u201d"


def ref_sentences(line: str) -> int:
    """1 + interior sentence ends, by a walk: a run of . ! ? then closers then whitespace then more text."""
    n, i, ends = len(line), 0, 0
    while i < n:
        if line[i] in ENDS:
            j = i
            while j < n and line[j] in ENDS:
                j += 1
            while j < n and line[j] in CLOSERS:
                j += 1
            k = j
            while k < n and line[k].isspace():
                k += 1
            if k > j and k < n:
                ends += 1
            i = k if k > j else j
        else:
            i += 1
    return 1 + ends


def ref_c4(text: str, terminal: bool = True):
    """datatrove's C4QualityFilter loop (split_paragraph=True; terminal = filter_no_terminal_punct), sentences by
    ref_sentences: (keep, reason, kept lines, lines)."""
    lines = text.splitlines()
    kept, sentences = [], 0
    for line in lines:
        line = line.strip()
        words = line.split()
        if any(len(w) > 1000 for w in words):
            continue
        line = RS.C4_CITATION.sub("", line)
        if terminal and (not line.endswith((".", "?", "!", '"', "'")) or line.endswith("...")):
            continue
        if len(words) < 3:
            continue
        low = line.lower()
        if "lorem ipsum" in low:
            return False, "lorem", None, len(lines)
        if "javascript" in low:
            continue
        if "{" in line:
            return False, "curly", None, len(lines)
        if any(p in low for p in RS.C4_POLICY_SUBSTRINGS):
            continue
        sentences += ref_sentences(line)
        kept.append(line)
    if sentences < 5:
        return False, "sentences", kept, len(lines)
    return True, "", kept, len(lines)


def ref_fineweb(text: str):
    """datatrove's FineWebQualityFilter statistics (words: str.split()), the lines cut by hand."""
    raw, cur = [], []
    for ch in text + "\n":  # text.split("\n"), cut by hand
        if ch == "\n":
            raw.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    lines = [x for x in raw if x.strip() != ""]
    if not lines:
        return 0.0, 0.0, 0.0, 0.0
    stop = set(RS.FINEWEB_STOP_CHARS)
    punct = sum(1 for x in lines if x and x[-1] in stop) / len(lines)
    short = sum(1 for x in lines if len(x) <= 30) / len(lines)
    seen, dup = [], 0
    for x in lines:
        if x in seen:
            dup += len(x)
        else:
            seen.append(x)
    nonl = sum(1 for ch in text if ch != "\n")
    return punct, short, dup / nonl, sum(1 for ch in text if ch == "\n") / len(text.split())


def ref_url_chars(text: str) -> float:
    if not text:
        return 1.0
    ok = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789$-_@.&+/:=?#~!*(),")
    hexd = set("0123456789abcdefABCDEF")
    total, i, n = 0, 0, len(text)
    while i < n:
        for pre in ("https://", "http://"):
            if text.startswith(pre, i):
                j = i + len(pre)
                while j < n:
                    if text[j] in ok:
                        j += 1
                    elif text[j] == "%" and j + 2 < n and text[j + 1] in hexd and text[j + 2] in hexd:
                        j += 3
                    else:
                        break
                if j > i + len(pre):
                    total += j - i
                    i = j - 1
                    break
        i += 1
    return total / n


def ref_chars(text: str):
    if not text:
        return 0.0, 1.0
    alnum = set(RS.ALNUM_BYTES.decode())
    return sum(ord(c) >= 0x80 for c in text) / len(text), sum(c not in alnum for c in text) / len(text)


HANDMADE = [
    "",
    "   \n\n  ",
    "One two three. Four five six! Seven eight nine? Ten eleven twelve. Thirteen fourteen fifteen.",
    "Lorem Ipsum dolor sit amet.\nA fine line of text here. And another one. Three. Four. Five.",
    "This line has a { bracket here.\nok ok ok. a b c. d e f. g h i. j k l.",
    "We use JavaScript here, a lot.\nPlease read our Privacy Policy now.\nShort.\nEnds without punct",
    "Mr. Smith went to Washington. He said \"hi.\" Then left! Really? Yes.\r\nA second line is here [12].",
    "A citation at the end [citation needed]\nThe last line ends with dots...\nx" + "y" * 1001 + " a b.",
    "line one here ok.\nline one here ok.\nline one here ok.\n\n\u00e9t\u00e9 \u3002\u3002 caf\u00e9!\u3002",
    "See https://example.com/a%20b?x=1 and http://x.y/%zz and https:// nothing; xhttp://q.r/s.",
    "unicode line sep\u2028second part is here. Also\x85next line here now.\u2029And a last one, ok.",
    "trailing space line! \nanother line?\n\n\n" + "- item\n" * 5,
    "The K\u212a cookie policy is here, uses cookies. Terms of Use apply. Done now ok.",
]


def _random_docs(k: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces = ["lorem ipsum", "Lorem", "ipsum", "{", "}", "javascript", "JavaScript", "privacy policy", "use cookies",
              "[12]", "[edit]", "[]", "[citation needed]", "...", "!", "?", ".", '"', "'", "\u201d", ")", "\n", "\n",
              "\n", "\r\n", "\u2028", "\u3002", "\uff01", "caf\u00e9", "\u00fc", "\U0001f600", "https://ex.com/p",
              "http://a.b/%41x", "%zz", "word", "the", "a", "Mr.", "x" * 1001, " ", " ", " ", "  ", "\t", "#", "1,2"]
    out = []
    for _ in range(k):
        out.append("".join(rng.choice(pieces) + rng.choice(["", " ", " ", "\n"]) for _ in range(rng.randint(0, 40))))
    return out


DOCS = HANDMADE + _random_docs(150, 7)
ALL = RulesConfig.preset("c4,fineweb,chars,url")


@pytest.fixture(scope="module")
def scores():
    return rule_scores(DOCS, ALL)


def test_sentence_counter_equals_walk():
    for line in ["One. Two! Three? Four.", "a.b. c", "He said \"hi.\" Then.", "x.. y", "end."] + DOCS:
        assert RS.count_sentences(line) == ref_sentences(line), line


@pytest.mark.parametrize("preset", ["c4", "c4_fineweb"])
def test_c4_columns_and_decisions_equal_reference(scores, preset):
    cfg = RulesConfig.preset(preset)
    got = scores if preset == "c4" else rule_scores(DOCS, cfg)
    keep, reason = rule_decisions(got, cfg)
    for d, text in enumerate(DOCS):
        ok, why, kept, nlines = ref_c4(text, terminal=preset == "c4")
        assert keep[d] == ok, (text, reason[d], why)
        if why == "lorem":
            assert got["c4_lorem_ipsum"][d] >= 1 and reason[d] == "c4_lorem_ipsum"
        elif why == "curly":  # (a "lorem ipsum" line after it: the reference stopped before it, we count it)
            assert got["c4_curly_bracket"][d] >= 1
        else:
            assert got["c4_lorem_ipsum"][d] == 0 and got["c4_curly_bracket"][d] == 0
            assert got["c4_sentences"][d] == sum(ref_sentences(x) for x in kept)
            assert got["c4_removed_lines_frac"][d] == ((nlines - len(kept)) / nlines if nlines else 0.0)
    assert 0 < keep.sum() < len(DOCS)  # both outcomes occur
    assert {"c4_lorem_ipsum", "c4_curly_bracket", "c4_sentences"} <= set(reason)


def test_fineweb_columns_equal_reference(scores):
    cols = ("fineweb_line_punct_frac", "fineweb_short_line_frac", "fineweb_dup_line_char_frac",
            "fineweb_newline_word_ratio")
    for d, text in enumerate(DOCS):
        assert tuple(float(scores[c][d]) for c in cols) == ref_fineweb(text), text
    keep, reason = rule_decisions(scores, RulesConfig.preset("fineweb"))
    assert keep.sum() > 0 and {"fineweb_line_punct_frac", "fineweb_short_line_frac"} <= set(reason)


def test_char_and_url_columns_equal_reference(scores):
    for d, text in enumerate(DOCS):
        a, b = ref_chars(text)
        assert scores["chars_non_ascii_frac"][d] == a and scores["chars_non_alnum_frac"][d] == b, text
        assert scores["url_char_frac"][d] == pytest.approx(ref_url_chars(text), abs=0), text
        assert scores["url_char_frac"][d] == (sum(len(u) for u in RS.URL_PATTERN.findall(text)) / len(text)
                                              if text else 1.0)
    assert scores["url_char_frac"][HANDMADE.index(HANDMADE[9])] > 0


def test_arrow_input_slices_and_devices_give_the_same_columns(scores):
    arr = pa.array(["pad"] + DOCS, pa.string()).slice(1)
    for device in ("cpu", "cuda"):
        got = rule_scores(arr, ALL, device=device)
        assert list(got) == [r.column for r in rules(ALL)]
        for k, v in got.items():
            assert np.array_equal(v, scores[k]), k


def test_blocklist_file_matching_and_errors(tmp_path):
    f = tmp_path / "block.txt"
    f.write_text("# comment\n\nExample.COM\n*.ads.net\n.track.org.\n")
    bl = RS.load_blocklist(str(f))
    assert bl.domains == {"example.com", "ads.net", "track.org"}
    urls = ["https://example.com/x", "http://WWW.Example.com:8080/", "https://user@sub.ads.net", "ftp://track.org.",
            "https://notexample.com", "https://example.co", None, "", "example.com/path", "//a.ads.net/q",
            "https://[::1]/", "https://ads.net.evil.io/"]
    want = [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0]
    got = RS.url_blocked(urls, bl)
    assert got.tolist() == want
    # brute force: the host, or any parent domain, in the set
    for u, g in zip(urls, got):
        h = RS.url_host(u)
        assert g == float(any(h == d or h.endswith("." + d) for d in bl.domains))
    bad = tmp_path / "bad.txt"
    bad.write_text("example.com\nnot a domain\n")
    with pytest.raises(ConfigError, match=r"bad\.txt:2: 'not a domain'"):
        RS.load_blocklist(str(bad))
    # '#' starts a comment after a domain too, as the error says (such a line was refused as "not a domain")
    inline = tmp_path / "inline.txt"
    inline.write_text("  # a comment\nexample.org  # spam network\nads.net#x\n")
    assert RS.load_blocklist(str(inline)).domains == {"example.org", "ads.net"}
    enc = tmp_path / "enc.txt"
    enc.write_bytes(b"ok.com\n\xff\xfe.com\n")
    with pytest.raises(ConfigError, match=r"enc\.txt:2: not UTF-8"):
        RS.load_blocklist(str(enc))
    with pytest.raises(MissingFileError, match="nope.txt"):
        RS.load_blocklist(str(tmp_path / "nope.txt"))
    cfg = RulesConfig.preset("url", url_blocklist=str(f))
    with pytest.raises(MissingColumnError, match="URLs"):
        rule_scores(["a"], cfg)
    s = rule_scores(["a", "b"], cfg, urls=["https://x.example.com", "https://ok.org"])
    assert s["url_blocked"].tolist() == [1.0, 0.0]
    assert rule_decisions(s, cfg)[1].tolist() == ["url_blocked", ""]


def test_presets_thresholds_and_errors():
    c = RulesConfig.preset("gopher,c4")
    cols = [r.column for r in rules(c)]
    assert cols[0] == "gopher_word_count" and "c4_sentences" in cols and "fineweb_line_punct_frac" not in cols
    assert RulesConfig.preset("gopher") == RulesConfig()
    d = describe(RulesConfig.preset("c4,fineweb,chars,url"))
    assert d["c4_sentences"]["min"] == 5 and d["fineweb_line_punct_frac"]["min"] == 0.12
    assert d["fineweb_dup_line_char_frac"]["max"] == 0.01 and d["chars_non_alnum_frac"]["max"] == 0.25
    assert d["url_char_frac"]["max"] == 0.2 and d["chars_non_ascii_frac"]["max"] == 1.0
    t = with_thresholds(c, ["c4_sentences=3", "gopher_word_count=20:500", "gopher_top_2gram_char_frac=0.5"])
    assert (t.c4_min_sentences, t.min_words, t.max_words, dict(t.top_ngrams)[2]) == (3, 20, 500, 0.5)
    assert isinstance(t.c4_min_sentences, int)
    for spec, msg in [("c4_sentences", "COLUMN=VALUE"), ("c4_sentence=3", "did you mean"),
                      ("gopher_word_count=20", "MIN:MAX"), ("c4_sentences=a", "one number"),
                      ("fineweb_line_punct_frac=0.1", "not an enabled rule")]:
        with pytest.raises(ConfigError, match=msg):
            with_thresholds(c, [spec])
    with pytest.raises(ConfigError, match=r"--rule-threshold chars_non_ascii_frac=1.5: .*fraction"):
        with_thresholds(RulesConfig.preset("chars"), ["chars_non_ascii_frac=1.5"])
    with pytest.raises(ConfigError, match=r"--rule-threshold c4_sentences=2.5: .*int"):
        with_thresholds(c, ["c4_sentences=2.5"])
    assert "c4_curly_bracket" not in [r.column for r in rules(without(c, ["c4_curly_bracket"]))]
    with pytest.raises(ConfigError, match="unknown rules preset 'c5'"):
        RulesConfig.preset("gopher,c5")
    with pytest.raises(ConfigError, match="--rules"):
        FilterConfig(rules="c4,c4")
    with pytest.raises(ConfigError, match="one set"):
        RulesConfig.preset("c4,c4_fineweb")
    with pytest.raises(ConfigError, match="not an enabled rule"):
        FilterConfig(rules="c4", rule_thresholds=("gopher_word_count=5:9",))


def test_filter_command_records_the_rule_sets(tmp_path):
    from gpu_dedup.cli import main

    src = tmp_path / "in"
    src.mkdir()
    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(HANDMADE)]
    (src / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    out = tmp_path / "out"
    assert main(["filter", str(src), "-o", str(out), "--rules", "c4,fineweb,chars,url", "--rule-threshold",
                 "chars_non_ascii_frac=0.05", "--device", "cpu", "-q", "--audit", "0", "--no-filtered"]) == 0
    table = pq.read_table(out / "scores.parquet")
    assert table["id"].to_pylist() == [d["id"] for d in docs]
    direct = rule_scores(HANDMADE, FilterConfig(rules="c4,fineweb,chars,url",
                                                rule_thresholds=("chars_non_ascii_frac=0.05",)).rules_config())
    for k, v in direct.items():
        assert np.array_equal(table[k].to_numpy(), v), k
    run = json.loads((out / "run.json").read_text())
    assert run["models"]["rules"]["chars_non_ascii_frac"]["max"] == 0.05
    assert run["models"]["rules"]["c4_sentences"]["keep_if"] == "value >= 5"
    reasons = table["reason"].to_pylist()
    assert reasons[0] == "empty" and reasons[2] == "kept"
    assert reasons[3] == "c4_lorem_ipsum" and reasons[4] == "c4_curly_bracket"


def _ref_blocked(url, domains) -> float:
    """Brute force, independent of url_host: urllib's host (user, port and case dropped; a final dot too),
    blocked when it is a listed domain or ends in "." + one; no URL or no host: not blocked."""
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").rstrip(".") if url else ""
    return float(bool(host) and any(host == d or host.endswith("." + d) for d in domains))


@pytest.fixture(scope="module")
def url_corpus(tmp_path_factory):
    """A JSON Lines and a Parquet copy of 40 documents with random URLs (listed hosts, their subdomains,
    look-alikes, user / port / case / final-dot forms, null and missing URLs) and a blocklist."""
    rng = random.Random(25)
    root = tmp_path_factory.mktemp("urls")
    listed = ["example.com", "ads.net", "b.track.org"]
    (root / "block.txt").write_text("# blocked\n" + "\n".join(["EXAMPLE.com", "*.ads.net", "b.track.org."]) + "\n")
    hosts = ["example.com", "www.example.com", "notexample.com", "example.co", "x.ads.net", "ads.net.evil.io",
             "track.org", "a.b.track.org", "b.track.org", "ok.org"]
    docs = []
    for i in range(40):
        d = {"id": f"u{i}", "text": f"Document number {i} says hello."}
        k = rng.randrange(12)
        if k < 10:
            h = hosts[k]
            h = h.upper() if rng.random() < 0.2 else h
            h = h + "." if rng.random() < 0.1 else h
            d["url"] = (f"{rng.choice(['http', 'https'])}://{rng.choice(['', 'user@'])}{h}"
                        f"{rng.choice(['', ':8080'])}{rng.choice(['', '/', '/a?b=c#d'])}")
        elif k == 10:
            d["url"] = None
        docs.append(d)  # k == 11: no url field at all
    (root / "c.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    pq.write_table(pa.Table.from_pylist([{"url": None, **d} for d in docs]), root / "c.parquet")
    return root, docs, listed


@pytest.mark.parametrize("name", ["c.jsonl", "c.parquet"])
def test_filter_url_blocklist_from_a_field_equals_brute_force(url_corpus, tmp_path, name):
    from gpu_dedup.cli import main

    root, docs, listed = url_corpus
    out = tmp_path / "out"
    assert main(["filter", str(root / name), "-o", str(out), "--rules", "url", "--url-field", "url",
                 "--url-blocklist", str(root / "block.txt"), "--device", "cpu", "-q", "--audit", "0"]) == 0
    table = pq.read_table(out / "scores.parquet")
    want = [_ref_blocked(d.get("url"), listed) for d in docs]
    assert 0 < sum(want) < len(docs) and table["id"].to_pylist() == [d["id"] for d in docs]
    assert table["url_blocked"].to_pylist() == want
    assert [r == "url_blocked" for r in table["reason"].to_pylist()] == [w == 1.0 for w in want]
    kept = {d["id"] for d, w in zip(docs, want) if not w}
    if name.endswith(".jsonl"):  # the kept records, byte for byte
        lines = (root / name).read_text().splitlines(keepends=True)
        got = "".join((out / "filtered" / name).read_text())
        assert got == "".join(x for x, d in zip(lines, docs) if d["id"] in kept)
    else:
        assert set(pq.read_table(out / "filtered" / name)["id"].to_pylist()) == kept
    run = json.loads((out / "run.json").read_text())
    assert run["models"]["url_blocklist"]["domains"] == 3 and run["models"]["url_blocklist"]["url_field"] == "url"


def test_filter_url_flag_errors(url_corpus, tmp_path, capsys):
    """Each misuse is an error on stderr naming the flags (or the file and the columns present), exit 2."""
    import re

    from gpu_dedup.cli import main

    root = url_corpus[0]
    bl = str(root / "block.txt")
    cases = [(["--url-blocklist", bl, "--url-field", "url"], "add --rules url.*no --rules"),
             (["--rules", "gopher", "--url-blocklist", bl, "--url-field", "url"], "add --rules url"),
             (["--rules", "url", "--url-blocklist", bl], "needs --url-field"),
             (["--rules", "url", "--url-field", "url"], "--url-field 'url' is read only by --url-blocklist"),
             (["--rules", "url", "--url-field", "text", "--url-blocklist", bl], "also the text or id"),
             (["--rules", "url", "--url-field", "url", "--url-blocklist", str(root / "no.txt")], "no.txt")]
    cases = [("c.jsonl", argv, msg) for argv, msg in cases] + [
        (name, ["--rules", "url", "--url-field", "link", "--url-blocklist", bl],
         rf"{name}: --url-field 'link'.*'url'.*choose another --url-field") for name in ("c.jsonl", "c.parquet")]
    for name, argv, msg in cases:
        base = ["filter", str(root / name), "-o", str(tmp_path / name), "--device", "cpu", "-q", "--audit", "0"]
        assert main(base + argv) != 0, argv
        err = capsys.readouterr().err
        assert re.search(msg, err), (argv, err)


def _ref_line_removed(raw: str, terminal: bool = True) -> bool:
    """Brute force C4 line filter, written from the paper's list (not rulesets.c4_line): strip; a word over 1000
    characters; citations ([12], [], [edit], [citation needed]) deleted, then no terminal . ? ! " ' or a final
    "..."; under 3 words; lorem ipsum; javascript; "{"; a policy phrase."""
    import re

    line = raw.strip()
    words = line.split()
    if any(len(w) > 1000 for w in words):
        return True
    line = re.sub(r"\[[0-9]*\]|\[edit\]|\[citation needed\]", "", line)
    if terminal and (line[-1:] not in ('.', '?', '!', '"', "'") or line.endswith("...")):
        return True
    low = line.lower()
    return len(words) < 3 or "lorem ipsum" in low or "javascript" in low or "{" in line or any(
        p in low for p in ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
                           "use cookies"))


def _c4_line_docs(k: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    good = ["The river runs north past the old mill. It floods in spring.", "Prices rose again [12] this year.",
            "Ünïcode lines count too, and they end well!", "She said \"we will go\". Then they went.",
            "Three words here.", "A line with a citation at its end [citation needed]."]
    bad = ["menu", "Read more...", "Enable JavaScript to view this page.", "This site uses cookies to work.",
           "Home | About | Contact", "x" * 1001 + " is long.", "", "   ", "See our privacy policy today."]
    breaks = ["\n", "\n", "\r\n", "\r", "\u2028", "\x0c"]
    docs = []
    for _ in range(k):
        lines = [rng.choice(good if rng.random() < 0.6 else bad) for _ in range(rng.randrange(1, 12))]
        text = "".join(x + rng.choice(breaks) for x in lines)
        docs.append(text if rng.random() < 0.5 else text.rstrip("\n\r\u2028\x0c"))
    return docs


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_c4_remove_lines_equals_brute_force_and_is_reversible(tmp_path, fmt):
    from gpu_dedup.cli import main

    texts = _c4_line_docs(40, 3)
    docs = [{"id": f"p{i}", "text": t, "meta": i} for i, t in enumerate(texts)]
    src = tmp_path / f"c.{fmt}"
    if fmt == "jsonl":
        src.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    else:
        pq.write_table(pa.Table.from_pylist(docs), src)
    out = tmp_path / "out"
    assert main(["filter", str(src), "-o", str(out), "--rules", "c4", "--c4-remove-lines", "--device", "cpu", "-q",
                 "--audit", "0"]) == 0
    keep = pq.read_table(out / "scores.parquet")["keep"].to_pylist()
    assert keep == [ref_c4(t)[0] for t in texts] and 0 < sum(keep) < len(texts)
    if fmt == "jsonl":
        got = {d["id"]: d for d in map(json.loads, filter(None, (out / "filtered" / src.name).read_bytes().split(b"\n")))}
    else:
        got = {d["id"]: d for d in pq.read_table(out / "filtered" / src.name).to_pylist()}
    assert list(got) == [d["id"] for d, k in zip(docs, keep) if k]
    cuts = pq.read_table(out / "removed_lines.parquet").to_pylist()
    changed = 0
    for d, k in zip(docs, keep):
        if not k:
            continue
        new, mine = got[d["id"]]["text"], [c for c in cuts if c["id"] == d["id"]]
        assert got[d["id"]]["meta"] == d["meta"]
        # the brute-force filter: the kept document's lines are its lines that C4's rules keep, in order
        assert new.splitlines() == [x for x in d["text"].splitlines() if not _ref_line_removed(x)], d["id"]
        assert len(mine) == sum(map(_ref_line_removed, d["text"].splitlines()))
        raw = d["text"].encode()
        for c in mine:  # each cut: a removed line (byte_start..byte_end) with at most one line break
            line = raw[c["byte_start"]:c["byte_end"]].decode()
            assert _ref_line_removed(line) and c["reason"].startswith("c4_")
            assert raw[c["cut_start"]:c["cut_end"]].decode() == c["cut_text"]
        back = new.encode()  # re-inserting every cut_text at cut_start, ascending, restores the text byte for byte
        for c in sorted(mine, key=lambda c: c["cut_start"]):
            back = back[:c["cut_start"]] + c["cut_text"].encode() + back[c["cut_start"]:]
        assert back == raw, d["id"]
        changed += bool(mine)
    assert changed > 3
    run = json.loads((out / "run.json").read_text())
    assert run["c4_lines"]["removed"] == len(cuts) and run["c4_lines"]["documents_changed"] == changed


def test_c4_remove_lines_flag_errors(tmp_path):
    for kw, msg in [({"rules": "gopher", "c4_remove_lines": True}, "add --rules c4"),
                    ({"c4_remove_lines": True}, "no --rules"), ({"rules": "c4", "c4_remove_lines": 1}, "bool"),
                    ({"rules": "c4", "c4_remove_lines": True, "lid": "x.bin", "unit": "paragraph",
                      "paragraph_action": "remove"}, "give one of them")]:
        with pytest.raises(ConfigError, match=msg):
            FilterConfig(**kw)
    assert FilterConfig(rules="gopher,c4_fineweb", c4_remove_lines=True).c4_remove_lines
