"""Pass 1 (lexical/signatures.py): one stream over every file equals the file-by-file pass, and its reader starts
before the kernels are loaded (runtime/passes.py's ``prefetched``)."""
import json
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpu_dedup import RunConfig, io
from gpu_dedup.lexical.minhash import permutation_params
from gpu_dedup.lexical.signatures import compute_file, compute_files
from gpu_dedup.runtime.passes import prefetched
from gpu_dedup.testing.evalcorpus import make_corpus


def _cat(parts) -> dict:
    return {"ids": pa.concat_arrays(parts.ids).to_pylist() if parts.ids else [],
            "exact": np.concatenate(parts.exact) if parts.exact else np.zeros((0, 2), np.uint64),
            "keys": np.concatenate(parts.band_keys) if parts.band_keys else np.zeros((0, 20), np.uint64),
            "nshingles": np.concatenate(parts.nshingles) if parts.nshingles else np.zeros(0, np.int64),
            "words": np.concatenate(parts.words) if parts.words else np.zeros(0, np.int64)}


def test_one_stream_over_the_files_equals_file_by_file(tmp_path):
    t = make_corpus(300, seed=7).select(["id", "text"])
    pq.write_table(t.slice(0, 120), tmp_path / "a.parquet", row_group_size=50)
    pq.write_table(t.slice(120, 0), tmp_path / "b.parquet")  # an empty file keeps its place
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in t.slice(120).to_pylist()))
    files = io.resolve_inputs([str(tmp_path)])
    cfg = RunConfig.preset("default", device="cpu", batch_bytes=20_000)
    params = permutation_params(cfg.minhash)
    parts, report, tm = compute_files(files, cfg, "cpu", params)
    assert [p.rows for p in parts] == [120, 0, 180] and report["rows"] == 300
    assert set(tm) >= {"read", "normalize", "minhash", "band_keys"}
    row0 = 0
    for f, part in zip(files, parts):
        alone, _, _ = compute_file(f, cfg, "cpu", params, row0=row0)
        row0 += alone.rows
        a, b = _cat(part), _cat(alone)
        assert a["ids"] == b["ids"]
        for k in ("exact", "keys", "nshingles", "words"):
            assert np.array_equal(a[k], b[k]), (f.relpath, k)


def test_the_reader_starts_before_the_first_item_is_asked_for():
    """The caller loads its kernels while the first batch is read: the thread pulls from the source at once."""
    pulled = threading.Event()

    def source():
        pulled.set()
        yield from range(5)

    stream = prefetched(source(), depth=2)
    assert pulled.wait(10)  # nothing was asked for yet
    assert list(stream) == [0, 1, 2, 3, 4]
    # dropped unfinished: its thread stops (it was blocked on a full queue)
    unfinished = prefetched(iter(range(100)), depth=2)
    assert next(unfinished) == 0
    thread = unfinished.thread
    unfinished.close()
    assert not thread.is_alive()
    assert list(prefetched(iter([1, 2]), depth=0)) == [1, 2]  # depth 0: no thread
