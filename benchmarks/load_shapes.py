"""Extreme corpus shapes end to end (child processes: wall time, peak RSS, one decisions row per id):
N short documents (a few words each: only the exact path), and M huge documents of S MB each.

    python benchmarks/load_shapes.py --short 5000000 --huge 1000 --huge-mb 5
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time, numpy as np, pyarrow as pa, pyarrow.parquet as pq, gpu_dedup
kind, n, mb, src = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
if kind == "short":
    vocab = np.array(["alpha", "beta", "gamma", "delta", "omega", "x", "y", "z", "data", "text"])
    w = rng.integers(0, vocab.shape[0], (n, 3))
    texts = pa.array(np.char.add(np.char.add(np.char.add(vocab[w[:, 0]], " "), vocab[w[:, 1]]),
                                 np.char.add(" ", vocab[w[:, 2]])))
    pq.write_table(pa.table({"id": pa.array(np.char.add("s", np.arange(n).astype(str))), "text": texts}),
                   f"{src}/short.parquet")
else:
    words = np.array([f"w{i}" for i in range(20000)])
    per = int(mb * 1e6 / 6)
    bases = [" ".join(words[rng.integers(0, 20000, per)]) for _ in range(8)]
    for k in range(0, n, 50):
        m = min(50, n - k)
        # rotations of a few random bases: cheap to make, and near duplicates of each other
        texts = []
        for i in range(m):
            b = bases[(k + i) % 8]
            cut = b.find(" ", int(rng.integers(1, len(b) - 1))) + 1 or 1
            texts.append(b[cut:] + " " + b[:cut])
        pq.write_table(pa.table({"id": [f"h{k + i}" for i in range(m)], "text": texts}), f"{src}/huge-{k:05d}.parquet")
t = time.perf_counter()
r = gpu_dedup.deduplicate(src, gpu_dedup.RunConfig(progress=False), output_dir=f"{src}/out", write_deduplicated=False)
d = r.decisions
print(json.dumps({"seconds": time.perf_counter() - t, "rows": d.num_rows, "unique_ids": len(set(d["id"].to_pylist())),
                  "removed": r.removed, "gb": r.stats["read"]["bytes_text"] / 1e9}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--short", type=int, default=5_000_000)
    ap.add_argument("--huge", type=int, default=1000)
    ap.add_argument("--huge-mb", type=float, default=5.0)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CHILD)
    print(f"{'corpus':34s} {'docs':>10s} {'GB':>6s} {'s (dedup)':>10s} {'peak RSS GB':>12s} {'rows = ids':>11s}")
    for kind, n, mb in (("short", args.short, 0), ("huge", args.huge, args.huge_mb)):
        src = tempfile.mkdtemp(prefix=f"gd-{kind}-", dir=args.work)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        r = subprocess.run([sys.executable, f.name, kind, str(n), str(mb), src], capture_output=True, text=True)
        if r.returncode:
            print(f"{kind}: failed\n{r.stderr[-2000:]}")
            continue
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        d = json.loads(r.stdout.strip().splitlines()[-1])
        label = f"{kind} ({mb:g} MB each)" if kind == "huge" else f"{kind} (3 words each)"
        peak = f"{rss / 2**20:12.2f}" if rss > before else f"{'<= prev':>12s}"
        print(f"{label:34s} {n:10,d} {d['gb']:6.2f} {d['seconds']:10.1f} {peak} "
              f"{str(d['rows'] == d['unique_ids'] == n):>11s}")
        subprocess.run(["rm", "-rf", src])
    os.unlink(f.name)


if __name__ == "__main__":
    main()
