"""The normalization kernel against the pure-Python reference of the declared policy."""
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.config import NormalizeConfig
from gpu_dedup.kernels import core_cpu as cpu
from gpu_dedup.kernels import normalize as knorm
from gpu_dedup.io.text import arrow_text_buffers
from gpu_dedup.text.normalize import normalize_strings, normalize_text
from gpu_dedup.text.unicode_tables import load_tables
from gpu_dedup.testing.unicode_reference import normalize_reference, reference_matches_tables

needs_same_unicode = pytest.mark.skipif(not reference_matches_tables(),
                                        reason="running Python's unicodedata differs from the pinned tables")
CONFIGS = [NormalizeConfig(), NormalizeConfig(remove_punctuation=True), NormalizeConfig(fold_digits=True),
           NormalizeConfig(True, True), NormalizeConfig(lowercase=False)]

MULTILINGUAL = [
    "The  Quick\tBrown\nFOX — jumps!", "Straße ẞ STRASSE", "İstanbul ıi", "ΣΊΣΥΦΟΣ σοφός",
    "café cafe\u0301", "Ｆｕｌｌｗｉｄｔｈ １２３", "ﬁne ﬂour ﬀ", "x² ½ ① ㎏", "日本語のテキスト、です。",
    "한국어 텍스트", "\u1100\u1161\u11a8", "العربية ﻻ ﷺ", "עברית", "हिन्दी क़", "ไทย", "Русский ТЕКСТ",
    "zero\u200bwidth soft\u00adhyphen \ufeffbom", "nbsp\u00a0here\u3000ideo", "emoji 👩\u200d💻 ok",
    "tab\t\t\tand\r\nnewlines\n\n", "   ", "", "٣٤٥ ۱۲ १२३", "a,b.c;d:e!f?g(h)[i]{j}", "$5 + 3€ = ¥",
    "Ǆ ǅ ǆ", "Ⅻ ⅻ", "\x00nul\x07bell", "\ud7ff\ue000\U0010fffd",
]


@needs_same_unicode
@pytest.mark.parametrize("cfg", CONFIGS)
def test_kernel_equals_reference_on_multilingual_text(cfg):
    rng = np.random.default_rng(0)
    docs = MULTILINGUAL + [" ".join(rng.choice(MULTILINGUAL, 5)) for _ in range(200)]
    assert normalize_strings(docs, cfg) == [normalize_reference(d, cfg) for d in docs]


@needs_same_unicode
@pytest.mark.parametrize("cfg", [NormalizeConfig(), NormalizeConfig(True, True)])
def test_kernel_equals_reference_for_every_codepoint(cfg):
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    # each codepoint between two letters so deletions, spaces and expansions all show
    docs = ["".join(f"a{chr(c)}b " for c in cps[i:i + 2000]) for i in range(0, len(cps), 2000)]
    got = normalize_strings(docs, cfg)
    for d, g in zip(docs, got):
        assert g == normalize_reference(d, cfg)


def test_sizes_words_and_trimming():
    norm = normalize_text(pa.array(["  Hello \t WORLD  ", "", " \n ", "ﬁ x"], pa.large_string()), NormalizeConfig())
    assert [norm.text(i) for i in range(4)] == ["hello world", "", "", "fi x"]
    assert norm.words.tolist() == [2, 0, 0, 2]
    assert norm.codepoints.tolist() == [11, 0, 0, 4]


def test_sliced_and_small_string_arrays():
    arr = pa.array(["zero", "One", "TWO  three"], pa.string()).slice(1, 2)
    data, off = arrow_text_buffers(arr)
    assert off.shape == (3,)
    norm = normalize_text(arr, NormalizeConfig())
    assert [norm.text(i) for i in range(2)] == ["one", "two three"]


def test_invalid_utf8_bytes_become_replacement_characters():
    from gpu_dedup.text.normalize import normalize_arrays

    raw = b"ok \xff\xfe bad \xe2\x82"
    data = np.frombuffer(raw, np.uint8)
    norm = normalize_arrays(data, np.array([0, len(raw)], np.int64), NormalizeConfig())
    assert norm.text(0) == "ok \ufffd\ufffd bad \ufffd\ufffd"


# ----------------------------------------------------------------------------------------------------------
# The ASCII fast paths (kernels/normalize.py: blocks, 8-byte words, bytes) against the policy spelled out in
# Python over the same tables, on text built to hit their edges.

PIECES = {
    "ascii": ["the", "Quick", "BROWN", "fox", "x", "a1b2", "2024", "Hello", "ok", "zZ", "0", "9x"],
    "space": [" ", "  ", "\t", "\n", "\n\n", "\r\n", " \n ", "\x0b", "\x0c", "\x1c", "\x1f", "        "],
    "control": ["\x00", "\x07", "\x1b", "\x7f"],
    "punct": [",", ".", "!", "-", "'", '"', "(", ")", "$", "+", "~", "...", ", ", ". "],
    "multi": ["é", "ß", "ﬁ", "Σ", "日本", "😀", "İ", "Ⅻ", "①", "㎏", "\u00a0", "\u0085", "\u2028", "\u3000",
              "\u200b", "\u00ad", "\ufeff", "١٢"],
}
EDGE_DOCS = ["", " ", "   \n\t  ", "a", " a ", "\u200b", " \u200b ", "a \u200b", "a\u3000", "a \u00e9 ", "\u00e9",
             "x" * 7 + "é" + "y" * 8, "x" * 6 + "日" + "y" * 9, "x" * 8 + "😀", " " * 200, "\n" * 100 + "a",
             "a" + " " * 100, "a  " * 100, ("abc " * 40) + "\u3000", ("Ab, " * 40).strip(),
             "é" + "z" * 200, "z" * 200 + "é", "\x7f" * 20 + "A" * 70 + "\x00" * 9]
EDGE_DOCS += ["ab " * k + "c" for k in (20, 21, 22, 42, 43)]  # content ending on and around block ends
EDGE_DOCS += [("q" * k + " ") * 3 for k in (6, 7, 8, 15, 63, 64)]


def _policy(text: str, tables) -> str:
    """The policy over the tables: each codepoint's image, then the space-separated runs joined by one
    space."""
    off, cp = tables.map_off, tables.map_cp
    mapped = "".join(chr(x) for ch in text for x in cp[off[ord(ch)]:off[ord(ch) + 1]].tolist())
    return " ".join(w for w in mapped.split(" ") if w)


def _random_docs(rng, n: int) -> list[str]:
    kinds = list(PIECES)
    docs = []
    for _ in range(n):
        # mostly ASCII text (long runs for the block and word loops), now and then everything else
        weights = rng.dirichlet([8.0, 3.0, 0.3, 1.0, rng.choice([0.05, 1.0])])
        size = int(rng.choice([3, 20, 120, 400]))
        picks = rng.choice(len(kinds), size, p=weights)
        docs.append("".join(PIECES[kinds[k]][rng.integers(len(PIECES[kinds[k]]))] for k in picks))
    return docs


def _buffers(docs: list[str]):
    raw = [d.encode("utf-8") for d in docs]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw), np.uint8).copy(), offsets


@pytest.mark.parametrize("cfg", [NormalizeConfig(), NormalizeConfig(True, True)])
def test_fast_paths_equal_the_policy(cfg):
    rng = np.random.default_rng(7)
    docs = EDGE_DOCS + _random_docs(rng, 300)
    tables = load_tables(cfg)
    want = [_policy(d, tables) for d in docs]
    data, offsets = _buffers(docs)
    norm = normalize_text(pa.array(docs, pa.large_string()), cfg)
    assert [norm.text(i) for i in range(len(docs))] == want
    assert norm.words.tolist() == [len(w.split(" ")) if w else 0 for w in want]
    assert norm.codepoints.tolist() == [len(w) for w in want]

    # every path alone (ASCII_GENERIC: bytes only; the model: words; with MODE_BLOCKS: blocks), each
    # document written with guard bytes after it that must stay untouched
    mode = knorm.ascii_mode(tables.map_cp)
    assert mode == ((knorm.MODE_PUNCT | knorm.MODE_DIGITS if cfg.remove_punctuation else 0)
                    | (0 if cfg.lowercase else knorm.MODE_CASED))
    want_bytes = [w.encode("utf-8") for w in want]
    for m in (knorm.ASCII_GENERIC, mode, mode | knorm.MODE_BLOCKS):
        out = np.full(sum(len(w) + 9 for w in want_bytes), 0xAA, np.uint8)
        pos = 0
        for i, w in enumerate(want_bytes):
            got = cpu.normalize_span(data, offsets[i], offsets[i + 1], tables.map_off, tables.map_cp, m, out, 0,
                                     False)
            assert got == (len(w), norm.words[i], norm.codepoints[i]), (m, docs[i])
            cpu.normalize_span(data, offsets[i], offsets[i + 1], tables.map_off, tables.map_cp, m, out, pos, True)
            assert bytes(out[pos:pos + len(w)]) == w, (m, docs[i])
            assert np.all(out[pos + len(w):pos + len(w) + 9] == 0xAA), (m, docs[i])
            pos += len(w) + 9
    # normalize_doc (the paragraph kernels' span normalizer): the word loop on spans >= SPAN_MODE_MIN, bytes below
    from gpu_dedup.kernels import bloom_cpu

    for i, w in enumerate(want_bytes):
        out = np.full(len(w) + 9, 0xAA, np.uint8)
        bloom_cpu.c_normalize_doc(data, offsets[i], offsets[i + 1], tables.map_off, tables.map_cp, out, 0, True)
        assert bytes(out[:len(w)]) == w and np.all(out[len(w):] == 0xAA), docs[i]


def test_tables_that_are_no_ascii_model_take_the_byte_loop():
    t = load_tables(NormalizeConfig())
    map_cp = t.map_cp.copy()
    map_cp[ord("q")] = ord("k")  # still one ASCII image per ASCII codepoint, but no SWAR model
    assert knorm.ascii_mode(map_cp) == knorm.ASCII_GENERIC
    for cfg in CONFIGS:
        assert knorm.ascii_mode(load_tables(cfg).map_cp) != knorm.ASCII_GENERIC

    tables = SimpleNamespace(map_off=t.map_off, map_cp=map_cp)
    docs = EDGE_DOCS + _random_docs(np.random.default_rng(3), 60) + ["Quick quiet queue " * 30]
    data, offsets = _buffers(docs)
    sizes = np.empty((len(docs), 3), np.int64)
    cpu.normalize_sizes(data, offsets, t.map_off, map_cp, sizes)
    out_off = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(sizes[:, 0], out=out_off[1:])
    out = np.empty(int(out_off[-1]), np.uint8)
    cpu.normalize_write(data, offsets, t.map_off, map_cp, out, out_off)
    got = [bytes(out[out_off[i]:out_off[i + 1]]).decode("utf-8") for i in range(len(docs))]
    assert got == [_policy(d, tables) for d in docs]
