"""ARPA files (the text format of KenLM's n-gram models): ``write_arpa``, and ``read_arpa``, which rejects
what KenLM's reader rejects (lm/read_arpa.cc), naming the file and line (``ARPAError``).

A model trained by gpu-dedup starts with a ``# gpu-dedup-lm: {json}`` line (``HEADER_PREFIX``): the
contract (normalization, order, ...) that ``lm.load_lm`` checks; KenLM skips it as a comment.
"""
from __future__ import annotations

import gzip
import itertools
import json
import logging
import math
import re
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..errors import DataError
from ..runtime.heartbeat import Heartbeat

logger = logging.getLogger(__name__)

HEADER_PREFIX = "# gpu-dedup-lm: "
KENLM_BINARY_MAGIC = b"mmap lm http://kheafield.com/code"
_BEAT_LINES = 1 << 16  # n-grams read between two looks at the clock (a progress line every HEARTBEAT_S)
_ARPA_SPACES = re.compile(r"[ \t\r\n]+")  # KenLM's kARPASpaces: a word may hold any other byte
# a number both Python's float() and Arrow's cast read, to the same (correctly rounded) value
_PLAIN_NUMBER = r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$"


def _num(value: float) -> str:
    """A float32 value as text that parses back to the same float32 (9 significant digits)."""
    return "%.9g" % value


def write_arpa(path: str, vocab: Sequence[str], grams: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
               contract: dict[str, Any], stats: dict[str, Any] | None = None) -> None:
    """Write an ARPA file at ``path`` (caller handles atomicity). grams[n-1] = (rows int (M, n) word ids,
    log10 prob float32 (M,), log10 backoff float32 (M,) or None for the highest order)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(HEADER_PREFIX + json.dumps(contract, sort_keys=True, ensure_ascii=True) + "\n")
        if stats is not None:
            f.write("# gpu-dedup-lm-stats: " + json.dumps(stats, sort_keys=True, ensure_ascii=True) + "\n")
        f.write("\n\\data\\\n")
        for n, (rows, _, _) in enumerate(grams, 1):
            f.write(f"ngram {n}={rows.shape[0]}\n")
        for n, (rows, prob, bo) in enumerate(grams, 1):
            f.write(f"\n\\{n}-grams:\n")
            words = [[vocab[i] for i in col] for col in rows.T.tolist()]
            joined = [" ".join(t) for t in zip(*words)] if n > 1 else words[0]
            ps = prob.tolist()
            if bo is None:
                f.writelines(f"{_num(p)}\t{g}\n" for p, g in zip(ps, joined))
            else:
                f.writelines(f"{_num(p)}\t{g}\t{_num(b)}\n" for p, g, b in zip(ps, joined, bo.tolist()))
        f.write("\n\\end\\\n")


class ARPAError(DataError):
    """A malformed ARPA file (the message names the file and line)."""


def _open_text(path: str):
    with open(path, "rb") as f:
        head = f.read(len(KENLM_BINARY_MAGIC))
    if head.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rt", encoding="utf-8", errors="strict", newline="\n")
    return open(path, encoding="utf-8", errors="strict", newline="\n")


class _ArpaLines:
    """The lines of an ARPA file being read, with the number of the last one taken (errors say file:line)."""

    def __init__(self, path: str):
        self.path = path
        self.no = 0
        self.it: Any = iter(())

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = next(self.it)
        self.no += 1
        return line

    def take(self) -> str | None:
        """The next line, None at the end of the file (counted either way: the line the file lacks)."""
        line = next(self.it, None)
        self.no += 1
        return line

    def bad(self, msg: str) -> ARPAError:
        return ARPAError(f"{self.path}:{self.no}: {msg}")


def read_arpa(path: str) -> tuple[dict[str, Any] | None, list[str], list[tuple[np.ndarray, np.ndarray,
                                                                               np.ndarray]]]:
    """Parse an ARPA file: (header contract or None, vocabulary (unigram order), per order (rows int64 (M, n)
    of word ids, log10 prob float32 (M,), log10 backoff float32 (M,), 0 where absent)). Raises ARPAError with
    file:line for anything KenLM's reader would reject (lm/read_arpa.cc) and for unknown words.

    Steps: the header lines up to ``\\data\\`` (``_arpa_header``), the ``ngram N=count`` lines
    (``_arpa_counts``), one section per order (``_arpa_section``), ``\\end\\`` (``_arpa_end``), then the
    header's JSON contract (``_arpa_contract``)."""
    lines = _ArpaLines(path)
    vocab: list[str] = []
    ids: dict[str, int] = {}
    grams = []
    try:
        with _open_text(path) as f:
            lines.it = iter(f)
            header = _arpa_header(lines)
            counts = _arpa_counts(lines)
            # a model of a few hundred MB reads for tens of seconds: a line every HEARTBEAT_S says how far
            with Heartbeat(logger, f"{path}: reading", total=sum(counts), unit="n-grams", start=False) as beat:
                for n, count in enumerate(counts, 1):
                    grams.append(_arpa_section(lines, n, count, len(counts), vocab, ids, beat))
            _arpa_end(lines, len(counts))
    except UnicodeDecodeError as exc:
        raise ARPAError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start} of a line near line "
                        f"{lines.no + 1}); an ARPA file is UTF-8 text (a KenLM binary is detected by its header)"
                        ) from None
    except (OSError, EOFError) as exc:
        raise ARPAError(f"{path}: cannot read it ({exc})") from None
    return _arpa_contract(path, header), vocab, grams


def _arpa_header(lines: _ArpaLines) -> list[str]:
    """The contract header's pieces among the leading blank / comment lines, up to and with \\data\\."""
    header: list[str] = []
    for line in lines:
        s = line.strip()
        if s.startswith(HEADER_PREFIX.strip()):
            header.append(s[len(HEADER_PREFIX.strip()):].strip())
        elif s == "\\data\\":
            return header
        elif s and not s.startswith("#"):
            raise lines.bad(f"expected \\data\\ (optionally after blank or '#' lines), found {s[:60]!r}")
    raise lines.bad("no \\data\\ line: not an ARPA file")


def _arpa_counts(lines: _ArpaLines) -> list[int]:
    """The n-gram count of every order, from the ``ngram N=count`` lines (orders 1, 2, ... in turn)."""
    counts: list[int] = []
    for line in lines:
        s = line.strip()
        if not s:
            if counts:
                break
            continue
        if not s.startswith("ngram "):
            raise lines.bad(f"expected 'ngram N=count', found {s[:60]!r}")
        n, _, c = s[6:].partition("=")
        if not (n.strip().isdigit() and c.strip().isdigit()) or int(n) != len(counts) + 1:
            raise lines.bad(f"bad count line {s!r} (orders must be 1, 2, ... with integer counts)")
        counts.append(int(c))
    if not counts:
        raise lines.bad("no 'ngram N=count' lines after \\data\\")
    return counts


def _arpa_section(lines: _ArpaLines, n: int, count: int, order: int, vocab: list[str],
                  ids: dict[str, int], beat: Heartbeat | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The \\n-grams: section: (rows int64 (count, n) of word ids, log10 prob, log10 backoff (0 if absent))
    float32 (count,). The unigrams define the vocabulary (``vocab``, ``ids`` grow); higher orders use it.
    ``beat`` hears of every block of ``_BEAT_LINES`` n-grams read.

    The lines are taken a block at a time and parsed column-wise with Arrow (``_block_fast``: ~10x the
    per-line reader on a 1 M n-gram model); a block in which anything is not plainly valid is read again by
    the per-line reader (``_block_lines``), whose checks and messages (file:line) are the reference: the
    result is the same either way, and a bad line is named as KenLM's reader would refuse it."""
    for line in lines:
        s = line.strip()
        if s:
            break
    else:
        raise lines.bad(f"file ends before the \\{n}-grams: section")
    if s != f"\\{n}-grams:":
        raise lines.bad(f"expected \\{n}-grams:, found {s[:60]!r}")
    rows = np.empty((count, n), np.int64)
    prob = np.empty(count, np.float32)
    bo = np.zeros(count, np.float32)
    known = None  # the vocabulary as an Arrow array (higher orders look their words up in it)
    done = 0
    while done < count:
        first_no = lines.no
        block = list(itertools.islice(lines.it, min(_BEAT_LINES, count - done)))
        lines.no += len(block)
        if n > 1 and known is None:
            known = pa.array(vocab, pa.string())
        part = _block_fast(block, n, order, vocab, ids, known) if len(block) == min(_BEAT_LINES, count - done) \
            else None
        if part is None:
            replay = _ArpaLines(lines.path)
            replay.no = first_no
            replay.it = iter(block)
            part = _block_lines(replay, len(block), n, count, done, order, vocab, ids)
            if len(block) < min(_BEAT_LINES, count - done):  # the file ended inside the section
                replay.take()
                raise replay.bad(f"the header says {count} {n}-grams but the section has {done + len(block)}")
        rows[done:done + len(block)], prob[done:done + len(block)], bo[done:done + len(block)] = part
        done += len(block)
        if beat is not None:
            beat.update(len(block))
    return rows, prob, bo


def _block_lines(lines: _ArpaLines, m: int, n: int, count: int, done: int, order: int, vocab: list[str],
                 ids: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The next m lines of a section, one at a time (n-grams done .. done + m - 1 of its count): the
    reference reader, with KenLM's checks."""
    rows = np.empty((m, n), np.int64)
    prob = np.empty(m, np.float32)
    bo = np.zeros(m, np.float32)
    for i in range(m):
        line = lines.take()
        if line is None or not line.strip():
            raise lines.bad(f"the header says {count} {n}-grams but the section has {done + i}")
        words, prob[i], bo[i] = _arpa_gram(lines, line, n, order)
        if n == 1:
            if words[0] in ids:
                raise lines.bad(f"duplicate unigram {words[0]!r}")
            ids[words[0]] = len(vocab)
            vocab.append(words[0])
            rows[i, 0] = ids[words[0]]
        else:
            for j, word in enumerate(words):
                w = ids.get(word)
                if w is None:
                    raise lines.bad(f"word {word!r} is not among the unigrams")
                rows[i, j] = w
    return rows, prob, bo


def _block_fast(block: list[str], n: int, order: int, vocab: list[str], ids: dict[str, int],
                known: pa.Array | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``_block_lines``' result for a block of n-gram lines, column-wise, or None when any line is not plainly
    valid: not in the canonical layout ``prob<TAB>w1 w2 ... wn[<TAB>backoff]`` (single spaces; lmplz and
    ``write_arpa`` write it; any other spacing KenLM reads is left to the per-line reader), a number outside
    _PLAIN_NUMBER, a positive or backed-off value where KenLM refuses one, an unknown or repeated word: then
    the per-line reader reads the block and says what is wrong. The numbers parse as Python's float() parses
    them (both round correctly; _PLAIN_NUMBER leaves out the forms only one of them reads)."""
    import pyarrow.compute as pc

    m = len(block)
    tabs = pc.split_pattern(pc.utf8_trim(pa.array(block, pa.string()), " \t\r\n"), "\t")
    tl = pc.list_value_length(tabs).to_numpy()
    if not ((tl == 2) | (tl == 3)).all():
        return None
    fields = pc.list_flatten(tabs)
    at = tabs.offsets.to_numpy()[:-1]
    has_bo = tl == 3
    grams = fields.take(at + 1)
    if pc.any(pc.match_substring(grams, "\r")).as_py():
        return None
    words = pc.split_pattern(grams, " ")
    if not (pc.list_value_length(words).to_numpy() == n).all():
        return None
    flat = pc.list_flatten(words)
    if pc.min(pc.binary_length(flat)).as_py() == 0:  # two spaces in a row, or one at an end
        return None
    nums = pa.concat_arrays([fields.take(at), fields.take(at[has_bo] + 2)])
    if not pc.all(pc.match_substring_regex(nums, _PLAIN_NUMBER)).as_py():
        return None
    values = pc.cast(nums, pa.float64()).to_numpy()
    if not np.isfinite(values).all():  # 1e999 reads as infinity
        return None
    p, b = values[:m], np.zeros(m)
    b[has_bo] = values[m:]
    if (p > 0).any() or (n == order and (b != 0).any()):
        return None
    rows = np.empty((m, n), np.int64)
    if n == 1:
        new = flat.to_pylist()
        if len(set(new)) < m or any(w in ids for w in new):
            return None
        rows[:, 0] = np.arange(len(vocab), len(vocab) + m)
        ids.update(zip(new, rows[:, 0].tolist()))
        vocab.extend(new)
    else:
        step = np.arange(m) * n
        for j in range(n):
            w = pc.index_in(flat.take(step + j), value_set=known)
            if w.null_count:
                return None
            rows[:, j] = w.to_numpy()
    return rows, p.astype(np.float32), b.astype(np.float32)


def _arpa_gram(lines: _ArpaLines, line: str, n: int, order: int) -> tuple[list[str], float, float]:
    """One n-gram line: (its n words, log10 prob, log10 backoff or 0), checked as KenLM checks it."""
    parts = _ARPA_SPACES.split(line.strip(" \t\r\n"))
    if len(parts) not in (n + 1, n + 2):
        raise lines.bad(f"a {n}-gram line needs log10prob, {n} word(s) and an optional backoff; found "
                        f"{len(parts)} fields")
    try:
        p = float(parts[0])
        b = float(parts[n + 1]) if len(parts) == n + 2 else 0.0
    except ValueError:
        raise lines.bad(f"not a number in {line.strip()[:80]!r}") from None
    if not (math.isfinite(p) and math.isfinite(b)):
        raise lines.bad(f"non-finite value in {line.strip()[:80]!r}")
    if p > 0:
        raise lines.bad(f"positive log10 probability {p} (a probability above 1)")
    if n == order and b != 0:
        raise lines.bad(f"the highest order ({n}) cannot have a backoff, found {b}")
    return parts[1:n + 1], p, b


def _arpa_end(lines: _ArpaLines, order: int) -> None:
    """``\\end\\`` after the last section, then nothing but blank lines."""
    for line in lines:
        s = line.strip()
        if s == "\\end\\":
            break
        if s:
            raise lines.bad(f"expected \\end\\ after the {order}-grams, found {s[:60]!r} (more n-grams than "
                            "the header says?)")
    else:
        raise lines.bad("missing \\end\\ (truncated file?)")
    for line in lines:
        if line.strip():
            raise lines.bad("non-blank line after \\end\\")


def _arpa_contract(path: str, header: list[str]) -> dict[str, Any] | None:
    """The JSON contract of the header lines (None without any)."""
    if not header:
        return None
    try:
        return json.loads("".join(header))
    except json.JSONDecodeError as exc:
        raise ARPAError(f"{path}: the '{HEADER_PREFIX.strip()}' header is not valid JSON ({exc}); remove "
                        "the line and pass normalization= to load_lm") from None
