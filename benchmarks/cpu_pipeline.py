"""Whole CPU pipeline on a generated corpus: wall time, docs/s, peak RSS, per-stage times.

Generates N documents (default 1,000,000 x ~400 words, with exact/near/template duplicates) into
parquet shards under --work, then runs `gpu-dedup run` in a child process and reads its peak RSS
(getrusage of the child) and run.json. The corpus is reused when already there.

    python benchmarks/cpu_pipeline.py --docs 1000000 --words 400 --work /tmp/gd-bench
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time


def make(work: str, docs: int, words: int, shard: int) -> str:
    import pyarrow.parquet as pq

    from gpu_dedup.testing.evalcorpus import make_corpus

    src = os.path.join(work, f"corpus-{docs}-{words}")
    done = os.path.join(src, "_DONE")
    if os.path.exists(done):
        return src
    os.makedirs(src, exist_ok=True)
    t = time.perf_counter()
    for k, start in enumerate(range(0, docs, shard)):
        n = min(shard, docs - start)
        table = make_corpus(n, seed=1000 + k, mean_words=words)
        ids = [f"s{k:03d}-{i}" for i in table["id"].to_pylist()]
        table = table.set_column(0, "id", __import__("pyarrow").array(ids))
        pq.write_table(table, os.path.join(src, f"part-{k:04d}.parquet"))
    open(done, "w").close()
    print(f"generated {docs:,} docs in {time.perf_counter() - t:.0f} s -> {src}")
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--shard", type=int, default=50_000)
    ap.add_argument("--work", default="/tmp/gd-bench")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--extra", default="", help="extra flags for gpu-dedup run")
    args = ap.parse_args()
    src = make(args.work, args.docs, args.words, args.shard)
    out = os.path.join(args.work, f"out-{args.preset}")
    cmd = [sys.executable, "-m", "gpu_dedup.cli", "run", src, "-o", out, "--preset", args.preset, "--overwrite",
           "--quiet", *args.extra.split()]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t
    rss_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    run = json.load(open(os.path.join(out, "run.json")))
    text_gb = run["read"].get("bytes_text", 0) / 1e9
    print(f"\n{'what':34s} {'value':>14s}")
    print(f"{'documents':34s} {run['counts']['input']:14,d}")
    print(f"{'text':34s} {text_gb:13.2f}G")
    print(f"{'removed':34s} {run['counts']['removed']:14,d}")
    print(f"{'wall time (s), incl. start-up':34s} {wall:14.1f}")
    print(f"{'docs/s end to end':34s} {run['counts']['input'] / wall:14,.0f}")
    print(f"{'peak RSS (GB)':34s} {rss_gb:14.2f}")
    for stage, sec in run["timings_s"].items():
        print(f"  {stage:32s} {sec:14.1f}")


if __name__ == "__main__":
    main()
