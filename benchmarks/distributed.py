"""The Ray engine vs the local engine in the same run, alternating: wall-time ratio (each round side by side,
with the load average before it and the Ray run's stages apart from its fixed costs), the driver's peak RSS,
the workers' peak RSS, bytes the shuffle writes per document, identical decisions; then the Ray engine's
driver peak RSS at each of --driver sizes (it must not grow with the documents: no per-document state).

    python benchmarks/distributed.py --docs 1000000 --driver 1000000,4000000 --words 100 --work /tmp/gd-dist

    python benchmarks/distributed.py --rounds 0 --driver "" --cli 100000,1000000 --words 20

    ray start --head --num-cpus 2 && python benchmarks/distributed.py --driver "" --words 20 --address auto

The comparison runs are child processes of ``gpu-dedup run -o OUT --no-deduplicated`` (the Ray ones start
a local cluster of --workers processes, or with --address join a running one: its start-up paid once). ``--cli``: the driver's peak RSS of that command line on Ray (report.html
included, the decisions as the Ray engine's default dataset of per-file parts) at each size: it must not grow with
the documents either. The driver-memory runs are child processes calling
``deduplicate(src, work_dir=W, engine="ray", workers=N)`` without an output directory: the engine alone
(``gpu-dedup run`` adds report.html, which reads decisions.parquet whole). Every result is printed as it
comes and appended to --json (one JSON object a line), so a run cut short keeps what it measured.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_pipeline import make  # noqa: E402  (same corpus generator and layout)
from scale import _du, run  # noqa: E402  (a child process per run: wall time, its peak RSS, run.json)


def _shuffle_bytes(work: str) -> int:
    """Bytes of the Ray engine's exchange files (everything under WORK/ray but the pieces and the parts)."""
    root = os.path.join(work, "ray")
    return sum(_du(os.path.join(root, d)) for d in os.listdir(root)
               if d not in ("pieces", "decisions", "done") and os.path.isdir(os.path.join(root, d)))


def ray_run(src: str, work: str, workers: int, extra: list[str], address: str | None = None,
            deduplicated: bool = False) -> dict:
    """A `gpu-dedup run --engine ray` child: a local cluster of ``workers`` processes it starts and stops, or
    (``address``) the running cluster it joins (`ray start --head --num-cpus N` beforehand: start-up paid once)."""
    wd = os.path.join(work, "workdir-ray")
    where = ["--address", address] if address else ["--workers", str(workers)]
    r = run(src, os.path.join(work, "out-ray"), ["--engine", "ray", *where, "--work-dir", wd, *extra], deduplicated)
    r["shuffle"] = _shuffle_bytes(wd)
    return r


_ENGINE_ONLY = ("import json, resource, sys\n"
                "from gpu_dedup import RunConfig, deduplicate\n"
                "r = deduplicate(sys.argv[1], RunConfig(progress=False), work_dir=sys.argv[2], engine='ray', "
                "workers=int(sys.argv[3]))\n"
                "print('RESULT', json.dumps({'peak': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "
                "'input': r.stats['counts']['input'], 'removed': r.stats['counts']['removed'], "
                "'engine': r.stats['engine']}))\n")


def engine_only(src: str, work: str, workers: int) -> dict:
    """The Ray engine's driver alone (no output directory): wall time and the driver process's peak RSS."""
    wd = os.path.join(work, "workdir-driver")
    for attempt in range(3):  # Ray gives a local cluster 30 s to start: on a loaded machine, try again
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", _ENGINE_ONLY, src, wd, str(workers)], capture_output=True,
                           text=True)
        if r.returncode == 0 or "timed out during startup" not in r.stderr or attempt == 2:
            break
        print("the local Ray cluster did not start in time; trying again", flush=True)
    if r.returncode:
        raise SystemExit(f"the engine-only run failed:\n{r.stderr[-3000:]}")
    got = json.loads([line for line in r.stdout.splitlines() if line.startswith("RESULT")][0].split(" ", 1)[1])
    got["wall"] = time.perf_counter() - t
    got["shuffle"] = _shuffle_bytes(wd)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000, help="documents of the local vs Ray comparison")
    ap.add_argument("--driver", default="1000000,4000000",
                    help="comma-separated sizes of the engine-only driver-memory runs ('' to skip)")
    ap.add_argument("--cli", default="", help="comma-separated sizes of `gpu-dedup run --engine ray` driver-memory "
                    "runs (report included; '' to skip)")
    ap.add_argument("--words", type=int, default=100, help="mean words per document (>= 20)")
    ap.add_argument("--shard", type=int, default=100_000, help="documents per Parquet file")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--address", default=None, help="the comparison's Ray runs join this running cluster (e.g. auto, "
                    "after `ray start --head --num-cpus 2`) instead of starting their own")
    ap.add_argument("--rounds", type=int, default=2, help="local / ray pairs, alternating")
    ap.add_argument("--work", default="/tmp/gd-dist")
    ap.add_argument("--json", default=None, help="append every result here (default WORK/results.jsonl)")
    ap.add_argument("--deduplicated", action="store_true", help="the --cli runs write OUT/deduplicated/ (what a "
                    "span stage after dedup reads: --extra=--paragraph-dedup); default --no-deduplicated")
    ap.add_argument("--extra", default="", help="extra flags for every comparison run, e.g. '--memory-budget 1G'")
    args = ap.parse_args()
    extra = args.extra.split()
    log = args.json or os.path.join(args.work, "results.jsonl")
    os.makedirs(args.work, exist_ok=True)

    def emit(kind: str, **fields) -> None:
        rec = {"kind": kind, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": f"{platform.node()} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
               "words": args.words, "shard": args.shard, "workers": args.workers, **fields}
        with open(log, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)

    sizes = [int(s) for s in args.driver.split(",") if s]
    # the comparison's corpus: only when a comparison round or a driver run of --docs documents reads it
    src = make(os.path.join(args.work, "small"), args.docs, args.words, args.shard) \
        if args.rounds or args.docs in sizes else None
    local, ray = [], []
    for k in range(args.rounds):
        load = os.getloadavg()[0]
        r = run(src, os.path.join(args.work, "out-local"), [*extra])
        r["load"] = load
        local.append(r)
        emit("local", round=k, docs=args.docs, wall=r["wall"], peak=r["peak"])
        load = os.getloadavg()[0]
        r = ray_run(src, args.work, args.workers, extra, args.address)
        r["load"] = load
        ray.append(r)
        emit("ray", round=k, docs=args.docs, wall=r["wall"], peak=r["peak"], shuffle=r["shuffle"],
             worker_peak=r["stats"]["engine"]["worker_peak_rss_bytes"], partitions=r["stats"]["engine"]["partitions"],
             timings={k2: round(v, 1) for k2, v in r["stats"]["timings_s"].items()})
    if args.rounds:
        same = pq.read_table(os.path.join(args.work, "out-local", "decisions.parquet")).equals(
            pq.read_table(os.path.join(args.work, "out-ray", "decisions")))  # the Ray engine's per-file parts
        n = local[0]["stats"]["counts"]["input"]
        lw, rw = min(r["wall"] for r in local), min(r["wall"] for r in ray)
        print(f"\n{n:,} documents x ~{args.words} words, {args.workers} Ray workers, {args.rounds} rounds "
              "(local, then Ray, alternating); the Ray run's stages: run.json's ray_* timings, the rest is the "
              "cluster's start and stop, the probe, the report and the process")
        print(f"{'round':>5} {'local s':>8} {'ray s':>7} {'ratio':>6} {'ray stages s':>13} {'ray rest s':>11} "
              f"{'load (1 min)':>13}")
        for k, (lo, ra) in enumerate(zip(local, ray)):
            st = sum(v for key, v in ra["stats"]["timings_s"].items() if key.startswith("ray_"))
            print(f"{k:>5} {lo['wall']:>8.1f} {ra['wall']:>7.1f} {ra['wall'] / lo['wall']:>6.2f} {st:>13.1f} "
                  f"{ra['wall'] - st:>11.1f} {lo['load']:>6.1f}/{ra['load']:<6.1f}")
        ratios = sorted(ra["wall"] / lo["wall"] for lo, ra in zip(local, ray))
        print(f"local wall {lw:.1f} s (best), driver peak RSS {max(r['peak'] for r in local) / 2**20:.0f} MiB")
        print(f"ray   wall {rw:.1f} s (best), driver peak RSS {max(r['peak'] for r in ray) / 2**20:.0f} MiB, worker "
              f"peak RSS {max(r['stats']['engine']['worker_peak_rss_bytes'] for r in ray) / 2**20:.0f} MiB, shuffle "
              f"{ray[-1]['shuffle'] / n:.0f} bytes/document")
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"ray / local wall-time ratio {rw / lw:.2f} (best of each), per round {each} (median "
              f"{ratios[len(ratios) // 2]:.2f}); decisions identical: {same}", flush=True)
        emit("summary", docs=n, local_wall=lw, ray_wall=rw, ratio=rw / lw, round_ratios=ratios, same=same)
    cli = []
    for size in [int(s) for s in args.cli.split(",") if s]:
        s = make(os.path.join(args.work, f"driver-{size}"), size, args.words, args.shard)
        r = ray_run(s, os.path.join(args.work, f"cli-{size}"), args.workers, extra, deduplicated=args.deduplicated)
        cli.append((r["stats"]["counts"]["input"], r["peak"]))
        emit("cli-driver", docs=cli[-1][0], wall=r["wall"], peak=r["peak"], shuffle=r["shuffle"],
             worker_peak=r["stats"]["engine"]["worker_peak_rss_bytes"])
    if len(cli) > 1:
        (n0, p0), (n1, p1) = cli[0], cli[-1]
        print(f"driver peak RSS (gpu-dedup run --engine ray, report included): {p0 / 2**20:.0f} MiB at {n0:,} "
              f"documents, {p1 / 2**20:.0f} MiB at {n1:,} (difference {(p1 - p0) / 2**20:+.0f} MiB)")
    peaks = []
    for size in sizes:
        s = src if size == args.docs else make(os.path.join(args.work, f"driver-{size}"), size, args.words,
                                                args.shard)
        r = engine_only(s, os.path.join(args.work, f"driver-run-{size}"), args.workers)
        peaks.append((r["input"], r["peak"]))
        emit("driver", docs=r["input"], wall=r["wall"], peak=r["peak"], shuffle=r["shuffle"],
             worker_peak=r["engine"]["worker_peak_rss_bytes"], removed=r["removed"])
    if len(peaks) > 1:
        (n0, p0), (n1, p1) = peaks[0], peaks[-1]
        print(f"driver peak RSS (engine only): {p0 / 2**20:.0f} MiB at {n0:,} documents, {p1 / 2**20:.0f} MiB at "
              f"{n1:,} (difference {(p1 - p0) / 2**20:+.0f} MiB)")


if __name__ == "__main__":
    main()
