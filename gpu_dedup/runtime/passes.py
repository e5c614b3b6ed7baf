"""How the passes over the input run on the local engine: read-ahead in a background thread, progress bars,
and the normalized text kept between pass 1 and verification (the Ray engine is gpu_dedup/distributed/).

Nothing here knows what a stage computes: the lexical passes (``lexical/signatures.py``, ``lexical/verify.py``)
and the index writer use these to move data.
"""
from __future__ import annotations

import logging
from typing import Any, Iterable, Iterator

from ..config import RunConfig

logger = logging.getLogger(__name__)


def prefetched(it: Iterable, depth: int = 2, prepare=None) -> Iterator:
    """Yield from ``it`` (each item passed through ``prepare`` when given) while a background thread
    reads and prepares ahead ``depth`` items, so reading and parsing batch i+1 (pyarrow releases the
    GIL) and its copy to the device overlap the kernels on batch i (which release it too). The thread starts
    at once, before the first item is asked for: the caller can do other work while the first item is read.
    depth 0: no thread (the CUDA simulator cannot run kernels from two threads at once)."""
    if prepare is not None:
        it = map(prepare, it)
    if depth == 0:
        return iter(it)
    return _Ahead(it, depth)


class _Ahead:
    """``prefetched``'s iterator: a reading thread started at construction, stopped by ``close`` (at the end,
    on an error, or when the iterator is dropped unfinished)."""

    _DONE = object()

    def __init__(self, it: Iterable, depth: int) -> None:
        import queue
        import threading

        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._work, args=(it,), name="gpu_dedup-reader", daemon=True)
        self.thread.start()

    def _work(self, it: Iterable) -> None:
        try:
            for item in it:
                if self.stop.is_set():
                    return
                self.q.put(item)
        except BaseException as exc:  # re-raised in the consumer, with its traceback
            self.q.put(exc)
            return
        self.q.put(self._DONE)

    def __iter__(self) -> "_Ahead":
        return self

    def __next__(self) -> Any:
        if self.stop.is_set():
            raise StopIteration
        item = self.q.get()
        if item is self._DONE:
            self.close()
            raise StopIteration
        if isinstance(item, BaseException):
            self.close()
            raise item
        return item

    def close(self) -> None:
        import queue

        self.stop.set()
        while self.thread.is_alive():  # unblock a producer waiting on a full queue
            try:
                self.q.get_nowait()
            except queue.Empty:
                self.thread.join(timeout=0.05)

    def __del__(self) -> None:
        self.close()


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def progress(cfg: RunConfig, desc: str, total: int | None = None):
    """A tqdm bar on stderr, or nothing at all with progress off (tqdm is not even imported then: in
    notebooks tqdm.auto warns about widgets on import). While the bar is open, log lines that go to the
    console (the CLI's handler) are written above it (``tqdm.write``), each on a line of its own, instead of
    being appended to the bar's line."""
    if not cfg.progress:
        return _NoProgress()
    return _Bar(desc, total)


class _Bar:
    """A tqdm bar (``update``; a context manager that closes it) that, while entered, sends the console log
    handlers' lines through ``tqdm.write``, above the bar."""

    def __init__(self, desc: str, total: int | None) -> None:
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        self.bar = tqdm(desc=desc, total=total, unit="doc", unit_scale=True, leave=False)
        self._redirect = logging_redirect_tqdm(tqdm_class=tqdm)

    def __enter__(self) -> "_Bar":
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.bar.close()
        finally:
            self._redirect.__exit__(*exc)

    def update(self, n: int) -> None:
        self.bar.update(n)


class TextCache:
    """Pass 1's normalized batches, kept (host memory, or device memory on a GPU) within ``budget`` bytes so
    that verification hashes the candidates' shingle sets without reading and normalizing the input again.
    It serves pass 2 only when it holds every batch of the run in row order; a batch past the budget, a
    reused work-dir piece drops what it holds (the input is re-read then)."""

    def __init__(self, budget: int):
        self.budget = budget
        self.entries: list[tuple[int, Any]] = []  # (first row of the batch in the run, normalize.Normalized)
        self.rows = 0
        self.bytes = 0
        self.reason = None if budget > 0 else "cache_bytes=0"

    @property
    def complete(self) -> bool:
        return self.reason is None

    def add(self, row: int, norm) -> None:
        if not self.complete:
            return
        size = sum(int(a.nbytes) for a in (norm.data, norm.offsets, norm.words, norm.codepoints))
        if row != self.rows:  # pragma: no cover - pass 1 visits rows in order
            self.drop(f"batches arrived out of order (row {row}, expected {self.rows})")
        elif self.bytes + size > self.budget:
            self.drop(f"the normalized text exceeds cache_bytes={self.budget:,}")
        else:
            self.entries.append((row, norm))
            self.rows += len(norm)
            self.bytes += size

    def drop(self, reason: str) -> None:
        if self.complete:
            self.entries, self.bytes, self.reason = [], 0, reason

    def stats(self, used: bool) -> dict[str, Any]:
        return {"budget_bytes": self.budget, "kept_bytes": self.bytes, "rows": self.rows,
                "used_for_verification": used, **({"not_used_because": self.reason} if self.reason else {})}


def known_text_bytes(files, text_field: str) -> int:
    """A lower bound of the normalized text's size known before reading: the text column's bytes in in-memory
    tables and Parquet metadata (uncompressed), at 90% (normalization trims and collapses whitespace); JSON
    Lines count 0. Unreadable metadata counts 0 (the reader reports the file)."""
    from ..io import open_parquet

    total = 0
    for f in files:
        try:
            if f.fmt == "table" and f.table is not None and text_field in f.table.column_names:
                total += f.table[text_field].nbytes
            elif f.fmt == "parquet":
                meta = open_parquet(f).metadata
                cols = [j for j in range(meta.num_columns) if meta.schema.column(j).path == text_field]
                total += sum(meta.row_group(g).column(j).total_uncompressed_size
                             for g in range(meta.num_row_groups) for j in cols)
        except Exception:  # noqa: BLE001 - an estimate only; reading reports bad files with their names
            continue
    return int(total * 0.9)

