"""End to end against datatrove's full MinHash pipeline: same Parquet shards, same number of workers.

Measures the wall time of two child processes, run one after the other (never at the same time), on the
corpus `cpu_pipeline.py` generates (`gpu_dedup.testing.evalcorpus`: exact, near and templated duplicates; reused
when already under --work):

  ours       `python -m gpu_dedup.cli run SHARDS -o OUT --overwrite --quiet --threads W`, default preset
             (word 5-grams, K = 100 = 20 bands x 5 rows, exact stage, exact-Jaccard verification at 0.8,
             representative policy); kept documents in OUT/deduplicated/; stage times from OUT/run.json.
  datatrove  its full MinHash pipeline as in its examples/minhash_deduplication.py, default MinhashConfig()
             (word 5-grams after simplify_text, 14 buckets x 8 hashes, 64-bit xxhash, seed 1), words from
             str.split (--dt-tokenizer whitespace, the default: the tokens ours shingles, so the comparison is
             not against spaCy) or datatrove's English default, spaCy (--dt-tokenizer spacy), one
             LocalPipelineExecutor per stage, each stage timed:
               1 ParquetReader -> MinhashDedupSignature      tasks = W, workers = W
               2 MinhashDedupBuckets                         tasks = 14 (one per bucket), workers = W
               3 MinhashDedupCluster                         tasks = 1 (datatrove asserts world_size == 1)
               4 ParquetReader -> MinhashDedupFilter -> ParquetWriter (kept documents)   tasks = W, workers = W
             ParquetWriter is given the input's schema (text, id, metadata struct of the other columns):
             left to infer it from its first document, it fails when a metadata column is null there.
             All outputs under a fresh temporary directory in --work (removed after counting). The script
             run is written to WORK/datatrove_minhash.py and executed with --datatrove-python.

Wall times include interpreter start-up and imports on both sides; an untimed warm-up run of each side on
2,000 documents comes first (--no-warmup skips it). Both sides read the same shard files
(read once beforehand, so both find them in the page cache). The methods differ and so do the kept
counts: ours removes a document only for a kept one it verifiably matches (exact Jaccard >= 0.8) after
removing exact copies; datatrove removes all but one document of each LSH cluster (connected components of
bucket collisions, no verification). Both counts are printed, with the overlap of the kept ids.

    python benchmarks/e2e_datatrove.py --docs 100000 --words 400 --workers 2

datatrove is the `bench` extra (`pip install -e '.[bench]'`: datatrove 0.10.1 beside this package; the
default whitespace tokenizer needs nothing more). --dt-tokenizer spacy needs spaCy, which no datatrove extra
short of `multilingual` pulls in; keep that peer in its own venv and pass --datatrove-python:

    python3 -m venv /work/venv-dt
    /work/venv-dt/bin/pip install 'datatrove[processing]==0.10.1' pyarrow 'spacy>=3.8'
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_pipeline import make  # same corpus generator and layout

DT_STAGES = ("signatures", "buckets", "cluster", "filter + write")

# Run by the datatrove interpreter: argv = SHARDS BASE WORKERS TOKENIZER; prints one line "DT_RESULT {json}".
DT_SCRIPT = '''\
import time

T0 = time.perf_counter()
import glob  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from importlib.metadata import version  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from datatrove.executor import LocalPipelineExecutor  # noqa: E402
from datatrove.pipeline.dedup.minhash import (  # noqa: E402
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import ParquetReader  # noqa: E402
from datatrove.pipeline.writers import ParquetWriter  # noqa: E402
from datatrove.utils.word_tokenizers import WordTokenizer  # noqa: E402
import datatrove.utils.hashes.xxhash as dt_xxhash  # noqa: E402
import xxhash  # noqa: E402


def xxhash64_utf8(data):
    """datatrove 0.10.1 hashes str; xxhash >= 4 takes bytes only (xxhash 3 encoded str as UTF-8 itself)."""
    return xxhash.xxh64_intdigest(data.encode("utf-8") if isinstance(data, str) else data)


if int(xxhash.VERSION.split(".")[0]) >= 4:
    dt_xxhash.xxhash64 = xxhash64_utf8  # read by create_hash_func when MinhashDedupSignature is built


class SplitTokenizer(WordTokenizer):
    """Words = str.split() of simplify_text's output (the whitespace tokens our default preset shingles)."""

    def word_tokenize(self, text):
        return text.split()

    def sent_tokenize(self, text):
        return [text]

    def span_tokenize(self, text):
        return [(0, len(text))]


def main():
    src, base, workers, tokenizer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    imports = time.perf_counter() - T0
    # "spacy": datatrove's default for English (spaCy's word tokenizer); "whitespace": str.split
    language = SplitTokenizer() if tokenizer == "whitespace" else "en"
    config = MinhashConfig()  # datatrove's default: 5-grams, 14 buckets x 8 hashes, 64-bit xxhash

    # ParquetWriter takes its schema from the first document unless given one: a metadata column that is null
    # there (origin / edit_rate / member of a unique document) then fails on the next batch. The input's own
    # columns, as ParquetReader puts them into Document.metadata (plus its file_path):
    cols = pq.read_schema(sorted(glob.glob(f"{src}/*.parquet"))[0])
    meta = [f for f in cols if f.name not in ("text", "id")] + [pa.field("file_path", pa.string())]
    schema = pa.schema([("text", pa.string()), ("id", pa.string()), ("metadata", pa.struct(meta))])

    def reader():
        # stage 1 and stage 4 must read the same files in the same order with the same number of tasks
        return ParquetReader(src, glob_pattern="*.parquet")

    stages = [
        ("signatures", [reader(), MinhashDedupSignature(output_folder=f"{base}/signatures", config=config,
                                                          language=language)],
         workers, workers),
        ("buckets", [MinhashDedupBuckets(input_folder=f"{base}/signatures", output_folder=f"{base}/buckets",
                                         config=config)], config.num_buckets, workers),
        ("cluster", [MinhashDedupCluster(input_folder=f"{base}/buckets", output_folder=f"{base}/remove_ids",
                                         config=config)], 1, 1),
        ("filter + write", [reader(), MinhashDedupFilter(input_folder=f"{base}/remove_ids"),
                            ParquetWriter(output_folder=f"{base}/deduplicated", schema=schema)], workers, workers),
    ]
    times = {}
    for i, (name, pipeline, tasks, w) in enumerate(stages):
        t = time.perf_counter()
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=w, logging_dir=f"{base}/logs/{i}").run()
        times[name] = time.perf_counter() - t
    print("DT_RESULT " + json.dumps({"version": version("datatrove"), "config": str(config),
                                     "buckets": config.num_buckets, "hashes": config.hashes_per_bucket,
                                     "imports": imports, "tokenizer": tokenizer, "stages": times}), flush=True)


if __name__ == "__main__":
    main()
'''


def _parquet_files(path: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".parquet"))


def _kept_ids(path: str) -> list[str]:
    import pyarrow.parquet as pq

    files = _parquet_files(path)
    if not files:
        raise SystemExit(f"no kept documents written under {path}")
    return [i for f in files for i in pq.read_table(f, columns=["id"])["id"].to_pylist()]


def _kinds(shards: list[str]) -> dict:
    """id -> the generator's label (unique / exact / near / template / short)."""
    import pyarrow.parquet as pq

    kinds = {}
    for f in shards:
        t = pq.read_table(f, columns=["id", "kind"])
        kinds.update(zip(t["id"].to_pylist(), t["kind"].to_pylist()))
    return kinds


def warm_up(args: argparse.Namespace, script: str) -> None:
    """Untimed run of each side on 2,000 documents: fills Numba's on-disk JIT cache (rebuilt after any kernel edit)
    and puts both environments' imports in the page cache."""
    src = make(args.work, 2_000, 50, 2_000)
    run_ours(src, os.path.join(args.work, "out-warmup"), args.workers)
    run_datatrove(args.datatrove_python, script, src, args.work, args.workers, args.dt_tokenizer)


def run_ours(src: str, out: str, workers: int) -> dict:
    cmd = [sys.executable, "-m", "gpu_dedup.cli", "run", src, "-o", out, "--overwrite", "--quiet",
           "--threads", str(workers)]
    t = time.perf_counter()
    r = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"gpu_dedup failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    if r.stderr.strip():
        print(f"gpu_dedup stderr: {r.stderr.strip()[-2000:]}")
    with open(os.path.join(out, "run.json")) as fh:
        run = json.load(fh)
    return {"wall": wall, "run": run, "kept": _kept_ids(os.path.join(out, "deduplicated"))}


def run_datatrove(python: str, script: str, src: str, work: str, workers: int, tokenizer: str) -> dict:
    base = tempfile.mkdtemp(prefix="datatrove-", dir=work)
    log = os.path.join(work, "datatrove.log")
    try:
        t = time.perf_counter()
        with open(log, "w") as err:
            r = subprocess.run([python, script, src, base, str(workers), tokenizer], check=False, stdout=subprocess.PIPE,
                               stderr=err, text=True)
        wall = time.perf_counter() - t
        if r.returncode != 0:
            with open(log) as fh:
                tail = fh.read()[-4000:]
            raise SystemExit(f"datatrove pipeline failed (rc {r.returncode}); log {log}:\n{tail}")
        res = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("DT_RESULT ")][-1][10:])
        res.update(wall=wall, kept=_kept_ids(os.path.join(base, "deduplicated")))
        return res
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--shard", type=int, default=50_000, help="documents per Parquet shard (as cpu_pipeline.py)")
    ap.add_argument("--workers", type=int, default=2, help="our --threads and datatrove's tasks/workers")
    ap.add_argument("--work", default="/tmp/gd-e2e")
    ap.add_argument("--repeat", type=int, default=1, help="runs per side; the best (lowest wall) is reported")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up run of each side")
    ap.add_argument("--dt-tokenizer", choices=("whitespace", "spacy"), default="whitespace",
                    help="datatrove's word tokenizer: str.split (the same tokens as ours; default) or its spaCy "
                         "English default (needs spaCy)")
    default_py = "/work/venv-dt/bin/python"
    ap.add_argument("--datatrove-python", default=default_py if os.path.exists(default_py) else sys.executable,
                    help="interpreter with datatrove 0.10.1 installed (default: %(default)s)")
    args = ap.parse_args()

    src = make(args.work, args.docs, args.words, args.shard)
    shards = _parquet_files(src)
    if len(shards) < args.workers:
        print(f"warning: {len(shards)} shard(s) < {args.workers} workers: datatrove parallelizes stages 1 and 4 "
              "by file, so some of its tasks get no input")
    for f in shards:  # same page-cache state for both sides
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    script = os.path.join(args.work, "datatrove_minhash.py")
    with open(script, "w") as fh:
        fh.write(DT_SCRIPT)
    out = os.path.join(args.work, "out-ours")
    if not args.no_warmup:
        warm_up(args, script)

    best_ours = best_dt = None
    for k in range(args.repeat):
        ours = run_ours(src, out, args.workers)
        dt = run_datatrove(args.datatrove_python, script, src, args.work, args.workers, args.dt_tokenizer)
        print(f"run {k + 1}/{args.repeat}: ours {ours['wall']:.1f} s, datatrove {dt['wall']:.1f} s", flush=True)
        if best_ours is None or ours["wall"] < best_ours["wall"]:
            best_ours = ours
        if best_dt is None or dt["wall"] < best_dt["wall"]:
            best_dt = dt

    run = best_ours["run"]
    n = run["counts"]["input"]
    cfg = run["config"]
    text_mb = run["read"].get("bytes_text", 0) / 1e6
    print(f"\n{n:,} documents (~{args.words} words, {text_mb:,.0f} MB of text, {len(shards)} Parquet shard(s)), "
          f"W = {args.workers}, best of {args.repeat} per side, wall-clock seconds")
    print(f"ours: gpu_dedup default preset ({cfg['shingle']['kind']} {cfg['shingle']['n']}-grams, "
          f"K = {cfg['minhash']['num_perm']} = {cfg['lsh']['bands']} x {cfg['lsh']['rows']}, "
          f"{cfg['minhash']['width']}-bit, verify at {cfg['cluster']['threshold']}), --threads {args.workers}")
    print(f"datatrove {best_dt['version']}: MinhashConfig() = {best_dt['config']} "
          f"({best_dt['buckets'] * best_dt['hashes']} hashes), {best_dt['tokenizer']} word tokenizer, "
          "LocalPipelineExecutor per stage")

    print(f"\n{'gpu_dedup stage':40s} {'s':>8s}")
    timings = run["timings_s"]
    for stage, sec in timings.items():
        if stage != "total":
            print(f"  {stage:38s} {sec:8.1f}")
    print(f"  {'start-up, report (wall - total)':38s} {best_ours['wall'] - timings['total']:8.1f}")
    print(f"\n{'datatrove stage':40s} {'s':>8s}")
    tasks = {"signatures": args.workers, "buckets": best_dt["buckets"], "cluster": 1, "filter + write": args.workers}
    for stage in DT_STAGES:
        label = f"{stage} ({tasks[stage]} task{'s' if tasks[stage] > 1 else ''})"
        print(f"  {label:38s} {best_dt['stages'][stage]:8.1f}")
    print(f"  {'start-up, imports (wall - stages)':38s} {best_dt['wall'] - sum(best_dt['stages'].values()):8.1f}")

    ko, kd = set(best_ours["kept"]), set(best_dt["kept"])
    rows = [
        ("total wall (s)", f"{best_ours['wall']:.1f}", f"{best_dt['wall']:.1f}"),
        ("docs/s end to end", f"{n / best_ours['wall']:,.0f}", f"{n / best_dt['wall']:,.0f}"),
        ("kept documents", f"{len(best_ours['kept']):,}", f"{len(best_dt['kept']):,}"),
        ("removed documents", f"{n - len(best_ours['kept']):,}", f"{n - len(best_dt['kept']):,}"),
        ("kept by this side only", f"{len(ko - kd):,}", f"{len(kd - ko):,}"),
    ]
    print(f"\n{'':28s} {'gpu_dedup':>12s} {'datatrove':>12s}")
    for name, a, b in rows:
        print(f"{name:28s} {a:>12s} {b:>12s}")
    print(f"{'kept by both':28s} {len(ko & kd):>12,}")
    kinds = _kinds(shards)
    print("removed, by the generator's label (a removed 'unique' document is the source of copies, one of which was "
          "kept instead):")
    for kind in ("exact", "near", "template", "short", "unique"):
        total = sum(1 for v in kinds.values() if v == kind)
        ro = sum(1 for i, v in kinds.items() if v == kind and i not in ko)
        rd = sum(1 for i, v in kinds.items() if v == kind and i not in kd)
        print(f"  {kind + f' ({total:,})':26s} {ro:>12,} {rd:>12,}")
    print(f"\ndatatrove_total / ours_total = {best_dt['wall'] / best_ours['wall']:.2f}")


if __name__ == "__main__":
    main()
