"""The Ray engine vs the local engine in the same run, alternating: wall-time ratio, the driver's peak RSS,
the workers' peak RSS, bytes the shuffle writes per document, identical decisions; then the driver's peak
RSS of the Ray engine at a second, larger size (it must not grow with the documents: no per-document state).

    python benchmarks/distributed.py --docs 1000000 --big 4000000 --words 100 --work /tmp/gd-dist

Each run is a child process (``gpu-dedup run``); the Ray runs start a local cluster of --workers processes.
"""
import argparse
import os
import sys

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_pipeline import make  # noqa: E402  (same corpus generator and layout)
from scale import _du, run  # noqa: E402  (a child process per run: wall time, its peak RSS, run.json)


def _shuffle_bytes(work: str) -> int:
    """Bytes of the Ray engine's exchange files (everything under WORK/ray but the pieces and the parts)."""
    root = os.path.join(work, "ray")
    return sum(_du(os.path.join(root, d)) for d in os.listdir(root)
               if d not in ("pieces", "decisions", "done") and os.path.isdir(os.path.join(root, d)))


def ray_run(src: str, work: str, workers: int, extra: list[str]) -> dict:
    wd = os.path.join(work, "workdir-ray")
    r = run(src, os.path.join(work, "out-ray"), ["--engine", "ray", "--workers", str(workers), "--work-dir", wd,
                                                  *extra])
    r["shuffle"] = _shuffle_bytes(wd)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--big", type=int, default=4_000_000, help="second size for the driver's peak RSS (0: skip)")
    ap.add_argument("--words", type=int, default=100)
    ap.add_argument("--shard", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="local / ray pairs, alternating")
    ap.add_argument("--work", default="/tmp/gd-dist")
    ap.add_argument("--extra", default="", help="extra flags for every run, e.g. '--memory-budget 1G'")
    args = ap.parse_args()
    extra = args.extra.split()
    src = make(os.path.join(args.work, "small"), args.docs, args.words, args.shard)
    local, ray = [], []
    for _ in range(args.rounds):
        local.append(run(src, os.path.join(args.work, "out-local"), [*extra]))
        ray.append(ray_run(src, args.work, args.workers, extra))
    same = pq.read_table(os.path.join(args.work, "out-local", "decisions.parquet")).equals(
        pq.read_table(os.path.join(args.work, "out-ray", "decisions.parquet")))
    n = local[0]["stats"]["counts"]["input"]
    lw, rw = min(r["wall"] for r in local), min(r["wall"] for r in ray)
    print(f"\n{n:,} documents x ~{args.words} words, {args.workers} Ray workers, best of {args.rounds} (alternating)")
    print(f"local wall {lw:.1f} s, driver peak RSS {max(r['peak'] for r in local) / 2**20:.0f} MiB")
    print(f"ray   wall {rw:.1f} s, driver peak RSS {max(r['peak'] for r in ray) / 2**20:.0f} MiB, worker peak RSS "
          f"{max(r['stats']['engine']['worker_peak_rss_bytes'] for r in ray) / 2**20:.0f} MiB, shuffle "
          f"{ray[-1]['shuffle'] / n:.0f} bytes/document")
    print(f"ray / local wall-time ratio {rw / lw:.2f}; decisions identical: {same}")
    if args.big:
        big_src = make(os.path.join(args.work, "big"), args.big, args.words, args.shard)
        big = ray_run(big_src, os.path.join(args.work, "big-run"), args.workers, extra)
        small_peak = max(r["peak"] for r in ray)
        print(f"driver peak RSS: {small_peak / 2**20:.0f} MiB at {n:,} documents, {big['peak'] / 2**20:.0f} MiB at "
              f"{big['stats']['counts']['input']:,} (difference {(big['peak'] - small_peak) / 2**20:+.0f} MiB)")


if __name__ == "__main__":
    main()
