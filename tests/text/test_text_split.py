"""Tests for gpu_dedup.text.split, the package's one paragraph splitter, and for the filters' use of it
(filters/scorers.paragraphs, unit="paragraph"); its sentences and three-sentence windows against a brute-force
pure-Python reference of the stated rule (``ref_sentences``: a regex over each line's bytes).

Until issue 27 the filters split paragraphs with their own regex (``\\n[ \\t\\r\\f\\v]*\\n``, parts kept when
``str.strip()`` left something). ``old_paragraphs`` keeps that definition as the reference: on every input
the kernel's paragraphs are the regex's parts trimmed of ASCII whitespace, except a part made only of
non-ASCII whitespace (NBSP, U+3000, U+0085, U+001C..U+001F, U+2028, ...), which ``str.strip()`` dropped and
the kernel keeps (a line is blank only when it holds ASCII whitespace: paragraph dedup's documented rule).
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.filters.scorers import paragraphs
from gpu_dedup.io.text import arrow_text_buffers
from gpu_dedup.testing.reference import sentence_spans as ref_sentences
from gpu_dedup.text.split import sentence_windows, split_units

_OLD = re.compile(r"\n[ \t\r\f\v]*\n")
ASCII_WS = " \t\n\r\v\f"

HOSTILE = [
    "", "\n", "\n\n", " \t\r\n\v\f", "a", "a\n\nb", "a\n \nb", "a\n\t\r\nb", "a\r\n\r\nb\r\n", "x\n\n\ny",
    "x\n\n\n\ny", "\n\n a \n\n", "  lead\n\ntrail  ", "\n\n\nfirst\n\nlast\n\n\n", " \t\n\t\nfoo  \n  bar\n \n",
    "one\ntwo\nthree", "one\n\ntwo\n \t \nthree\n\f\nfour", "\r\r\rx\r\r", "a\n\u00a0\nb", "é\n\n\nü\n",
    "日本\n\n語\n", "emoji 😀\n\n\t😀 \n", "a\v\nb", "tab\tinside\n\nline", "\x00\n\n\x00",
    "a\n\n\u00a0\n\nb", "\u3000", "x\n\n\u0085\n\ny", "\u2028\n\n\u2029", "\x1c\x1d\n\n\x1e\x1f",
]


def old_paragraphs(texts: list[str]) -> tuple[list[int], list[str]]:
    """The filters' former definition (regex split, then ``str.strip()``)."""
    doc, parts = [], []
    for d, t in enumerate(texts):
        for p in _OLD.split(t):
            if p.strip():
                doc.append(d)
                parts.append(p)
    return doc, parts


def old_trimmed_plus_unicode_blank(texts: list[str]) -> tuple[list[int], list[str]]:
    """What the kernel gives, from the old definition: its parts trimmed of ASCII whitespace, plus the parts
    it dropped because they hold only non-ASCII whitespace."""
    doc, parts = [], []
    for d, t in enumerate(texts):
        for p in _OLD.split(t):
            if p.strip(ASCII_WS):
                doc.append(d)
                parts.append(p.strip(ASCII_WS))
    return doc, parts


def _random_texts(rng: np.random.Generator, n: int) -> list[str]:
    alphabet = ["a", "b", "é", "日", "😀", " ", " ", "\t", "\r", "\n", "\n", "\n", "\v", "\f", "\u00a0", "\u3000"]
    return ["".join(rng.choice(alphabet, size=int(rng.integers(0, 40)))) for _ in range(n)]


def test_kernel_paragraphs_are_the_old_regex_parts_trimmed():
    rng = np.random.default_rng(27)
    texts = HOSTILE + _random_texts(rng, 400)
    doc, arr, weight = paragraphs(pa.array(texts, pa.large_string()))
    got = arr.to_pylist()
    want_doc, want = old_trimmed_plus_unicode_blank(texts)
    assert doc.tolist() == want_doc and got == want
    assert weight.tolist() == [len(p.encode("utf-8")) for p in got]  # a paragraph's bytes, trimmed
    assert doc.dtype == np.int64 and arr.type == pa.large_string() and weight.dtype == np.float64


def test_the_two_differences_from_the_old_regex_exactly():
    """1. the text (and byte weight) of a paragraph no longer carries the ASCII whitespace around it; 2. a
    paragraph of non-ASCII whitespace only is a paragraph (the regex's ``str.strip()`` dropped it)."""
    texts = ["  lead\n\ntrail  \r\n", "x\n\n\ny", "a\n\n\u00a0\n\nb"]
    _, old = old_paragraphs(texts)
    assert old == ["  lead", "trail  \r\n", "x", "\ny", "a", "b"]
    _, arr, weight = paragraphs(pa.array(texts, pa.large_string()))
    assert arr.to_pylist() == ["lead", "trail", "x", "y", "a", "\u00a0", "b"]
    assert weight.tolist() == [4, 5, 1, 1, 1, 2, 1]


def test_filters_split_exactly_as_paragraph_dedup():
    """The filters' paragraphs are paragraph dedup's units of split="paragraph", byte for byte."""
    texts = HOSTILE + _random_texts(np.random.default_rng(5), 100)
    arr = pa.array(texts, pa.large_string())
    data, offsets = arrow_text_buffers(arr)
    u = split_units(data, offsets, "paragraph", "cpu")
    spans = [bytes(data[s:e]).decode("utf-8") for s, e in zip(u.start.tolist(), u.end.tolist())]
    doc, got, _ = paragraphs(arr)
    assert got.to_pylist() == spans
    assert np.bincount(doc, minlength=len(texts)).tolist() == np.diff(u.unit_off).tolist()


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_sliced_and_narrow_arrays(kind):
    """Offsets that do not start at 0 (a slice) and 32-bit offsets give the same paragraphs."""
    texts = ["skip\n\nme", "p1\n\np2", " \n", "p3"]
    doc, arr, _ = paragraphs(pa.array(texts, kind).slice(1))
    assert doc.tolist() == [0, 0, 2] and arr.to_pylist() == ["p1", "p2", "p3"]
    doc, arr, weight = paragraphs(pa.array([], kind))
    assert len(doc) == len(arr) == len(weight) == 0
    doc, arr, _ = paragraphs(pa.chunked_array([pa.array(["a\n\nb"], kind), pa.array(["c"], kind)]))
    assert doc.tolist() == [0, 0, 1] and arr.to_pylist() == ["a", "b", "c"]


# -- sentences: the rule of gpu_dedup/text/split.py, written again as a regex over each line (testing/reference.py)

SENTENCES = [
    "", ".", "a", "Hello there. This is e.g. the first one! And a third? Yes.\nNew line here",
    "你好。我是猫！ok？好", "Wait... what. Wait... Then. 3.14 is pi. U.S.-made goods.", '"Stop!" he said. (Done.) [x.] Next',
    "Dr. Smith arrived at 5 p.m. sharp.", "trailing space.   \n\n  lead. \t tab.\r\nCRLF line.",
    "no terminal at all", "?!?! ...", "a.b.c. d", "end.\n", "。。。", "x.\u00a0Y", "a. \n b", "Q? A!'B",
]


def _sentence_texts(rng: np.random.Generator, n: int) -> list[str]:
    alphabet = ["a", "Z", "é", "日", "3", " ", " ", "\t", "\r", "\n", ".", ".", "!", "?", "。", "！", "？", '"',
                "'", ")", "]", "\u00a0"]
    return ["".join(rng.choice(alphabet, size=int(rng.integers(0, 50)))) for _ in range(n)]


def _spans(texts: list[str], split: str) -> list[list[tuple[int, int]]]:
    data, offsets = arrow_text_buffers(pa.array(texts, pa.large_string()))
    u = split_units(data, offsets, split, "cpu")
    return [[(int(s - offsets[d]), int(e - offsets[d])) for s, e in zip(u.start[u.unit_off[d]:u.unit_off[d + 1]],
                                                                         u.end[u.unit_off[d]:u.unit_off[d + 1]])]
            for d in range(len(texts))]


def test_sentence_golden():
    got = _spans(["Hello there. This is e.g. the first one! And a third? Yes.\nNew line here",
                  "你好。我是猫！ok", 'Wait... what. 3.14 is pi. U.S.-made. "Stop!" he said.'], "sentence")
    texts = [[b[s:e].decode() for s, e in doc] for b, doc in zip(
        [t.encode() for t in ["Hello there. This is e.g. the first one! And a third? Yes.\nNew line here",
                              "你好。我是猫！ok", 'Wait... what. 3.14 is pi. U.S.-made. "Stop!" he said.']], got)]
    assert texts == [["Hello there.", "This is e.g. the first one!", "And a third?", "Yes.", "New line here"],
                     ["你好。", "我是猫！", "ok"], ["Wait... what.", "3.14 is pi.", "U.S.-made.", '"Stop!" he said.']]


def test_sentences_equal_the_brute_force_reference():
    texts = SENTENCES + HOSTILE + _sentence_texts(np.random.default_rng(26), 500)
    got = _spans(texts, "sentence")
    assert got == [ref_sentences(t.encode()) for t in texts]
    assert sum(map(len, got)) > 1000


def test_sentences_refine_lines():
    """A sentence never runs over a newline: every sentence lies inside one non-blank line."""
    texts = SENTENCES + _sentence_texts(np.random.default_rng(3), 200)
    for sents, lines in zip(_spans(texts, "sentence"), _spans(texts, "line")):
        assert all(any(a <= s and e <= b for a, b in lines) for s, e in sents)


def test_three_sentence_windows_equal_brute_force():
    texts = SENTENCES + _sentence_texts(np.random.default_rng(9), 100)
    data, offsets = arrow_text_buffers(pa.array(texts, pa.large_string()))
    u = split_units(data, offsets, "sentence", "cpu")
    w = sentence_windows(u, 3)
    want_first, want_off = [], [0]
    for d in range(len(texts)):
        a, b = int(u.unit_off[d]), int(u.unit_off[d + 1])
        want_first += list(range(a, b - 2))
        want_off.append(len(want_first))
    assert w.first.tolist() == want_first and w.win_off.tolist() == want_off
    assert w.start.tolist() == u.start[want_first].tolist()
    assert w.end.tolist() == u.end[np.array(want_first, np.int64) + 2].tolist()
    assert sentence_windows(u, 1).first.tolist() == list(range(len(u.start)))
    with pytest.raises(ValueError, match="size"):
        sentence_windows(u, 0)


def test_unknown_split_is_refused():
    data, offsets = arrow_text_buffers(pa.array(["a"], pa.large_string()))
    with pytest.raises(ValueError, match="span3"):
        split_units(data, offsets, "span3", "cpu")


def test_whitespace_words_equal_a_python_count():
    """text.split.whitespace_words (the filter's and the dedup report's word count): maximal runs of characters
    other than ASCII whitespace, against re.findall on random texts of spaces, tabs, vertical tabs, NBSP,
    ideographic spaces, multi-byte letters; blank and empty texts; a sliced array."""
    import random

    from gpu_dedup.text.split import whitespace_words

    rng = random.Random(4)
    alphabet = ["a", "b", " ", "\t", "\n", "\v", "\f", "\r", "\u00a0", "\u3000", "é", "日", "x"]
    texts = ["", " ", "\v\v", "a"] + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
                                       for _ in range(3000)]
    want = [len(re.findall(r"[^ \t\n\v\f\r]+", t)) for t in texts]
    for arr in (pa.array(texts, pa.large_string()), pa.array(texts, pa.string())):
        assert whitespace_words(arr).tolist() == want
        assert whitespace_words(arr.slice(5, 100)).tolist() == want[5:105]
