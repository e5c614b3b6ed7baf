"""The seed's domain rules around language ID (002 §21.2.1): the script pre-filter and the code / math
detectors that relax thresholds. Counts come from ``kernels/domain.py`` (CPU and GPU, one source); the
rules on those counts are here, stated in ``DomainConfig``'s docstring.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..device import array_module, launch, line_chunks, to_device, to_host
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


def domain_counts(text: pa.Array, device: str, chunk: int | None = None) -> np.ndarray:
    """int64 (n, N_STATS) counts of each document of ``text`` (pa.string / large_string, no nulls). CPU: a
    scan per document (prange). GPU: a thread per line-aligned piece of about ``chunk`` bytes (default
    kernels/domain_cuda.DOMAIN_CHUNK; ``device.line_chunks``), the pieces' rows summed per document: the same
    counts."""
    data, offsets = arrow_text_buffers(text)
    n = len(text)
    kw_data, kw_off = keyword_table()
    args = [to_device(np.ascontiguousarray(a), device) for a in
            (data, offsets, SCRIPT_RANGES, symbol_table(), kw_data, kw_off)]
    xp = array_module(device)
    stats = xp.zeros((n, N_STATS), dtype=np.int64)
    if n and device == "cuda":
        from ..kernels import domain_cuda as kd  # the GPU's piece size (imports the CUDA kernels)

        starts, ends, bounds = line_chunks(xp, args[0], args[1], chunk or kd.DOMAIN_CHUNK)
        pieces = int(starts.shape[0])
        if pieces:
            rows = xp.empty((pieces, N_STATS), dtype=np.int64)
            launch(device, "domain_chunks", pieces, args[0], starts, ends, *args[2:], rows, family="domain")
            total = xp.zeros((pieces + 1, N_STATS), dtype=np.int64)  # total[i] = the rows of pieces < i
            xp.cumsum(rows, axis=0, out=total[1:])
            stats = total[bounds[1:]] - total[bounds[:-1]]
    elif n:
        launch(device, "domain_stats", n, *args, stats, family="domain")
    return np.asarray(to_host(stats))


def domain_stats(text: pa.Array, cfg: DomainConfig, device: str) -> DomainStats:
    """The script pre-filter's language and the code/math tag of every document (rules: DomainConfig)."""
    c = domain_counts(text, device)
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
