"""Labelled synthetic evaluation corpus: English-like documents with known duplicate structure.

Independent of the pipeline. Its exact truth (all-pairs word n-gram Jaccard, the exact greedy dedup that
the ``representative`` policy approximates, scores of a keep mask) is ``gpu_dedup.testing.reference``.

Text model. The generated text uses only ASCII letters and digits, the Latin-1 letters é, ü, ñ (and
their capitals at sentence starts), the punctuation ``. , ; : ! ? ' -`` attached to words, spaces
and ``"\\n"``. For such text the pipeline's normalization (NFKC, lowercase, whitespace runs -> one
space) followed by splitting on spaces is exactly ``text.lower().split()``; ``make_corpus`` checks
this for every document (``check_text``).

Document kinds (column ``kind``):
  unique    independent documents;
  exact     a copy of a unique document, byte-identical or differing only in case / whitespace;
  near      a copy of a unique document with phrase-level edits (substitute / insert / delete runs
            of 1-5 words) touching about ``edit_rate`` of its words;
  template  members of chained families: one boilerplate with slots whose contents drift a little
            from member to member, so neighbours are >= 0.8 similar but far-apart members are not;
  short     fewer than 5 words (no word 5-gram), many of them repeated web boilerplate.

Only numpy, pyarrow and the standard library are imported.
"""
from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, RunError
from .vocabulary import DETERMINERS, FIXED_WORDS, build_vocabulary, words_of

log = logging.getLogger(__name__)

__all__ = ["KINDS", "VOCABULARY", "check_text", "normalize_text", "make_corpus"]

KINDS = ("unique", "exact", "near", "template", "short")

# ---------------------------------------------------------------------------------------------
# Vocabulary: ~1,500 common English words by part of speech, each list roughly in frequency order
# (rank 0 = most common). Sentences are drawn from a small grammar over these categories so the
# text reads like (meaningless) English rather than word salad.
# ---------------------------------------------------------------------------------------------

_VOCAB, _SPANS = build_vocabulary()
#: Every distinct word of the generator's vocabulary (all categories, numbers included).
VOCABULARY: tuple[str, ...] = tuple(dict.fromkeys(_VOCAB))
_CATS = tuple(_SPANS)
_CAT_CODE = {c: i for i, c in enumerate(_CATS)}
_VOCAB_ARR = np.array(_VOCAB, dtype=object)
_VOCAB_CAP = np.array([w[:1].upper() + w[1:] for w in _VOCAB], dtype=object)
_VOWEL_START = np.array([w[:1] in "aeiou" for w in _VOCAB])
_CAT_OF_WORD = np.empty(len(_VOCAB), dtype=np.int8)
for _c, (_a, _b) in _SPANS.items():
    _CAT_OF_WORD[_a:_b] = _CAT_CODE[_c]
_FIXED_ID = {w: _SPANS["F"][0] + i for i, w in enumerate(words_of(FIXED_WORDS))}


def _zipf_cdf(n: int, exponent: float = 1.0, offset: float = 2.7) -> np.ndarray:
    """CDF (float64, shape (n,)) of a Zipf-Mandelbrot law p(rank) ~ 1 / (rank + offset) ** exponent."""
    p = 1.0 / (np.arange(n) + offset) ** exponent
    c = np.cumsum(p)
    return c / c[-1]


# Numbers and years are uniform (a Zipf law over "1900".."2024" would look odd); the rest Zipf.
_CDF = {c: (_zipf_cdf(b - a) if c not in "YU" else np.arange(1, b - a + 1) / (b - a))
        for c, (a, b) in _SPANS.items()}


def _sample_words(rng: np.random.Generator, cat_codes: np.ndarray) -> np.ndarray:
    """Draw one word id (int32) per entry of ``cat_codes`` (int8 category codes) from its category."""
    out = np.empty(len(cat_codes), dtype=np.int32)
    for code in np.unique(cat_codes):
        cat = _CATS[code]
        where = np.flatnonzero(cat_codes == code)
        start = _SPANS[cat][0]
        out[where] = start + np.searchsorted(_CDF[cat], rng.random(len(where)), side="right")
    return out


# ---------------------------------------------------------------------------------------------
# Sentence grammar. A pattern is a sequence of slots: a category letter (see _build_vocabulary) or
# "=word" for a fixed word; a slot may carry "," ";" or ":" after it; the last item is the end mark.
# ---------------------------------------------------------------------------------------------

_PATTERNS: tuple[tuple[str, int], ...] = (
    ("D A N V D N P D N .", 10),
    ("S V D N P D A N .", 10),
    ("P D N, S V D A N .", 6),
    ("D N M B D N R .", 6),
    ("K V D N, C S V D N P D N .", 6),
    ("=there =was D A N P D N .", 4),
    ("D N =was R A, C D N V D N .", 4),
    ("=in Y, D A N V D N P D N .", 3),
    ("M S B D N P D N ?", 3),
    ("D N V =about U =percent =of D N .", 2),
    ("S V D N, D A N, =and D N .", 4),
    ("R, D N V D N C S V D N .", 4),
    ("D A N =is A .", 3),
    ("K =and K V D N P D N =last =year .", 2),
    ("=why =did D N B D N ?", 2),
    ("S V R !", 1),
    ("D N V .", 2),
    ("=it =was D A N, =and S V D N P D N .", 3),
    ("D N P D N V D A N; S V R .", 3),
    ("K V: D N, D N, =and D N .", 2),
)
_PUNCT = ("", ",", ".", "?", "!", ";", ":")
_SEPS = (" ", "\n\n")
# Tail code = punct * 2 + sep: what follows a word (its attached punctuation, then the separator).
_TAILS = np.array([p + s for p in _PUNCT for s in _SEPS], dtype=object)
_PARAGRAPH_P = 0.15  # chance that a sentence ends its paragraph
_NO_FIX = -1


def _compile_patterns() -> tuple[np.ndarray, ...]:
    """Patterns as padded int tables: category code, fixed word id (or -1), punct code; + lengths, CDF."""
    rows = []
    for text, _ in _PATTERNS:
        items = text.split()
        end = _PUNCT.index(items[-1])
        slots = []
        for item in items[:-1]:
            punct = 0
            if item[-1] in ",;:":
                punct, item = _PUNCT.index(item[-1]), item[:-1]
            if item.startswith("="):
                slots.append((_CAT_CODE["F"], _FIXED_ID[item[1:]], punct))
            else:
                slots.append((_CAT_CODE[item], _NO_FIX, punct))
        slots[-1] = (slots[-1][0], slots[-1][1], end)
        rows.append(slots)
    width = max(len(r) for r in rows)
    cat = np.zeros((len(rows), width), np.int8)
    fix = np.full((len(rows), width), _NO_FIX, np.int32)
    punct = np.zeros((len(rows), width), np.int8)
    for i, r in enumerate(rows):
        for j, (c, f, p) in enumerate(r):
            cat[i, j], fix[i, j], punct[i, j] = c, f, p
    lens = np.array([len(r) for r in rows], np.int64)
    w = np.array([wt for _, wt in _PATTERNS], np.float64)
    return cat, fix, punct, lens, np.cumsum(w) / w.sum()


_PAT_CAT, _PAT_FIX, _PAT_PUNCT, _PAT_LEN, _PAT_CDF = _compile_patterns()
_PAT_MEAN_LEN = float(np.diff(np.concatenate([[0.0], _PAT_CDF])) @ _PAT_LEN)
_ID_A = _SPANS["D"][0] + words_of(DETERMINERS).index("a")
_ID_AN = _FIXED_ID["an"]


@dataclass
class _Tokens:
    """Token arrays of one or more documents: ``word`` int32 vocabulary ids, ``tail`` int8 tail
    codes, ``cap`` bool (capitalise the first letter); all shape (n_tokens,)."""

    word: np.ndarray
    tail: np.ndarray
    cap: np.ndarray

    def __len__(self) -> int:
        return len(self.word)

    def slice(self, a: int, b: int) -> "_Tokens":
        return _Tokens(self.word[a:b], self.tail[a:b], self.cap[a:b])

    def copy(self) -> "_Tokens":
        return _Tokens(self.word.copy(), self.tail.copy(), self.cap.copy())

    @staticmethod
    def concat(parts: Sequence["_Tokens"]) -> "_Tokens":
        return _Tokens(np.concatenate([p.word for p in parts]), np.concatenate([p.tail for p in parts]),
                       np.concatenate([p.cap for p in parts]))


def _draw_patterns(rng: np.random.Generator, n_words: int, n_docs: int) -> np.ndarray:
    """Pattern ids (int64) of enough sentences for ``n_words`` words in ``n_docs`` documents."""
    n = int(n_words / _PAT_MEAN_LEN * 1.1) + 2 * n_docs + 16
    return np.searchsorted(_PAT_CDF, rng.random(n), side="right")


def _sentences_to_tokens(rng: np.random.Generator, pat: np.ndarray) -> _Tokens:
    """Materialise sentences (pattern ids, shape (s,)) as tokens; paragraph breaks drawn here."""
    lens = _PAT_LEN[pat]
    ends = np.cumsum(lens)
    n_tok = int(ends[-1]) if len(ends) else 0
    sent = np.repeat(np.arange(len(pat)), lens)
    pos = np.arange(n_tok) - np.repeat(ends - lens, lens)
    p = pat[sent]
    fix = _PAT_FIX[p, pos]
    word = fix.copy()
    free = fix == _NO_FIX
    word[free] = _sample_words(rng, _PAT_CAT[p, pos][free])
    # "a" -> "an" before a vowel (the next token is always in the same sentence after a determiner).
    is_a = np.flatnonzero(word[:-1] == _ID_A)
    word[is_a[_VOWEL_START[word[is_a + 1]]]] = _ID_AN
    punct = _PAT_PUNCT[p, pos].astype(np.int8)
    sep = np.zeros(n_tok, np.int8)
    sep[ends - 1] = rng.random(len(pat)) < _PARAGRAPH_P
    return _Tokens(word, punct * 2 + sep, pos == 0)


def _gen_docs(rng: np.random.Generator, targets: np.ndarray) -> list[_Tokens]:
    """One document per entry of ``targets`` (int, words wanted), cut at sentence boundaries; each
    has at least one sentence and about its target length."""
    targets = np.asarray(targets, np.int64)
    n = len(targets)
    if n == 0:
        return []
    pat = _draw_patterns(rng, int(targets.sum()), n)
    while True:
        cum = np.cumsum(_PAT_LEN[pat])
        # cuts[k] = number of sentences in documents 0..k: the first sentence end at/after the target.
        cuts = np.searchsorted(cum, np.cumsum(targets), side="left") + 1
        rank = np.arange(1, n + 1)
        cuts = np.maximum.accumulate(cuts - rank) + rank   # strictly increasing: >= 1 sentence each
        if cuts[-1] <= len(pat):
            break
        pat = np.concatenate([pat, _draw_patterns(rng, int(targets.sum()) // 4, n)])
    pat = pat[: cuts[-1]]
    toks = _sentences_to_tokens(rng, pat)
    bounds = np.concatenate([[0], np.cumsum(_PAT_LEN[pat])[cuts - 1]])
    return [toks.slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _render(docs: Sequence[_Tokens]) -> list[str]:
    """Render token documents to text: capitalised sentence starts, attached punctuation, " " or
    "\\n\\n" between words, no trailing whitespace."""
    if not docs:
        return []
    allt = _Tokens.concat(docs)
    strings = np.where(allt.cap, _VOCAB_CAP[allt.word], _VOCAB_ARR[allt.word]) + _TAILS[allt.tail]
    bounds = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).tolist()
    return ["".join(strings[a:b]).rstrip() for a, b in zip(bounds[:-1], bounds[1:])]


# Phrase-level edits (runs of 1..5 words, mean 3) rather than scattered single words: an edit run
# breaks about run + 4 shingles, so the Jaccard to the source falls off slowly with the rate and the
# default rates straddle 0.8 and 0.5 (benchmarks/quality.py prints the measured distribution).
_RUN_MAX = 5
_MEAN_RUN = (1 + _RUN_MAX) / 2
_INSERT_CATS = np.array([_CAT_CODE[c] for c in "AARNPD"], np.int8)


def _edit(rng: np.random.Generator, src: _Tokens, rate: float) -> _Tokens:
    """A near-duplicate of ``src``: about ``rate * len(src)`` words substituted (same part of speech),
    inserted or deleted, in runs of 1..5 words at random places."""
    n = len(src)
    n_ops = max(1, int(round(rate * n / _MEAN_RUN)))
    pos = np.sort(rng.integers(0, n, n_ops))
    kind = rng.integers(0, 3, n_ops)          # 0 substitute, 1 insert, 2 delete
    run = rng.integers(1, _RUN_MAX + 1, n_ops)
    # All random words up front (one draw each): a same-category alternative for every source
    # position, and the inserted words.
    alt = _sample_words(rng, _CAT_OF_WORD[src.word])
    n_ins = int(run[kind == 1].sum())
    ins = _sample_words(rng, _INSERT_CATS[rng.integers(0, len(_INSERT_CATS), n_ins)])
    ins_at = 0
    parts: list[_Tokens] = []
    cursor = 0
    for p, k, r in zip(pos.tolist(), kind.tolist(), run.tolist()):
        p = max(p, cursor)                     # overlapping edits start where the previous one ended
        if p >= n:
            break
        parts.append(src.slice(cursor, p))
        if k == 0:
            piece = src.slice(p, min(n, p + r)).copy()
            piece.word = alt[p:p + len(piece)]
            parts.append(piece)
            cursor = p + len(piece)
        elif k == 1:
            parts.append(_Tokens(ins[ins_at:ins_at + r], np.zeros(r, np.int8), np.zeros(r, bool)))
            ins_at += r
            cursor = p
        else:
            end = min(n, p + r)
            # Keep the deleted run's closing punctuation and capital on the neighbours.
            last_tail = int(src.tail[end - 1])
            if last_tail and parts and len(parts[-1]):
                prev = parts[-1] = parts[-1].copy()
                prev.tail[-1] = max(int(prev.tail[-1]), last_tail)
            if src.cap[p] and end < n:
                nxt = src.slice(end, end + 1).copy()
                nxt.cap[0] = True
                parts.append(nxt)
                end += 1
            cursor = end
    parts.append(src.slice(cursor, n))
    return _Tokens.concat(parts)


def _template_family(rng: np.random.Generator, size: int, n_words: int, n_slots: int = 6) -> list[_Tokens]:
    """A chained family of ``size`` documents of about ``n_words`` words (>= 150).

    Layout: heading + boilerplate, slot, heading + boilerplate, ..., boilerplate (n_slots slots,
    about half of the words). Member i+1 is member i with the next chunk of c = n_words // 30 slot
    words redrawn (cycling through the slots), so neighbours differ in <= 2 runs: Jaccard >= about
    (T - c - 8) / (T + c + 8) ~ 0.84..0.89, while members >= ~10 steps apart share little more
    than the boilerplate (Jaccard < 0.5).
    """
    half = n_words // 2
    boiler = np.full(n_slots + 1, max(8, half // (n_slots + 1)))
    slots = np.full(n_slots, max(8, half // n_slots))
    targets = np.empty(2 * n_slots + 1, np.int64)
    targets[0::2], targets[1::2] = boiler, slots
    pieces = _gen_docs(rng, targets)
    heads = _SPANS["H"][0] + np.arange(n_slots + 1) % (_SPANS["H"][1] - _SPANS["H"][0])
    parts: list[_Tokens] = []
    is_slot: list[np.ndarray] = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            head = _Tokens(np.array([heads[i // 2]], np.int32), np.array([1], np.int8), np.zeros(1, bool))
            parts.append(head)
            is_slot.append(np.zeros(1, bool))
        piece = piece.copy()
        piece.tail[-1] = piece.tail[-1] // 2 * 2 + 1     # a paragraph ends each piece
        parts.append(piece)
        is_slot.append(np.full(len(piece), i % 2 == 1))
    base = _Tokens.concat(parts)
    stream = np.flatnonzero(np.concatenate(is_slot))
    chunk = max(2, len(base) // 30)
    members = [base]
    cats = _CAT_OF_WORD[base.word]
    for step in range(1, size):
        m = members[-1].copy()
        where = stream[((step - 1) * chunk + np.arange(chunk)) % len(stream)]
        m.word[where] = _sample_words(rng, cats[where])
        members.append(m)
    return members


_SHORT_PHRASES = ("Home", "Read more", "Click here", "Sign in", "Log in", "Contact us", "Privacy policy",
                  "All rights reserved.", "Page not found", "Loading...", "Thank you!", "Next page",
                  "Share this", "Terms of use", "Subscribe now", "Back to top", "Skip to content",
                  "Search", "Menu", "Previous post")
_SHORT_CATS = np.array([_CAT_CODE[c] for c in "NNAVR"], np.int8)


def _short_texts(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` texts of 1..4 words: 60% web boilerplate phrases (some in other case or spacing,
    which normalize to the same text), 40% random words."""
    out = []
    for _ in range(n):
        if rng.random() < 0.6:
            t = _SHORT_PHRASES[int(rng.integers(len(_SHORT_PHRASES)))]
            v = rng.random()
            if v < 0.15:
                t = t.lower()
            elif v < 0.25:
                t = t.upper()
            elif v < 0.35:
                t = t.replace(" ", "  ")
        else:
            k = int(rng.integers(1, 5))
            ws = _VOCAB_ARR[_sample_words(rng, _SHORT_CATS[rng.integers(0, len(_SHORT_CATS), k)])]
            t = " ".join(ws)
            t = t[:1].upper() + t[1:] + ("." if rng.random() < 0.5 else "")
        out.append(t)
    return out


def _whitespace_variant(text: str) -> str:
    """Same normalized text, different bytes: single newlines between paragraphs, double spaces."""
    return text.replace("\n\n", "\n").replace(". ", ".  ")


def _case_variant(text: str) -> str:
    """Same normalized text, different bytes: the first paragraph in capitals."""
    head, sep, rest = text.partition("\n\n")
    return head.upper() + sep + rest


# ---------------------------------------------------------------------------------------------
# Text checks and normalization
# ---------------------------------------------------------------------------------------------

_ALLOWED = re.compile(r"[A-Za-z0-9éüñÉÜÑ.,;:!?'\- \n]*")
_LONE_PUNCT = re.compile(r"(?:^|\s)[.,;:!?'\-]+(?=\s|$)")
_WS_PUNCT = re.compile(r"\s[.,;:!?'\-]")
_PUNCT_CHARS = ".,;:!?'-"


def check_text(text: str) -> None:
    """Raise ValueError unless ``text`` keeps the generator's tokenization property: only ASCII
    letters/digits, é ü ñ (any case), punctuation ``. , ; : ! ? ' -`` attached to a word, spaces and
    newlines; NFKC-stable. For such text the pipeline's normalized words are ``text.lower().split()``."""
    if _ALLOWED.fullmatch(text) is None:
        bad = sorted(set(re.sub(r"[A-Za-z0-9éüñÉÜÑ.,;:!?'\- \n]", "", text)))
        raise ConfigError(f"text has characters outside the generator's alphabet: {bad!r} in {text[:60]!r}")
    # Cheap test first: a lone punctuation token must start the text or follow whitespace.
    m = None
    if text[:1] in _PUNCT_CHARS or _WS_PUNCT.search(text):
        m = _LONE_PUNCT.search(text)
    if m is not None:
        raise ConfigError(f"text has punctuation not attached to a word: {m.group()!r} in {text[:60]!r}")
    if unicodedata.normalize("NFKC", text) != text:
        raise ConfigError(f"text is not NFKC-stable: {text[:60]!r}")


def normalize_text(text: str) -> str:
    """The reference normalization: lowercase, whitespace runs -> one space, ends trimmed."""
    return " ".join(text.lower().split())


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------

def _check_frac(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise ConfigError(f"{name} must be a fraction in [0, 1), got {value!r}")


def make_corpus(n_docs: int, seed: int, *, mean_words: int = 300, exact_dup_frac: float = 0.05,
                near_dup_frac: float = 0.15, edit_rates: Sequence[float] = (0.02, 0.05, 0.1, 0.2, 0.35),
                template_families: int = 4, family_size: int = 20, short_frac: float = 0.02) -> pa.Table:
    """Generate a labelled corpus of ``n_docs`` documents, deterministic in ``seed``.

    Counts: round(exact_dup_frac * n_docs) exact copies, round(near_dup_frac * n_docs) near copies
    (edit rates assigned in turn from ``edit_rates``), template_families * family_size template
    members, round(short_frac * n_docs) short documents; the rest are unique. Exact and near copies
    are made from uniformly chosen unique documents. Unique and near documents have a gamma
    distributed length with mean ``mean_words``; template members about max(mean_words, 150).
    The documents are shuffled and numbered "d000000", "d000001", ... in the final order.

    Returns a table with columns ``id`` (string), ``text`` (string), ``kind`` (string, one of
    KINDS), ``origin`` (string, nullable: the source document's id for exact / near copies, the family
    id "f0000".. for template members, for short documents the first earlier document with the same
    normalized text), ``edit_rate`` (float64, nullable: 0.0 for exact copies, the rate for near copies),
    ``member`` (int32, nullable: position of a template member in its family's chain).
    """
    if not isinstance(n_docs, int) or n_docs < 1:
        raise ConfigError(f"n_docs must be a positive int, got {n_docs!r}")
    if not isinstance(mean_words, int) or mean_words < 20:
        raise ConfigError(f"mean_words must be an int >= 20 (documents need 5-grams), got {mean_words!r}")
    for name, v in (("exact_dup_frac", exact_dup_frac), ("near_dup_frac", near_dup_frac),
                    ("short_frac", short_frac)):
        _check_frac(name, v)
    rates = [float(r) for r in edit_rates]
    if not rates or any(not 0.0 < r < 1.0 for r in rates):
        raise ConfigError(f"edit_rates must be a non-empty list of rates in (0, 1), got {edit_rates!r}")
    if not isinstance(template_families, int) or template_families < 0:
        raise ConfigError(f"template_families must be an int >= 0, got {template_families!r}")
    if not isinstance(family_size, int) or family_size < 2:
        raise ConfigError(f"family_size must be an int >= 2, got {family_size!r}")
    n_exact = int(round(exact_dup_frac * n_docs))
    n_near = int(round(near_dup_frac * n_docs))
    n_short = int(round(short_frac * n_docs))
    n_template = template_families * family_size
    n_unique = n_docs - n_exact - n_near - n_short - n_template
    if n_unique < 1:
        raise ConfigError(f"n_docs={n_docs} is too small for {n_exact} exact + {n_near} near + {n_short} short "
                          f"+ {n_template} template documents; raise n_docs or lower the fractions / families")

    rng = np.random.default_rng(seed)
    lengths = np.maximum(12, rng.gamma(4.0, mean_words / 4.0, n_unique)).astype(np.int64)
    unique = _gen_docs(rng, lengths)

    src_exact = rng.integers(0, n_unique, n_exact)
    src_near = rng.integers(0, n_unique, n_near)
    near_rate = np.array([rates[i % len(rates)] for i in range(n_near)], np.float64)
    near = [_edit(rng, unique[s], r) for s, r in zip(src_near.tolist(), near_rate.tolist())]

    family_words = max(mean_words, 150)
    families = [_template_family(rng, family_size, int(family_words * rng.uniform(0.9, 1.1)))
                for _ in range(template_families)]

    texts = _render(unique + near + [m for f in families for m in f])
    unique_texts, near_texts, template_texts = (texts[:n_unique], texts[n_unique:n_unique + n_near],
                                                texts[n_unique + n_near:])
    variant = rng.integers(0, 3, n_exact)    # 0 byte-identical, 1 whitespace, 2 case
    exact_texts = [unique_texts[s] if v == 0 else
                   _whitespace_variant(unique_texts[s]) if v == 1 else _case_variant(unique_texts[s])
                   for s, v in zip(src_exact.tolist(), variant.tolist())]
    short_texts = _short_texts(rng, n_short)

    # Assemble in generation order: unique, exact, near, template, short.
    all_texts = unique_texts + exact_texts + near_texts + template_texts + short_texts
    kind = (["unique"] * n_unique + ["exact"] * n_exact + ["near"] * n_near + ["template"] * n_template
            + ["short"] * n_short)
    origin_gen: list[int | str | None] = ([None] * n_unique + src_exact.tolist() + src_near.tolist()
                                         + [f"f{f:04d}" for f in range(template_families) for _ in range(family_size)]
                                         + [None] * n_short)
    edit_rate: list[float | None] = ([None] * n_unique + [0.0] * n_exact + near_rate.tolist()
                                     + [None] * (n_template + n_short))
    member: list[int | None] = ([None] * (n_unique + n_exact + n_near)
                                + [i for _ in range(template_families) for i in range(family_size)]
                                + [None] * n_short)
    for t in all_texts:
        try:
            check_text(t)
        except ValueError as exc:     # a generator bug, not a user error
            raise RunError(f"evalcorpus generated a text that breaks its own contract: {exc}") from exc

    log.debug("make_corpus(%d, seed=%d): %d unique, %d exact, %d near, %d template, %d short", n_docs, seed,
              n_unique, n_exact, n_near, n_template, n_short)
    perm = rng.permutation(n_docs)                 # perm[new position] = generation index
    new_pos = np.empty(n_docs, np.int64)
    new_pos[perm] = np.arange(n_docs)
    ids = [f"d{i:06d}" for i in range(n_docs)]
    out_text = [all_texts[g] for g in perm.tolist()]
    out_kind = [kind[g] for g in perm.tolist()]
    out_origin: list[str | None] = []
    seen_norm: dict[str, str] = {}
    for pos, g in enumerate(perm.tolist()):
        o = origin_gen[g]
        if isinstance(o, int):
            out_origin.append(ids[new_pos[o]])
        elif kind[g] == "short":
            norm = normalize_text(all_texts[g])
            out_origin.append(seen_norm.get(norm))
            seen_norm.setdefault(norm, ids[pos])
        else:
            out_origin.append(o)
    return pa.table({
        "id": pa.array(ids, pa.string()),
        "text": pa.array(out_text, pa.string()),
        "kind": pa.array(out_kind, pa.string()),
        "origin": pa.array(out_origin, pa.string()),
        "edit_rate": pa.array([edit_rate[g] for g in perm.tolist()], pa.float64()),
        "member": pa.array([member[g] for g in perm.tolist()], pa.int32()),
    })
