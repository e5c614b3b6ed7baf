"""distributed/stages.py: the buckets tasks find the buckets of a brute-force grouping by (band, key) of the
LSH rows (exact-group leaders with shingles), and the same ones whether they read the bands stage's files (in
band order, or not: put in order first) or, with at most BANDS_FROM_PIECES key ranges, the pieces' band keys."""
import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup import RunConfig
from gpu_dedup.distributed import stages
from gpu_dedup.distributed.rows import DUPS_SCHEMA
from gpu_dedup.runtime.workdir import band_column

BANDS = 5
OFFSETS = [0, 40, 40, 90]  # three files, the second without rows


def _pieces(rng) -> tuple[list[pa.Table], np.ndarray]:
    """Each file's piece (nshingles, band keys from a few values: buckets of several rows) and the exact
    duplicates (global rows) that LSH leaves out."""
    pieces = []
    for lo, hi in zip(OFFSETS[:-1], OFFSETS[1:]):
        n = hi - lo
        cols = {"nshingles": pa.array(np.where(rng.random(n) < 0.1, 0, 7).astype(np.int32))}
        for b in range(BANDS):
            cols[band_column(b)] = pa.array(rng.integers(0, 6, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        pieces.append(pa.table(cols))
    return pieces, np.sort(rng.choice(OFFSETS[-1], 9, replace=False))


def _job(tmp_path, name, parts, pieces, dups):
    cfg = RunConfig(progress=False)
    cfg = cfg.replace(lsh=cfg.lsh.__class__(bands=BANDS, rows=cfg.minhash.num_perm // BANDS))
    job = stages.Job(cfg, "cpu", ["f"] * len(pieces), str(tmp_path / name), parts, offsets=OFFSETS, run_key="k")
    for fi, piece in enumerate(pieces):
        job.layout.write(piece, "pieces", f"f{fi:06d}")
        mine = dups[(dups >= OFFSETS[fi]) & (dups < OFFSETS[fi + 1])]
        for p, name_ in enumerate(job.dup_names(fi)):
            rows = mine if p == 0 else mine[:0]
            job.layout.write(pa.table({"row": rows, "leader": rows * 0, "short": np.zeros(len(rows), bool)},
                                      schema=DUPS_SCHEMA), "dups_by_row", name_)
    return job


def _buckets(job):
    """The buckets tasks of every key range: their counts merged, their star edges as one set."""
    got = [stages.buckets(job, p) for p in range(job.partitions)]
    edges = job.layout.read("edges_0", [f"p{p:04d}-f{g:06d}" for p in range(job.partitions) for g in range(job.nfiles)])
    return ({"buckets": sum(r["buckets"] for r in got), "bucket_entries": sum(r["bucket_entries"] for r in got),
             "largest_bucket": max(r["largest_bucket"] for r in got),
             "buckets_per_band": np.sum([r["buckets_per_band"] for r in got], axis=0).tolist()},
            set(zip(edges["a"].to_pylist(), edges["b"].to_pylist())))


@pytest.mark.parametrize("seed", [0, 1])
def test_buckets_from_band_rows_or_pieces_as_brute_force(tmp_path, seed):
    rng = np.random.default_rng(seed)
    pieces, dups = _pieces(rng)
    wide = stages.BANDS_FROM_PIECES + 1
    job = _job(tmp_path, "rows", wide, pieces, dups)
    for fi in range(job.nfiles):
        stages.bands(job, fi)
    from_rows = _buckets(job)
    # the same band rows written in another order: put in band order first
    shuffled = _job(tmp_path, "shuffled", wide, pieces, dups)
    for fi in range(job.nfiles):
        for p in range(wide):
            t = job.layout.read_one("band_rows", f"f{fi:06d}-p{p:04d}")
            shuffled.layout.write(t.take(pa.array(rng.permutation(t.num_rows))), "band_rows", f"f{fi:06d}-p{p:04d}")
    assert _buckets(shuffled) == from_rows
    for parts in range(1, stages.BANDS_FROM_PIECES + 1):  # no bands stage: the pieces' keys
        assert _buckets(_job(tmp_path, f"pieces{parts}", parts, pieces, dups)) == from_rows

    groups: dict = {}
    for fi, piece in enumerate(pieces):
        for r in range(piece.num_rows):
            row = OFFSETS[fi] + r
            if piece["nshingles"][r].as_py() > 0 and row not in dups:
                for b in range(BANDS):
                    groups.setdefault((b, piece[band_column(b)][r].as_py()), []).append(row)
    big = [g for g in groups.values() if len(g) >= 2]
    want = {(min(g), r) for g in big for r in g if r != min(g)}
    stats, edges = from_rows
    assert stats == {"buckets": len(big), "bucket_entries": sum(map(len, big)), "largest_bucket": max(map(len, big)),
                     "buckets_per_band": [sum(1 for (b, _), g in groups.items() if b == band and len(g) >= 2)
                                          for band in range(BANDS)]}
    assert edges == want | {(b, a) for a, b in want}
