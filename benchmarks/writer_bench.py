"""Writing ``deduplicated/`` (``io.write_kept``): 1 thread vs ``--threads`` threads, same shards, one run.

Writes ``--shards`` shards of ``--docs`` generated documents each (``evalcorpus.make_corpus``, about
``--words`` words; ids and text only) in every format of ``--formats`` (``parquet``: snappy, row groups
of ``--row-group`` rows; ``jsonl``, ``jsonl.gz``, ``jsonl.zst``), plus ``parquet-1file``: all the
documents in one Parquet file (row groups of ``--row-group`` rows: one file cannot be split across
files, only its decoding overlaps its encoding). Reads every input once (page cache), then times
``write_kept`` (keep 70 % of the rows at random, ``file_rows`` given as the pipeline gives them) with 1
thread and with ``--threads``, interleaved, ``--repeat`` times each (median). pyarrow's CPU pool is left
as it is. Prints seconds, MB/s of input file bytes, the speed-up, the process's CPU seconds per write and
the load average before and after (on a shared machine wall times are noisy).

    python benchmarks/writer_bench.py --shards 16 --docs 10000 --words 200 --threads 2
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import tempfile
import time

import numpy as np


def _corpus(directory: str, shards: int, docs: int, words: int, row_group: int, formats: list[str]) -> dict:
    """{case: paths}, reused when ``directory`` already holds the same ones."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    from gpu_dedup.testing.evalcorpus import make_corpus

    meta = {"shards": shards, "docs": docs, "words": words, "row_group": row_group, "formats": formats}
    stamp = os.path.join(directory, "corpus.json")
    cases = {fmt: [os.path.join(directory, fmt, f"shard-{i:04d}.{fmt}") for i in range(shards)] for fmt in formats}
    cases["parquet-1file"] = [os.path.join(directory, "parquet-1file", "all.parquet")]
    if os.path.exists(stamp):
        with open(stamp) as fh:
            if json.load(fh) == meta and all(os.path.exists(p) for ps in cases.values() for p in ps):
                return cases
    shutil.rmtree(directory, ignore_errors=True)
    t = time.perf_counter()
    tables = []
    for i in range(shards):
        table = make_corpus(docs, seed=100 + i, mean_words=words).select(["id", "text"])
        table = table.set_column(0, "id", pa.array([f"s{i:04d}-{x}" for x in table["id"].to_pylist()]))
        tables.append(table)
        for fmt in formats:
            path = cases[fmt][i]
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if fmt == "parquet":
                pq.write_table(table, path, compression="snappy", row_group_size=row_group)
                continue
            data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in table.to_pylist()).encode()
            if fmt == "jsonl.gz":
                data = gzip.compress(data, compresslevel=6)
            elif fmt == "jsonl.zst":
                data = zstandard.ZstdCompressor().compress(data)
            with open(path, "wb") as fh:
                fh.write(data)
    os.makedirs(os.path.dirname(cases["parquet-1file"][0]), exist_ok=True)
    pq.write_table(pa.concat_tables(tables), cases["parquet-1file"][0], compression="snappy", row_group_size=row_group)
    with open(stamp, "w") as fh:
        json.dump(meta, fh)
    print(f"generated {shards} x {docs:,} docs in {time.perf_counter() - t:.0f} s -> {directory}")
    return cases


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--docs", type=int, default=10_000, help="documents per shard")
    ap.add_argument("--words", type=int, default=200)
    ap.add_argument("--row-group", type=int, default=2_000, help="Parquet row group, rows")
    ap.add_argument("--formats", default="parquet,jsonl,jsonl.gz")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpu_dedup_writer_bench"))
    args = ap.parse_args()

    from gpu_dedup import io

    cases = _corpus(args.dir, args.shards, args.docs, args.words, args.row_group, args.formats.split(","))
    load_before = os.getloadavg()
    rows: list[tuple] = []
    for case, paths in cases.items():
        files = io.resolve_inputs(paths)
        file_rows = [0] * len(files)
        for b in io.iter_batches(files, id_field="id", text_field="text", batch_bytes=64 << 20, on_error="raise"):
            file_rows[b.file_index] += len(b)  # also brings the inputs into the page cache
        keep = np.random.default_rng(0).random(sum(file_rows)) < 0.7
        size = sum(os.path.getsize(p) for p in paths)
        times: dict[int, list[float]] = {1: [], args.threads: []}
        cpu: dict[int, list[float]] = {1: [], args.threads: []}
        for _ in range(args.repeat):
            for threads in (1, args.threads):
                out = tempfile.mkdtemp(prefix="writer_bench_", dir=args.dir)
                c, t = _cpu(), time.perf_counter()
                res = io.write_kept(files, keep, out, id_field="id", text_field="text", on_error="raise",
                                    file_rows=file_rows, read_threads=threads)
                times[threads].append(time.perf_counter() - t)
                cpu[threads].append(_cpu() - c)
                assert res["rows_written"] == int(keep.sum())
                shutil.rmtree(out)
        one, many = statistics.median(times[1]), statistics.median(times[args.threads])
        rows.append((case, len(files), size / 1e6, one, many, statistics.median(cpu[1]),
                     statistics.median(cpu[args.threads])))
    load_after = os.getloadavg()
    n = args.threads
    print(f"\nwrite_kept, {sum(file_rows):,} docs per case, keep 70 %, median of {args.repeat}; "
          f"pyarrow.cpu_count() = {__import__('pyarrow').cpu_count()}, os.cpu_count() = {os.cpu_count()}")
    print(f"{'case':14s} {'files':>5s} {'input MB':>9s} {'1 thr s':>8s} {f'{n} thr s':>8s} {'MB/s 1':>7s} "
          f"{f'MB/s {n}':>7s} {'speed-up':>8s} {'CPU s 1':>8s} {f'CPU s {n}':>8s}")
    for case, nf, mb, one, many, c1, cn in rows:
        print(f"{case:14s} {nf:5d} {mb:9.1f} {one:8.2f} {many:8.2f} {mb / one:7.0f} {mb / many:7.0f} "
              f"{one / many:7.2f}x {c1:8.2f} {cn:8.2f}")
    print(f"load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; "
          f"after: {', '.join(f'{x:.2f}' for x in load_after)}")


if __name__ == "__main__":
    main()
