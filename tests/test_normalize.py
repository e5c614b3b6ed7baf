"""The normalization kernel against the pure-Python reference of the declared policy."""
import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.config import NormalizeConfig
from gpu_dedup.normalize import arrow_text_buffers, normalize_strings, normalize_text
from gpu_dedup.unicode_tables import normalize_reference, reference_matches_tables

needs_same_unicode = pytest.mark.skipif(not reference_matches_tables(),
                                        reason="running Python's unicodedata differs from the pinned tables")
CONFIGS = [NormalizeConfig(), NormalizeConfig(remove_punctuation=True), NormalizeConfig(fold_digits=True),
           NormalizeConfig(True, True)]

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
    from gpu_dedup.normalize import normalize_arrays

    raw = b"ok \xff\xfe bad \xe2\x82"
    data = np.frombuffer(raw, np.uint8)
    norm = normalize_arrays(data, np.array([0, len(raw)], np.int64), NormalizeConfig())
    assert norm.text(0) == "ok \ufffd\ufffd bad \ufffd\ufffd"
