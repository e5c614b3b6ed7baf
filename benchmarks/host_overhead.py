"""Host overhead of a CPU run: the seconds of every run.json stage outside the hashing kernels, and read + write
against pyarrow's own read_table + write_table of the same data, in the same run.

Generates the scale corpus (benchmarks/cpu_pipeline.py's generator, benchmarks/scale.py's default shape: 1 M
documents of ~100 words in 100 k-document parquet shards) under --work, runs ``gpu-dedup run`` on it in a child
process (the deduplicated/ copy written, as a user's run does), and reads run.json's ``timings_s``. Then, in this
process, pyarrow reads every input file whole (``pq.read_table``) and writes each file's kept rows
(``pq.write_table``, the keep mask from decisions.parquet) and the decisions table: the floor of what our read
(pass 1) + write (``write_deduplicated`` + ``write_decisions``) cost. A ratio > 1 is our IO's overhead.

    python benchmarks/host_overhead.py --docs 1000000 --words 100 --work /tmp/gd-host
    python benchmarks/host_overhead.py --docs 100000 --markdown      # the table of docs/performance.md

Run it twice on a fresh checkout: the first run's "compile" row is Numba filling its cache.

Then the host work a GPU run pays per document (issue 38 item 4: "the host never caps the GPU"), each piece
measured alone in this process on one thread, in CPU microseconds per document: read and decode (``iter_batches``,
one decoding thread), the text buffers handed to the device (``arrow_text_buffers`` and the per-row lengths), the ids
(one string array for the run, checked unique), the decisions table (run.json's ``decisions`` stage: host code on
either device), writing decisions.parquet and writing deduplicated/ (``write_kept``, one thread). A GPU run overlaps
the read with the kernels (the reading thread and the Parquet pool read ahead) and writes files in parallel, so
what caps it is this sum divided by the host's cores. The corpus's mean document size is printed with it (the
issue's bar: <= 30 us per ~3 KB document per core: ``--words 500``).
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_pipeline import make  # noqa: E402  (the same corpus generator and layout as scale.py)

# stages whose time is the hashing kernels (normalization, MinHash signatures, band keys, verification's shingle
# sets); every other stage of run.json's timings_s is host work around them
HASHING = ("normalize", "minhash", "band_keys", "shingle_sets")
NOT_STAGES = ("total",)


def run_ours(src: str, out: str, extra: list[str]) -> tuple[float, dict]:
    """Process wall seconds and run.json of one ``gpu-dedup run``."""
    cmd = [sys.executable, "-m", "gpu_dedup.cli", "run", src, "-o", out, "--overwrite", "-q", *extra]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t
    with open(os.path.join(out, "run.json")) as f:
        return wall, json.load(f)


def run_pyarrow(src: str, out: str, tmp: str) -> dict[str, float]:
    """pyarrow's read_table of every input file, write_table of each one's kept rows and of decisions.parquet."""
    import numpy as np
    import pyarrow.parquet as pq

    files = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".parquet"))
    decisions = pq.read_table(os.path.join(out, "decisions.parquet"))
    keep = np.asarray(decisions["keep"].to_numpy(zero_copy_only=False), bool)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t = time.perf_counter()
    tables = [pq.read_table(f) for f in files]
    read = time.perf_counter() - t
    t = time.perf_counter()
    row = 0
    for k, table in enumerate(tables):
        mask = keep[row:row + table.num_rows]
        row += table.num_rows
        pq.write_table(table.filter(mask), os.path.join(tmp, f"part-{k:04d}.parquet"))
    write = time.perf_counter() - t
    t = time.perf_counter()
    pq.write_table(decisions, os.path.join(tmp, "decisions.parquet"))
    write_decisions = time.perf_counter() - t
    assert row == keep.shape[0], (row, keep.shape[0])
    shutil.rmtree(tmp, ignore_errors=True)
    return {"read": read, "write": write, "write_decisions": write_decisions}


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def host_per_document(src: str, out: str, stats: dict, tmp: str) -> list[tuple[str, float]]:
    """(piece, CPU seconds) of the host work of a GPU run over ``src``, one thread each (module docstring)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_dedup import io
    from gpu_dedup.decisions import decisions_schema
    from gpu_dedup.io.text import arrow_text_buffers
    from gpu_dedup.runtime.run import write_tables

    files = io.resolve_inputs([src])
    reader = {"id_field": "id", "text_field": "text", "on_error": "raise"}
    ids, buffers = [], 0.0
    t = _cpu()
    for batch in io.iter_batches(files, batch_bytes=64 << 20, read_threads=1, **reader):
        b = _cpu()
        _, offsets = arrow_text_buffers(batch.text)
        np.diff(offsets)  # the per-row text bytes pass 1 keeps
        buffers += _cpu() - b
        ids.append(batch.ids)
    read = _cpu() - t - buffers
    t = _cpu()
    io.check_unique_ids(pa.chunked_array([pa.chunked_array(ids, pa.string()).combine_chunks()], pa.string()))
    id_s = _cpu() - t
    decisions = pq.read_table(os.path.join(out, "decisions.parquet"))
    keep = np.asarray(decisions["keep"].to_numpy(zero_copy_only=False), bool)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t = _cpu()
    write_tables([decisions], decisions_schema(), os.path.join(tmp, "decisions.parquet"))
    write_d = _cpu() - t
    t = _cpu()
    io.write_kept(files, keep, os.path.join(tmp, "deduplicated"), read_threads=1, **reader)
    write_k = _cpu() - t
    shutil.rmtree(tmp, ignore_errors=True)
    return [("read and decode (iter_batches, 1 decoding thread)", read),
            ("text buffers to hand to the device (arrow_text_buffers, row lengths)", buffers),
            ("ids (one array, checked unique)", id_s),
            ("decisions table (run.json `decisions`, host code on either device)", stats["timings_s"]["decisions"]),
            ("decisions.parquet", write_d), ("deduplicated/ (write_kept, 1 thread)", write_k)]


def table(wall: float, stats: dict, base: dict[str, float]) -> list[str]:
    """The report's markdown rows: every stage, the totals, then the IO comparison."""
    tm = stats["timings_s"]
    stages = {k: v for k, v in tm.items() if k not in NOT_STAGES}
    parts = sum(stages.values())
    rows = ["| stage | kind | seconds | % of wall |", "|---|---|---|---|"]
    for k, v in sorted(stages.items(), key=lambda kv: -kv[1]):
        kind = "hashing kernels" if k in HASHING else "host"
        rows.append(f"| {k} | {kind} | {v:.2f} | {100 * v / wall:.1f} |")
    host = sum(v for k, v in stages.items() if k not in HASHING)
    rows.append(f"| **host stages (all but {', '.join(HASHING)})** | host | **{host:.2f}** | "
                f"**{100 * host / wall:.1f}** |")
    rows.append(f"| hashing kernels | kernels | {parts - host:.2f} | {100 * (parts - host) / wall:.1f} |")
    rows.append(f"| outside run.json (interpreter start-up, exit) | host | {wall - parts:.2f} | "
                f"{100 * (wall - parts) / wall:.1f} |")
    rows.append(f"| process wall | | {wall:.2f} | 100 |")
    ours_r, ours_w = tm.get("read", 0.0), tm.get("write_deduplicated", 0.0)
    ours_d = tm.get("write_decisions", 0.0)
    rows += ["", "| IO | gpu_dedup s | pyarrow s | ratio |", "|---|---|---|---|",
             f"| read (pass 1 / read_table of every file) | {ours_r:.2f} | {base['read']:.2f} | "
             f"{ours_r / base['read']:.2f} |",
             f"| write the kept rows (write_deduplicated, which reads every file again / filter + write_table) | "
             f"{ours_w:.2f} | {base['write']:.2f} | {ours_w / base['write']:.2f} |",
             f"| write decisions.parquet | {ours_d:.2f} | {base['write_decisions']:.2f} | "
             f"{ours_d / base['write_decisions']:.2f} |",
             f"| **read + write** | **{ours_r + ours_w + ours_d:.2f}** | "
             f"**{sum(base.values()):.2f}** | **{(ours_r + ours_w + ours_d) / sum(base.values()):.2f}** |"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--words", type=int, default=100)
    ap.add_argument("--shard", type=int, default=100_000)
    ap.add_argument("--work", default="/tmp/gd-host")
    ap.add_argument("--extra", default="", help="extra flags for gpu-dedup run, e.g. '--threads 2'")
    ap.add_argument("--markdown", action="store_true", help="print only the markdown tables")
    args = ap.parse_args()
    src = make(args.work, args.docs, args.words, args.shard)
    out = os.path.join(args.work, "out")
    wall, stats = run_ours(src, out, args.extra.split())
    base = run_pyarrow(src, out, os.path.join(args.work, "pyarrow-out"))
    n = stats["counts"]["input"]
    if not args.markdown:
        print(f"\n{n:,} documents, {stats['read']['bytes_text'] / 1e9:.3f} GB text, "
              f"{platform.node()} ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
              f"{n / wall:,.0f} docs/s over the process wall")
    print("\n".join(table(wall, stats, base)))
    pieces = host_per_document(src, out, stats, os.path.join(args.work, "host-out"))
    kb = stats["read"]["bytes_text"] / n / 1e3
    total = sum(s for _, s in pieces)
    print(f"\nHost work of a GPU run per document, one thread each, {n:,} documents of {kb:.2f} KB of text "
          f"on average:\n")
    print("| piece | CPU s | us / document | us / KB |\n|---|---:|---:|---:|")
    for name, sec in pieces + [("**total**", total)]:
        print(f"| {name} | {sec:.2f} | {sec / n * 1e6:.1f} | {sec / n * 1e6 / kb:.2f} |")
    print(f"\n{total / n * 1e6:.1f} us per document per core ({total / n * 1e6 / kb * 3:.1f} us per 3 KB): "
          f"{n / total:,.0f} documents/s per host core; 16 cores: {16 * n / total:,.0f} documents/s")


if __name__ == "__main__":
    main()
