"""Screening the text a model is fitted on (``train-classifier``, ``train-lm``, the DSIR target) against
benchmarks, with ``screen``'s policy and code (000 §5: "keep tests out of fitting/tuning"; 000 §8: "Benchmark
screening ... must prevent leakage into learned preprocessing")."""
from __future__ import annotations

import logging
import os
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, DataError, MissingFileError
from .benchmarks import FIELDS_HINT
from .screening import ScreenConfig, build_index, read_benchmarks, screen_batch

logger = logging.getLogger(__name__)


FLAGGED_LISTED = 1000  # flagged training documents listed by name in a record (all are counted)
SCREEN_BATCH_DOCS = 65536


class ContaminatedTrainingError(DataError):
    """Training text shares an n-gram with a benchmark item and the run refuses it (the message lists some)."""


class TrainingScreen:
    """Benchmark screening of the text a model is fitted on (000 §5: "keep tests out of fitting/tuning").

    The same policy and code as ``screen`` (``read_benchmarks``, ``build_index``, ``screen_batch``: word
    13-grams by default, the common-phrase rules): a training document that shares ``cfg.min_matches``
    n-grams with a benchmark item is flagged. ``check`` takes the documents batch by batch and returns the
    ones to keep; ``verdict`` then refuses the run (``drop=False``: ``ContaminatedTrainingError`` naming
    documents and items) or, with ``drop=True``, lets it go on without them; ``record`` is what the card /
    run.json keeps (benchmarks, policy, counts, the flagged documents: where, benchmark, item, a sample
    n-gram).

    Args (constructor):
        benchmark_files: the benchmark files (as ``screen``'s).
        drop: drop flagged documents (True) or refuse the run (False).
        option: the argument that gave the files (``screen``, ``dsir_screen``), named in errors.
        cfg: the ``ScreenConfig`` (None: its defaults).
        device: "cpu" or "cuda".

    Raises (constructor):
        ConfigError: no benchmark file given.
        MissingFileError / DataError: a benchmark file that does not exist or cannot be read; the message
            names the option and the file.
    """

    def __init__(self, benchmark_files: Sequence[str | os.PathLike], drop: bool = False, option: str = "screen",
                 cfg: ScreenConfig | None = None, device: str = "cpu") -> None:
        self.paths = [os.fspath(p) for p in benchmark_files]
        self.cfg, self.drop, self.option, self.device = cfg or ScreenConfig(), bool(drop), option, device
        if not self.paths:
            raise ConfigError(f"`{option}` names no benchmark file; give at least one, or leave it out")
        try:
            items = read_benchmarks(self.paths, self.cfg)
        except (MissingFileError, DataError, OSError, UnicodeError, pa.ArrowException, ValueError) as e:
            raise self._unreadable(e) from None
        self.index = build_index(items, self.cfg, device)
        self.screened = 0
        self.flagged: list[dict[str, Any]] = []
        self.flagged_count = 0
        self.per_benchmark = {name: 0 for name in items.names}

    def _unreadable(self, first: Exception) -> Exception:
        """The error naming the first file that cannot be read on its own (all were read together first)."""
        for path in self.paths:
            try:
                read_benchmarks([path], self.cfg)
            except (MissingFileError, DataError, OSError, UnicodeError, pa.ArrowException, ValueError) as e:
                cls = MissingFileError if isinstance(e, FileNotFoundError) else DataError
                why = str(e).removesuffix(FIELDS_HINT)  # a flag of screen's, not of the command that screens
                return cls(f"`{self.option}`: benchmark file {path!r} cannot be read ({why}); give JSON Lines / JSON "
                           f"/ Parquet benchmark items (fields {', '.join(self.cfg.fields)}) or a plain-text file "
                           "(one item per line)")
        return DataError(f"`{self.option}`: the benchmark files {self.paths} cannot be read together ({first})")

    def check(self, text: pa.Array, where: Any) -> np.ndarray:
        """Screen one batch of documents.

        Args:
            text: the documents (pyarrow string or large_string array).
            where: ``where(i)`` names document ``i`` of the batch for the record (file and line or row).

        Returns:
            bool (len(text),): the documents to keep (all True unless one is flagged and ``drop`` is set;
            without ``drop`` a flagged document is kept here and ``verdict`` refuses the run).
        """
        keep = np.ones(len(text), bool)
        for lo in range(0, len(text), SCREEN_BATCH_DOCS):
            part = text.slice(lo, SCREEN_BATCH_DOCS)
            seen: set[int] = set()
            for m in screen_batch(part, self.index, self.cfg, self.device):
                d = lo + m["doc"]
                if d in seen:
                    continue  # one row per document: its first (lowest) matching item
                seen.add(d)
                keep[d] = False
                self.flagged_count += 1
                items = self.index.items
                bench = items.names[int(items.item_bench[m["item"]])]
                self.per_benchmark[bench] += 1
                if len(self.flagged) < FLAGGED_LISTED:
                    self.flagged.append({"where": where(d), "benchmark": bench,
                                         "item_id": items.item_ids[m["item"]], "matched_ngrams": m["matched_ngrams"],
                                         "sample": m["sample_ngrams"][0] if m["sample_ngrams"] else None})
        self.screened += len(text)
        return keep if self.drop else np.ones(len(text), bool)

    def verdict(self, what: str = "training documents") -> None:
        """Refuse the run when a document was flagged and ``drop`` is off.

        Args:
            what: what the documents are, for the message ("training documents", "DSIR target documents").

        Raises:
            ContaminatedTrainingError: a document shares an n-gram with a benchmark item and ``drop`` is off.
        """
        if self.drop or not self.flagged_count:
            if self.flagged_count:
                logger.warning("%s: dropped %d of %d %s that share a %d-gram with a benchmark item (listed in the "
                               "record)", self.option, self.flagged_count, self.screened, what, self.cfg.ngram)
            return
        shown = "; ".join(f"{f['where']} with {f['benchmark']} item {f['item_id']} ({f['sample']!r})"
                          for f in self.flagged[:3])
        raise ContaminatedTrainingError(
            f"`{self.option}`: {self.flagged_count} of {self.screened} {what} share a {self.cfg.ngram}-gram with a "
            f"benchmark item (e.g. {shown}); benchmark text must stay out of fitting and tuning: remove them, or "
            f"pass {self.option}_drop=True to drop them (the record lists them)")

    def record(self) -> dict[str, Any]:
        """What the card / run.json records about the screening.

        Returns:
            benchmarks, policy, action, per-benchmark counts, documents screened / flagged / dropped and the
            first ``FLAGGED_LISTED`` flagged documents.
        """
        return {"benchmarks": list(self.paths), "policy": self.index.policy,
                "action": "drop" if self.drop else "refuse",
                "counts": {name: {**{k: v for k, v in c.items()
                                     if k not in ("documents_flagged", "items_matched", "match_rows")},
                                  "training_documents_flagged": self.per_benchmark[name]}
                           for name, c in self.index.counts.items()},
                "documents_screened": self.screened, "documents_flagged": self.flagged_count,
                "documents_dropped": self.flagged_count if self.drop else 0,
                "flagged": self.flagged, "flagged_listed": len(self.flagged),
                "note": "n-gram overlap is a bounded contamination signal: short items, paraphrases and "
                        "translations can evade it"}


__all__ = ["TrainingScreen", "ContaminatedTrainingError"]
