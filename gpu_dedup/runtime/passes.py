"""How the passes over the input run on the local engine: read-ahead in a background thread, progress bars (with
documents/s and an ETA: ``Expected`` estimates a pass's documents from the inputs), and the normalized text kept
between pass 1 and verification (the Ray engine is gpu_dedup/distributed/).

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


class Expected:
    """The documents a pass over ``files`` will read, for a progress bar's ETA: exact for in-memory tables and
    local Parquet files (their metadata; for up to FOOTERS files), else estimated from the files of the same
    format and compression already read in full (documents per stored byte, times the file's size). ``total``
    is None while a file's count can be neither read nor estimated (the bar shows documents/s, no ETA)."""

    FOOTERS = 1000  # Parquet footers read for the count; beyond that (or remote) the size estimates it

    def __init__(self, files) -> None:
        from ..io import file_size

        files = list(files)
        self.known: list[int | None] = []
        self.kind: list[Any] = []
        self.size: list[int] = []
        footers = len(files) <= self.FOOTERS
        for f in files:
            rows, size = None, 0
            try:
                if f.fmt == "table":
                    rows = f.table.num_rows if f.table is not None else 0
                elif f.fmt == "parquet" and footers and getattr(f, "fs", None) is None:
                    import pyarrow.parquet as pq

                    rows = pq.ParquetFile(f.path).metadata.num_rows
                else:
                    size = file_size(f)
            except Exception:  # noqa: BLE001 - an unreadable file is the pass's error to raise, not the bar's
                rows = None
            self.known.append(rows)
            self.kind.append((f.fmt, getattr(f, "compression", None)))
            self.size.append(size)
        self.read: dict[int, int] = {}  # JSON Lines files read in full: their documents

    def finished(self, i: int, rows: int) -> None:
        """File ``i`` was read in full: ``rows`` documents."""
        if self.known[i] is None:
            self.read[i] = rows

    def total(self) -> int | None:
        out = 0
        for i, k in enumerate(self.known):
            if k is not None:
                out += k
            elif i in self.read:
                out += self.read[i]
            else:
                same = [j for j in self.read if self.kind[j] == self.kind[i] and self.size[j] > 0]
                if not same:
                    return None
                per_byte = sum(self.read[j] for j in same) / sum(self.size[j] for j in same)
                out += int(round(per_byte * self.size[i]))
        return out


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int, file_index: int | None = None) -> None:
        return None

    def for_file(self, file_index: int) -> "_NoProgress":
        return self


class _FileBar:
    """A bar's ``update`` for the documents of one file (a pass that reads one file at a time)."""

    def __init__(self, bar: "_Bar", file_index: int) -> None:
        self.bar, self.file_index = bar, file_index

    def update(self, n: int) -> None:
        self.bar.update(n, self.file_index)


def progress(cfg: RunConfig, desc: str, total: int | None = None, files=None, unit: str = "doc"):
    """A tqdm bar on stderr (documents, documents/s, and an ETA when the total is known: ``total``, or from
    ``files``, ``Expected``), or nothing at all with progress off (tqdm is not even imported then: in
    notebooks tqdm.auto warns about widgets on import). While the bar is open, log lines that go to the
    console (the CLI's handler) are written above it (``tqdm.write``), each on a line of its own, instead of
    being appended to the bar's line."""
    if not cfg.progress:
        return _NoProgress()
    return _Bar(desc, total, Expected(files) if total is None and files is not None else None, unit)


class _Bar:
    """A tqdm bar (``update``; a context manager that closes it) that, while entered, sends the console log
    handlers' lines through ``tqdm.write``, above the bar. With ``expected`` its total follows the estimate,
    refined as each file is read in full (``update``'s ``file_index``: the file the documents came from)."""

    def __init__(self, desc: str, total: int | None, expected: Expected | None = None, unit: str = "doc") -> None:
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        self.expected = expected
        self.file: int | None = None
        self.file_rows = 0
        if expected is not None:
            total = expected.total()
        self.bar = tqdm(desc=desc, total=total, unit=unit, unit_scale=True, leave=False)
        self._redirect = logging_redirect_tqdm(tqdm_class=tqdm)

    def __enter__(self) -> "_Bar":
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.bar.close()
        finally:
            self._redirect.__exit__(*exc)

    def update(self, n: int, file_index: int | None = None) -> None:
        if self.expected is not None and file_index is not None and file_index != self.file:
            if self.file is not None:  # the file before it was read in full
                self.expected.finished(self.file, self.file_rows)
                total = self.expected.total()
                if total is not None and total != self.bar.total:
                    self.bar.total = max(total, self.bar.n + n)
                    self.bar.refresh()  # the new estimate, and with it the ETA, shows at once
            self.file, self.file_rows = file_index, 0
        self.file_rows += n
        if self.bar.total is not None and self.bar.n + n > self.bar.total:  # an estimate that fell short
            self.bar.total = self.bar.n + n
        self.bar.update(n)

    def for_file(self, file_index: int) -> _FileBar:
        """This bar, counting documents of file ``file_index``."""
        return _FileBar(self, file_index)


class TextCache:
    """Pass 1's normalized batches, kept (host memory, or device memory on a GPU) within ``budget`` bytes so
    that verification hashes the candidates' shingle sets without reading and normalizing the input again.
    It keeps the longest prefix of the run's batches (in row order) that fits: verification takes the
    candidates of rows < ``rows`` from it and re-reads only the files after them (``reason`` says why it does
    not hold the whole run: None when it does). A batch past the budget ends the prefix; a reused work-dir
    piece drops what it holds (the input is re-read then)."""

    def __init__(self, budget: int):
        self.budget = budget
        self.entries: list[tuple[int, Any]] = []  # (first row of the batch in the run, normalize.Normalized)
        self.rows = 0
        self.bytes = 0
        self.reason = None if budget > 0 else "cache_bytes=0"
        self.open = budget > 0  # whether add() still keeps batches

    @property
    def complete(self) -> bool:
        return self.reason is None

    def add(self, row: int, norm) -> None:
        if not self.open:
            return
        size = sum(int(a.nbytes) for a in (norm.data, norm.offsets, norm.words, norm.codepoints))
        if row != self.rows:  # pragma: no cover - pass 1 visits rows in order
            self.drop(f"batches arrived out of order (row {row}, expected {self.rows})")
        elif self.bytes + size > self.budget:
            self.stop(f"the normalized text exceeds cache_bytes={self.budget:,}")
        else:
            self.entries.append((row, norm))
            self.rows += len(norm)
            self.bytes += size

    def stop(self, reason: str) -> None:
        """Keep what is held (a prefix of the run), take no more batches; ``reason``: why (the first one)."""
        self.open = False
        if self.reason is None:
            self.reason = reason

    def drop(self, reason: str) -> None:
        self.stop(reason)
        self.entries, self.bytes, self.rows = [], 0, 0

    def stats(self, used: bool) -> dict[str, Any]:
        """run.json's stages.text_cache. ``reason`` is said as ``partial_because`` when verification used the
        prefix held (rows < ``rows`` from the cache, the rest re-read), else as ``not_used_because``."""
        why = {}
        if self.reason:
            why = {("partial_because" if used and self.rows else "not_used_because"): self.reason}
        return {"budget_bytes": self.budget, "kept_bytes": self.bytes, "rows": self.rows,
                "used_for_verification": used, **why}


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

