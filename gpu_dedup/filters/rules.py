"""Heuristic quality rules: Gopher's (Rae et al. 2021, arXiv 2112.11446, App. A; repetition thresholds of its
Table A1), and the sets of ``rulesets.py`` (C4, FineWeb, character fractions, URLs; presets "c4", "fineweb",
"chars", "url", combined as "gopher,c4"), one score column per rule, each with its threshold recorded
(``describe``); ``with_thresholds`` replaces bounds (``--rule-threshold``), ``without`` switches rules off.

Definitions (ours where the paper leaves a choice; datatrove, NeMo Curator and dolma each differ a little):

- words: Python's ``text.split()`` (maximal runs of non-whitespace codepoints; no language tokenizer), word
  length in codepoints. ``gopher_word_count`` = words; ``gopher_mean_word_length`` = mean word length (0
  without words). Unlike datatrove, punctuation-only words count.
- ``gopher_symbol_word_ratio`` = max(count of '#', count of "..." (non-overlapping, as ``str.count``) plus
  '…') / words: the paper removes a document when EITHER ratio exceeds 0.1, which is one test on the max.
- lines: ``text.split("\\n")`` each ``strip()``-ed; blank lines (nothing left) are ignored by every line
  statistic. ``gopher_bullet_lines_frac``: lines whose first character is in ``bullets``;
  ``gopher_ellipsis_lines_frac``: lines ending with "..." or '…'.
- ``gopher_alpha_words_frac``: words with at least one alphabetic character (``str.isalpha``, Unicode
  letters) / words.
- ``gopher_stop_words``: how many DISTINCT stop words occur, a word matching after stripping ASCII
  punctuation at both ends and lowercasing A-Z ("The," matches "the").
- repetition. Duplicates are the 2nd and later occurrences of an identical unit. ``gopher_dup_line_frac`` =
  duplicate lines / lines; ``gopher_dup_line_char_frac`` = their characters / characters of the document
  (``len(text)``). Paragraphs are maximal runs of non-blank lines (text from the first line's first to the last
  line's last non-space character); ``gopher_dup_para_frac`` / ``gopher_dup_para_char_frac`` likewise.
  Word n-grams (of ``words``; characters of an n-gram = the sum of its words' lengths, over the characters of
  all words): ``gopher_top_{n}gram_char_frac`` = characters of the words covered by the occurrences of the
  most frequent n-gram (if it occurs at least twice; of several equally frequent, the largest), else 0;
  ``gopher_dup_{n}gram_char_frac`` = characters of the words covered by any occurrence of an n-gram occurring
  at least twice. A word is counted once however many occurrences overlap it (the paper: "taking care not to
  count characters that occur in overlapping n-grams more than once"), so both stay fractions in [0, 1]
  (datatrove's count x length can pass 1 on overlapping repeats such as "a b a b a b").

Every statistic of a document without words / lines is 0 (an empty document fails ``gopher_word_count``
first). Lines, paragraphs and n-grams are compared by 64-bit XXH64 keys (kernels/features.py).

Speed: the statistics are one CPU kernel pass (``kernels.features_cpu.rule_stats``, parallel over documents;
it sorts each document's lines and n-grams, host work even on a GPU run): see benchmarks/dsir_bench.py.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import did_you_mean, is_int, is_real
from ..errors import ConfigError, MissingColumnError
from ..kernels import features as F
from ..io.text import arrow_text_buffers
from ..ops import features as features_ops
from ..text.unicode_tables import shipped_arrays
from .dsir import TextsLike, text_array

logger = logging.getLogger(__name__)

GOPHER_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
BULLETS = ("•", "‣", "◦", "⁃", "▪", "●", "-", "*")
MAX_RULE_NGRAM = 64
PRESETS = ("gopher", "gopher_quality", "gopher_repetition", "c4", "c4_fineweb", "fineweb", "chars", "url")


@dataclass(frozen=True)
class RulesConfig:
    """The heuristic rules; every threshold a field, ``None`` switching that bound off (a rule with no bound
    left is not computed). ``top_ngrams`` / ``dup_ngrams``: (n, max fraction) pairs (empty: off). Defaults = the
    "gopher" preset: the paper's thresholds, the other sets off. The ``c4_*``, ``fineweb_*``, ``chars_*`` and
    ``url_*`` fields are the rule sets of ``rulesets.py`` (their presets: "c4", "fineweb", "chars", "url"):
    the bounds are the published ones; ``c4_max_removed_lines`` and ``max_non_ascii`` default to 1.0 in
    their presets (recorded, never rejecting: no published cut). ``url_blocklist``: a file of blocked domains
    (``rulesets.load_blocklist``); its rule needs the documents' URLs."""

    min_words: int | None = 50
    max_words: int | None = 100_000
    min_mean_word_length: float | None = 3.0
    max_mean_word_length: float | None = 10.0
    max_symbol_word_ratio: float | None = 0.1
    max_bullet_lines: float | None = 0.9
    max_ellipsis_lines: float | None = 0.3
    min_alpha_words: float | None = 0.8
    min_stop_words: int | None = 2
    max_dup_lines: float | None = 0.3
    max_dup_line_chars: float | None = 0.2
    max_dup_paragraphs: float | None = 0.3
    max_dup_paragraph_chars: float | None = 0.2
    top_ngrams: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    dup_ngrams: tuple[tuple[int, float], ...] = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
    stop_words: tuple[str, ...] = GOPHER_STOP_WORDS
    bullets: tuple[str, ...] = BULLETS
    c4_min_sentences: int | None = None
    c4_max_lorem_ipsum: int | None = None
    c4_max_curly_bracket: int | None = None
    c4_max_removed_lines: float | None = None
    c4_min_words_per_line: int = 3
    c4_max_word_length: int = 1000
    c4_terminal_punct: bool = True
    fineweb_min_line_punct: float | None = None
    fineweb_max_short_lines: float | None = None
    fineweb_max_dup_line_chars: float | None = None
    fineweb_max_newline_words: float | None = None
    fineweb_short_line_length: int = 30
    max_non_ascii: float | None = None
    max_non_alnum: float | None = None
    max_url_chars: float | None = None
    url_blocklist: str | None = None

    def __post_init__(self) -> None:
        for name in ("c4_min_sentences", "c4_max_lorem_ipsum", "c4_max_curly_bracket"):
            v = getattr(self, name)
            if v is not None and (not is_int(v) or v < 0):
                raise ConfigError(f"RulesConfig.{name} must be an int >= 0 or None (off), got {v!r}")
        for name in ("c4_min_words_per_line", "c4_max_word_length", "fineweb_short_line_length"):
            v = getattr(self, name)
            if not is_int(v) or v < 0:
                raise ConfigError(f"RulesConfig.{name} must be an int >= 0, got {v!r}")
        for name in ("c4_max_removed_lines", "fineweb_min_line_punct", "fineweb_max_short_lines",
                     "fineweb_max_dup_line_chars", "max_non_ascii", "max_non_alnum", "max_url_chars"):
            _check_fraction(f"RulesConfig.{name}", getattr(self, name), none_ok=True)
        if not isinstance(self.c4_terminal_punct, bool):
            raise ConfigError(f"RulesConfig.c4_terminal_punct must be a bool, got {self.c4_terminal_punct!r}")
        v = self.fineweb_max_newline_words
        if v is not None and (not is_real(v) or v < 0):
            raise ConfigError(f"RulesConfig.fineweb_max_newline_words must be a finite number >= 0 or None (off), "
                              f"got {v!r}")
        if self.url_blocklist is not None and (not isinstance(self.url_blocklist, str) or not self.url_blocklist):
            raise ConfigError(f"RulesConfig.url_blocklist must be a file path or None, got {self.url_blocklist!r}")
        for name in ("min_words", "max_words", "min_stop_words"):
            v = getattr(self, name)
            if v is not None and (not is_int(v) or v < 0):
                raise ConfigError(f"RulesConfig.{name} must be an int >= 0 or None (off), got {v!r}")
        for name in ("min_mean_word_length", "max_mean_word_length", "max_symbol_word_ratio"):
            v = getattr(self, name)
            if v is not None and (not is_real(v) or v < 0):
                raise ConfigError(f"RulesConfig.{name} must be a finite number >= 0 or None (off), got {v!r}")
        for name in ("max_bullet_lines", "max_ellipsis_lines", "min_alpha_words", "max_dup_lines",
                     "max_dup_line_chars", "max_dup_paragraphs", "max_dup_paragraph_chars"):
            _check_fraction(f"RulesConfig.{name}", getattr(self, name), none_ok=True)
        for lo, hi in (("min_words", "max_words"), ("min_mean_word_length", "max_mean_word_length")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise ConfigError(f"RulesConfig.{lo} ({a!r}) is above {hi} ({b!r}): no document could pass")
        for name in ("top_ngrams", "dup_ngrams"):
            pairs = getattr(self, name)
            if not isinstance(pairs, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
                raise ConfigError(f"RulesConfig.{name} must be a tuple of (n, max fraction) pairs, got {pairs!r}")
            ns = [p[0] for p in pairs]
            for n, frac in pairs:
                if not is_int(n) or not 1 <= n <= MAX_RULE_NGRAM:
                    raise ConfigError(f"RulesConfig.{name}: n must be an int in [1, {MAX_RULE_NGRAM}], got {n!r}")
                _check_fraction(f"RulesConfig.{name} (n={n})", frac, none_ok=False)
            if len(set(ns)) != len(ns):
                raise ConfigError(f"RulesConfig.{name} lists an n twice: {ns}")
        words = self.stop_words
        if not isinstance(words, tuple) or not 1 <= len(words) <= 64:
            raise ConfigError(f"RulesConfig.stop_words must be a tuple of 1 to 64 words, got {words!r}")
        for w in words:
            if (not isinstance(w, str) or not 1 <= len(w) <= 8 or not w.isascii() or w != w.lower()
                    or any(c.isspace() or c in _ASCII_PUNCT for c in w)):
                raise ConfigError(f"RulesConfig.stop_words: {w!r} must be 1-8 lowercase ASCII characters without "
                                  "spaces or punctuation (the kernel compares packed bytes)")
        if len(set(words)) != len(words):
            raise ConfigError(f"RulesConfig.stop_words lists a word twice: {words}")
        if self.min_stop_words is not None and self.min_stop_words > len(words):
            raise ConfigError(f"RulesConfig.min_stop_words ({self.min_stop_words}) exceeds the {len(words)} "
                              "stop words: no document could pass")
        if not isinstance(self.bullets, tuple) or not all(isinstance(b, str) and len(b) == 1 and not b.isspace()
                                                          for b in self.bullets):
            raise ConfigError(f"RulesConfig.bullets must be a tuple of single non-space characters, got "
                              f"{self.bullets!r}")

    @staticmethod
    def preset(name: str = "gopher", **overrides: Any) -> "RulesConfig":
        """"gopher": every Gopher rule at the paper's threshold; "gopher_quality": its quality rules only (no
        repetition); "gopher_repetition": its repetition rules only; "c4": C4's page rules (line rules recorded;
        "c4_fineweb": without the terminal-punctuation line rule, as FineWeb runs them); "fineweb": FineWeb's
        quality rules; "chars": the non-ASCII and non-alphanumeric fractions; "url": the URL density (and the
        blocklist when ``url_blocklist`` is given). Several, comma-separated ("gopher,c4,fineweb"): every rule of
        each. ``overrides`` replace fields.

        Raises:
            ConfigError: an unknown preset or field.
        """
        names = [x.strip() for x in name.split(",")] if isinstance(name, str) else [name]
        for x in names:
            if x not in PRESETS:
                raise ConfigError(f"unknown rules preset {x!r}; choose one or more (comma-separated) of {PRESETS}"
                                  f"{did_you_mean(str(x), PRESETS)}")
        if len(set(names)) != len(names) or {"c4", "c4_fineweb"} <= set(names):
            raise ConfigError(f"rules preset {name!r} names a set twice (c4 and c4_fineweb are one set: give one)")
        bad = [k for k in overrides if k not in {f.name for f in dataclasses.fields(RulesConfig)}]
        if bad:
            raise ConfigError(f"unknown RulesConfig field {bad[0]!r}"
                              f"{did_you_mean(bad[0], [f.name for f in dataclasses.fields(RulesConfig)])}")
        on: dict[str, Any] = {}
        for x in names:
            on |= _PRESET_ON[x]
        return RulesConfig(**(_ALL_OFF | on | overrides))


_ASCII_PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_QUALITY_FIELDS = ("min_words", "max_words", "min_mean_word_length", "max_mean_word_length", "max_symbol_word_ratio",
                   "max_bullet_lines", "max_ellipsis_lines", "min_alpha_words", "min_stop_words")
_REPETITION_FIELDS = ("max_dup_lines", "max_dup_line_chars", "max_dup_paragraphs", "max_dup_paragraph_chars")
_GOPHER_DEFAULTS = {f: RulesConfig.__dataclass_fields__[f].default
                    for f in _QUALITY_FIELDS + _REPETITION_FIELDS + ("top_ngrams", "dup_ngrams")}
_ALL_OFF: dict[str, Any] = {f: None for f in _QUALITY_FIELDS + _REPETITION_FIELDS} | {"top_ngrams": (),
                                                                                      "dup_ngrams": ()}
# the bounds each preset switches on: the published thresholds (C4: Raffel et al. 2020 / TFDS c4_utils; FineWeb:
# datatrove FineWebQualityFilter's defaults; chars / url: NeMo Curator's NonAlphaNumericFilter 0.25, UrlsFilter 0.2)
_PRESET_ON: dict[str, dict[str, Any]] = {
    "gopher": _GOPHER_DEFAULTS,
    "gopher_quality": {f: _GOPHER_DEFAULTS[f] for f in _QUALITY_FIELDS},
    "gopher_repetition": {f: _GOPHER_DEFAULTS[f] for f in _REPETITION_FIELDS + ("top_ngrams", "dup_ngrams")},
    "c4": {"c4_min_sentences": 5, "c4_max_lorem_ipsum": 0, "c4_max_curly_bracket": 0, "c4_max_removed_lines": 1.0},
    # FineWeb's recipe runs C4's rules without the terminal-punctuation line rule (datatrove examples/fineweb.py)
    "c4_fineweb": {"c4_min_sentences": 5, "c4_max_lorem_ipsum": 0, "c4_max_curly_bracket": 0,
                   "c4_max_removed_lines": 1.0, "c4_terminal_punct": False},
    "fineweb": {"fineweb_min_line_punct": 0.12, "fineweb_max_short_lines": 0.67, "fineweb_max_dup_line_chars": 0.01,
                "fineweb_max_newline_words": 0.3},
    "chars": {"max_non_ascii": 1.0, "max_non_alnum": 0.25},
    "url": {"max_url_chars": 0.2},
}


def _check_fraction(name: str, v: Any, none_ok: bool) -> None:
    if v is None and none_ok:
        return
    if not is_real(v) or not 0 <= v <= 1:
        raise ConfigError(f"{name} must be a fraction in [0, 1]{' or None (off)' if none_ok else ''}, got {v!r}")


@dataclass(frozen=True)
class Rule:
    """One score column: kept when min <= value <= max (a None bound is not checked)."""

    column: str
    min: float | None
    max: float | None
    statistic: str


def rules(cfg: RulesConfig) -> list[Rule]:
    """The enabled rules in evaluation order (the quality rules, then repetition)."""
    c = cfg
    out = [
        Rule("gopher_word_count", c.min_words, c.max_words, "words (text.split())"),
        Rule("gopher_mean_word_length", c.min_mean_word_length, c.max_mean_word_length,
             "mean characters per word"),
        Rule("gopher_symbol_word_ratio", None, c.max_symbol_word_ratio,
             "max('#' count, ellipsis count) / words"),
        Rule("gopher_bullet_lines_frac", None, c.max_bullet_lines, "non-blank lines starting with a bullet"),
        Rule("gopher_ellipsis_lines_frac", None, c.max_ellipsis_lines, "non-blank lines ending with an ellipsis"),
        Rule("gopher_alpha_words_frac", c.min_alpha_words, None, "words with an alphabetic character"),
        Rule("gopher_stop_words", c.min_stop_words, None, "distinct stop words present"),
        Rule("gopher_dup_line_frac", None, c.max_dup_lines, "duplicate lines / lines"),
        Rule("gopher_dup_line_char_frac", None, c.max_dup_line_chars, "characters in duplicate lines / characters"),
        Rule("gopher_dup_para_frac", None, c.max_dup_paragraphs, "duplicate paragraphs / paragraphs"),
        Rule("gopher_dup_para_char_frac", None, c.max_dup_paragraph_chars,
             "characters in duplicate paragraphs / characters"),
    ]
    out += [Rule(f"gopher_top_{n}gram_char_frac", None, t, f"characters of the most frequent word {n}-gram")
            for n, t in c.top_ngrams]
    out += [Rule(f"gopher_dup_{n}gram_char_frac", None, t, f"characters of words in duplicate word {n}-grams")
            for n, t in c.dup_ngrams]
    out += [
        Rule("c4_lorem_ipsum", None, c.c4_max_lorem_ipsum, "C4: lines reaching its lorem-ipsum test that contain "
             "'lorem ipsum'"),
        Rule("c4_curly_bracket", None, c.c4_max_curly_bracket, "C4: lines reaching its curly-bracket test that "
             "contain '{'"),
        Rule("c4_sentences", c.c4_min_sentences, None, f"C4: sentences in the lines its line rules keep (>= "
             f"{c.c4_min_words_per_line} words, none over {c.c4_max_word_length} characters, "
             + ("terminal punctuation, " if c.c4_terminal_punct else "") + "no javascript / policy phrase)"),
        Rule("c4_removed_lines_frac", None, c.c4_max_removed_lines, "C4: lines its line rules remove / lines "
             "(recorded; the text is not changed)"),
        Rule("fineweb_line_punct_frac", c.fineweb_min_line_punct, None,
             "FineWeb: non-blank lines ending in terminal punctuation"),
        Rule("fineweb_short_line_frac", None, c.fineweb_max_short_lines,
             f"FineWeb: non-blank lines of <= {c.fineweb_short_line_length} characters"),
        Rule("fineweb_dup_line_char_frac", None, c.fineweb_max_dup_line_chars,
             "FineWeb: characters of duplicate lines / characters without newlines"),
        Rule("fineweb_newline_word_ratio", None, c.fineweb_max_newline_words, "FineWeb: newlines / words"),
        Rule("chars_non_ascii_frac", None, c.max_non_ascii, "characters >= U+0080 / characters"),
        Rule("chars_non_alnum_frac", None, c.max_non_alnum, "characters outside [a-zA-Z0-9\\n?!,.] / characters "
             "(NeMo Curator)"),
        Rule("url_char_frac", None, c.max_url_chars, "characters of URLs in the text / characters (NeMo Curator)"),
        Rule("url_blocked", None, 0 if c.url_blocklist is not None else None,
             f"1 when the URL's host or a parent domain is in {c.url_blocklist}"),
    ]
    return [r for r in out if r.min is not None or r.max is not None]


# the RulesConfig fields behind each fixed column (the n-gram columns are entries of top_ngrams / dup_ngrams)
_COLUMN_FIELDS = {
    "gopher_word_count": ("min_words", "max_words"),
    "gopher_mean_word_length": ("min_mean_word_length", "max_mean_word_length"),
    "gopher_symbol_word_ratio": ("max_symbol_word_ratio",), "gopher_bullet_lines_frac": ("max_bullet_lines",),
    "gopher_ellipsis_lines_frac": ("max_ellipsis_lines",), "gopher_alpha_words_frac": ("min_alpha_words",),
    "gopher_stop_words": ("min_stop_words",), "gopher_dup_line_frac": ("max_dup_lines",),
    "gopher_dup_line_char_frac": ("max_dup_line_chars",), "gopher_dup_para_frac": ("max_dup_paragraphs",),
    "gopher_dup_para_char_frac": ("max_dup_paragraph_chars",),
    "c4_lorem_ipsum": ("c4_max_lorem_ipsum",), "c4_curly_bracket": ("c4_max_curly_bracket",),
    "c4_sentences": ("c4_min_sentences",), "c4_removed_lines_frac": ("c4_max_removed_lines",),
    "fineweb_line_punct_frac": ("fineweb_min_line_punct",), "fineweb_short_line_frac": ("fineweb_max_short_lines",),
    "fineweb_dup_line_char_frac": ("fineweb_max_dup_line_chars",),
    "fineweb_newline_word_ratio": ("fineweb_max_newline_words",), "chars_non_ascii_frac": ("max_non_ascii",),
    "chars_non_alnum_frac": ("max_non_alnum",), "url_char_frac": ("max_url_chars",),
    "url_blocked": ("url_blocklist",),
}
_INT_FIELDS = ("min_words", "max_words", "min_stop_words", "c4_min_sentences", "c4_max_lorem_ipsum",
               "c4_max_curly_bracket")


def without(cfg: RulesConfig, columns: Sequence[str]) -> RulesConfig:
    """``cfg`` with the rules of ``columns`` switched off (``--rule-off gopher_stop_words``)."""
    enabled = [r.column for r in rules(cfg)]
    bad = [c for c in columns if c not in enabled]
    if bad:
        raise ConfigError(f"--rule-off {bad[0]!r} is not an enabled rule{did_you_mean(bad[0], enabled)} (enabled: "
                          f"{', '.join(enabled)})")
    off: dict[str, Any] = {f: None for c in columns for f in _COLUMN_FIELDS.get(c, ())}
    off["top_ngrams"] = tuple((n, t) for n, t in cfg.top_ngrams if f"gopher_top_{n}gram_char_frac" not in columns)
    off["dup_ngrams"] = tuple((n, t) for n, t in cfg.dup_ngrams if f"gopher_dup_{n}gram_char_frac" not in columns)
    return dataclasses.replace(cfg, **off)


def with_thresholds(cfg: RulesConfig, specs: Sequence[str]) -> RulesConfig:
    """``cfg`` with the bounds of enabled rules replaced (``--rule-threshold COLUMN=VALUE``): VALUE is the one
    bound of a one-sided rule; a two-sided rule takes ``MIN:MAX`` (``gopher_word_count=20:100000``).

    Args:
        cfg: the ``RulesConfig``.
        specs: "COLUMN=VALUE" strings.

    Returns:
        The new ``RulesConfig`` (validated again).

    Raises:
        ConfigError: a malformed spec, a column that is not an enabled rule, a value of the wrong form.
    """
    by_col = {r.column: r for r in rules(cfg)}
    changes: dict[str, Any] = {}
    top, dup = dict(cfg.top_ngrams), dict(cfg.dup_ngrams)
    for spec in specs:
        col, sep, val = str(spec).partition("=")
        col = col.strip()
        if not sep or not val.strip():
            raise ConfigError(f"--rule-threshold {spec!r} must be COLUMN=VALUE (e.g. chars_non_ascii_frac=0.3)")
        if col not in by_col:
            raise ConfigError(f"--rule-threshold {spec!r}: {col!r} is not an enabled rule"
                              f"{did_you_mean(col, list(by_col))} (enabled: {', '.join(by_col)})")
        if col == "url_blocked":
            raise ConfigError("--rule-threshold url_blocked: the blocklist rule has no threshold (a blocked URL is "
                              "rejected); switch it off with --rule-off url_blocked")
        r = by_col[col]
        parts = val.split(":")
        two = r.min is not None and r.max is not None
        try:
            nums = [float(x) for x in parts]
        except ValueError:
            nums = []
        if len(nums) != (2 if two else 1):
            raise ConfigError(f"--rule-threshold {spec!r}: {col} takes "
                              + ("MIN:MAX (two-sided)" if two else "one number") + f", got {val!r}")
        fields = _COLUMN_FIELDS.get(col)
        if fields is None:  # a top / dup n-gram entry
            n = int(col.split("_")[2].removesuffix("gram"))
            (top if col.startswith("gopher_top_") else dup)[n] = nums[0]
            continue
        for f, x in zip(fields, nums):
            changes[f] = int(x) if f in _INT_FIELDS and float(x).is_integer() else x
    changes["top_ngrams"] = tuple(top.items())
    changes["dup_ngrams"] = tuple(dup.items())
    try:
        return dataclasses.replace(cfg, **changes)
    except ConfigError as e:
        raise ConfigError(f"--rule-threshold {', '.join(map(str, specs))}: {e}") from e


def describe(cfg: RulesConfig) -> dict[str, dict[str, Any]]:
    """Column -> {"min", "max", "keep_if", "statistic"} of every enabled rule, in evaluation order (run.json)."""
    out = {}
    for r in rules(cfg):
        cond = " and ".join(s for s in ((f"value >= {r.min}" if r.min is not None else ""),
                                        (f"value <= {r.max}" if r.max is not None else "")) if s)
        out[r.column] = {"min": r.min, "max": r.max, "keep_if": cond, "statistic": r.statistic}
    return out


@functools.lru_cache(maxsize=1)
def class_table() -> np.ndarray:
    """uint8 (0x110000,): CLS_SPACE where ``chr(c).isspace()``, CLS_ALPHA where ``chr(c).isalpha()`` (general
    category L*), from the package's shipped Unicode data (the same on every machine)."""
    data = shipped_arrays()
    names = [str(n) for n in data["gc_names"]]
    gc = data["gc"]
    alpha_codes = np.array([i for i, n in enumerate(names) if n.startswith("L")], np.uint8)
    table = np.where((gc & 0x80) != 0, F.CLS_SPACE, 0).astype(np.uint8)
    table |= np.where(np.isin(gc & 0x1F, alpha_codes), F.CLS_ALPHA, 0).astype(np.uint8)
    table.flags.writeable = False
    return table


def _stop_keys(words: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.array([int.from_bytes(w.encode("ascii"), "little") for w in words], np.uint64)
    return keys, np.array([len(w) for w in words], np.int64)


def rule_stats(texts: TextsLike, cfg: RulesConfig) -> tuple[np.ndarray, list[int], list[int]]:
    """Raw statistics matrix float64 (n, N_BASE_STATS + top + dup) from the CPU kernel, with the n of the
    enabled top / duplicate n-gram columns."""
    enabled = {r.column for r in rules(cfg)}
    top = [n for n, _ in cfg.top_ngrams if f"gopher_top_{n}gram_char_frac" in enabled]
    dup = [n for n, _ in cfg.dup_ngrams if f"gopher_dup_{n}gram_char_frac" in enabled]
    data, offsets = arrow_text_buffers(text_array(texts))
    keys, lens = _stop_keys(cfg.stop_words)
    bullets = np.array([ord(b) for b in cfg.bullets], np.int32)
    out = features_ops.rule_stats_host(data, offsets, class_table(), bullets, keys, lens, np.array(top, np.int64),
                                       np.array(dup, np.int64), F.RULES_SEED, F.N_BASE_STATS + len(top) + len(dup))
    return out, top, dup


def rule_scores(texts: TextsLike, cfg: RulesConfig, device: str = "cpu",
                urls: Sequence[str | None] | None = None) -> dict[str, np.ndarray]:
    """Compute the statistics of the enabled rules (Gopher's and ``rulesets.py``'s).

    The statistics run on the CPU for either device (per-document sorts and string rules are host work; see
    the module doc).

    Args:
        texts: the documents: a list of str, or a pyarrow string array.
        cfg: the ``RulesConfig``.
        device: "cpu", "cuda" or "auto".
        urls: the documents' URLs (None entries: no URL), needed by ``url_blocked``.

    Returns:
        One float64 (n,) host column per enabled rule, in ``rules(cfg)`` order.

    Raises:
        ConfigError: an unknown device, or a blocklist file that cannot be read (its file and line).
        MissingColumnError: ``url_blocked`` is enabled and ``urls`` is None.
        MissingFileError: the blocklist file does not exist.
    """
    from . import rulesets

    if device not in ("cpu", "cuda", "auto"):
        raise ConfigError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device != "cpu":
        logger.info("rule statistics run on the CPU (device=%s is used by the other stages)", device)
    enabled = [r.column for r in rules(cfg)]
    base: dict[str, np.ndarray] = {}
    if any(c.startswith("gopher_") for c in enabled):
        base.update(_gopher_scores(texts, cfg))
    text = text_array(texts)
    if any(c.startswith("c4_") for c in enabled):
        base.update(rulesets.c4_stats(text, cfg.c4_min_words_per_line, cfg.c4_max_word_length,
                                      cfg.c4_terminal_punct))
    if any(c.startswith("fineweb_") for c in enabled):
        base.update(rulesets.fineweb_stats(text, cfg.fineweb_short_line_length))
    if any(c.startswith("chars_") for c in enabled):
        base.update(rulesets.char_stats(text))
    if "url_char_frac" in enabled:
        base["url_char_frac"] = rulesets.url_char_frac(text)
    if "url_blocked" in enabled:
        if urls is None:
            raise MissingColumnError("the url_blocked rule needs the documents' URLs: pass urls= (on the command "
                                     "line --url-field FIELD)")
        if len(urls) != len(text):
            raise ConfigError(f"urls has {len(urls)} entries for {len(text)} documents")
        base["url_blocked"] = rulesets.url_blocked(urls, _blocklist(cfg.url_blocklist))
    return {c: np.ascontiguousarray(base[c]) for c in enabled}


@functools.lru_cache(maxsize=4)
def _blocklist(path: str) -> Any:
    from .rulesets import load_blocklist

    return load_blocklist(path)


def _gopher_scores(texts: TextsLike, cfg: RulesConfig) -> dict[str, np.ndarray]:
    st, top, dup = rule_stats(texts, cfg)
    words = st[:, F.ST_WORDS]
    safe = np.maximum(words, 1)
    symbol = np.where(words > 0, np.maximum(st[:, F.ST_HASH], st[:, F.ST_ELLIPSIS]) / safe, 0.0)
    base = {
        "gopher_word_count": words, "gopher_mean_word_length": st[:, F.ST_MEAN_WORD_LEN],
        "gopher_symbol_word_ratio": symbol, "gopher_bullet_lines_frac": st[:, F.ST_BULLET_LINES],
        "gopher_ellipsis_lines_frac": st[:, F.ST_ELLIPSIS_LINES], "gopher_alpha_words_frac": st[:, F.ST_ALPHA_WORDS],
        "gopher_stop_words": st[:, F.ST_STOP_WORDS], "gopher_dup_line_frac": st[:, F.ST_DUP_LINES],
        "gopher_dup_line_char_frac": st[:, F.ST_DUP_LINE_CHARS], "gopher_dup_para_frac": st[:, F.ST_DUP_PARAS],
        "gopher_dup_para_char_frac": st[:, F.ST_DUP_PARA_CHARS],
    }
    for t, n in enumerate(top):
        base[f"gopher_top_{n}gram_char_frac"] = st[:, F.N_BASE_STATS + t]
    for t, n in enumerate(dup):
        base[f"gopher_dup_{n}gram_char_frac"] = st[:, F.N_BASE_STATS + len(top) + t]
    return base


def rule_decisions(scores: dict[str, Any], cfg: RulesConfig) -> tuple[np.ndarray, np.ndarray]:
    """Decide the enabled rules: a document is kept when every one holds.

    Args:
        scores: the columns of ``rule_scores`` (float64 (n,) each); a NaN score fails its rule.
        cfg: the ``RulesConfig``.

    Returns:
        (keep, reason): bool (n,), and object (n,) the first failing rule's column name ("" when kept).

    Raises:
        MissingColumnError: ``scores`` lacks a column of an enabled rule.
        ConfigError: a column has the wrong shape.
    """
    rs = rules(cfg)
    missing = [r.column for r in rs if r.column not in scores]
    if missing:
        raise MissingColumnError(f"scores lack the columns {missing} of the enabled rules; compute them with "
                                 "rule_scores under the same RulesConfig")
    n = len(next(iter(scores.values()))) if scores else 0
    keep = np.ones(n, bool)
    reason = np.full(n, "", dtype=object)
    for r in rs:
        x = np.asarray(scores[r.column], dtype=np.float64)
        if x.shape != (n,):
            raise ConfigError(f"score column {r.column} has shape {x.shape}, expected ({n},)")
        ok = np.ones(n, bool)
        if r.min is not None:
            ok &= x >= r.min
        if r.max is not None:
            ok &= x <= r.max
        fail = keep & ~ok
        reason[fail] = r.column
        keep &= ok
    return keep, reason


def check_rule_actions(cfg: Any) -> None:
    """The rule flags of ``filter`` beside the sets (``FilterConfig.__post_init__`` calls this): --url-blocklist
    needs --url-field and --rules url (--url-field alone would be read for nothing); --c4-remove-lines needs a
    c4 set and is not combined with --paragraph-action remove.

    Args:
        cfg: the ``FilterConfig``.

    Raises:
        ConfigError: a flag without the ones it needs (the message names them), or a bad value.
    """
    sets = {x.strip() for x in cfg.rules.split(",")} if isinstance(cfg.rules, str) else set()
    given = f"--rules {cfg.rules!r}" if cfg.rules else "no --rules"
    for name, v in (("url_field", cfg.url_field), ("url_blocklist", cfg.url_blocklist)):
        if v is not None and (not isinstance(v, str) or not v):
            raise ConfigError(f"FilterConfig.{name} (--{name.replace('_', '-')}) must be a non-empty string or "
                              f"None, got {v!r}")
    if cfg.url_blocklist is not None:
        if "url" not in sets:
            raise ConfigError(f"--url-blocklist {cfg.url_blocklist!r} is a rule of the url set: add --rules url "
                              f"(or a list holding it, e.g. --rules gopher,url); got {given}")
        if cfg.url_field is None:
            raise ConfigError(f"--url-blocklist {cfg.url_blocklist!r} needs --url-field COLUMN: the field of "
                              "each document's URL")
    elif cfg.url_field is not None:
        raise ConfigError(f"--url-field {cfg.url_field!r} is read only by --url-blocklist FILE (with --rules "
                          "url): give the blocklist, or drop --url-field")
    if cfg.url_field is not None and cfg.url_field in (cfg.text_field, cfg.id_field):
        raise ConfigError(f"--url-field {cfg.url_field!r} is also the text or id field; name the URL column")
    if not isinstance(cfg.c4_remove_lines, bool):
        raise ConfigError(f"FilterConfig.c4_remove_lines must be a bool, got {cfg.c4_remove_lines!r}")
    if cfg.c4_remove_lines:
        if not {"c4", "c4_fineweb"} & sets:
            raise ConfigError("--c4-remove-lines cuts the lines of C4's line rules: add --rules c4 (or "
                              f"c4_fineweb, e.g. --rules gopher,c4); got {given}")
        if cfg.paragraph_action == "remove":
            raise ConfigError("--c4-remove-lines and --paragraph-action remove both cut the kept documents; "
                              "give one of them")
