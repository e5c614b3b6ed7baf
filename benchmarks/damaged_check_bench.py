"""The cost of the damaged-file rule on a large .jsonl.gz (issue 36 item 2): reading with on_error='skip', where a
compressed file is checked (decoded to its end) on a thread beside its first read and its chunks are held until
the check or the read has decoded it whole, against the same reader with on_error='raise' (no check), today's
reader (``--today``: a checkout of the code before the rule, e.g. /work/main), and the floor, one decompression.

Writes (or reuses) ``--dir``/big.jsonl.gz of about ``--mb`` MB compressed (word-like text, ~1.7x), then runs each
mode ``--repeat`` times in a child process of its own, interleaved (so page cache and load are alike), and prints
the median wall time, CPU time (user + system: less sensitive to other load than wall time on a shared
machine), the time to the first batch, and the child's peak RSS:

* ``decompress``: ``pyarrow.input_stream(gzip)`` read to its end in 1 MiB pieces (what the check costs alone);
* ``raise``: ``io.iter_batches(on_error="raise")``, every batch consumed (64 MiB batches, the CPU default);
* ``skip``: the same with ``on_error="skip"``: the file is larger than the hold (read-ahead, 256 MiB) can
  take, so it is checked on a thread beside the read from the start, the read holding its chunks meanwhile;
* ``skip-wait``: ``skip`` with ``read_ahead_bytes=0``: nothing held, the read waits for the check at its
  first chunk (a check, then the read);
* ``today-raise`` / ``today-skip``: the reader of ``--today`` (``PYTHONPATH`` set to it).

    python benchmarks/damaged_check_bench.py --mb 200 --repeat 3 --today /work/main
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _make(path: str, mb: int, seed: int = 0) -> None:
    import gzip
    import random

    if os.path.exists(path) and os.path.getsize(path) >= mb * 1e6:
        return
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("etaoinshrdlucmfwypvbgkjqxz"[:rng.randint(8, 26)]) for _ in range(rng.randint(1, 11)))
             for _ in range(50000)]
    t = time.perf_counter()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as gz:
        i = 0
        while raw.tell() < mb * 1e6:
            lines = []
            for _ in range(2000):
                lines.append(json.dumps({"id": f"d{i}", "text": " ".join(rng.choices(vocab, k=rng.randint(50, 1500)))}))
                i += 1
            gz.write(("\n".join(lines) + "\n").encode())
    print(f"wrote {path}: {os.path.getsize(path) / 1e6:.0f} MB, {i:,} documents ({time.perf_counter() - t:.0f} s)")


def _child(mode: str, path: str) -> dict:
    """One timed read in this process (a child of the driver)."""
    import resource

    import pyarrow as pa

    if mode != "decompress":
        from gpu_dedup import io  # imported before the clock starts
    use = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = use.ru_utime + use.ru_stime
    t = time.perf_counter()
    first = None
    rows = 0
    if mode == "decompress":
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        with pa.input_stream(path, compression="gzip") as s:
            while s.readinto(view):
                first = first or time.perf_counter() - t
    else:
        kw = {"read_ahead_bytes": 0} if mode == "skip-wait" else {}
        on_error = "raise" if mode.endswith("raise") else "skip"
        for b in io.iter_batches(io.resolve_inputs([path]), id_field="id", text_field="text", batch_bytes=64 << 20,
                                 on_error=on_error, **kw):
            first = first or time.perf_counter() - t
            rows += len(b)
    use = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall": time.perf_counter() - t, "first": first, "rows": rows, "cpu": use.ru_utime + use.ru_stime - cpu0,
            "rss_mb": use.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/gpu_dedup_damaged_bench")
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--today", default=None, help="a checkout of the code before the rule (its reader is timed too)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    path = os.path.join(args.dir, "big.jsonl.gz")
    if args.child:
        print(json.dumps(_child(args.child, path)))
        return
    os.makedirs(args.dir, exist_ok=True)
    _make(path, args.mb)
    modes = {"decompress": HERE, "raise": HERE, "skip": HERE, "skip-wait": HERE}
    if args.today:
        modes.update({"today-raise": args.today, "today-skip": args.today})
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    order = list(modes)
    for k in range(args.repeat):
        for mode in order[k % len(order):] + order[:k % len(order)]:  # rotated: no mode always runs after another
            root = modes[mode]
            env = dict(os.environ, PYTHONPATH=root)
            out = subprocess.run([sys.executable, __file__, "--dir", args.dir, "--child", mode], env=env, check=True,
                                 capture_output=True, text=True).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1]))
    base = statistics.median(r["wall"] for r in runs["raise"])
    print(f"{os.path.getsize(path) / 1e6:.0f} MB .jsonl.gz, median of {args.repeat}, load {os.getloadavg()[0]:.1f}")
    cpu_base = statistics.median(r["cpu"] for r in runs["raise"])
    print(f"{'mode':<12} {'wall s':>7} {'/ raise':>8} {'CPU s':>7} {'/ raise':>8} {'first batch s':>14} "
          f"{'peak RSS MB':>12} {'rows':>8}")
    for mode, rs in runs.items():
        wall = statistics.median(r["wall"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)
        first = statistics.median(r["first"] or 0 for r in rs)
        rss = statistics.median(r["rss_mb"] for r in rs)
        print(f"{mode:<12} {wall:7.2f} {wall / base:8.2f} {cpu:7.2f} {cpu / cpu_base:8.2f} {first:14.2f} {rss:12.0f} "
              f"{rs[0]['rows']:8,}")


if __name__ == "__main__":
    main()
