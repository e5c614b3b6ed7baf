"""How far is the per-codepoint policy (nfkc-cp-lower-v1) from full-string NFKC + lowercase?

Builds a synthetic multilingual corpus in memory (no downloads; deterministic for a seed), then compares
per document:

  ours      gpu_dedup.testing.unicode_reference.normalize_reference(text, NormalizeConfig())
  pyarrow   " ".join(utf8_lower(utf8_normalize(text, "NFKC")).split())        (utf8proc: simple lowercase)
  python    " ".join(unicodedata.normalize("NFKC", text).lower().split())   (full lowercase, final sigma)

and prints: the fraction of documents and of characters that differ, the difference classes (counted on
whitespace-separated tokens, with one example each), the difference rate per kind of token, and measured
single-thread throughputs. Usage:

    PYTHONPATH=. python benchmarks/nfkc_policy.py [--mb 24] [--seed 0] [--repeats 3]

The corpus mixture is made up (see PROFILES / EXTRAS): the document-level rates depend on it; the
per-token-kind rates and the classes are what carry over to real data.
"""
from __future__ import annotations

import argparse
import datetime
import difflib
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import unicodedata
from collections import defaultdict
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_dedup.text import unicode_tables as ut
from gpu_dedup.testing import unicode_reference as uref
from gpu_dedup.config import NormalizeConfig

CFG = NormalizeConfig()

# ---------------------------------------------------------------------------------------------- corpus

LATIN = "abcdefghijklmnopqrstuvwxyz"
LATIN_ACCENTED = "éèêëàâäôöûüùçñíóúáãõåøæœ"
CYRILLIC = "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
GREEK_VOWEL_TONOS = "άέήίόύώ"
ARABIC = "ابتثجحخدذرزسشصضطظعغفقكلمنهوي"
HEBREW = "אבגדהוזחטיכלמנסעפצקרשת"
DEVA_CONS = "कखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह"
DEVA_SIGNS = "ािीुूेैोौंः"
THAI_CONS = "กขคฆงจฉชซญดตถทธนบปผพฟภมยรลวศษสหอฮ"
THAI_VOWELS = "ะาิีึืุูเแโใไำ่้๊๋"
HIRAGANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
KANA_VOICED = "がぎぐげござじずぜぞだぢづでどばびぶべぼガギグゲゴザジズゼゾダヂヅデドバビブベボパピプペポ"
VIET_WORDS = ("Việt Nam tiếng người đường Nguyễn Hà Nội Thành phố Hồ Chí Minh được những chúng tôi "
              "không thể nước mình học sinh trường đại học Huế Đà Nẵng phở bún chả cảm ơn xin chào "
              "nghiêng ngả ướt sũng thuở ấy rượu khuyết điểm").split()
VIET_TONES = {"\u0300", "\u0301", "\u0303", "\u0309", "\u0323"}
GREEK_WORDS = ("οδός λόγος ανθρώπους θάλασσα σοφός κόσμος ήλιος φίλος νόμος Ελλάς καλησπέρα "
               "ευχαριστώ πόλεις χρόνος ιστορίας").split()
TURKISH = "İstanbul İzmir IŞIK ılık şişe Çağrı DİYARBAKIR İNSAN kırmızı Iğdır".split()
GERMAN = "Straße STRASSE STRAẞE Fußball groß GROẞ Maßstab weiß Grüße ẞ".split()
PERSIAN_ZWNJ = ["می\u200cخواهم", "خانه\u200cها", "نمی\u200cدانم", "کتاب\u200cهای", "می\u200cروم"]
ARABIC_PRESENTATION = ["\ufefb", "\ufdfa", "\ufdf2", "\ufe8d\ufedf\ufeb4\ufefc\ufee1", "\ufc5e", "\ufe81",
                       "\ufb50", "\ufef5", "\ufdfb"]
HEBREW_PRESENTATION = ["\ufb2a\ufb4b", "\ufb1d", "\ufb4f", "\ufb21\ufb22", "\ufb31\ufb35"]
EMOJI = ["😀", "👍", "👍🏽", "❤️", "🎉", "🙏🏿", "1️⃣", "🇫🇷", "🇯🇵", "😂", "🔥", "✨"]
EMOJI_ZWJ = ["👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "👩🏽\u200d💻", "🧑\u200d🤝\u200d🧑", "👁️\u200d🗨️",
             "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"]
UNICODE_SPACES = ["\u00a0", "\u3000", "\u2009", "\u202f", "\u2007", "\u200a", "\t", "\u2028", "\u0085", "\u2002"]
ZERO_WIDTH = ["\u200b", "\u00ad", "\u2060", "\ufeff", "\u200e", "\u200f", "\u2066", "\u2069", "\u061c",
              "\u180e", "\u200c", "\u200d"]
COMPAT = ["\ufb01", "\ufb02", "\ufb00", "\ufb03", "\ufb06", "\u0132", "\u01c6", "\u0149", "\u2122", "\u2116",
          "\u338f", "\u337f", "\u2460", "\u216b", "\u210c", "\U0001d400\U0001d401\U0001d402", "\u2026"]
FRACTION_SUPER = ["x\u00b2", "H\u2082O", "m\u00b3", "\u00bd", "\u00be", "\u2153", "10\u207b\u00b3",
                  "E=mc\u00b2", "\u00b9\u2044\u2084", "1\u00bd"]
CONTROLS = ["\x07", "\x1b[0m", "\x00", "\x7f", "\x9b"]
UNICODE_15 = ["\U0001e030\U0001e031", "\U0001e04f", "\u0c5d", "\U00011f04"]
ASCII_PUNCT = [",", ".", "!", "?", ";", ":", ")", '"']


def _rand_word(rng: np.random.Generator, alphabet: str, lo: int, hi: int) -> str:
    return "".join(alphabet[i] for i in rng.integers(0, len(alphabet), rng.integers(lo, hi + 1)))


def _cased(rng: np.random.Generator, w: str) -> str:
    u = rng.random()
    return w.upper() if u < 0.03 else w.capitalize() if u < 0.18 else w


def _viet_tones_combining(word: str) -> str:
    """Vowel letters precomposed, tone marks as combining characters (Windows-1258 / some IMEs)."""
    out = []
    for ch in unicodedata.normalize("NFC", word):
        d = unicodedata.normalize("NFD", ch)
        tones = "".join(m for m in d if m in VIET_TONES)
        out.append(unicodedata.normalize("NFC", "".join(m for m in d if m not in VIET_TONES)) + tones)
    return "".join(out)


def _misorder_marks(word: str) -> str:
    """Reverse every run of combining marks (typing order != canonical order)."""
    out, run = [], []
    for ch in unicodedata.normalize("NFD", word):
        if unicodedata.combining(ch):
            run.append(ch)
        else:
            out.extend(reversed(run))
            run = []
            out.append(ch)
    out.extend(reversed(run))
    return "".join(out)


def build_vocab(rng: np.random.Generator) -> dict[str, list[str]]:
    """Token kind -> list of distinct tokens (sampled Zipf-like into documents)."""
    def words(n: int, make: Callable[[], str]) -> list[str]:
        return list(dict.fromkeys(make() for _ in range(n)))

    ascii_words = words(4000, lambda: _cased(rng, _rand_word(rng, LATIN, 1, 10)))
    latin = words(3000, lambda: _cased(rng, _rand_word(rng, LATIN * 3 + LATIN_ACCENTED, 2, 10)))
    accented = [w for w in latin if unicodedata.normalize("NFD", w) != w]
    greek_lower = words(1500, lambda: _rand_word(rng, GREEK * 3 + GREEK_VOWEL_TONOS, 2, 8) + "ς") + GREEK_WORDS
    hangul = words(2000, lambda: "".join(chr(0xAC00 + int(i)) for i in rng.integers(0, 11172, rng.integers(1, 5))))
    kana_words = words(1500, lambda: _rand_word(rng, HIRAGANA * 2 + KANA_VOICED, 2, 6))
    voiced = [w for w in kana_words if unicodedata.normalize("NFD", w) != w]
    halfwidth = ["".join(_HALFWIDTH.get(c, c) for c in unicodedata.normalize("NFD", _to_katakana(w)))
                 for w in voiced[:300]]
    arabic = words(2000, lambda: _rand_word(rng, ARABIC, 2, 7))
    cjk_compat = [chr(c) for c in range(0xF900, 0xFA6E)] + [chr(c) for c in range(0x2F800, 0x2FA1E)]
    return {
        "ascii word": ascii_words,
        "Latin, precomposed accents": latin,
        "Latin, decomposed accents (NFD)": [unicodedata.normalize("NFD", w) for w in accented],
        "German ß/ẞ": GERMAN,
        "Turkish İ/ı": TURKISH,
        "Vietnamese, precomposed": VIET_WORDS,
        "Vietnamese, decomposed (NFD)": [unicodedata.normalize("NFD", w) for w in VIET_WORDS],
        "Vietnamese, combining tone marks": [_viet_tones_combining(w) for w in VIET_WORDS],
        "Vietnamese, stacked marks in typing order": [_misorder_marks(w) for w in VIET_WORDS
                                                      if _misorder_marks(w) != unicodedata.normalize("NFD", w)],
        "Cyrillic": words(3000, lambda: _cased(rng, _rand_word(rng, CYRILLIC, 2, 10))),
        "Greek, lowercase/title": greek_lower + [w.capitalize() for w in greek_lower[:300]],
        "Greek, all caps (final Σ)": [w.upper() for w in greek_lower[:500]],
        "Arabic": arabic,
        "Arabic, shadda before vowel mark": [w[0] + "\u0651\u064e" + w[1:] for w in arabic[:500]],
        "Arabic presentation forms": ARABIC_PRESENTATION,
        "Persian with ZWNJ": PERSIAN_ZWNJ,
        "Hebrew": words(1500, lambda: _rand_word(rng, HEBREW, 2, 6)),
        "Hebrew, dagesh before vowel point": [_rand_word(rng, HEBREW, 1, 3) + "\u05d1\u05bc\u05b8"
                                              + _rand_word(rng, HEBREW, 1, 3) for _ in range(300)],
        "Hebrew presentation forms": HEBREW_PRESENTATION,
        "Devanagari": words(2000, lambda: "".join(_rand_word(rng, DEVA_CONS, 1, 1) + _rand_word(rng, DEVA_SIGNS, 0, 1)
                                                  for _ in range(rng.integers(1, 4)))),
        "Devanagari nukta (precomposed/decomposed)": ["\u0958\u093f\u0932\u093e", "\u0915\u093c\u093f\u0932\u093e",
                                                      "\u095b\u093f\u0928\u094d\u0926\u0917\u0940",
                                                      "\u091c\u093c\u093f\u0928\u094d\u0926\u0917\u0940"],
        "Devanagari with ZWJ/ZWNJ": ["\u0915\u094d\u200d\u0937", "\u0930\u094d\u200d\u092f",
                                     "\u0915\u094d\u200c\u0937"],
        "Thai": words(1500, lambda: "".join(_rand_word(rng, THAI_CONS, 1, 1) + _rand_word(rng, THAI_VOWELS, 0, 1)
                                            for _ in range(rng.integers(2, 6)))),
        "CJK ideographs": words(3000, lambda: "".join(chr(0x4E00 + int(i)) for i in
                                                      rng.integers(0, 0x5000, rng.integers(1, 5)))),
        "CJK compatibility ideographs": cjk_compat,
        "fullwidth forms": ["Ｈｅｌｌｏ", "ＡＢＣ", "１２３", "！", "（注）", "ｗｗｗ", "：", "＄１００"],
        "Japanese kana, precomposed": kana_words,
        "Japanese kana, decomposed (NFD)": [unicodedata.normalize("NFD", w) for w in voiced],
        "halfwidth katakana with voiced marks": halfwidth,
        "Hangul syllables": hangul,
        "Hangul conjoining jamo (NFD)": [unicodedata.normalize("NFD", w) for w in hangul[:1000]],
        "Hangul compatibility jamo (chat)": ["ㅋㅋㅋ", "ㅎㅎ", "ㅠㅠ", "ㅎㅏ", "ㅇㅋ", "ㄱㅅ", "ㅋㅋㅋㅋㅋ"],
        "ligatures/letterlike/compat": COMPAT,
        "superscripts/fractions": FRACTION_SUPER,
        "emoji": EMOJI,
        "emoji ZWJ/tag sequences": EMOJI_ZWJ,
        "words joined by Unicode spaces": [f"a{s}b" for s in UNICODE_SPACES] + [f"word{s}" for s in UNICODE_SPACES],
        "words with zero-width/format chars": [f"foo{z}bar" for z in ZERO_WIDTH] + [f"{z}start" for z in ZERO_WIDTH],
        "C0/C1 controls": [f"x{c}y" for c in CONTROLS],
        "characters new in Unicode 15": UNICODE_15,
    }


_HALFWIDTH = {unicodedata.normalize("NFKC", chr(c)): chr(c) for c in range(0xFF66, 0xFF9E)}
_HALFWIDTH.update({"\u3099": "\uff9e", "\u309a": "\uff9f"})


def _to_katakana(w: str) -> str:
    return "".join(chr(ord(c) + 0x60) if 0x3041 <= ord(c) <= 0x3096 else c for c in w)


# Document profiles: (weight, {token kind: weight}). EXTRAS (at these per-token rates) are mixed into a
# share EXTRAS_DOC_SHARE of the documents; the others hold only their script's token kinds.
PROFILES: dict[str, tuple[float, dict[str, float]]] = {
    "en": (30, {"ascii word": 1.0}),
    "eu": (12, {"Latin, precomposed accents": 0.85, "ascii word": 0.05, "Latin, decomposed accents (NFD)": 0.04,
                "German ß/ẞ": 0.03, "Turkish İ/ı": 0.025}),
    "vi": (4, {"Vietnamese, precomposed": 0.8, "Vietnamese, decomposed (NFD)": 0.08,
               "Vietnamese, combining tone marks": 0.08, "Vietnamese, stacked marks in typing order": 0.04}),
    "ru": (8, {"Cyrillic": 1.0}),
    "el": (4, {"Greek, lowercase/title": 0.9, "Greek, all caps (final Σ)": 0.1}),
    "ar": (6, {"Arabic": 0.85, "Arabic, shadda before vowel mark": 0.08, "Arabic presentation forms": 0.03,
               "Persian with ZWNJ": 0.04}),
    "he": (3, {"Hebrew": 0.88, "Hebrew, dagesh before vowel point": 0.08, "Hebrew presentation forms": 0.04}),
    "hi": (5, {"Devanagari": 0.9, "Devanagari nukta (precomposed/decomposed)": 0.07, "Devanagari with ZWJ/ZWNJ": 0.03}),
    "th": (3, {"Thai": 1.0}),
    "zh": (10, {"CJK ideographs": 0.93, "CJK compatibility ideographs": 0.02, "fullwidth forms": 0.05}),
    "ja": (6, {"Japanese kana, precomposed": 0.5, "CJK ideographs": 0.4, "Japanese kana, decomposed (NFD)": 0.05,
               "halfwidth katakana with voiced marks": 0.05}),
    "ko": (5, {"Hangul syllables": 0.88, "Hangul conjoining jamo (NFD)": 0.07,
               "Hangul compatibility jamo (chat)": 0.05}),
}
EXTRAS: dict[str, float] = {
    "emoji": 0.008, "emoji ZWJ/tag sequences": 0.002, "words joined by Unicode spaces": 0.004,
    "words with zero-width/format chars": 0.003, "ligatures/letterlike/compat": 0.003,
    "superscripts/fractions": 0.003, "C0/C1 controls": 0.0003, "characters new in Unicode 15": 0.0002,
}
EXTRAS_DOC_SHARE = 0.3


def build_corpus(target_bytes: int, seed: int
                 ) -> tuple[list[str], list[str], dict[str, list[str]], dict[str, np.ndarray]]:
    """Return (documents, their profile names (+"+extras"), vocab, counts) where counts[kind][i] is the
    number of occurrences of vocab[kind][i]."""
    rng = np.random.default_rng(seed)
    vocab = build_vocab(rng)
    counts = {k: np.zeros(len(v), dtype=np.int64) for k, v in vocab.items()}
    names = list(PROFILES)
    doc_w = np.array([PROFILES[n][0] for n in names], dtype=float)
    plans = {}
    for n in names:
        for extras in (False, True):
            kinds = {**PROFILES[n][1], **(EXTRAS if extras else {})}
            weights = np.array(list(kinds.values()))
            plans[n + ("+extras" if extras else "")] = (list(kinds), weights / weights.sum())
    docs: list[str] = []
    profiles: list[str] = []
    size = 0
    while size < target_bytes:
        name = names[int(rng.choice(len(names), p=doc_w / doc_w.sum()))]
        name += "+extras" if rng.random() < EXTRAS_DOC_SHARE else ""
        kinds, p = plans[name]
        n_tok = int(rng.integers(150, 700))
        kind_idx = rng.choice(len(kinds), size=n_tok, p=p)
        ranks = rng.zipf(1.2, size=n_tok) - 1
        toks = []
        for ki, r in zip(kind_idx.tolist(), ranks.tolist()):
            kind = kinds[ki]
            i = r % len(vocab[kind])
            counts[kind][i] += 1
            toks.append(vocab[kind][i])
        seps = rng.choice(np.array([" ", "\n"]), size=n_tok, p=[0.95, 0.05])
        doc = "".join(t + s for t, s in zip(toks, seps.tolist()))
        docs.append(doc)
        profiles.append(name)
        size += len(doc.encode("utf-8", "surrogatepass"))
    return docs, profiles, vocab, counts


# ---------------------------------------------------------------------------------------------- oracles

def ours(text: str) -> str:
    return uref.normalize_reference(text, CFG)


def python_oracle(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def pyarrow_oracle_many(texts: list[str]) -> list[str]:
    out = pc.utf8_lower(pc.utf8_normalize(pa.array(texts, pa.large_string()), "NFKC")).to_pylist()
    return [" ".join(t.split()) for t in out]


# ---------------------------------------------------------------------------------------------- classes

_JAMO = re.compile("[\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff\u3131-\u318e\uffa0-\uffdc]")
_KANA_MARK = re.compile("[\u3099\u309a\uff9e\uff9f]")
_CF_GROUPS = [
    ("ZWJ/ZWNJ", set("\u200c\u200d")),
    ("emoji tag chars", {chr(c) for c in range(0xE0000, 0xE0080)}),
    ("soft hyphen", {"\u00ad"}),
    ("bidi marks", set("\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")),
]


def _cf_group(ch: str) -> str:
    for name, chars in _CF_GROUPS:
        if ch in chars:
            return name
    return "ZWSP/WJ/BOM/other Cf"


def _out_of_order(s: str) -> bool:
    cc = [unicodedata.combining(ch) for ch in s]
    return any(a > b > 0 for a, b in zip(cc, cc[1:]))


def classify(raw: str, r: str, o: str) -> str:
    """Explain ours (r) != oracle (o) by the transformations that close the gap, in a fixed order."""
    causes: list[str] = []
    cf = [ch for ch in o if unicodedata.category(ch) == "Cf"]
    if cf:
        causes.append("Cf deleted by us, kept by oracle (" + "+".join(sorted({_cf_group(c) for c in cf})) + ")")
        o = uref.collapse_spaces("".join(ch for ch in o if unicodedata.category(ch) != "Cf"))
    if any(unicodedata.category(ch) == "Cc" for ch in o):
        causes.append("non-whitespace control: we map to space, oracle keeps")
        o = uref.collapse_spaces("".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in o))
    composed = unicodedata.normalize("NFC", r)
    if composed != r and r != o:
        if _JAMO.search(raw):
            causes.append("Hangul jamo -> syllable composition")
        elif _KANA_MARK.search(raw):
            causes.append("kana + voiced sound mark composition")
        elif _out_of_order(r):
            causes.append("canonical reordering of combining marks (+composition)")
        else:
            causes.append("canonical composition of decomposed sequences (base + mark)")
        r = composed
    if r != o and len(r) == len(o) and all(a == b or (a, b) == ("σ", "ς") for a, b in zip(r, o)):
        causes.append("final sigma (oracle's contextual lowercase)")
        r = o
    if r != o and "\u0130" in raw and r.replace("i\u0307", "i") == o:
        causes.append("İ -> i + U+0307 (full lowercase) vs i (oracle's simple lowercase)")
        r = o
    if r != o and any(unicodedata.category(ch) == "Cn" for ch in raw):
        causes.append(f"character unassigned in Unicode {ut.UNICODE_VERSION} (oracle's Unicode is newer)")
        r = o
    if r != o:
        causes.append("other")
    return " + ".join(causes)


def _show(s: str) -> str:
    """Printable rendering: invisible / combining characters as <U+XXXX>."""
    out = []
    for ch in s:
        cat = unicodedata.category(ch)
        escape = (cat[0] in "CMZ" and ch != " ") or _JAMO.match(ch)
        out.append(f"<U+{ord(ch):04X}>" if escape else ch)
    return "".join(out)


def _diff_chars(a: str, b: str) -> int:
    matched = sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return max(len(a), len(b)) - matched


# ---------------------------------------------------------------------------------------------- timing

def _best_and_median(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def cold_load_seconds() -> tuple[float, float]:
    """In a fresh process: (seconds to import numpy, seconds to import unicode_tables + first load_tables)."""
    code = ("import time; t0=time.perf_counter(); import numpy; t1=time.perf_counter(); "
            "from gpu_dedup import unicode_tables as u; from gpu_dedup.config import NormalizeConfig as N; "
            "u.load_tables(N()); print(t1-t0, time.perf_counter()-t1)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    numpy_s, load_s = map(float, res.stdout.split())
    return numpy_s, load_s


# ---------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=24.0, help="corpus size in MB (10^6 bytes of UTF-8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="timing repetitions (best and median reported)")
    args = ap.parse_args(argv)
    if not uref.reference_matches_tables():
        print(f"warning: running unicodedata {unicodedata.unidata_version} != shipped {ut.UNICODE_VERSION}; "
              f"'ours' below uses the running version")
    pa.set_cpu_count(1)

    t0 = time.perf_counter()
    docs, profiles, vocab, counts = build_corpus(int(args.mb * 1e6), args.seed)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    nchars = sum(map(len, docs))
    print(f"# nfkc_policy report — {datetime.date.today().isoformat()}, {platform.machine()} "
          f"{os.cpu_count()} cores, Python {platform.python_version()} (unicodedata {unicodedata.unidata_version}), "
          f"pyarrow {pa.__version__}, policy {ut.POLICY_NAME} / Unicode {ut.UNICODE_VERSION}")
    print(f"corpus: {len(docs)} documents, {nbytes / 1e6:.1f} MB UTF-8, {nchars} codepoints, "
          f"{sum(int(c.sum()) for c in counts.values())} tokens of {len(vocab)} kinds "
          f"(seed {args.seed}, built in {time.perf_counter() - t0:.1f} s)")

    # -- document level
    t_ours = time.perf_counter()
    r_docs = [ours(d) for d in docs]
    t_ours = time.perf_counter() - t_ours
    t_py = time.perf_counter()
    py_docs = [python_oracle(d) for d in docs]
    t_py = time.perf_counter() - t_py
    pa_docs = pyarrow_oracle_many(docs)
    print("\n## Documents that differ from ours")
    for name, o_docs in (("pyarrow NFKC+utf8_lower", pa_docs), ("python NFKC+str.lower", py_docs)):
        ndiff = sum(r != o for r, o in zip(r_docs, o_docs))
        print(f"  vs {name:<24} {ndiff}/{len(docs)} = {ndiff / len(docs):.1%} of documents")
    print(f"  per document profile ({EXTRAS_DOC_SHARE:.0%} of documents also get the '+extras' token kinds: emoji, "
          "Unicode spaces, zero-width chars, compat forms, controls)")
    print(f"  {'profile':<12} {'docs':>6} {'vs pyarrow':>11} {'vs python':>10}")
    for prof in sorted(set(profiles), key=lambda p: (p.endswith("extras"), p)):
        idx = [j for j, p in enumerate(profiles) if p == prof]
        d_pa = sum(r_docs[j] != pa_docs[j] for j in idx) / len(idx)
        d_py = sum(r_docs[j] != py_docs[j] for j in idx) / len(idx)
        print(f"  {prof:<12} {len(idx):>6} {d_pa:>11.1%} {d_py:>10.1%}")

    # -- token level (each distinct token once, weighted by its count)
    flat = [(k, i, t) for k, v in vocab.items() for i, t in enumerate(v) if counts[k][i]]
    toks = [t for _, _, t in flat]
    weight = np.array([counts[k][i] for k, i, _ in flat], dtype=np.int64)
    r_tok = [ours(t) for t in toks]
    oracles = {"pyarrow": pyarrow_oracle_many(toks), "python": [python_oracle(t) for t in toks]}
    in_chars = np.array([len(t) for t in toks]) * weight
    print("\n## Characters that differ (token level)")
    per_kind: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    classes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    examples: dict[str, tuple[str, str, str]] = {}
    for oname, o_tok in oracles.items():
        diff_mask = np.array([a != b for a, b in zip(r_tok, o_tok)])
        out_chars = int((np.array([len(o) for o in o_tok]) * weight).sum())
        changed = sum(_diff_chars(r_tok[j], o_tok[j]) * int(weight[j]) for j in np.flatnonzero(diff_mask))
        inside = in_chars[diff_mask].sum() / in_chars.sum()
        print(f"  vs {oname:<8} input codepoints inside differing tokens: {inside:.3%}"
              f"; edit-distance-style differing output characters: {changed / out_chars:.3%}")
        for j, (kind, _, raw) in enumerate(flat):
            per_kind[kind][oname][0] += int(weight[j])
            if diff_mask[j]:
                per_kind[kind][oname][1] += int(weight[j])
                label = classify(raw, r_tok[j], o_tok[j])
                classes[label][oname] += int(weight[j])
                examples.setdefault(label, (raw, r_tok[j], o_tok[j]))

    print("\n## Difference classes (token occurrences; example: input -> ours | oracle)")
    print(f"  {'class':<92} {'pyarrow':>8} {'python':>8}")
    for label in sorted(classes, key=lambda k: -sum(classes[k].values())):
        raw, r, o = examples[label]
        print(f"  {label:<92} {classes[label]['pyarrow']:>8} {classes[label]['python']:>8}")
        print(f"      e.g. {_show(raw)} -> {_show(r)} | {_show(o)}")

    print("\n## Share of tokens that differ, per kind of token")
    print(f"  {'token kind':<44} {'tokens':>9} {'vs pyarrow':>11} {'vs python':>10}")
    for kind in vocab:
        if kind not in per_kind:
            continue
        n = per_kind[kind]["pyarrow"][0]
        print(f"  {kind:<44} {n:>9} {per_kind[kind]['pyarrow'][1] / n:>11.1%} {per_kind[kind]['python'][1] / n:>10.1%}")

    # -- throughput (one thread)
    arr = pa.array(docs, pa.large_string())
    reps = args.repeats
    b_norm, m_norm = _best_and_median(lambda: pc.utf8_normalize(arr, "NFKC"), reps)
    normalized = pc.utf8_normalize(arr, "NFKC")
    b_low, m_low = _best_and_median(lambda: pc.utf8_lower(normalized), reps)
    b_both, m_both = _best_and_median(lambda: pc.utf8_lower(pc.utf8_normalize(arr, "NFKC")), reps)
    mb = nbytes / 1e6
    print(f"\n## Throughput, one thread, {mb:.1f} MB ({reps} runs; best / median)")
    print(f"  pyarrow utf8_normalize(NFKC)              {mb / b_norm:8.1f} / {mb / m_norm:8.1f} MB/s")
    print(f"  pyarrow utf8_lower (on NFKC output)       {mb / b_low:8.1f} / {mb / m_low:8.1f} MB/s")
    print(f"  pyarrow utf8_normalize(NFKC)+utf8_lower   {mb / b_both:8.1f} / {mb / m_both:8.1f} MB/s")
    print(f"  python unicodedata NFKC+lower+split/join  {mb / t_py:8.1f} MB/s (one run)")
    print(f"  normalize_reference (pure Python, cached) {mb / t_ours:8.1f} MB/s (one run)")
    cold = sorted(cold_load_seconds() for _ in range(reps))
    numpy_s, load_s = cold[len(cold) // 2]
    print(f"  load_tables cold, fresh process (median of {reps}): {load_s:.3f} s for import + first load_tables, "
          f"after {numpy_s:.3f} s to import numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
