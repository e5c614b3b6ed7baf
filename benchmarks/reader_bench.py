"""Host Parquet reading: our reader (``io.iter_batches``) vs pyarrow ``read_table``, same shards, one run.

Writes ``--shards`` snappy Parquet shards of ``--docs`` generated ~400-word documents
(``evalcorpus.make_corpus``; row groups of about ``--row-group-mb`` of text), reads them once to get
them into the page cache, then times, interleaved, ``--repeat`` times each (median):

* pyarrow ``pq.read_table(files, columns=["id", "text"], use_threads=True)`` (decode only: a chunked
  table, no validation, no batching);
* ours: ``io.iter_batches(files, **RunConfig reader options)`` with the CPU batch size (64 MiB),
  consuming every batch (decode + null / UTF-8 checks + id casts + batches of <= batch_bytes), with
  ``--threads`` decoding threads, and with 1 (sequential: the reader before it decoded in parallel).

pyarrow's CPU pool is set to ``--threads`` too. Prints MB/s of text and ours / pyarrow (target >= 0.9),
plus the CPU seconds each used and the load average (on a shared machine wall times are noisy).

    python benchmarks/reader_bench.py --docs 150000 --shards 8 --threads 2
"""
import argparse
import json
import os
import statistics
import time


def _write_shards(directory: str, docs: int, shards: int, row_group_mb: float, seed: int) -> list[str]:
    """The shards, reused when ``directory`` already holds the same ones."""
    import pyarrow.parquet as pq

    from gpu_dedup.testing.evalcorpus import make_corpus

    meta = {"docs": docs, "shards": shards, "row_group_mb": row_group_mb, "seed": seed, "mean_words": 400}
    paths = [os.path.join(directory, f"shard-{i:04d}.parquet") for i in range(shards)]
    stamp = os.path.join(directory, "corpus.json")
    if os.path.exists(stamp) and all(os.path.exists(p) for p in paths):
        with open(stamp) as fh:
            if json.load(fh) == meta:
                return paths
    os.makedirs(directory, exist_ok=True)
    t = time.perf_counter()
    table = make_corpus(docs, seed=seed, mean_words=400).select(["id", "text"])
    per_doc = table.column("text").nbytes / table.num_rows
    group_rows = max(1, int(row_group_mb * 1e6 / per_doc))
    per_shard = -(-table.num_rows // shards)
    for i, p in enumerate(paths):
        pq.write_table(table.slice(i * per_shard, per_shard), p, compression="snappy", row_group_size=group_rows)
    with open(stamp, "w") as fh:
        json.dump(meta, fh)
    print(f"wrote {shards} shards of {docs:,} docs ({table.column('text').nbytes / 1e6:.0f} MB of text, row groups "
          f"of {group_rows:,} rows) in {time.perf_counter() - t:.0f} s")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=150_000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--row-group-mb", type=float, default=24.0, help="text per row group, MB")
    ap.add_argument("--threads", type=int, default=None, help="decoding threads (default: pyarrow's CPU count)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpu_dedup_reader_bench"),
                    help="where the shards are written (and reused from)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_dedup import io
    from gpu_dedup.config import RunConfig
    from gpu_dedup.runtime.device import batch_bytes

    threads = args.threads or pa.cpu_count()
    pa.set_cpu_count(threads)
    paths = _write_shards(args.dir, args.docs, args.shards, args.row_group_mb, args.seed)
    files = io.resolve_inputs(paths)
    options = RunConfig().replace(batch_bytes=batch_bytes(None, "cpu")).reader_options()
    md = pq.ParquetFile(paths[0]).metadata
    print(f"{len(paths)} shards, {md.num_row_groups} row groups of ~{md.row_group(0).num_rows:,} rows each in "
          f"shard 0, {sum(os.path.getsize(p) for p in paths) / 1e6:.0f} MB on disk; batch_bytes "
          f"{options['batch_bytes'] >> 20} MiB; {threads} threads (pyarrow CPU pool: {pa.cpu_count()}, "
          f"os.cpu_count {os.cpu_count()})")

    def pyarrow_read() -> int:
        table = pq.read_table(paths, columns=["id", "text"], use_threads=True)
        return table.num_rows

    def ours(n_threads: int):
        def run() -> int:
            rows = 0
            for batch in io.iter_batches(files, read_threads=n_threads, **options):
                rows += len(batch)
            return rows
        return run

    report = io.ReadReport()
    for _ in io.iter_batches(files, report=report, **options):  # warm-up: page cache, imports
        pass
    text_mb = report.bytes_text / 1e6
    cases = {"pyarrow read_table(use_threads=True)": pyarrow_read,
             f"ours iter_batches, {threads} threads": ours(threads),
             "ours iter_batches, sequential (1 thread)": ours(1)}
    for run in cases.values():
        assert run() == report.rows, "every reader must see every row"
    wall: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    load = os.getloadavg()[0]
    for _ in range(args.repeat):  # interleaved, so a noisy neighbour hurts all of them alike
        for name, run in cases.items():
            c, t = time.process_time(), time.perf_counter()
            run()
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    base = statistics.median(wall["pyarrow read_table(use_threads=True)"])
    print(f"\n{report.rows:,} docs, {text_mb:.0f} MB of text; median of {args.repeat}; load average "
          f"{load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'reader':44s} {'wall s':>7s} {'MB/s':>7s} {'cpu s':>7s} {'vs pyarrow':>11s} {'target':>7s}")
    for name in cases:
        w = statistics.median(wall[name])
        ratio = "" if name.startswith("pyarrow") else f"{base / w:10.2f}x"
        target = "" if name.startswith("pyarrow") else ">=0.90"
        print(f"{name:44s} {w:7.2f} {text_mb / w:7.0f} {statistics.median(cpu[name]):7.2f} {ratio:>11s} {target:>7s}")


if __name__ == "__main__":
    main()
