"""n-gram language models: the LM contract (tokenization + normalization), ARPA files (arpa.py), and perplexity
scoring with our kernels (``kernels/lm*.py``, through ``ops/lm.py``) or, for a KenLM binary file, the ``kenlm`` package.

Tokenization (one definition, used to train and to score, recorded in the model):
    a document's sentences are its non-empty lines: the text is split on "\\n" first, each line is then
    normalized on its own (``LMNormalization``: "none", or our normalizer ``text/normalize`` with its
    punctuation / digit-folding options; CCNet folds digits to 0), and split into words on ASCII whitespace.
    A line without words is not a sentence. Each sentence is scored as ``<s> w1 ... wk </s>``, exactly
    ``kenlm.Model.score(line, bos=True, eos=True)``.
Per-document perplexity (our definition): ``10 ** (-sum of the sentences' log10 probabilities / tokens)`` with
    tokens = words + one ``</s>`` per sentence (``<s>`` is not predicted, as in kenlm's ``perplexity``).
    CCNet scores paragraphs (lines) separately (Wenzek et al. 2020, CCNet, section 3.3; datatrove's
    utils/perplexity.py sums a document's lines the way we do). A document without a sentence gets NaN and
    the reason ``EMPTY_REASON``.
The contract is written into the ARPA file as a leading comment line ``# gpu-dedup-lm: {json}`` (KenLM's ARPA
reader skips leading lines that start with "#"); ``load_lm`` refuses a model whose contract differs from the
caller's ``normalization``, and needs an explicit ``normalization`` for an ARPA without it (e.g. from lmplz).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np
import pyarrow as pa

from ..config import NormalizeConfig, check_literal
from ..contract import check_contract
from ..errors import ConfigError, DataError, DependencyError, MissingFileError, RunError, UsageError
from ..io.text import arrow_text_buffers
from ..ops import lm as lm_ops
from ..runtime.device import array_module, resolve_device, to_device, to_host
from ..runtime.heartbeat import phase
from ..text.normalize import normalize_arrays
from ..text.unicode_tables import POLICY_NAME, UNICODE_VERSION
from .arpa import HEADER_PREFIX, KENLM_BINARY_MAGIC, ARPAError, ngram_line, read_arpa

logger = logging.getLogger(__name__)

LMNormMode = Literal["none", "nfkc-lower"]
LM_CONTRACT_VERSION = 1
SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2 (KenLM's kUNK, kBOS, kEOS)
EMPTY_REASON = "no sentence: no line with a word after normalization"
NULL_REASON = "null text"
MISSING_UNK_LOG10 = -100.0  # KenLM's default for an ARPA without <unk> (lm/config.cc)
KENLM_EXTRA = 'pip install "gpu-dedup[kenlm]"'


@dataclass(frozen=True)
class LMNormalization:
    """How text becomes words for a language model. mode="none": the raw line, split on ASCII whitespace;
    mode="nfkc-lower": our normalizer (per-codepoint NFKC + lowercase, whitespace collapsed; policy
    ``nfkc-cp-lower-v1``) with its options: punctuation/symbols -> space, decimal digits -> "0" (CCNet)."""

    mode: LMNormMode = "nfkc-lower"
    remove_punctuation: bool = False
    fold_digits: bool = False

    def __post_init__(self) -> None:
        check_literal("LMNormalization.mode", self.mode, LMNormMode)
        for name in ("remove_punctuation", "fold_digits"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"LMNormalization.{name} must be a bool, got {value!r}")
            if value and self.mode == "none":
                raise ConfigError(f"LMNormalization.{name}=True needs mode='nfkc-lower' (mode='none' leaves the "
                                  "text as it is); set mode='nfkc-lower' or drop the option")

    def normalize_config(self) -> NormalizeConfig | None:
        if self.mode == "none":
            return None
        return NormalizeConfig(remove_punctuation=self.remove_punctuation, fold_digits=self.fold_digits)

    @classmethod
    def parse(cls, text: str) -> "LMNormalization":
        """``none`` | ``nfkc-lower`` followed by any of ``,remove-punctuation`` ``,fold-digits`` (the CLI's
        --normalization / --lm-normalization)."""
        mode, *opts = [x.strip() for x in str(text).split(",")]
        known = {"remove-punctuation": "remove_punctuation", "fold-digits": "fold_digits"}
        bad = [o for o in opts if o not in known]
        # in the words of the text given (a flag's value), not of the dataclass: `normalization` is the flag's
        # API name (cli/flags.py writes it as --normalization / --lm-normalization)
        if bad:
            raise ConfigError(f"`normalization` {text!r}: unknown option {bad[0]!r} (options: "
                              f"{', '.join(known)}; e.g. nfkc-lower,fold-digits)")
        if mode not in ("none", "nfkc-lower"):
            raise ConfigError(f"`normalization` {text!r}: {mode!r} is not a mode: none (the text as it is) or "
                              "nfkc-lower, then any options (e.g. nfkc-lower,fold-digits)")
        if mode == "none" and opts:
            raise ConfigError(f"`normalization` {text!r}: {opts[0]} needs nfkc-lower (none leaves the text as it "
                              f"is): write nfkc-lower,{','.join(opts)} or none")
        return cls(mode=mode, **{known[o]: True for o in opts})

    def spec(self) -> str:
        """The text ``parse`` reads back into this normalization, e.g. ``nfkc-lower,fold-digits``."""
        return ",".join([self.mode] + [o for o, on in (("remove-punctuation", self.remove_punctuation),
                                                       ("fold-digits", self.fold_digits)) if on])

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LMNormalization":
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})


def lm_contract(norm: LMNormalization) -> dict[str, Any]:
    """What must match between the text a model was trained on and the text it scores."""
    n: dict[str, Any] = dataclasses.asdict(norm)
    if norm.mode != "none":
        n.update(policy=POLICY_NAME, unicode_version=UNICODE_VERSION)
    return {"lm_contract_version": LM_CONTRACT_VERSION,
            "sentences": "non-empty lines (split on \\n before normalization), each <s> ... </s>",
            "words": "split on ASCII whitespace after normalization",
            "normalization": n}


# ----------------------------------------------------------------------------------------------------
# Text -> lines (shared by training and scoring)
# ----------------------------------------------------------------------------------------------------

def split_lines(data, offsets, xp):
    """Lines of documents data[offsets[d]:offsets[d+1]]: (line_off int64 (L+1,), doc_lines int64 (n+1,));
    line i = data[line_off[i]:line_off[i+1]] (its "\\n" included), document d's lines are doc_lines[d] ..
    doc_lines[d+1]-1. A document that ends with "\\n" gets a last empty line (no sentence)."""
    n = offsets.shape[0] - 1
    lo, hi = int(offsets[0]), int(offsets[-1])
    nl = xp.flatnonzero(data[lo:hi] == 10).astype(xp.int64) + (lo + 1)
    pos = xp.concatenate([offsets[:-1].astype(xp.int64), nl])
    tag = xp.concatenate([xp.ones(n, xp.int8), xp.zeros(nl.shape[0], xp.int8)])
    order = xp.lexsort(xp.stack([tag, pos]))  # by position; a line after "\n" before a document start there
    line_off = xp.concatenate([pos[order], xp.asarray([hi], xp.int64)])
    doc_lines = xp.concatenate([xp.flatnonzero(tag[order] == 1).astype(xp.int64),
                                xp.asarray([pos.shape[0]], xp.int64)])
    return line_off, doc_lines


def prepare_text(data, offsets, norm: LMNormalization, device: str):
    """(data', line_off, doc_lines) ready for the kernels: lines split, then normalized per line (module doc)."""
    xp = array_module(device)
    line_off, doc_lines = split_lines(data, offsets, xp)
    cfg = norm.normalize_config()
    if cfg is None:
        return data, line_off, doc_lines
    normed = normalize_arrays(data, line_off, cfg, device)
    return normed.data, normed.offsets, doc_lines


def text_arrays(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray]:
    """(data uint8, offsets int64 (n+1,), null bool (n,)) of a list of str or an Arrow string array; nulls
    become empty documents (flagged)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    arr = texts if isinstance(texts, pa.Array) else pa.array(list(texts), pa.large_string())
    null = arr.is_null().to_numpy(zero_copy_only=False).astype(bool) if arr.null_count else np.zeros(len(arr), bool)
    if arr.null_count:
        arr = arr.fill_null("")
    data, offsets = arrow_text_buffers(arr)
    return data, offsets, null


# ----------------------------------------------------------------------------------------------------
# Models and scoring
# ----------------------------------------------------------------------------------------------------

def _pow2(n: int) -> int:
    """Power-of-two table capacity for n keys at load <= 1/2."""
    return 1 << max(1, (2 * max(n, 1) - 1).bit_length())


def _word_keys(vocab: Sequence[str], device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Host uint64 (V,) x2: the 128-bit keys of the vocabulary's words, hashed on ``device``."""
    enc = [w.encode("utf-8") for w in vocab]
    lens = np.fromiter((len(b) for b in enc), np.int64, len(enc))
    ends = np.cumsum(lens)
    data = np.frombuffer(b"".join(enc), np.uint8) if enc else np.zeros(0, np.uint8)
    h1, h2 = lm_ops.span_hashes(device, to_device(data, device), to_device(ends - lens, device),
                                to_device(ends, device))
    return to_host(h1), to_host(h2)


class NgramLM:
    """A loaded n-gram model: ``score`` (our kernels over an ARPA's tables, or kenlm for a binary file) and
    ``describe`` (for run.json). Build it with ``load_lm``."""

    def __init__(self, path: str, normalization: LMNormalization, contract: dict[str, Any] | None,
                 vocab: list[str] | None = None, grams: list | None = None, kenlm_model: Any = None,
                 device: str = "cpu"):
        self.path = path
        self.normalization = normalization
        self.contract = contract
        self._kenlm = kenlm_model
        self._device_tables: dict[str, tuple] = {}
        if kenlm_model is not None:
            self.format = "kenlm-binary"
            self.order = int(kenlm_model.order)
            self.counts: list[int] = []
            self.vocab_size = None
            return
        self.format = "arpa"
        assert vocab is not None and grams is not None
        self.order = len(grams)
        if self.order > lm_ops.MAX_SCORED_ORDER:
            raise ARPAError(f"{path}: a {self.order}-gram model; the scorer reads models of order up to "
                            f"{lm_ops.MAX_SCORED_ORDER} (KenLM's default build: 6): prune it to a lower order")
        self._build(vocab, grams, device)

    def _build(self, vocab: list[str], grams: list, device: str = "cpu") -> None:
        ids = {w: i for i, w in enumerate(vocab)}
        for special in ("<s>", "</s>"):
            if special not in ids:
                raise ARPAError(f"{self.path}: the model has no {special} unigram (KenLM refuses it too); a "
                                "sentence model needs <s> and </s>")
        if "<unk>" not in ids:
            logger.warning("%s has no <unk>; unknown words get log10 p = %s like KenLM", self.path,
                           MISSING_UNK_LOG10)
            ids["<unk>"] = len(vocab)
            vocab = [*vocab, "<unk>"]
            rows, prob, bo = grams[0]
            grams = [(np.vstack([rows, [[ids["<unk>"]]]]), np.append(prob, np.float32(MISSING_UNK_LOG10)),
                      np.append(bo, np.float32(0)))] + list(grams[1:])
        self.unk, self.bos, self.eos = ids["<unk>"], ids["<s>"], ids["</s>"]
        self.vocab_size = len(vocab)
        self.counts = [int(g[0].shape[0]) for g in grams]
        phase(logger, "language model %s: building the lookup tables of %s n-grams", self.path,
              f"{sum(self.counts):,}")
        h1, h2 = _word_keys(vocab, device)
        (vk1, vk2, vids), clash = lm_ops.vocab_table_host(h1, h2, np.arange(len(vocab), dtype=np.int64),
                                                          _pow2(len(vocab)))
        if clash >= 0:
            raise ARPAError(f"{self.path}: two vocabulary words share a 128-bit key (word {vocab[clash]!r}); "
                            "this is astronomically unlikely: report it")
        keys = np.concatenate([to_host(lm_ops.ngram_keys(device, to_device(np.ascontiguousarray(rows, np.int64),
                                                                            device))) for rows, _, _ in grams])
        prob = np.concatenate([p for _, p, _ in grams]).astype(np.float32)
        bo = np.concatenate([b for _, _, b in grams]).astype(np.float32)
        cap = _pow2(keys.shape[0])
        (tk, tp, tb), clash = lm_ops.ngram_table_host(keys, prob, bo, cap)
        if clash >= 0:
            n, i = _locate(clash, self.counts)
            rows = grams[n - 1][0]
            words = " ".join(vocab[j] for j in rows[i])
            first = np.flatnonzero((rows[:i] == rows[i]).all(axis=1))
            at = ngram_line(self.path, n, i)
            raise ARPAError(f"{self.path}:{at}: the {n}-gram {words!r} is listed twice" + (
                f" (first at line {ngram_line(self.path, n, int(first[0]))}); remove the duplicate" if first.size
                else " (or two n-grams share a 64-bit key)"))
        # on the CPU the n-gram table is one array of 16-byte slots (key, prob, backoff), read through three
        # strided views: a lookup touches one cache line instead of three (measured 9% faster scoring)
        packed = np.zeros((cap, 2), np.uint64)
        packed[:, 0] = tk
        pf = packed.view(np.float32).reshape(cap, 4)  # columns 2, 3: the bytes of the second uint64
        pf[:, 2], pf[:, 3] = tp, tb
        self._tables = (vk1, vk2, vids, packed[:, 0], pf[:, 2], pf[:, 3])

    def tables(self, device: str) -> tuple:
        if device == "cpu":
            return self._tables
        if device not in self._device_tables:
            self._device_tables[device] = tuple(to_device(np.ascontiguousarray(a), device) for a in self._tables)
        return self._device_tables[device]

    def describe(self) -> dict[str, Any]:
        """What run.json records about the model."""
        st = os.stat(self.path)
        return {"path": os.path.abspath(self.path), "format": self.format, "order": self.order,
                "ngrams": self.counts, "vocab_size": self.vocab_size, "bytes": st.st_size,
                "mtime_ns": st.st_mtime_ns, "contract": self.contract or lm_contract(self.normalization),
                "contract_source": "file header" if self.contract else "caller (normalization=)",
                "perplexity": "10 ** (-sum log10 p / (words + one </s> per sentence)); sentences = non-empty "
                              "lines, each <s> ... </s>"}

    def score(self, texts: Sequence[str | None] | pa.Array | pa.ChunkedArray, device: str = "cpu") -> dict:
        """Score documents. Returns arrays of length n: ``logprob`` float64 (sum of the sentences' float32
        log10 probabilities), ``tokens`` int64 (words + sentences), ``sentences``, ``oov`` int64, ``perplexity``
        float64 (NaN without a sentence) and ``reason`` (object: "" or why the perplexity is NaN)."""
        device = resolve_device(device)
        data, offsets, null = text_arrays(texts)
        n = offsets.shape[0] - 1
        if self._kenlm is not None:
            lp, tok, sent, oov = self._score_kenlm(data, offsets)
        else:
            tdata, line_off, doc_lines = prepare_text(to_device(data, device), to_device(offsets, device),
                                                      self.normalization, device)
            outs = lm_ops.score_docs(device, tdata, line_off, doc_lines, self.tables(device), self.order, self.bos,
                                     self.eos, self.unk)
            lp, tok, sent, oov = (to_host(a) for a in outs)
        with np.errstate(divide="ignore", invalid="ignore"):
            ppl = np.where(tok > 0, 10.0 ** (-lp / np.maximum(tok, 1)), np.nan)
        reason = np.full(n, "", dtype=object)
        reason[tok == 0] = EMPTY_REASON
        reason[null] = NULL_REASON
        return {"logprob": lp, "tokens": tok, "sentences": sent, "oov": oov, "perplexity": ppl, "reason": reason}

    def _score_kenlm(self, data, offsets):
        """The kenlm package scores each sentence of our tokenization (a binary model: no tables of ours)."""
        tdata, line_off, doc_lines = prepare_text(data, offsets, self.normalization, "cpu")
        raw = bytes(tdata)
        n = offsets.shape[0] - 1
        lp, tok, sent, oov = np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        m = self._kenlm
        for d in range(n):
            for li in range(int(doc_lines[d]), int(doc_lines[d + 1])):
                words = raw[int(line_off[li]):int(line_off[li + 1])].split()
                if words:
                    line = b" ".join(words).decode("utf-8", "surrogateescape")
                    lp[d] += m.score(line, bos=True, eos=True)
                    tok[d] += len(words) + 1
                    sent[d] += 1
                    oov[d] += sum(1 for w in words if w.decode("utf-8", "surrogateescape") not in m)
        return lp, tok, sent, oov


def _locate(i: int, counts: list[int]) -> tuple[int, int]:
    for n, c in enumerate(counts, 1):
        if i < c:
            return n, i
        i -= c
    raise RunError(f"n-gram index past the model's n-gram counts {counts}; this is a bug, please report it")


def load_lm(path: str | os.PathLike, normalization: LMNormalization | None = None,
            device: str = "cpu") -> NgramLM:
    """Load an n-gram language model.

    Args:
        path: an ARPA file (ours, or any other one), or a KenLM binary file (scored by the ``kenlm`` package).
        normalization: the text normalization the model was trained with. Required for a model we did not
            train, or a KenLM binary; for ours it must match the one recorded in the file.
        device: where the word and n-gram keys of an ARPA file's tables are hashed ("cpu" or "cuda": the same
            keys; a large model loads faster on a GPU).

    Returns:
        The ``NgramLM``.

    Raises:
        MissingFileError: ``path`` does not exist.
        ARPAError: a malformed ARPA file (the message names the line).
        DataError: a foreign model without ``normalization``.
        ConfigError: ``normalization`` differs from the model's (the message names the fields).
        DependencyError: a KenLM binary without the ``kenlm`` package.
        UsageError: ``normalization`` is not an ``LMNormalization``.
    """
    path = os.fspath(path)
    if normalization is not None and not isinstance(normalization, LMNormalization):
        raise UsageError(f"normalization must be an LMNormalization, got {type(normalization).__name__}")
    if not os.path.isfile(path):
        raise MissingFileError(f"language model {path!r} does not exist (train one with gpu-dedup train-lm)")
    with open(path, "rb") as f:
        head = f.read(len(KENLM_BINARY_MAGIC))
    if head == KENLM_BINARY_MAGIC:
        if normalization is None:
            raise DataError(f"{path} is a KenLM binary file, which records no normalization: pass "
                            "normalization=LMNormalization(...) matching how its training text was prepared")
        try:
            import kenlm
        except ImportError:
            raise DependencyError(f"{path} is a KenLM binary file; scoring it needs the kenlm package: "
                                  f"{KENLM_EXTRA} (or convert the model to ARPA)") from None
        return NgramLM(path, normalization, None, kenlm_model=kenlm.Model(path))
    phase(logger, "language model %s (%.0f MB): reading the ARPA file", path, os.path.getsize(path) / 1e6)
    contract, vocab, grams = read_arpa(path, max_order=lm_ops.MAX_SCORED_ORDER)
    if contract is None:
        if normalization is None:
            raise DataError(f"{path} has no '{HEADER_PREFIX.strip()}' header (not trained by gpu-dedup, e.g. "
                            "KenLM's lmplz): pass normalization=LMNormalization(...) describing how its training "
                            "text was normalized (mode='none' for text used as is)")
        return NgramLM(path, normalization, None, vocab, grams, device=device)
    try:  # (read_arpa checked that the contract and its normalization are JSON objects)
        own = LMNormalization.from_dict(contract.get("normalization", {}))
    except (TypeError, ValueError) as exc:
        raise ARPAError(f"{path}: the header's normalization is not one this version understands ({exc})") from None
    try:
        check_contract(lm_contract(normalization or own), contract, f"language model {path}")
    except ValueError as exc:
        # the model's own normalization in the form lm_normalization (--lm-normalization) reads (not a repr)
        raise ConfigError(f"{exc}\nFor this model: leave lm_normalization out (its header gives "
                          f"{own.spec()!r}, which then applies), or retrain it on text normalized your way "
                          "(gpu-dedup train-lm).") from None
    return NgramLM(path, normalization or own, contract, vocab, grams, device=device)
