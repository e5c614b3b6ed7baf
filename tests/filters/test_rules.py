"""Gopher heuristic rules (gpu_dedup/filters/rules.py, kernels/features_cpu.rule_stats): every statistic against
a brute-force Python implementation of the documented definitions, on handmade and random documents; decisions,
reasons, switchable thresholds, config validation."""
import string
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.filters import rules as R
from gpu_dedup.filters.rules import RulesConfig

ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _dups(units):
    seen, dup, dup_chars = set(), 0, 0
    for u in units:
        if u in seen:
            dup += 1
            dup_chars += len(u)
        seen.add(u)
    return dup, dup_chars


def _paragraphs(text):
    paras, cur = [], []
    for raw in text.split("\n") + [""]:
        if raw.strip():
            cur.append(raw)
        elif cur:
            paras.append("\n".join(cur).strip())
            cur = []
    return paras


def _covered(words, starts, n):
    cov = [False] * len(words)
    for j in starts:
        cov[j:j + n] = [True] * n
    return sum(len(w) for w, c in zip(words, cov) if c)


def _ngram_chars(words, n, top):
    grams = [tuple(words[j:j + n]) for j in range(len(words) - n + 1)]
    cnt = Counter(grams)
    if top:
        if not cnt or max(cnt.values()) < 2:
            return 0
        best = max(cnt.values())
        return max(_covered(words, [j for j, g in enumerate(grams) if g == t], n) for t in cnt if cnt[t] == best)
    chosen = {g for g, c in cnt.items() if c >= 2}
    return _covered(words, [j for j, g in enumerate(grams) if g in chosen], n)


def ref_scores(text: str, cfg: RulesConfig) -> dict[str, float]:
    """The module doc's definitions, written directly with Python strings."""
    words = text.split()
    nw = len(words)
    lines = [ln.strip() for ln in text.split("\n")]
    lines = [ln for ln in lines if ln]
    paras = _paragraphs(text)
    wchars = sum(len(w) for w in words)
    stops = {w.strip(string.punctuation).translate(ASCII_LOWER) for w in words} & set(cfg.stop_words)
    dl, dlc = _dups(lines)
    dp, dpc = _dups(paras)
    out = {
        "gopher_word_count": nw,
        "gopher_mean_word_length": wchars / nw if nw else 0.0,
        "gopher_symbol_word_ratio": max(text.count("#"), text.count("...") + text.count("…")) / nw if nw else 0.0,
        "gopher_bullet_lines_frac": sum(ln[0] in cfg.bullets for ln in lines) / len(lines) if lines else 0.0,
        "gopher_ellipsis_lines_frac": sum(ln.endswith(("...", "…")) for ln in lines) / len(lines) if lines else 0.0,
        "gopher_alpha_words_frac": sum(any(c.isalpha() for c in w) for w in words) / nw if nw else 0.0,
        "gopher_stop_words": len(stops),
        "gopher_dup_line_frac": dl / len(lines) if lines else 0.0,
        "gopher_dup_line_char_frac": dlc / len(text) if lines else 0.0,
        "gopher_dup_para_frac": dp / len(paras) if paras else 0.0,
        "gopher_dup_para_char_frac": dpc / len(text) if paras else 0.0,
    }
    for n, _ in cfg.top_ngrams:
        out[f"gopher_top_{n}gram_char_frac"] = _ngram_chars(words, n, True) / wchars if wchars else 0.0
    for n, _ in cfg.dup_ngrams:
        out[f"gopher_dup_{n}gram_char_frac"] = _ngram_chars(words, n, False) / wchars if wchars else 0.0
    return out


GOOD = ("The history of the region is long and varied. Farmers settled in the valley more than a thousand years ago, "
        "and the first towns grew along the river that still runs through it today. Trade with the coast brought "
        "new crops, tools and ideas, while the mountains to the north kept invaders away for centuries. Today the "
        "valley is known for its vineyards, its old stone bridges and a festival that has been held every autumn "
        "since the middle ages, drawing visitors from all over the country.")

HANDMADE = [
    "", " ", "\n\n\t \n", "word", "Straße", "ΣΊΣΥΦΟΣ σοφός", "日本語のテキスト 日本語のテキスト",
    "nbsp\xa0separated\u3000ideographic\u2028line-sep\u2029para\x1cfile\x85nel words",
    "emoji 👩\u200d💻 zero\u200bwidth soft\u00adhyphen",
    GOOD, GOOD + "\n\n" + GOOD, (GOOD + "\n") * 5,
    "spam " * 500, "a b a b a b a b a b c", "x y z x y z x y z", "a a a a a a a a",
    "- one\n- two\n  • three\n* four\n‣ five\nsix\n\n   -\n", "• " * 10,
    "wait...\nreally…\nno....\nyes ...  \n  ...\nok", "#tag ### ##\n#### x", ".......... ... …… . ..",
    "line one\r\nline two\r\nline one\r\n\r\nline two\r\n",
    "para A\nstill A\n\n\npara B\n  \npara A\nstill A\n\npara A\nstill A",
    "  indented\n\tindented  \nindented", "THE Be, to; OF and... (that) HAVE-with With. the",
    "123 456 7.89 -- ?? !!", "Ünïcödé wörds ÀÉÎ and the of", "tab\tseparated\twords\tand\tthe\tof",
]


def _random_docs(rng, n):
    vocab = ["the", "of", "And", "to,", "data", "model", "#", "...", "…", "•", "-", "ü", "日本", "42", "x.y", "(a)"]
    pool = [" ".join(rng.choice(vocab, rng.integers(1, 8))) for _ in range(6)]
    docs = []
    for _ in range(n):
        lines = []
        for _ in range(rng.integers(0, 12)):
            r = rng.random()
            if r < 0.35:
                lines.append(pool[rng.integers(0, len(pool))])  # repeated lines and paragraphs
            elif r < 0.45:
                lines.append(" " * int(rng.integers(0, 3)))      # blank lines
            else:
                lines.append(rng.choice(["", "  ", "- ", "• "]) + " ".join(rng.choice(vocab, rng.integers(1, 15))))
        docs.append("\n".join(lines))
    return docs


def _check(texts, cfg):
    got = R.rule_scores(texts, cfg)
    assert list(got) == [r.column for r in R.rules(cfg)]
    for i, t in enumerate(texts):
        want = ref_scores(t, cfg)
        for col, vals in got.items():
            assert vals.dtype == np.float64 and vals.shape == (len(texts),)
            assert vals[i] == pytest.approx(want[col], rel=1e-12, abs=1e-15), (col, t)


def test_statistics_equal_brute_force_on_handmade_documents():
    _check(HANDMADE, RulesConfig())


def test_statistics_equal_brute_force_on_random_documents():
    rng = np.random.default_rng(0)
    cfg = RulesConfig(top_ngrams=((1, 0.5), (2, 0.2), (3, 0.18)), dup_ngrams=((2, 0.3), (5, 0.15), (10, 0.1)))
    _check(_random_docs(rng, 150), cfg)


def test_known_values():
    s = R.rule_scores(["a b a b a b a b a b c", "", "spam " * 500], RulesConfig())
    assert s["gopher_word_count"].tolist() == [11, 0, 500]
    # "a b a" occurs at 0, 2, 4, 6: it covers words 0..8 (9 of 11 characters), not 4 x 3 = 12
    assert s["gopher_top_3gram_char_frac"][0] == pytest.approx(9 / 11)
    assert s["gopher_dup_5gram_char_frac"][0] == pytest.approx(10 / 11)
    assert s["gopher_dup_10gram_char_frac"][2] == 1.0 and s["gopher_top_2gram_char_frac"][2] == 1.0
    assert all(v[1] == 0.0 for v in s.values())


def test_arrow_inputs_and_sliced_arrays():
    arr = pa.array(["pad"] + HANDMADE, pa.string()).slice(1)
    a, b = R.rule_scores(arr, RulesConfig()), R.rule_scores(HANDMADE, RulesConfig())
    assert all(np.array_equal(a[k], b[k]) for k in b)
    assert R.rule_scores([], RulesConfig())["gopher_word_count"].shape == (0,)


def test_decisions_and_first_failing_reason():
    cfg = RulesConfig()
    texts = [GOOD, "", "too short to pass", (GOOD + "\n") * 5, GOOD.replace(" the ", " ")[:400] + " #" * 20,
             "\n".join("- " + GOOD[i:i + 60] for i in range(0, 420, 60)), "spam " * 500, "I a x y z the of " * 10,
             "spam the of " * 100]
    keep, reason = R.rule_decisions(R.rule_scores(texts, cfg), cfg)
    assert keep.tolist() == [True] + [False] * 8
    assert reason.tolist() == ["", "gopher_word_count", "gopher_word_count", "gopher_dup_line_frac",
                               "gopher_symbol_word_ratio", "gopher_bullet_lines_frac", "gopher_stop_words",
                               "gopher_mean_word_length", "gopher_top_2gram_char_frac"]
    # switching a rule off moves the reason to the next failing rule, or keeps the document
    off = RulesConfig(max_dup_lines=None)
    k2, r2 = R.rule_decisions(R.rule_scores(texts, off), off)
    assert "gopher_dup_line_frac" not in R.describe(off) and r2[3] == "gopher_dup_line_char_frac"
    loose = RulesConfig(max_bullet_lines=None, max_dup_lines=None, max_dup_line_chars=None, max_dup_paragraphs=None,
                        max_dup_paragraph_chars=None, top_ngrams=(), dup_ngrams=())
    k3, r3 = R.rule_decisions(R.rule_scores(texts, loose), loose)
    assert k3[3] and k3[5] and r3[3] == "" and r3[5] == ""
    # thresholds are fields: a tighter word count fails the good document
    tight = RulesConfig(min_words=1000)
    assert R.rule_decisions(R.rule_scores([GOOD], tight), tight)[1].tolist() == ["gopher_word_count"]


def test_decisions_treat_nan_as_failing_and_need_every_column():
    cfg = RulesConfig.preset("gopher_quality")
    scores = R.rule_scores([GOOD, GOOD], cfg)
    scores["gopher_alpha_words_frac"][1] = np.nan
    keep, reason = R.rule_decisions(scores, cfg)
    assert keep.tolist() == [True, False] and reason[1] == "gopher_alpha_words_frac"
    del scores["gopher_stop_words"]
    with pytest.raises(KeyError, match="gopher_stop_words"):
        R.rule_decisions(scores, cfg)


def test_presets_and_describe():
    full = R.describe(RulesConfig.preset("gopher"))
    assert full == R.describe(RulesConfig())
    assert full["gopher_word_count"] == {"min": 50, "max": 100_000, "keep_if": "value >= 50 and value <= 100000",
                                         "statistic": "words (text.split())"}
    assert full["gopher_top_2gram_char_frac"]["max"] == 0.20 and full["gopher_dup_10gram_char_frac"]["max"] == 0.10
    assert full["gopher_stop_words"]["min"] == 2 and full["gopher_alpha_words_frac"]["min"] == 0.8
    assert len(full) == 11 + 3 + 6
    quality = R.describe(RulesConfig.preset("gopher_quality"))
    repetition = R.describe(RulesConfig.preset("gopher_repetition"))
    assert len(quality) == 7 and len(repetition) == 13 and set(quality) | set(repetition) == set(full)
    assert R.describe(RulesConfig.preset("gopher", min_words=None))["gopher_word_count"]["min"] is None
    with pytest.raises(ValueError, match="did you mean 'gopher'"):
        RulesConfig.preset("gophr")
    with pytest.raises(ValueError, match="unknown RulesConfig field 'min_word'"):
        RulesConfig.preset("gopher", min_word=3)


@pytest.mark.parametrize("kw,match", [
    ({"min_words": -1}, "min_words"), ({"min_words": 2.5}, "min_words"), ({"max_words": True}, "max_words"),
    ({"min_words": 10, "max_words": 5}, "no document could pass"), ({"max_dup_lines": 1.5}, "max_dup_lines"),
    ({"min_alpha_words": float("nan")}, "min_alpha_words"), ({"max_symbol_word_ratio": -0.1}, "symbol"),
    ({"top_ngrams": ((0, 0.2),)}, "n must be"), ({"top_ngrams": ((2, 2.0),)}, "n=2"),
    ({"dup_ngrams": ((5, 0.1), (5, 0.2))}, "twice"), ({"dup_ngrams": [(5, 0.1)]}, "tuple"),
    ({"stop_words": ("The",)}, "lowercase"), ({"stop_words": ("toolongword",)}, "1-8"),
    ({"stop_words": ("a b",)}, "spaces"), ({"stop_words": ()}, "1 to 64"),
    ({"min_stop_words": 9}, "exceeds"), ({"bullets": ("--",)}, "single"), ({"bullets": (" ",)}, "non-space")])
def test_config_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        RulesConfig(**kw)


def test_custom_stop_words_and_bullets():
    cfg = RulesConfig(stop_words=("data", "x"), bullets=("+",))
    _check(["+ data\n+ DATA.\n- x", "Data, x! y"], cfg)


def test_device_argument():
    assert np.array_equal(R.rule_scores([GOOD], RulesConfig(), "cuda")["gopher_word_count"], [len(GOOD.split())])
    with pytest.raises(ValueError, match="device"):
        R.rule_scores([GOOD], RulesConfig(), "tpu")
