"""Word-level diffs of two documents as escaped HTML, for the report's cluster excerpts."""
from __future__ import annotations

import difflib
import html
from typing import Sequence
from ..errors import ConfigError

DIFF_WORDS = 2000        # words of each document compared in the cluster excerpts
CONTEXT_WORDS = 12       # unchanged words kept on each side of a difference; longer runs are collapsed
MIN_SKIP = 8             # ... but only when that hides at least this many words


# ------------------------------------------------------------------------------------------------ diffs
def _words_html(words: Sequence[str]) -> str:
    return html.escape(" ".join(words))


def _skip(n: int) -> str:
    return f"<span class=\"skip\">[… {n:,} identical words …]</span>"


def _equal_run(words: Sequence[str], first: bool, last: bool, context: int | None) -> str:
    """An unchanged run of words, its middle collapsed when that hides at least MIN_SKIP words."""
    n = len(words)
    keep = 2 * context if context is not None and (first and last or not (first or last)) else context
    if context is None or n - keep < MIN_SKIP:
        return _words_html(words)
    if first and last:  # no change at all: show the start only
        return f"{_words_html(words[:keep])} {_skip(n - keep)}"
    if first:
        return f"{_skip(n - context)} {_words_html(words[n - context:])}"
    if last:
        return f"{_words_html(words[:context])} {_skip(n - context)}"
    return f"{_words_html(words[:context])} {_skip(n - 2 * context)} {_words_html(words[n - context:])}"


def diff_words(a: str, b: str, max_words: int = DIFF_WORDS, context: int | None = CONTEXT_WORDS) -> tuple[str, str]:
    """Word-level diff of the first ``max_words`` words of two texts, as two escaped HTML strings.

    Words only in ``a`` are wrapped in ``<del>``, words only in ``b`` in ``<mark>``; whitespace is collapsed to
    single spaces. A truncated text ends with "… (N more words, not compared)".

    Args:
        a, b: the texts.
        max_words: how many words of each to compare.
        context: unchanged words kept next to each change; the rest of a run collapses to
            "[… N identical words …]". None shows everything.

    Returns:
        (html_a, html_b).

    Raises:
        ConfigError: ``max_words`` < 1 or ``context`` < 0.
    """
    if not isinstance(max_words, int) or max_words < 1:
        raise ConfigError(f"max_words must be a positive int, got {max_words!r}")
    if context is not None and (not isinstance(context, int) or context < 0):
        raise ConfigError(f"context must be an int >= 0 or None, got {context!r}")
    wa_all, wb_all = a.split(), b.split()
    wa, wb = wa_all[:max_words], wb_all[:max_words]
    out_a: list[str] = []
    out_b: list[str] = []
    # autojunk off: in web text the frequent words ("the", "and") are exactly the ones that must align
    ops = difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes()
    for k, (op, i1, i2, j1, j2) in enumerate(ops):
        if op == "equal":
            first, last = k == 0, k == len(ops) - 1
            out_a.append(_equal_run(wa[i1:i2], first, last, context))
            out_b.append(_equal_run(wb[j1:j2], first, last, context))
            continue
        if i2 > i1:
            out_a.append(f"<del>{_words_html(wa[i1:i2])}</del>")
        if j2 > j1:
            out_b.append(f"<mark>{_words_html(wb[j1:j2])}</mark>")

    def tail(total: int) -> str:
        if total <= max_words:
            return ""
        return f" <span class=\"skip\">… ({total - max_words:,} more words, not compared)</span>"

    return " ".join(out_a) + tail(len(wa_all)), " ".join(out_b) + tail(len(wb_all))
