"""Pure-Python reference of the normalization policy: the test oracle for the shipped tables and kernels.

It uses the RUNNING interpreter's ``unicodedata``, not the shipped data, so it is valid only when
``reference_matches_tables()`` (the tables were generated under the same Unicode version); tests skip otherwise.
The policy itself is documented in ``gpu_dedup.text.unicode_tables``.
"""
from __future__ import annotations

import functools
import re
import unicodedata

from ..config import NormalizeConfig
from ..constants import IMAGE_MAX_ITERATIONS as MAX_ITERATIONS
from ..constants import N_CODEPOINTS, REPLACEMENT
from ..errors import ConfigError, RunError
from ..text.unicode_tables import SURROGATE_HI, SURROGATE_LO, UNICODE_VERSION, NormTables


def reference_matches_tables() -> bool:
    """True when the running Python's Unicode database is the one the shipped tables were built from."""
    return unicodedata.unidata_version == UNICODE_VERSION


_SPACE_CATEGORIES = frozenset(("Cc", "Zs", "Zl", "Zp"))
_SPACES_RE = re.compile(" {2,}")


def _post_char(ch: str, remove_punctuation: bool, fold_digits: bool) -> str:
    cat = unicodedata.category(ch)
    if cat in _SPACE_CATEGORIES or ch.isspace():
        return " "
    if cat == "Cf":
        return ""
    if remove_punctuation and cat[0] in "PS":
        return " "
    if fold_digits and cat == "Nd":
        return "0"
    return ch


def _one_step(ch: str, remove_punctuation: bool, fold_digits: bool, lowercase: bool = True) -> str:
    if SURROGATE_LO <= ord(ch) < SURROGATE_HI:
        ch = chr(REPLACEMENT)
    s = unicodedata.normalize("NFKC", ch)
    if lowercase:
        s = s.lower()
    return "".join(_post_char(x, remove_punctuation, fold_digits) for x in s)


def _reference_image(c: int, remove_punctuation: bool, fold_digits: bool, lowercase: bool = True) -> str:
    ch = chr(c)
    s = _one_step(ch, remove_punctuation, fold_digits, lowercase)
    if s == ch:
        return s
    for _ in range(MAX_ITERATIONS):
        nxt = "".join(_one_step(x, remove_punctuation, fold_digits, lowercase) for x in s)
        if nxt == s:
            return s
        s = nxt
    raise RunError(f"image of U+{c:04X} did not reach a fixed point in {MAX_ITERATIONS} iterations")


_reference_image_cached = functools.lru_cache(maxsize=1 << 16)(_reference_image)


def reference_codepoint_image(c: int, cfg: NormalizeConfig) -> str:
    """Image of one codepoint under the policy (steps 1-3, no collapsing), from the running unicodedata."""
    if not 0 <= c < N_CODEPOINTS:
        raise ConfigError(f"codepoint must be in [0, 0x110000), got {c!r}")
    return _reference_image(c, cfg.remove_punctuation, cfg.fold_digits, cfg.lowercase)


def collapse_spaces(s: str) -> str:
    """Collapse runs of U+0020 to one and strip U+0020 from both ends (other characters untouched)."""
    return _SPACES_RE.sub(" ", s).strip(" ")


def normalize_reference(text: str, cfg: NormalizeConfig) -> str:
    """Reference normalization of ``text``: per-codepoint image (running unicodedata), then collapse + trim.

    Lone surrogates in ``text`` (e.g. from ``errors="surrogateescape"``) become U+FFFD's image.
    """
    rp, fd, lo = cfg.remove_punctuation, cfg.fold_digits, cfg.lowercase
    return collapse_spaces("".join([_reference_image_cached(ord(ch), rp, fd, lo) for ch in text]))


def apply_tables_python(text: str, tables: NormTables) -> str:
    """Normalize ``text`` with ``tables`` codepoint by codepoint (slow; for tests), then collapse + trim."""
    off, cp = tables.map_off, tables.map_cp
    out: list[str] = []
    for ch in text:
        c = ord(ch)
        out.extend(map(chr, cp[off[c]:off[c + 1]].tolist()))
    return collapse_spaces("".join(out))
