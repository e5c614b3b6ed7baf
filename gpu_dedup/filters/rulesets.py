"""The rule sets users expect beside Gopher's: C4's line rules, FineWeb's quality rules, character fractions and
URL rules, one statistic column each (the thresholds live in ``rules.RulesConfig``; ``rules.rule_scores``
calls these functions for the enabled columns).

Definitions (the published ones, as the reference implementations compute them; where a reference needs a
tokenizer we cannot ship, ours is stated):

- **C4** (Raffel et al. 2020, JMLR 21(140) §2.2; TFDS ``c4_utils.clean_page``, datatrove ``C4QualityFilter``).
  Lines are ``text.splitlines()``, each ``strip()``-ed. A line is REMOVED, in this order, when: a word
  (``line.split()``) is longer than ``max_word_length`` (1000) codepoints; after deleting Wikipedia citations
  (``[12]``, ``[]``, ``[edit]``, ``[citation needed]``) it does not end in ``. ? ! " '`` or ends in "...";
  it has fewer than ``min_words_per_line`` (3) words (counted before the citations go); it contains "lorem
  ipsum" (``str.lower()``: the page is dropped, column ``c4_lorem_ipsum`` counts such lines); it contains
  "javascript"; it contains "{" (the page is dropped: ``c4_curly_bracket``); it contains a policy phrase
  ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"). The
  page is dropped with fewer than 5 sentences in the kept lines (``c4_sentences``). FineWeb applies these rules
  without the terminal-punctuation one (preset "c4_fineweb"). The references stop at the
  first "lorem ipsum" / "{" line; we count every such line (the same pages are dropped; ``reason`` names
  lorem ipsum before the curly bracket, whichever line comes first). ``c4_removed_lines_frac`` = removed lines
  / lines (0 without lines): C4 rewrites the page without them; gpu_dedup records the fraction (a rule whose
  default bound, 1.0, never rejects) and leaves the text as it is (``filtered/`` is the input's records byte
  for byte), unless ``--c4-remove-lines``: then the kept documents lose those lines (``c4_line_units``;
  ``paragraphs.write_line_cuts`` logs each cut, reversibly). Sentences: TFDS and datatrove count them with NLTK's punkt model, which is downloaded at run time
  and so not used here; a kept line has 1 + the number of sentence ends inside it, an end being a run of
  ``. ! ?`` (closing quotes / brackets ``" ' ) ] ’ ”`` may follow) followed by whitespace. Punkt does not split
  after abbreviations ("Mr. Smith"), we do: a page near 5 sentences can differ.
- **FineWeb** (Penedo et al. 2024, arXiv 2406.17557 §3.5; datatrove ``FineWebQualityFilter``). Lines are
  ``text.split("\\n")`` without those that ``strip()`` to nothing, NOT stripped themselves (a line ending in
  "!\\r" or "! " does not end in punctuation, as in datatrove). ``fineweb_line_punct_frac``: lines ending in a
  terminal punctuation codepoint (datatrove's 159 ``TERMINAL_PUNCTUATION``, ``FINEWEB_STOP_CHARS``) / lines;
  ``fineweb_short_line_frac``: lines of at most ``short_line_length`` (30) codepoints / lines;
  ``fineweb_dup_line_char_frac``: codepoints of the 2nd and later copies of identical lines / codepoints of the
  text without its "\\n"; ``fineweb_newline_word_ratio``: "\\n" count / words. Words: ``text.split()``
  (datatrove: NLTK's ``word_tokenize``, which also counts punctuation tokens, so its ratio is lower). Without
  lines every column is 0 (datatrove rejects such a page as "empty"; so does gpu_dedup's ``empty`` test).
- **Characters**. ``chars_non_ascii_frac``: codepoints >= U+0080 / codepoints (0 for an empty text; the seed's
  "non-ASCII fraction", 002:52; no published threshold: the default bound 1.0 records it, set yours with
  ``--rule-threshold chars_non_ascii_frac=0.3``). ``chars_non_alnum_frac``: NeMo Curator's
  ``NonAlphaNumericFilter``: codepoints outside ``[a-zA-Z0-9\\n?!,.]`` / codepoints (1.0 for an empty text).
- **URLs**. ``url_char_frac``: NeMo Curator's ``UrlsFilter``: codepoints of the URLs its regex finds in the
  text (``URL_PATTERN``) / codepoints (1.0 for an empty text). ``url_blocked``: 1 when the host of the
  document's URL (its ``--url-field``) is a domain of the blocklist file or a subdomain of one, else 0
  (datatrove's ``URLFilter`` tests the registered domain and the full host against its list; a listed
  "a.example.com" blocks "x.a.example.com" here, not there). The host is the URL's authority without user,
  port and a final dot, lowercased; a document without a URL (null, empty or without a host) is not blocked.

Speed: Python's string methods per document (C loops; one thread); the character fractions are one pass over the
UTF-8 bytes (``kernels.features_cpu.char_counts``, a table lookup per byte, parallel over documents; host work on a
GPU run too, as the Gopher statistics). benchmarks/rules_bench.py compares them with datatrove's filters on the same
documents.
"""
from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, MissingFileError
from ..io.text import arrow_text_buffers
from ..kernels import features as F
from ..ops import features as features_ops

logger = logging.getLogger(__name__)

C4_END_PUNCTUATION = (".", "?", "!", '"', "'")
C4_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
                        "use cookies")
C4_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]\u2019\u201d]*\s+(?=\S)")
# datatrove's TERMINAL_PUNCTUATION (utils/text.py), as codepoint ranges
_STOP_RANGES = (
    (0x21, 0x21), (0x2E, 0x2E), (0x3F, 0x3F), (0x589, 0x589), (0x61D, 0x61F), (0x6D4, 0x6D4), (0x700, 0x702),
    (0x7F9, 0x7F9), (0x837, 0x837), (0x839, 0x839), (0x83D, 0x83E), (0x964, 0x965), (0x104A, 0x104B),
    (0x1362, 0x1362), (0x1367, 0x1368), (0x166E, 0x166E), (0x1735, 0x1736), (0x17D4, 0x17D6), (0x17D9, 0x17DA),
    (0x1803, 0x1803), (0x1809, 0x1809), (0x1944, 0x1945), (0x1AA8, 0x1AAB), (0x1B5A, 0x1B5B), (0x1B5E, 0x1B5F),
    (0x1B7D, 0x1B7E), (0x1C3B, 0x1C3C), (0x1C7E, 0x1C7F), (0x203C, 0x203D), (0x2047, 0x2049), (0x2E2E, 0x2E2E),
    (0x2E3C, 0x2E3C), (0x2E53, 0x2E54), (0x3002, 0x3002), (0xA4FF, 0xA4FF), (0xA60E, 0xA60F), (0xA6F3, 0xA6F3),
    (0xA6F7, 0xA6F7), (0xA876, 0xA877), (0xA8CE, 0xA8CF), (0xA92F, 0xA92F), (0xA9C8, 0xA9C9), (0xAA5D, 0xAA5F),
    (0xAAF0, 0xAAF1), (0xABEB, 0xABEB), (0xFE52, 0xFE52), (0xFE56, 0xFE57), (0xFF01, 0xFF01), (0xFF0E, 0xFF0E),
    (0xFF1F, 0xFF1F), (0xFF61, 0xFF61), (0x10A56, 0x10A57), (0x10F55, 0x10F59), (0x10F86, 0x10F89),
    (0x11047, 0x11048), (0x110BE, 0x110C1), (0x11141, 0x11143), (0x111C5, 0x111C6), (0x111CD, 0x111CD),
    (0x111DE, 0x111DF), (0x11238, 0x11239), (0x1123B, 0x1123C), (0x112A9, 0x112A9), (0x1144B, 0x1144C),
    (0x115C2, 0x115C3), (0x115C9, 0x115D7), (0x11641, 0x11642), (0x1173C, 0x1173E), (0x11944, 0x11944),
    (0x11946, 0x11946), (0x11A42, 0x11A43), (0x11A9B, 0x11A9C), (0x11C41, 0x11C42), (0x11EF7, 0x11EF8),
    (0x11F43, 0x11F44), (0x16A6E, 0x16A6F), (0x16AF5, 0x16AF5), (0x16B37, 0x16B38), (0x16B44, 0x16B44),
    (0x16E98, 0x16E98), (0x1BC9F, 0x1BC9F), (0x1DA88, 0x1DA88),
)
FINEWEB_STOP_CHARS = tuple(chr(c) for a, b in _STOP_RANGES for c in range(a, b + 1))
_STOP_SET = frozenset(FINEWEB_STOP_CHARS)
# NeMo Curator's regex_url and regex_alphanum (nemo_curator/stages/text/utils/constants.py)
URL_PATTERN = re.compile(r"https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~]|[!*\(\),]|(?:%[0-9A-Fa-f]{2}))+")
ALNUM_BYTES = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\n?!,."
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def _texts(texts: pa.Array | Sequence[str]) -> list[str]:
    return texts.to_pylist() if isinstance(texts, (pa.Array, pa.ChunkedArray)) else list(texts)


def count_sentences(line: str) -> int:
    """Sentences of a kept C4 line: 1 + the sentence ends inside it (module doc)."""
    return 1 + len(_SENTENCE_END.findall(line))


def c4_line(raw: str, min_words_per_line: int = 3, max_word_length: int = 1000,
            terminal_punct: bool = True) -> tuple[str, int]:
    """C4's line rules on one line (module doc): (what happens to it, its sentences). What happens: "" (kept),
    else the rule that removes it: "c4_word_length", "c4_terminal_punct", "c4_min_words", "c4_lorem_ipsum",
    "c4_javascript", "c4_curly_bracket" or "c4_policy" (tested in that order); sentences: 0 for a removed line.

    Args:
        raw: the line (without its line break; stripped here).
        min_words_per_line, max_word_length, terminal_punct: as ``c4_stats``.

    Returns:
        (reason, sentences).
    """
    line = raw.strip()
    words = line.split()
    if len(line) > max_word_length and any(len(w) > max_word_length for w in words):
        return "c4_word_length", 0
    if "[" in line:
        line = C4_CITATION.sub("", line)
    if terminal_punct and (not line.endswith(C4_END_PUNCTUATION) or line.endswith("...")):
        return "c4_terminal_punct", 0
    if len(words) < min_words_per_line:
        return "c4_min_words", 0
    low = line.lower()
    if "lorem ipsum" in low:
        return "c4_lorem_ipsum", 0
    if "javascript" in low:
        return "c4_javascript", 0
    if "{" in line:
        return "c4_curly_bracket", 0
    if any(p in low for p in C4_POLICY_SUBSTRINGS):
        return "c4_policy", 0
    return "", count_sentences(line)


def c4_stats(texts: pa.Array | Sequence[str], min_words_per_line: int = 3, max_word_length: int = 1000,
             terminal_punct: bool = True) -> dict[str, np.ndarray]:
    """C4's line rules per document (module doc; each line by ``c4_line``).

    Args:
        texts: the documents (str list or Arrow string array, no nulls).
        min_words_per_line: lines with fewer words are removed.
        max_word_length: lines with a longer word (codepoints) are removed.
        terminal_punct: remove lines without terminal punctuation (False: FineWeb's use of C4's rules,
            datatrove's ``filter_no_terminal_punct=False``).

    Returns:
        float64 (n,) columns ``c4_sentences``, ``c4_lorem_ipsum``, ``c4_curly_bracket``,
        ``c4_removed_lines_frac``.
    """
    docs = _texts(texts)
    n = len(docs)
    out = {k: np.zeros(n) for k in ("c4_sentences", "c4_lorem_ipsum", "c4_curly_bracket", "c4_removed_lines_frac")}
    sent, lorem, curly, removed = (out[k] for k in out)
    for d, text in enumerate(docs):
        lines = text.splitlines()
        kept = s = lo = cu = 0
        for raw in lines:
            why, k = c4_line(raw, min_words_per_line, max_word_length, terminal_punct)
            lo += why == "c4_lorem_ipsum"
            cu += why == "c4_curly_bracket"
            kept += not why
            s += k
        sent[d], lorem[d], curly[d] = s, lo, cu
        removed[d] = (len(lines) - kept) / len(lines) if lines else 0.0
    return out


def c4_line_units(texts: pa.Array | Sequence[str], min_words_per_line: int = 3, max_word_length: int = 1000,
                  terminal_punct: bool = True) -> dict[str, np.ndarray]:
    """Every line of every document as a unit to cut (``--c4-remove-lines``): its document, UTF-8 byte range
    (the line without its line break; lines as ``str.splitlines``, so \r\n, \r, \x0b, \x0c, \x1c-\x1e,
    \x85, U+2028 and U+2029 end a line as in C4) and the C4 rule that removes it ("" when kept).

    Args:
        texts: the documents (str list or Arrow string array, no nulls).
        min_words_per_line, max_word_length, terminal_punct: as ``c4_stats``.

    Returns:
        {"doc": int64 (L,), "start": int64 (L,), "end": int64 (L,), "reason": object (L,)}, in document then
        line order.
    """
    doc: list[int] = []
    start: list[int] = []
    end: list[int] = []
    reason: list[str] = []
    for d, text in enumerate(_texts(texts)):
        pos = 0
        for piece in text.splitlines(keepends=True):
            line = piece.splitlines()[0] if piece.splitlines() else ""
            b = len(line.encode("utf-8"))
            doc.append(d)
            start.append(pos)
            end.append(pos + b)
            reason.append(c4_line(line, min_words_per_line, max_word_length, terminal_punct)[0])
            pos += len(piece.encode("utf-8"))
    return {"doc": np.array(doc, np.int64), "start": np.array(start, np.int64), "end": np.array(end, np.int64),
            "reason": np.array(reason, dtype=object)}


def fineweb_stats(texts: pa.Array | Sequence[str], short_line_length: int = 30) -> dict[str, np.ndarray]:
    """FineWeb's quality statistics per document (module doc).

    Args:
        texts: the documents (str list or Arrow string array, no nulls).
        short_line_length: a line of at most this many codepoints is short.

    Returns:
        float64 (n,) columns ``fineweb_line_punct_frac``, ``fineweb_short_line_frac``,
        ``fineweb_dup_line_char_frac``, ``fineweb_newline_word_ratio``.
    """
    docs = _texts(texts)
    n = len(docs)
    names = ("fineweb_line_punct_frac", "fineweb_short_line_frac", "fineweb_dup_line_char_frac",
             "fineweb_newline_word_ratio")
    out = {k: np.zeros(n) for k in names}
    punct, short, dup, newline = (out[k] for k in names)
    for d, text in enumerate(docs):
        lines = [x for x in text.split("\n") if x.strip()]
        if not lines:
            continue
        m = len(lines)
        # a line is non-blank, so it has a last codepoint: endswith(one of 159 characters) is a set lookup
        punct[d] = sum(1 for x in lines if x[-1] in _STOP_SET) / m
        short[d] = sum(1 for x in lines if len(x) <= short_line_length) / m
        # the 2nd and later copies of a line = all lines' codepoints minus one copy of each distinct line
        dup_chars = sum(map(len, lines)) - sum(map(len, set(lines)))
        nl = text.count("\n")
        dup[d] = dup_chars / (len(text) - nl)  # > 0: a line holds a non-space codepoint
        newline[d] = nl / len(text.split())
    return out


def char_stats(texts: pa.Array | Sequence[str]) -> dict[str, np.ndarray]:
    """The character fractions per document from the UTF-8 bytes (module doc): a codepoint is a byte that is
    not a continuation byte (10xxxxxx), a non-ASCII one a lead byte (>= 0xC0).

    Args:
        texts: the documents (str list or Arrow string array, no nulls).

    Returns:
        float64 (n,) columns ``chars_non_ascii_frac`` and ``chars_non_alnum_frac``.
    """
    arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(list(texts), pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], pa.large_string())
    data, offsets = arrow_text_buffers(arr.cast(pa.large_string()))
    counts = features_ops.char_counts_host(data, offsets, _char_table())
    chars, non_ascii, ok = (counts[:, k].astype(np.float64) for k in range(3))
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"chars_non_ascii_frac": np.where(chars > 0, non_ascii / chars, 0.0),
                "chars_non_alnum_frac": np.where(chars > 0, (chars - ok) / chars, 1.0)}


@functools.lru_cache(maxsize=1)
def _char_table() -> np.ndarray:
    t = np.zeros(256, np.uint8)
    b = np.arange(256)
    t[(b & 0xC0) != 0x80] |= F.CC_START
    t[b >= 0xC0] |= F.CC_NON_ASCII
    t[np.frombuffer(ALNUM_BYTES, np.uint8)] |= F.CC_ASCII_SET
    t.flags.writeable = False
    return t


def url_char_frac(texts: pa.Array | Sequence[str]) -> np.ndarray:
    """NeMo Curator's URL density: codepoints of ``URL_PATTERN``'s matches / codepoints (1.0 when empty).

    Args:
        texts: the documents (str list or Arrow string array, no nulls).

    Returns:
        float64 (n,).
    """
    docs = _texts(texts)
    out = np.ones(len(docs))
    for d, text in enumerate(docs):
        if text:
            out[d] = (sum(len(u) for u in URL_PATTERN.findall(text)) / len(text)) if "://" in text else 0.0
    return out


@dataclass(frozen=True)
class Blocklist:
    """Blocked domains read from ``path`` (``load_blocklist``)."""

    path: str
    domains: frozenset[str]
    sha256: str

    def describe(self) -> dict[str, object]:
        return {"path": self.path, "domains": len(self.domains), "sha256": self.sha256,
                "match": "the URL's host or a parent domain of it is listed"}


def load_blocklist(path: str) -> Blocklist:
    """Read a blocklist file: one domain a line (case-insensitive; a leading "*." or "." is allowed and means the
    same: the domain and its subdomains), blank lines ignored, "#" starts a comment (a line's or after a domain),
    UTF-8.

    Args:
        path: the file.

    Returns:
        The ``Blocklist``.

    Raises:
        MissingFileError: no such file.
        ConfigError: the file cannot be read or decoded, or a line is not a domain (the message names the file
            and line).
    """
    import hashlib
    import os

    if not os.path.isfile(path):
        raise MissingFileError(f"URL blocklist {path!r} does not exist or is not a file (one domain a line)")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"URL blocklist {path!r} cannot be read: {e}") from e
    domains: set[str] = set()
    for no, line in enumerate(raw.split(b"\n"), 1):
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise ConfigError(f"URL blocklist {path}:{no}: not UTF-8 ({e.reason} at byte {e.start})") from e
        text = text.split("#", 1)[0].strip()  # a comment, the line's or after a domain (no domain holds a '#')
        if not text:
            continue
        d = text.lower()
        d = d[2:] if d.startswith("*.") else d[1:] if d.startswith(".") else d
        d = d[:-1] if d.endswith(".") else d
        if not d or len(d) > 253 or not all(_HOST_LABEL.fullmatch(x) for x in d.split(".")):
            raise ConfigError(f"URL blocklist {path}:{no}: {text!r} is not a domain (one domain a line, e.g. "
                              "example.com; '#' starts a comment)")
        domains.add(d)
    return Blocklist(path, frozenset(domains), hashlib.sha256(raw).hexdigest())


def url_host(url: str | None) -> str:
    """The lowercased host of ``url`` ("" when there is none): the authority after "scheme://" (or a leading
    "//"; a URL without either is read as starting with its host), without user info, port and final dot."""
    if not url:
        return ""
    u = url.strip()
    k = u.find("://")
    if k >= 0 and u[:k].replace("+", "").replace("-", "").replace(".", "").isalnum():
        u = u[k + 3:]
    elif u.startswith("//"):
        u = u[2:]
    for sep in "/?#":
        j = u.find(sep)
        if j >= 0:
            u = u[:j]
    u = u.rsplit("@", 1)[-1]
    if u.startswith("["):  # an IPv6 literal: never a listed domain
        return u.lower()
    u = u.split(":", 1)[0]
    return u.rstrip(".").lower()


def url_blocked(urls: Sequence[str | None], blocklist: Blocklist) -> np.ndarray:
    """1.0 where the URL's host or one of its parent domains is in the blocklist, else 0.0.

    Args:
        urls: the documents' URLs (None or "" for none).
        blocklist: ``load_blocklist``'s list.

    Returns:
        float64 (n,).
    """
    out = np.zeros(len(urls))
    dom = blocklist.domains
    for d, url in enumerate(urls):
        host = url_host(url)
        while host:
            if host in dom:
                out[d] = 1.0
                break
            k = host.find(".")
            host = host[k + 1:] if k >= 0 else ""
    return out
