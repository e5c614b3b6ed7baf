"""Training n-gram language models: exact n-gram counts, then interpolated modified Kneser-Ney estimated the
way KenLM's ``lmplz`` does (defaults: no pruning, ``--interpolate_unigrams``), written as an ARPA file that
``kenlm.Model`` and ``gpu_dedup.filters.lm.load_lm`` load.

Counting: the tokenization of ``filters.lm`` (sentences = non-empty lines); words are hashed by the lm
kernels (CPU or GPU) to 128-bit keys and given ids (0 <unk>, 1 <s>, 2 </s>, then in order of first
appearance); every new key's word is kept and every known key's word compared with it, so ids are exact.
Each sentence is ``<s> w1 ... wk </s>``; n-grams are its windows of 1..order ids (the lone ``<s>`` excepted),
counted exactly by sorting the id rows (numpy) per batch and merging. Literal ``<s>``, ``</s>``, ``<unk>`` in
the text are dropped with a warning, as lmplz does (it reads them as whitespace), and so is ``<UNK>``, which
KenLM's ARPA reader takes for ``<unk>`` (a model with it would hold the unknown word twice).

Estimation (lmplz: lm/builder/adjust_counts.cc, initial_probabilities.cc, interpolate.cc; float32 like it):
    adjusted count a(g) = raw count for the highest order and for n-grams starting with <s>, else the number
    of distinct words v with "v g" seen (continuation count); t_{n,k} = #{order-n n-grams with a = k};
    Y = t1 / (t1 + 2 t2), D_k = k - (k + 1) Y t_{k+1} / t_k (k = 1, 2, 3+), each in [0, k] or training fails;
    u(w|h) = (a(hw) - D(a(hw))) / sum_x a(hx), gamma(h) = (D1 N1(h.) + D2 N2(h.) + D3 N3+(h.)) / sum_x a(hx);
    p(w|h) = u(w|h) + gamma(h) p(w|h'), with p(w|eps) = u(w) + gamma(eps) / |V| (|V| counts <unk>, not <s>),
    u(<unk>) = 0, p(<s>) = 1; ARPA: log10 p (<= 0), backoff log10 gamma(g) for every g that is a context
    (0 for n-grams ending in </s> or <unk>).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from .. import io
from ..config import check_literal, is_int
from ..runtime.compiling import compile_clock
from ..runtime.device import note_compiling, resolve_device, to_device, to_host
from ..errors import ConfigError, DataError, MissingFileError, OutputExistsError, RunError
from ..runtime.outputs import check_outside_inputs, input_roots
from ..io.text import arrow_text_buffers
from ..ops import lm as lm_ops
from .arpa import UNK_CAPS, write_arpa
from .lm import SPECIALS, LMNormalization, lm_contract, prepare_text

logger = logging.getLogger(__name__)

UNK, BOS, EOS = 0, 1, 2
MAX_ORDER = 6
DROPPED = frozenset(SPECIALS) | {UNK_CAPS}  # words of the text that are no words of the model (module doc)
OnError = Literal["raise", "skip"]
_MERGE_ROWS = 1 << 23  # merge an order's per-batch counts once this many rows are pending
_TXT_BLOCK = 64 << 20  # .txt files are read in blocks of about this many bytes (cut after a newline)


@dataclass(frozen=True)
class LMTrainConfig:
    """order: n-gram order (1..6); normalization: how text becomes words (recorded in the model);
    text_field / id_field / on_error / batch_bytes: how jsonl / parquet inputs are read (``gpu_dedup.io``).
    Plain ``.txt`` inputs hold one document per line. screen: benchmark files (``gpu_dedup.screen.screening``'s
    formats): a reference document (a record, or a line of a .txt) that shares a word 13-gram with a
    benchmark item refuses the run (000 §5: "keep tests out of fitting"), or with screen_drop is left out of
    the counts and listed in the statistics (``screen``)."""

    order: int = 5
    normalization: LMNormalization = field(default_factory=LMNormalization)
    text_field: str = "text"
    id_field: str | None = None
    on_error: OnError = "raise"
    batch_bytes: int = 64 << 20
    screen: tuple[str, ...] = ()
    screen_drop: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.screen, (str, os.PathLike)) or not all(isinstance(x, (str, os.PathLike))
                                                                  for x in self.screen):
            raise ConfigError(f"LMTrainConfig.screen must be a tuple of benchmark file paths, got {self.screen!r}")
        object.__setattr__(self, "screen", tuple(os.fspath(x) for x in self.screen))
        if not isinstance(self.screen_drop, bool):
            raise ConfigError(f"LMTrainConfig.screen_drop must be a bool, got {self.screen_drop!r}")
        if self.screen_drop and not self.screen:
            raise ConfigError("LMTrainConfig.screen_drop=True drops the documents `screen` flags: give the benchmark "
                              "files with screen=(FILE, ...), or leave screen_drop out")
        if not is_int(self.order) or not 1 <= self.order <= MAX_ORDER:
            raise ConfigError(f"LMTrainConfig.order must be an int in [1, {MAX_ORDER}], got {self.order!r} "
                              "(5 is the usual choice, as in CCNet)")
        if not isinstance(self.normalization, LMNormalization):
            raise ConfigError(f"LMTrainConfig.normalization must be an LMNormalization, got {self.normalization!r}")
        if not isinstance(self.text_field, str) or not self.text_field:
            raise ConfigError(f"LMTrainConfig.text_field must be a non-empty str, got {self.text_field!r}")
        if self.id_field is not None and (not isinstance(self.id_field, str) or not self.id_field):
            raise ConfigError(f"LMTrainConfig.id_field must be None or a non-empty str, got {self.id_field!r}")
        check_literal("LMTrainConfig.on_error", self.on_error, OnError)
        if not is_int(self.batch_bytes) or self.batch_bytes < 1024:
            raise ConfigError(f"LMTrainConfig.batch_bytes must be an int >= 1024, got {self.batch_bytes!r}")


class DiscountError(DataError):
    """The corpus is too small (or artificial) for modified Kneser-Ney discounts (lmplz's BadDiscountException)."""


# ----------------------------------------------------------------------------------------------------
# Counting
# ----------------------------------------------------------------------------------------------------

DUPLICATE_SAMPLE = 10_000_000  # sentences whose keys are kept for the duplicates hint (8 bytes each)


def _sentence_keys(ids: np.ndarray, k: np.ndarray) -> np.ndarray:
    """uint64 (S,): a key per sentence of ``ids`` (k[s] word ids of sentence s, concatenated): equal sentences get
    equal keys, different ones differ but for 64-bit accidents (it only words a hint)."""
    first = np.zeros(k.shape[0], np.int64)
    np.cumsum(k[:-1], out=first[1:])
    pos = np.arange(ids.shape[0], dtype=np.int64) - np.repeat(first, k)
    with np.errstate(over="ignore"):
        tok = (ids.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        tok ^= (pos.astype(np.uint64) + np.uint64(1)) * np.uint64(0xC2B2AE3D27D4EB4F)
        tok *= np.uint64(0x165667B19E3779F9)
        keys = np.add.reduceat(tok, first) if ids.shape[0] else np.zeros(k.shape[0], np.uint64)
        return keys ^ (k.astype(np.uint64) * np.uint64(0x27D4EB2F165667C5))


class NgramCounter:
    """Exact n-gram counts of sentences added batch by batch (module doc)."""

    def __init__(self, order: int, norm: LMNormalization, device: str = "cpu"):
        self.order = order
        self.norm = norm
        self.device = device
        self.vocab: list[str] = list(SPECIALS)
        self._ids: dict[tuple[int, int], int] = {}
        self._parts: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(order)]
        self._pending = [0] * order
        self.sentences = self.words = self.dropped = 0
        self._sentence_keys: list[np.ndarray] = []  # a 64-bit key per sentence, for the duplicates hint

    def add(self, data, offsets) -> None:
        """Count the sentences of documents data[offsets[d]:offsets[d+1]] (host or device arrays)."""
        dev = self.device
        tdata, line_off, _ = prepare_text(to_device(data, dev), to_device(offsets, dev), self.norm, dev)
        lines = int(line_off.shape[0]) - 1
        word_off, start, end, h1, h2 = (to_host(a) for a in lm_ops.line_words(dev, tdata, line_off))
        ids = self._word_ids(to_host(tdata), start, end, h1, h2)
        per_line = np.diff(word_off)
        keep = ids >= 0
        if not keep.all():
            self.dropped += int((~keep).sum())
            per_line = np.bincount(np.repeat(np.arange(lines), per_line)[keep], minlength=lines)
            ids = ids[keep]
        self._count(ids, per_line[per_line > 0])

    def repeated_sentences(self) -> tuple[int, int]:
        """(sentences that repeat an earlier one, sentences looked at): of the first DUPLICATE_SAMPLE or so."""
        if not self._sentence_keys:
            return 0, 0
        keys = np.concatenate(self._sentence_keys)
        return int(keys.shape[0] - np.unique(keys).shape[0]), int(keys.shape[0])

    def _word_ids(self, tdata: np.ndarray, start, end, h1, h2) -> np.ndarray:
        """Ids of the words (exact: a known key's word is compared with the one it was first seen as); -1
        for the special tokens <s>, </s>, <unk> (and <UNK>: module doc) written in the text."""
        if not start.shape[0]:
            return np.zeros(0, np.int64)
        keys = np.stack([h1, h2], axis=1)
        uniq, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        lens = end - start
        if not np.array_equal(lens, lens[first][inv]):
            raise RunError("two different words share a 128-bit key (astronomically unlikely): report it")
        mapped = np.empty(uniq.shape[0], np.int64)
        raw = tdata.tobytes()
        keys_list = uniq.tolist()
        # new words get ids in the order they first appear (as lmplz numbers them), not in the order of their
        # keys: the vocabulary's order in the ARPA file does not depend on how words are keyed
        for j in np.argsort(first, kind="stable").tolist():
            k1, k2 = keys_list[j]
            word = raw[int(start[first[j]]):int(end[first[j]])].decode("utf-8")
            known = self._ids.get((k1, k2))
            if known is None:
                known = -1 if word in DROPPED else len(self.vocab)
                if known >= 0:
                    self.vocab.append(word)
                self._ids[(k1, k2)] = known
            elif (word in DROPPED) != (known < 0) or (known >= 0 and self.vocab[known] != word):
                raise RunError(f"two different words share a 128-bit key ({word!r}): report it")
            mapped[j] = known
        return mapped[inv]

    def _count(self, ids: np.ndarray, k: np.ndarray) -> None:
        """Count the windows of sentences <s> ids... </s> (k[s] words in sentence s, ids concatenated)."""
        s = k.shape[0]
        if not s:
            return
        if self.sentences < DUPLICATE_SAMPLE:
            self._sentence_keys.append(_sentence_keys(ids, k))
        self.sentences += s
        self.words += int(k.sum())
        lens = k + 2
        b = np.zeros(s, np.int64)
        np.cumsum(lens[:-1], out=b[1:])
        seq = np.empty(int(lens.sum()), np.int32)
        seq[b] = BOS
        seq[b + k + 1] = EOS
        sent_of_tok = np.repeat(np.arange(s), k)
        first_tok = np.zeros(s, np.int64)
        np.cumsum(k[:-1], out=first_tok[1:])
        seq[b[sent_of_tok] + 1 + np.arange(ids.shape[0]) - first_tok[sent_of_tok]] = ids
        sent_of_pos = np.repeat(np.arange(s), lens)
        pos = np.arange(seq.shape[0])
        stop = (b + lens)[sent_of_pos]
        for n in range(1, self.order + 1):
            ok = pos + n <= stop
            if n == 1:
                ok &= pos != b[sent_of_pos]  # the lone <s> is not an n-gram
            starts = pos[ok]
            if not starts.shape[0]:
                continue
            rows = seq[starts[:, None] + np.arange(n)]
            u, c = unique_rows(rows, return_counts=True)
            self._parts[n - 1].append((u, c.astype(np.int64)))
            self._pending[n - 1] += u.shape[0]
            if self._pending[n - 1] > _MERGE_ROWS:
                self._merge(n)

    def _merge(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        parts = self._parts[n - 1]
        if not parts:
            merged = (np.zeros((0, n), np.int32), np.zeros(0, np.int64))
        elif len(parts) == 1:
            merged = parts[0]
        else:
            rows = np.concatenate([p[0] for p in parts])
            u, inv = unique_rows(rows, return_inverse=True)
            c = np.bincount(inv.reshape(-1), weights=np.concatenate([p[1] for p in parts]), minlength=u.shape[0])
            merged = (u, np.rint(c).astype(np.int64))
        self._parts[n - 1] = [merged]
        self._pending[n - 1] = merged[0].shape[0]
        return merged

    def counts(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per order n: (unique rows int32 (M, n) of ids, raw counts int64 (M,)); order 1 is every id."""
        v = len(self.vocab)
        u1, c1 = self._merge(1)
        uni = np.zeros(v, np.int64)
        uni[u1[:, 0]] = c1
        return [(np.arange(v, dtype=np.int32)[:, None], uni)] + [self._merge(n) for n in range(2, self.order + 1)]


# ----------------------------------------------------------------------------------------------------
# Estimation
# ----------------------------------------------------------------------------------------------------

def unique_rows(rows: np.ndarray, return_inverse: bool = False,
                return_counts: bool = False) -> tuple[np.ndarray, ...]:
    """``np.unique(rows, axis=0, ...)`` for rows of non-negative word ids: the same rows in the same
    (lexicographic) order with the same inverse and counts, by sorting one or two uint64 keys packed from the
    ids instead of comparing rows as bytes (numpy's axis=0 path, about 10x slower; measured as 89% of training
    time). The packing keeps the order: column 0 in the most significant bits. Rows that need more than two
    64-bit words fall back to numpy."""
    m = rows.shape[0]
    n = rows.shape[1] if rows.ndim == 2 else 0
    bits = max(1, int(rows.max()).bit_length()) if m and n else 1
    per = 64 // bits
    if not m or not n or int(rows.min()) < 0 or -(-n // per) > 2:
        out = np.unique(rows, axis=0, return_inverse=return_inverse, return_counts=return_counts)
        if not (return_inverse or return_counts):
            return (out,)
        return tuple(x.reshape(-1) if i == 1 and return_inverse else x for i, x in enumerate(out))
    keys = []
    for w in range(0, n, per):
        k = np.zeros(m, np.uint64)
        for j in range(w, min(n, w + per)):
            k = (k << np.uint64(bits)) | rows[:, j].astype(np.uint64)
        keys.append(k)
    # lexsort is stable and sorts by its last key first: the first row of each run is the first occurrence
    order = np.lexsort(keys[::-1]) if len(keys) > 1 else np.argsort(keys[0], kind="stable")
    new = np.zeros(m, bool)  # the first row of each run of equal rows
    new[0] = True
    for k in keys:
        ks = k[order]
        new[1:] |= ks[1:] != ks[:-1]
    out: list[np.ndarray] = [rows[order[new]]]
    if return_inverse:
        inv = np.empty(m, np.int64)
        inv[order] = np.cumsum(new) - 1
        out.append(inv)
    if return_counts:
        out.append(np.diff(np.append(np.flatnonzero(new), m)).astype(np.int64))
    return tuple(out)


def _index_of(sub: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index in ``rows`` (unique rows; unigrams: row i is id i) of each row of ``sub`` (all present in rows)."""
    if rows.shape[1] == 1:
        return sub[:, 0].astype(np.int64)
    if not sub.shape[0]:
        return np.zeros(0, np.int64)
    _, inv = unique_rows(np.concatenate([rows, sub]), return_inverse=True)
    inv = inv.reshape(-1)
    pos = np.empty(rows.shape[0], np.int64)
    pos[inv[:rows.shape[0]]] = np.arange(rows.shape[0])
    return pos[inv[rows.shape[0]:]]


def discounts(a: np.ndarray, n: int) -> tuple[np.ndarray, list[int]]:
    """Modified Kneser-Ney discounts [0, D1, D2, D3+] (float32) of order n from its adjusted counts, and
    t_{n,1..4}. Raises DiscountError (what is zero or out of range, and what to do) like lmplz."""
    t = [int(np.count_nonzero(a == k)) for k in (1, 2, 3, 4)]
    for k in (1, 2, 3):
        if t[k - 1] == 0:
            raise DiscountError(
                f"cannot estimate modified Kneser-Ney discounts for {n}-grams: no {n}-gram has adjusted count {k} "
                f"(count-of-counts t{n},1..4 = {t}; adjusted count = occurrences for the highest order and "
                "<s>-initial n-grams, else distinct left neighbours). The reference corpus is too small or "
                "artificial (e.g. repeated text): use more (varied) text, or a lower order (LMTrainConfig.order)")
    f = np.float32
    y = f(t[0]) / f(t[0] + 2.0 * t[1])
    d = np.zeros(4, np.float32)
    for k in (1, 2, 3):
        d[k] = f(k) - f(k + 1) * y * f(t[k]) / f(t[k - 1])
        if not 0.0 <= d[k] <= k:
            raise DiscountError(
                f"modified Kneser-Ney discount D{k}{'+' if k == 3 else ''} of the {n}-grams is {float(d[k]):.4g}, "
                f"outside [0, {k}] (count-of-counts t{n},1..4 = {t}): the counts do not look like natural text "
                "(too small or artificial corpus); use more (varied) text or a lower order")
    return d, t


def estimate(raw: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[tuple[np.ndarray, np.ndarray, Any]], dict]:
    """Interpolated modified Kneser-Ney (module doc) from raw counts (``NgramCounter.counts``). Returns per order
    (rows, log10 prob float32, log10 backoff float32 or None for the highest order), and statistics."""
    order = len(raw)
    f32 = np.float32
    adj = []
    for n, (rows, c) in enumerate(raw, 1):
        if n == order:
            a = c.copy()
        else:
            ext = raw[n][0][:, 1:]
            us, cs = unique_rows(ext, return_counts=True) if ext.shape[0] else (ext, np.zeros(0, np.int64))
            a = np.zeros(rows.shape[0], np.int64)
            a[_index_of(us, rows)] = cs
            starts_bos = rows[:, 0] == BOS
            a[starts_bos] = c[starts_bos]
        adj.append(a)
    disc, coc = zip(*(discounts(a, n) for n, a in enumerate(adj, 1)))
    v = raw[0][0].shape[0]
    uniform = f32(1.0 / float(f32(v - 1)))  # |V| includes <unk>, excludes <s>
    probs: list[np.ndarray] = []
    backoffs: list[Any] = []
    for n, ((rows, _), a, d) in enumerate(zip(raw, adj, disc), 1):
        if n == 1:
            cid = np.zeros(rows.shape[0], np.int64)
        else:
            uc, cid = unique_rows(rows[:, :-1], return_inverse=True)
            cid = cid.reshape(-1)
        m = int(cid.max()) + 1 if cid.shape[0] else 0
        denom = np.bincount(cid, weights=a, minlength=m).astype(f32)
        gamma = np.zeros(m, f32)
        capped = np.minimum(a, 3)
        for k in (1, 2, 3):
            nk = np.bincount(cid, weights=(capped == k), minlength=m).astype(f32)
            gamma = gamma + d[k] * nk
        gamma = gamma / denom
        u = (a.astype(f32) - d[capped]) / denom[cid]
        if n == 1:
            u[UNK] = 0
            p = u + gamma[0] * uniform
            p[BOS] = 1
        else:
            p = u + gamma[cid] * probs[-1][_index_of(rows[:, 1:], raw[n - 2][0])]
            bo = np.zeros(raw[n - 2][0].shape[0], f32)
            bo[_index_of(uc, raw[n - 2][0])] = np.log10(gamma)
            last = raw[n - 2][0][:, -1]
            bo[(last == EOS) | (last == UNK)] = 0
            backoffs.append(bo)
        probs.append(p.astype(f32))
    backoffs.append(None)
    out = [(rows, np.minimum(f32(0), np.log10(p)).astype(f32), bo) for (rows, _), p, bo in zip(raw, probs, backoffs)]
    stats = {"ngrams": [int(r.shape[0]) for r, _ in raw], "count_of_counts": [list(t) for t in coc],
             "discounts": [[float(x) for x in dd[1:]] for dd in disc]}
    return out, stats


# ----------------------------------------------------------------------------------------------------
# Training entry point
# ----------------------------------------------------------------------------------------------------

def _txt_blocks(path: str):
    """(data, offsets) blocks of a plain-text file (one document per line), cut after a newline."""
    with open(path, "rb") as f:
        carry = b""
        pos = 0
        while True:
            chunk = f.read(_TXT_BLOCK)
            buf = carry + chunk
            cut = len(buf) if not chunk else buf.rfind(b"\n") + 1
            block, carry = buf[:cut], buf[cut:]
            if block:
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(f"{path}: invalid UTF-8 at byte {pos + exc.start}; fix or re-encode the "
                                    "file (a .txt reference corpus must be UTF-8)") from None
                # the whole block is one pseudo-document: its lines (the documents) are its sentences
                yield np.frombuffer(block, np.uint8), np.array([0, len(block)], np.int64)
                pos += len(block)
            if not chunk:
                return


def _screen_txt_block(data: np.ndarray, scr: Any, path: str, line0: int) -> np.ndarray:
    """The block without the lines (documents) that ``scr`` drops; ``line0``: lines of the file before it."""
    import pyarrow as pa

    lines = bytes(data).decode("utf-8").split("\n")
    keep = scr.check(pa.array(lines, pa.large_string()), lambda i: f"{path}:{line0 + i + 1}")
    if keep.all():
        return data
    kept = "\n".join(line for line, k in zip(lines, keep) if k)
    return np.frombuffer(kept.encode("utf-8"), np.uint8)


def train_lm(inputs: str | os.PathLike | Sequence[str | os.PathLike], out_path: str | os.PathLike,
             cfg: LMTrainConfig | None = None, device: str = "cpu", overwrite: bool = False) -> dict[str, Any]:
    """Train an interpolated modified Kneser-Ney model and write it as an ARPA file, atomically.

    Args:
        inputs: the reference corpus: jsonl / parquet (read by ``gpu_dedup.io``), or ``.txt`` with one document
            per line.
        out_path: the ARPA file to write.
        cfg: the ``LMTrainConfig`` (order, normalization, fields; None: its defaults).
        device: "cpu", "cuda" or "auto".
        overwrite: replace an existing ``out_path``.

    Returns:
        The statistics: n-gram counts per order, discounts, timings.

    Raises:
        OutputExistsError: ``out_path`` exists and ``overwrite`` is False.
        ConfigError: ``out_path``'s directory is at or under an input (the tool never writes into its inputs).
        MissingFileError: an input file does not exist.
        DataError: invalid UTF-8 in a .txt input, or a corpus with no sentence.
        DiscountError: the corpus is too small for modified Kneser-Ney discounts.
        ContaminatedTrainingError: a document shares an n-gram with a ``cfg.screen`` benchmark and
            ``cfg.screen_drop`` is off (the message names it); a benchmark file that cannot be read is a
            MissingFileError / DataError naming ``screen`` and the file.
    """
    cfg = cfg or LMTrainConfig()
    device = resolve_device(device)
    out_path = os.fspath(out_path)
    paths = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    check_outside_inputs({"out_path": os.path.dirname(os.path.abspath(out_path))}, input_roots(paths))
    if os.path.isdir(out_path):  # not replaceable by a file, with overwrite or without
        raise ConfigError(f"out_path {out_path!r} is a directory: name the model file to write, e.g. "
                          f"{os.path.join(out_path, 'model.arpa')!r}")
    if os.path.exists(out_path) and not overwrite:
        raise OutputExistsError(f"{out_path} exists; pass overwrite=True (or choose another path) to replace it")
    if not paths:
        raise ConfigError("no reference corpus given: pass the files to train on")
    t0, c0 = time.perf_counter(), compile_clock()
    note_compiling(device, ("lm-train",))  # a first run compiles the counting kernels: said before they run
    counter = NgramCounter(cfg.order, cfg.normalization, device)
    scr = None
    if cfg.screen:
        from ..screen.training import TrainingScreen

        scr = TrainingScreen(cfg.screen, drop=cfg.screen_drop, option="screen", device=device)
    txt = [os.fspath(p) for p in paths if os.fspath(p).lower().endswith(".txt")]
    other = [p for p in paths if not os.fspath(p).lower().endswith(".txt")]
    for p in txt:
        if not os.path.isfile(p):
            raise MissingFileError(f"reference corpus file {p!r} does not exist")
        lines = 0
        for data, offsets in _txt_blocks(p):
            if scr is not None:
                n = int(np.count_nonzero(data == 10))
                data = _screen_txt_block(data, scr, p, lines)
                offsets = np.array([0, len(data)], np.int64)
                lines += n
            counter.add(data, offsets)
    report = io.ReadReport()
    if other:
        files = io.source_files(other)
        for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                     batch_bytes=cfg.batch_bytes, on_error=cfg.on_error, report=report):
            text = batch.text
            if scr is not None:
                name, row0 = files[batch.file_index].relpath, batch.row_start
                keep = scr.check(text, lambda i: f"{name} row {row0 + i}")
                if not keep.all():
                    import pyarrow as pa

                    text = text.filter(pa.array(keep))
            counter.add(*arrow_text_buffers(text))
    if scr is not None:
        scr.verdict("reference documents")
    if counter.dropped:
        logger.warning("dropped %d literal <s> / </s> / <unk> / <UNK> tokens from the reference text (as lmplz does; "
                       "KenLM reads <UNK> as <unk>)",
                       counter.dropped)
    if not counter.sentences:
        raise DataError(f"the reference corpus {[os.fspath(p) for p in paths]} has no sentence (no line with a "
                        "word after normalization); check the inputs and text_field")
    t1, compiled = time.perf_counter(), compile_clock() - c0  # a first run compiles the counting kernels
    try:
        grams, stats = estimate(counter.counts())
    except DiscountError as exc:
        dup, seen = counter.repeated_sentences()
        if seen and dup >= 0.1 * seen:  # repeated lines flatten the count-of-counts: the likely cause
            raise DiscountError(f"{exc}. {dup:,} of {seen:,} sentences (lines) repeat an earlier one "
                                f"({100 * dup / seen:.0f}%): duplicates are the likely cause; deduplicate the "
                                "text first (gpu-dedup run, or sort -u for line-level copies)") from None
        raise
    contract = lm_contract(cfg.normalization)
    stats = {"order": cfg.order, "sentences": counter.sentences, "words": counter.words,
             "vocab_size": len(counter.vocab), "dropped_special_tokens": counter.dropped, **stats,
             "estimator": "interpolated modified Kneser-Ney (lmplz defaults, no pruning)",
             "config": {**dataclasses.asdict(cfg), "normalization": dataclasses.asdict(cfg.normalization)}}
    with io.atomic_path(out_path) as tmp:
        write_arpa(tmp, counter.vocab, grams, contract, stats={k: stats[k] for k in ("order", "sentences", "words")})
    stats.update(path=out_path, contract=contract, read=report.to_dict(),
                 screen=scr.record() if scr is not None else None, seconds_count=round(t1 - t0 - compiled, 3),
                 seconds_compile=round(compiled, 3), seconds_total=round(time.perf_counter() - t0, 3))
    logger.info("trained a %d-gram model on %d sentences (%d words, vocabulary %d): %s", cfg.order,
                counter.sentences, counter.words, len(counter.vocab), out_path)
    return stats
