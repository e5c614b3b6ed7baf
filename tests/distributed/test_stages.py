"""distributed/stages.py: the buckets task, one band at a time, finds the same buckets and edges whatever the
order of a band_rows file's rows (the bands task writes them band by band; one written otherwise is put in
band order first)."""
import numpy as np
import pyarrow as pa

from gpu_dedup import RunConfig
from gpu_dedup.distributed import stages


def _band_rows(rng, rows: np.ndarray, bands: int) -> pa.Table:
    """Band rows of ``rows`` (global), band by band, their keys from a few values (buckets of several rows)."""
    keys = rng.integers(0, 6, rows.shape[0] * bands).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return pa.table({"band": pa.array(np.repeat(np.arange(bands, dtype=np.int32), rows.shape[0])),
                     "key": pa.array(keys), "row": pa.array(np.tile(rows, bands))}, schema=stages._BANDS)


def _buckets(tmp_path, name, tables, offsets, bands):
    cfg = RunConfig(progress=False)
    cfg = cfg.replace(lsh=cfg.lsh.__class__(bands=bands, rows=cfg.minhash.num_perm // bands))
    job = stages.Job(cfg, "cpu", ["f"] * len(tables), str(tmp_path / name), 1, offsets=offsets, run_key="k")
    for fi, t in enumerate(tables):
        job.layout.write(t, "band_rows", f"f{fi:06d}-p0000")
    got = stages.buckets(job, 0)
    edges = job.layout.read("edges_0", [f"p0000-f{g:06d}" for g in range(len(tables))])
    return ({k: v for k, v in got.items() if k not in ("seconds", "cpu_seconds", "peak_rss_bytes")},
            sorted(zip(edges["a"].to_pylist(), edges["b"].to_pylist())))


def test_buckets_whatever_the_row_order_of_a_file(tmp_path):
    """Two files' band rows in band order, then the same rows shuffled (and a file without rows): the same
    counts, per-band buckets and star edges, each checked against a brute-force grouping by (band, key)."""
    rng = np.random.default_rng(7)
    bands, offsets = 5, [0, 40, 40, 90]
    tables = [_band_rows(rng, np.arange(0, 40), bands), _band_rows(rng, np.zeros(0, np.int64), bands),
              _band_rows(rng, np.arange(40, 90), bands)]
    shuffled = [t.take(pa.array(rng.permutation(t.num_rows))) for t in tables]
    ordered, mixed = _buckets(tmp_path, "ordered", tables, offsets, bands), \
        _buckets(tmp_path, "mixed", shuffled, offsets, bands)
    assert ordered == mixed
    groups: dict = {}
    for t in tables:
        for b, k, r in zip(t["band"].to_pylist(), t["key"].to_pylist(), t["row"].to_pylist()):
            groups.setdefault((b, k), []).append(r)
    big = [g for g in groups.values() if len(g) >= 2]
    want = sorted({(min(g), r) for g in big for r in g if r != min(g)})
    stats, edges = ordered
    assert stats["buckets"] == len(big) and stats["bucket_entries"] == sum(map(len, big))
    assert stats["largest_bucket"] == max(map(len, big))
    assert stats["buckets_per_band"] == [sum(1 for (b, _), g in groups.items() if b == band and len(g) >= 2)
                                         for band in range(bands)]
    assert edges == sorted(want + [(b, a) for a, b in want]) and stats["edges"] == len(want)
