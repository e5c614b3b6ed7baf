"""report/streamed.py: a score column's figures read in batches (a Ray run's scores/ parts, never gathered) equal
numpy's over the whole column: order statistics against a sort, percentiles bit for bit against
``numpy.percentile``, histograms against ``numpy.histogram``; heavy tails, ties, one value, non-finite values,
more values than the sorting limit, files in parts of uneven sizes."""
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.filters.report import CLIP_PERCENTILES, HIST_BINS, hist_view
from gpu_dedup.report import streamed
from gpu_dedup.report.streamed import (
    ScoreColumn,
    histogram,
    order_stat,
    percentiles,
    split_at,
)


def _columns(rng, kind: str) -> np.ndarray:
    n = int(rng.integers(1, 3000))
    if kind == "heavy":
        return np.concatenate([rng.integers(50, 500, n).astype(float), [1e9] * 3, [0.0] * 3])
    if kind == "ties":
        return rng.integers(0, 4, n).astype(float)
    if kind == "lognormal":
        return np.exp(rng.normal(0, 8, n))
    if kind == "nonfinite":
        v = rng.normal(size=n)
        v[rng.random(n) < 0.2] = np.nan
        v[rng.random(n) < 0.05] = np.inf
        return v
    return rng.random(n)


def _parts(tmp_path, values: np.ndarray, rng) -> ScoreColumn:
    """``values`` as a dataset of Parquet parts of random sizes (some empty)."""
    cuts = np.sort(rng.integers(0, len(values) + 1, 4))
    bounds = [0, *cuts.tolist(), len(values)]
    d = tmp_path / "scores"
    d.mkdir()
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(pa.table({"s": pa.array(values[a:b], pa.float64())}), d / f"part-{k:06d}.parquet")
    return ScoreColumn.of_files(streamed.table_files(str(d)), "s")


@pytest.mark.parametrize("kind", ["uniform", "heavy", "ties", "lognormal", "nonfinite"])
@pytest.mark.parametrize("seed", range(3))
def test_the_streamed_figures_equal_numpys(tmp_path, monkeypatch, kind, seed):
    monkeypatch.setattr(streamed, "BATCH_ROWS", 97)   # many batches
    monkeypatch.setattr(streamed, "SORT_LIMIT", 50)   # the narrowing passes run
    rng = np.random.default_rng(seed)
    values = _columns(rng, kind)
    col = _parts(tmp_path, values, rng)
    v = np.sort(values[np.isfinite(values)])
    n, lo, hi = col.summary()
    assert (n, lo, hi) == (len(v), v[0], v[-1])
    for k in {0, len(v) // 3, len(v) // 2, len(v) - 1}:
        assert order_stat(col, k, lo, hi) == v[k]
    qs = (1.0, 37.5, 50.0, 99.0)
    assert percentiles(col, qs, n, lo, hi) == [float(x) for x in np.percentile(v, qs)]
    counts, edges, m = histogram(col, 50, lo, hi)
    want, want_edges = np.histogram(v, bins=50)
    assert m == len(v) and counts.tolist() == want.tolist() and edges.tolist() == want_edges.tolist()
    a, b = np.percentile(v, CLIP_PERCENTILES)
    inside = v[(v >= a) & (v <= b)]
    assert split_at(col, a, b) == (int((v < a).sum()), int((v > b).sum()), inside.min(), inside.max())


def test_the_histogram_view_of_parts_equals_the_whole_arrays(tmp_path, monkeypatch):
    monkeypatch.setattr(streamed, "BATCH_ROWS", 64)
    """The filter report's histogram (clipped to the 1st..99th percentiles for a heavy tail, log axis for one
    dominant bin) is the same from the parts as from the whole array, and the whole array's is numpy's."""
    rng = np.random.default_rng(7)
    words = np.concatenate([rng.integers(50, 500, 990).astype(float), [1e6] * 5, [0.0] * 5])
    whole, parts = hist_view(words), hist_view(_parts(tmp_path, words, rng))
    p1, p99 = np.percentile(words, CLIP_PERCENTILES)
    shown = words[(words >= p1) & (words <= p99)]
    assert (whole.below, whole.above) == (int((words < p1).sum()), int((words > p99).sum())) and whole.above >= 5
    assert whole.counts.tolist() == np.histogram(shown, bins=HIST_BINS)[0].tolist() and whole.shown == len(shown)
    for f in ("counts", "edges"):
        assert getattr(parts, f).tolist() == getattr(whole, f).tolist()
    assert (parts.shown, parts.below, parts.above, parts.log) == (whole.shown, whole.below, whole.above, whole.log)


def test_a_tables_batches_from_any_row_and_the_rows_read_forward(tmp_path, monkeypatch):
    """table_batches from row k of a dataset of parts (row groups of 7 rows, batches of 5) starts at the batch
    holding k, the rows numbered as in the one table; StreamedRows gives the ids and keep flags of any range, after
    a range further on too (read again from its row group), and names a wanted row's id without reading."""
    from gpu_dedup.report.inputs import FileRows, StreamedRows

    monkeypatch.setattr(streamed, "BATCH_ROWS", 5)
    sizes = (23, 1, 40)
    whole = pa.table({"id": [f"r{i}" for i in range(sum(sizes))], "keep": [i % 3 == 0 for i in range(sum(sizes))]})
    (tmp_path / "t").mkdir()
    for k, (a, n) in enumerate(zip(np.cumsum((0,) + sizes[:-1]).tolist(), sizes)):
        pq.write_table(whole.slice(a, n), tmp_path / "t" / f"part-{k:06d}.parquet", row_group_size=7)
    path = str(tmp_path / "t")
    for start in (0, 6, 7, 22, 23, 24, 40, 63):
        got = list(streamed.table_batches(path, ["id"], start))
        first, b = got[0]
        assert first <= start < first + b.num_rows and all(len(b) <= 5 for _, b in got)
        assert pa.concat_arrays([b.column(0) for _, b in got]).to_pylist() == whole["id"].to_pylist()[first:]
    rows = StreamedRows(path, FileRows(), {40: "r40"})
    for lo, n in ((0, 3), (2, 20), (30, 34), (5, 1), (21, 4), (63, 1), (10, 0)):
        assert rows.ids(lo, n).to_pylist() == whole["id"].to_pylist()[lo:lo + n]
        assert rows.keep(lo, n).tolist() == whole["keep"].to_pylist()[lo:lo + n]
    assert rows.id_of(40) == "r40" and rows.id_of(3) == "r3"


_HELD = """
import json, sys
import numpy as np, pyarrow as pa
from gpu_dedup import io
from gpu_dedup.pipeline.report import _read_decisions
from gpu_dedup.report.inputs import FileRows, StreamedRows, _parquet_texts
from gpu_dedup.report.streamed import table_batches
dec, src, what = sys.argv[1:4]
if what == "decisions":
    d = _read_decisions(dec, ["d59999"])
    got = d.rows
else:
    files = FileRows()
    for _, b in table_batches(dec, ["source"]):
        files.add(b.column("source"))
    rows = StreamedRows(dec, files, {59999: "d59999"})
    got = {r: len(t) for r, t in _parquet_texts(io.resolve_inputs([src])[0], "text", "id", rows, 0, 60000,
                                                 np.array([0, 59999])).items()}
print(json.dumps({"held": pa.default_memory_pool().max_memory(), "got": {str(k): v for k, v in got.items()}}))
"""


def test_a_row_group_is_read_in_batches_of_bounded_bytes(tmp_path):
    """The pipeline report's reads hold a batch of about BATCH_BYTES of a row group, read a page at a time, whatever
    the row group's size: Arrow's peak (its pool's max_memory, in a fresh process) stays under the 4.2 MB of the
    decisions' ids (3.0 MB: each column's reader holds about a page, 1 MiB, decoded and as stored; 8.9 MB when a
    batch was 65,536 rows and a column chunk was read whole) and under half the input row group's 21 MB of texts
    (7.0 MB: the text and id readers and the decisions'; 79.5 MB when the row group, its ids and the decisions' ids
    of its rows were read whole)."""
    import json
    import subprocess
    import sys

    rng = np.random.default_rng(5)
    n = 60000
    ids = [f"d{i}" + "x" * 60 for i in range(n)]
    ids[-1] = "d59999"
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ", np.uint8)
    raw = letters[rng.integers(0, len(letters), n * 350)].tobytes()
    texts = [raw[i * 350:(i + 1) * 350].decode() for i in range(n)]
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts}), src, row_group_size=n, use_dictionary=False)
    (tmp_path / "dec").mkdir()
    pq.write_table(pa.table({"id": ids, "keep": [True] * n, "reason": ["kept"] * n, "step": ["dedup"] * n,
                             "source": ["in.parquet"] * n}), tmp_path / "dec" / "part-000000.parquet",
                   row_group_size=n, use_dictionary=["reason", "step", "source"])
    held = {}
    for what in ("decisions", "texts"):
        r = subprocess.run([sys.executable, "-c", _HELD, str(tmp_path / "dec"), str(src), what],
                           capture_output=True, text=True, check=True)
        out = json.loads(r.stdout)
        held[what] = out["held"]
        assert out["got"] == ({"d59999": n - 1} if what == "decisions" else {"0": 350, str(n - 1): 350})
    assert held["decisions"] < 4.2e6 and held["texts"] < 21e6 / 2, held
