"""Domain rules around language ID: the script pre-filter (a script that one language alone writes needs no
model) and the code / math detectors that relax thresholds (OpenWebMath's two-tier rule, Paster et al. 2023).
Counts come from ``kernels/domain.py`` (CPU and GPU, one source); the rules on those counts are here, stated
in ``DomainConfig``'s docstring.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..runtime.device import to_device, to_host
from ..kernels.domain import (
    CODE_SYMBOLS,
    KEYWORDS,
    LETTERS,
    LINES,
    MATH_LINES,
    N_SCRIPTS,
    N_STATS,
    NONSPACE,
    SCRIPT_RANGES,
    SCRIPTS,
    WORDS,
    keyword_table,
    symbol_table,
)
from ..io.text import arrow_text_buffers
from ..ops import domain as domain_ops
from .config import DomainConfig

SCRIPT_LANGUAGES = {name: lang for name, lang in SCRIPTS}
DOMAINS = ("", "code", "math")  # the scores' ``domain`` column: "" = prose


@dataclass
class DomainStats:
    """Per document (n,): ``script_lang`` the language of the script pre-filter ("" when no script holds
    more than the fraction), ``script_frac`` that script's share of the letters (float64), ``domain``
    "" | "code" | "math", and the raw counts (int64 (n, N_STATS), columns in kernels/domain.py)."""

    script_lang: np.ndarray
    script_frac: np.ndarray
    domain: np.ndarray
    counts: np.ndarray


def domain_counts(text: pa.Array, device: str, chunk: int | None = None, buffers: tuple | None = None) -> np.ndarray:
    """int64 (n, N_STATS) counts of each document of ``text`` (pa.string / large_string, no nulls). CPU: a
    scan per document. GPU: a thread per line-aligned piece of about ``chunk`` bytes (``ops.domain``): the same
    counts. ``buffers``: (data, offsets) of ``text``'s UTF-8 bytes already where ``device``'s kernels read
    them (scorers.text_buffers: the batch's one copy), else made from ``text``."""
    kw_data, kw_off = keyword_table()
    tables = [to_device(np.ascontiguousarray(a), device) for a in (SCRIPT_RANGES, symbol_table(), kw_data, kw_off)]
    if buffers is None:
        buffers = [to_device(np.ascontiguousarray(a), device) for a in arrow_text_buffers(text)]
    stats = domain_ops.domain_counts(device, *buffers, *tables, N_STATS, chunk)
    return np.asarray(to_host(stats))


def domain_stats(text: pa.Array, cfg: DomainConfig, device: str, buffers: tuple | None = None) -> DomainStats:
    """The script pre-filter's language and the code/math tag of every document (rules: DomainConfig);
    ``buffers`` as ``domain_counts``'."""
    c = domain_counts(text, device, buffers=buffers)
    n = c.shape[0]
    letters = c[:, LETTERS].astype(np.float64)
    script_lang = np.full(n, "", dtype=object)
    script_frac = np.zeros(n, np.float64)
    if n and N_SCRIPTS:
        best = np.argmax(c[:, :N_SCRIPTS], axis=1)
        top = c[np.arange(n), best].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(letters > 0, top / np.maximum(letters, 1), 0.0)
        hit = frac > cfg.script_fraction
        langs = np.array([lang for _, lang in SCRIPTS], dtype=object)
        script_lang[hit] = langs[best[hit]]
        script_frac = np.where(hit, frac, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        math_frac = np.where(c[:, LINES] > 0, c[:, MATH_LINES] / np.maximum(c[:, LINES], 1), 0.0)
        sym = np.where(c[:, NONSPACE] > 0, c[:, CODE_SYMBOLS] / np.maximum(c[:, NONSPACE], 1), 0.0)
        kw = np.where(c[:, WORDS] > 0, c[:, KEYWORDS] / np.maximum(c[:, WORDS], 1), 0.0)
    domain = np.full(n, "", dtype=object)
    domain[(sym >= cfg.code_symbol_density) | (kw >= cfg.code_keyword_fraction)] = "code"
    domain[math_frac > cfg.math_line_fraction] = "math"  # LaTeX wins: math text is full of braces too
    return DomainStats(script_lang, script_frac, domain, c)
