"""Band keys of a run's documents, served one band column (or one key range of it) at a time.

Held either in memory as an (n, bands) matrix, or on disk in the work directory's pieces (one parquet
column per band), so that with a memory budget the bucket grouping never holds more than one key range
of one band. An index's keys can be put in front (rows 0..I-1). A scoped run (ClusterConfig.scope_field)
gives ``mix``, its scopes' hashes per row, XORed into every key of the run's rows as they are served, so
no bucket holds two scopes (but with probability 2^-64 per pair of keys, as any key collision).
"""
from __future__ import annotations

import numpy as np

from ..runtime.device import array_module, to_device, to_host


class BandKeys:
    def __init__(self, bands: int, *, matrix=None, work=None, file_rows: list[int] | None = None,
                 prefix: np.ndarray | None = None, device: str = "cpu", mix=None):
        self.bands = bands
        self.matrix = matrix
        self.work = work
        self.file_rows = file_rows or []
        self.prefix = prefix
        self.device = device
        self.mix = mix  # uint64 (n_main,) on the device, or None
        self._mix_h = to_host(mix) if mix is not None and (matrix is None or prefix is not None) else None
        self.xp = array_module(device)
        n_prefix = 0 if prefix is None else prefix.shape[0]
        n_main = matrix.shape[0] if matrix is not None else sum(self.file_rows)
        self.n = n_prefix + n_main

    def with_prefix(self, prefix: np.ndarray) -> "BandKeys":
        return BandKeys(self.bands, matrix=self.matrix, work=self.work, file_rows=self.file_rows, prefix=prefix,
                        device=self.device, mix=self.mix)

    @property
    def on_disk(self) -> bool:
        return self.matrix is None

    def column(self, band: int, rows, lo: int = 0, hi: int = 1 << 64):
        """(selected rows, their keys) for ``rows`` (sorted int64 array, device module) whose band key
        lies in [lo, hi). Memory: the selection plus one piece's column at a time when on disk."""
        whole = lo == 0 and hi >= 1 << 64
        if not self.on_disk and self.prefix is None:
            k = self.matrix[rows, band]
            if self.mix is not None:
                k = k ^ self.mix[rows]
            if whole:
                return rows, k
            sel = _in_range(k, lo, hi)
            return rows[sel], k[sel]
        rows_h = to_host(rows)
        out_rows, out_keys = [], []
        start = 0
        sources = []
        main0 = 0
        if self.prefix is not None:
            main0 = self.prefix.shape[0]
            sources.append((self.prefix.shape[0], lambda: self.prefix[:, band]))
        if self.on_disk:
            for i, count in enumerate(self.file_rows):
                sources.append((count, lambda i=i: self.work.band(i, band)))
        else:
            sources.append((self.matrix.shape[0], lambda: to_host(self.matrix[:, band])))
        for count, load in sources:
            a, b = np.searchsorted(rows_h, [start, start + count])
            if a < b:
                r = rows_h[a:b]
                k = load()[r - start]
                if self._mix_h is not None and start >= main0:
                    k = k ^ self._mix_h[r - main0]
                if not whole:
                    keep = _in_range(k, lo, hi)
                    r, k = r[keep], k[keep]
                out_rows.append(r)
                out_keys.append(k)
            start += count
        r = np.concatenate(out_rows) if out_rows else np.zeros(0, np.int64)
        k = np.concatenate(out_keys) if out_keys else np.zeros(0, np.uint64)
        return to_device(r.astype(np.int64), self.device), to_device(k.astype(np.uint64), self.device)

    def rows(self, rows) -> np.ndarray:
        """Host (len(rows), bands) matrix of the keys of ``rows`` (sorted)."""
        return np.stack([to_host(self.column(b, rows)[1]) for b in range(self.bands)], axis=1) \
            if len(rows) else np.zeros((0, self.bands), np.uint64)


def _in_range(k, lo: int, hi: int):
    """lo <= k < hi for uint64 keys; hi may be 2^64 (no upper bound)."""
    above = k >= np.uint64(lo)
    return above & (k < np.uint64(hi)) if hi < 1 << 64 else above
