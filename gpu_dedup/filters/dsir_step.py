"""DSIR as a step of ``gpu-dedup filter`` (stage.py): the target's hashed-feature model fitted first (the
target screened against benchmarks on request), the raw corpus's counted during the scoring pass, then the
log importance weights and the Gumbel top-k selection in a second pass over the text."""
from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from .. import io
from ..config import is_int
from ..decisions import reason_array
from ..errors import DataError
from ..runtime.device import batch_bytes
from .config import FilterConfig

logger = logging.getLogger(__name__)


class DsirStep:
    """DSIR over the run: the target's hashed-feature model is fitted first, the raw corpus's during the
    scoring pass, the log importance weights in a second pass over the text."""

    def __init__(self, cfg: FilterConfig, device: str):
        from .dsir import DSIRConfig, fit_counts

        self.cfg = DSIRConfig(buckets=cfg.dsir_buckets, seed=cfg.seed, select=cfg.select)
        self.device = device
        self.raw_counts = np.zeros(self.cfg.buckets, np.float64)
        target = np.zeros(self.cfg.buckets, np.float64)
        tfiles = io.source_files(list(cfg.dsir_target))
        docs = 0
        scr = None
        if cfg.dsir_screen:  # the target is fitted to: benchmark text stays out of it (000 §5)
            from ..screen.training import TrainingScreen

            scr = TrainingScreen(cfg.dsir_screen, drop=cfg.dsir_screen_drop, option="dsir_screen", device=device)
        for batch in io.iter_batches(tfiles, id_field=None, text_field=cfg.text_field,
                                     batch_bytes=batch_bytes(cfg.batch_bytes, device), on_error=cfg.on_error):
            text = batch.text
            if scr is not None:
                text = text.filter(pa.array(scr.check(text, lambda i, b=batch: f"{tfiles[b.file_index].relpath} "
                                                                               f"row {b.row_start + i}")))
            target += fit_counts(text, self.cfg, device)
            docs += len(text)
        if scr is not None:
            scr.verdict("DSIR target documents")
        self.screen = scr.record() if scr is not None else None
        if not docs or not target.any():
            raise DataError(f"DSIR target {list(cfg.dsir_target)} holds no text (field {cfg.text_field!r}); "
                            f"give files of target-domain documents")
        self.target_counts = target
        self.target_docs = docs

    def add_raw(self, text: pa.Array) -> None:
        from .dsir import fit_counts

        self.raw_counts += fit_counts(text, self.cfg, self.device)

    def select(self, files, cfg: FilterConfig, cols, keep, reason):
        """Weigh every document (a second pass), keep ``select`` of those the other tests kept by Gumbel
        top-k, and count the selected documents' features (a third pass) for the KL report."""
        from .dsir import BagModel, dsir_report, fit_counts, gumbel_topk, log_weights, select_count

        target = BagModel.from_counts(self.target_counts, self.cfg.alpha)
        raw = BagModel.from_counts(self.raw_counts, self.cfg.alpha)
        weights = [np.asarray(log_weights(b.text, target, raw, self.cfg, self.device), np.float64)
                   for b in self._batches(files, cfg)]
        w = np.concatenate(weights) if weights else np.zeros(0)
        cols["dsir_weight"] = w
        pool = np.flatnonzero(keep)
        k = select_count(len(pool), cfg.select) if len(pool) else 0
        short = None
        if is_int(cfg.select) and cfg.select > len(pool):
            # asked for more than there are: all of them are kept, which is no selection at all; say so
            short = (f"asked to select {cfg.select:,} documents, but only {len(pool):,} passed every other test; "
                     f"all {len(pool):,} are kept (DSIR removes none)")
            logger.warning("DSIR: %s", short)
        # documents without features have weight -inf: gumbel_topk never selects them
        chosen = pool[np.asarray(gumbel_topk(w[pool], k, cfg.seed), np.int64)] if k else np.zeros(0, np.int64)
        selected = np.zeros(len(keep), bool)
        selected[chosen] = True
        vocab = reason.dictionary.to_pylist()
        codes = reason.indices.to_numpy(zero_copy_only=False).copy()
        codes[keep & ~selected] = vocab.index("dsir_weight")
        reason = reason_array(codes, vocab)
        selected_counts = np.zeros(self.cfg.buckets, np.float64)
        for b in self._batches(files, cfg):
            rows = np.flatnonzero(selected[b.row_start:b.row_start + len(b.text)])
            if len(rows):
                selected_counts += fit_counts(b.text.take(pa.array(rows)), self.cfg, self.device)
        stats = {"target": list(cfg.dsir_target), "target_documents": self.target_docs, "target_screen": self.screen,
                 "pool": int(len(pool)),
                 "requested": cfg.select, "selected": int(len(chosen)),
                 **({"warning": short} if short else {}),
                 "order": "among the documents every other test kept",
                 "report": dsir_report(self.target_counts, self.raw_counts, selected_counts, w, self.cfg,
                                       selected=chosen)}
        return keep & selected, reason, stats

    def _batches(self, files, cfg: FilterConfig):
        return io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                               batch_bytes=batch_bytes(cfg.batch_bytes, self.device), on_error=cfg.on_error)
