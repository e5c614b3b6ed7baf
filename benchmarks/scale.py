"""Scale: the whole pipeline on a generated corpus, local engine vs the Ray engine (2 workers) in the
same run, with wall time, peak RSS of each child process and the bytes written to the work directory.

    python benchmarks/scale.py --docs 1000000 --words 100 --work /tmp/gd-scale
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_pipeline import make  # noqa: E402  (same corpus generator and layout)


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def run(src: str, out: str, extra: list[str], deduplicated: bool = False) -> dict:
    """A `gpu-dedup run` child (``--no-deduplicated`` unless ``deduplicated``): wall time, its peak RSS, run.json."""
    child = ("import resource, sys, gpu_dedup.cli as c; rc = c.main(sys.argv[1:]); "
             "print('PEAK_RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")
    cmd = [sys.executable, "-c", child, "run", src, "-o", out, "--overwrite", "-q",
           *([] if deduplicated else ["--no-deduplicated"]), *extra]
    t = time.perf_counter()
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    peak = int([line for line in r.stdout.splitlines() if line.startswith("PEAK_RSS")][0].split()[1]) * 1024
    stats = json.load(open(os.path.join(out, "run.json")))
    return {"wall": wall, "peak": peak, "stats": stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--words", type=int, default=100)
    ap.add_argument("--shard", type=int, default=100_000)
    ap.add_argument("--work", default="/tmp/gd-scale")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--extra", default="", help="extra flags for both runs, e.g. '--memory-budget 1G'")
    args = ap.parse_args()
    src = make(args.work, args.docs, args.words, args.shard)
    rows = []
    wd = os.path.join(args.work, "workdir-local")
    extra = args.extra.split()
    local = run(src, os.path.join(args.work, "out-local"), ["--work-dir", wd, *extra])
    rows.append((f"local engine (2 threads) {args.extra}".strip(), local, _du(wd)))
    if not args.no_ray:
        wd = os.path.join(args.work, "workdir-ray")
        ray_r = run(src, os.path.join(args.work, "out-ray"), ["--engine", "ray", "--workers", "2", "--work-dir", wd,
                                                             "--table-layout", "file", *extra])
        rows.append(("Ray engine, local cluster of 2 workers", ray_r, _du(wd)))
        same = open(os.path.join(args.work, "out-local", "decisions.parquet"), "rb").read() == \
            open(os.path.join(args.work, "out-ray", "decisions.parquet"), "rb").read()
    n = local["stats"]["counts"]["input"]
    print(f"\n{n:,} documents, {local['stats']['read']['bytes_text'] / 1e9:.2f} GB text")
    print(f"{'engine':38s} {'wall s':>8s} {'docs/s':>10s} {'peak RSS GB':>12s} {'work dir GB':>12s}")
    for name, r, wbytes in rows:
        print(f"{name:38s} {r['wall']:8.1f} {n / r['wall']:10,.0f} {r['peak'] / 2**30:12.2f} {wbytes / 1e9:12.2f}")
    if len(rows) == 2:
        print(f"\nray / local wall-time ratio: {rows[1][1]['wall'] / rows[0][1]['wall']:.2f}; "
              f"decisions.parquet byte-identical: {same}")
    print("(the Ray run's peak RSS is the driver's; its workers are separate processes)")


if __name__ == "__main__":
    main()
