"""Bloom filter at scale: measured false-positive rate, memory and insert/query throughput, next to the
exact seen-set's memory.

Inserts n distinct items (the 8-byte little-endian integers 0..n-1) and queries n other distinct items
(n..2n-1); the observed false-positive rate is (queries found) / n. Everything printed is measured here.

    python benchmarks/bloom_fp.py                       # n = 10 M, p = 1e-3, 1e-6, 1e-9 on the CPU
    python benchmarks/bloom_fp.py --device cuda --json out.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))

from gpu_dedup.runtime.device import resolve_device, simulator, to_device  # noqa: E402
from gpu_dedup.paragraph.bloom import BloomConfig, BloomFilter, ExactSet, hash_spans  # noqa: E402


def _sync(device: str) -> None:
    if device == "cuda" and not simulator():
        import cupy

        cupy.cuda.Device().synchronize()


def _timed(fn, device):
    _sync(device)
    t = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - t


def _keys(lo: int, hi: int, device: str):
    data = np.arange(lo, hi, dtype="<u8").view(np.uint8)
    starts = np.arange(0, 8 * (hi - lo), 8, dtype=np.int64)
    return to_device(data, device), to_device(starts, device), to_device(starts + 8, device)


def _warm_up(device: str) -> None:
    """Load / compile every kernel once on a tiny input so the timings measure throughput, not JIT."""
    h = hash_spans(*_keys(0, 1000, device), device=device)
    bf = BloomFilter(BloomConfig(expected_items=1000, fp_rate=0.01), device)
    bf.insert(*h)
    bf.query(*h)
    es = ExactSet(BloomConfig(expected_items=1000, mode="exact"), device)
    es.insert(*h)
    es.query(*h)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000, help="items inserted (and queried), default 10 M")
    ap.add_argument("--fp", type=float, nargs="+", default=[1e-3, 1e-6, 1e-9], help="target rates p")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--exact-batch", type=int, default=1_000_000, help="items per exact-set insert (streaming)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    device = resolve_device(args.device)
    n = args.n
    import numba

    res: dict = {"n": n, "device": device, "threads": numba.get_num_threads(), "cpu": platform.processor(),
                 "cores": os.cpu_count(), "bloom": [], "exact": None}

    _warm_up(device)
    ins, t_h1 = _timed(lambda: hash_spans(*_keys(0, n, device), device=device), device)
    qry, t_h2 = _timed(lambda: hash_spans(*_keys(n, 2 * n, device), device=device), device)
    res["hash_items_per_s"] = 2 * n / (t_h1 + t_h2)
    print(f"n = {n:,} items, device {device} ({res['threads']} threads); XXH64x2 hashing "
          f"{res['hash_items_per_s'] / 1e6:.1f} M items/s")
    print(f"{'p':>8} {'m bits':>14} {'k':>3} {'MiB':>9} {'insert M/s':>11} {'query M/s':>10} "
          f"{'FP observed':>12} {'FP count':>9} {'expected':>9} {'obs/p':>6}")
    for p in args.fp:
        bf = BloomFilter(BloomConfig(expected_items=n, fp_rate=p), device)
        _, t_ins = _timed(lambda: bf.insert(*ins), device)
        found_ins, t_q1 = _timed(lambda: bf.query(*ins), device)
        found, t_q2 = _timed(lambda: bf.query(*qry), device)
        fn = int(n - int(found_ins.sum()))
        fp_count = int(found.sum())
        row = {"p": p, "m_bits": bf.m, "k": bf.k, "bytes": bf.nbytes, "insert_items_per_s": n / t_ins,
               "query_items_per_s": 2 * n / (t_q1 + t_q2), "false_negatives": fn, "fp_count": fp_count,
               "fp_observed": fp_count / n, "fp_expected_count": n * p,
               "fp_estimated_from_fill": bf.stats()["estimated_fp_rate_from_fill"]}
        res["bloom"].append(row)
        ratio = row["fp_observed"] / p
        print(f"{p:>8.0e} {bf.m:>14,} {bf.k:>3} {bf.nbytes / 2**20:>9.1f} {row['insert_items_per_s'] / 1e6:>11.2f} "
              f"{row['query_items_per_s'] / 1e6:>10.2f} {row['fp_observed']:>12.3e} {fp_count:>9,} "
              f"{n * p:>9.2f} {ratio:>6.2f}" + ("" if n * p >= 10 else "  (too few expected to resolve)"))
        assert fn == 0, "a Bloom filter never has false negatives"

    es = ExactSet(BloomConfig(expected_items=n, mode="exact"), device)

    def fill():
        for s in range(0, n, args.exact_batch):
            es.insert(ins[0][s:s + args.exact_batch], ins[1][s:s + args.exact_batch])

    _, t_ins = _timed(fill, device)
    found, t_q = _timed(lambda: es.query(*qry), device)
    res["exact"] = {"bytes": es.nbytes, "runs": len(es.runs), "insert_items_per_s": n / t_ins,
                    "query_items_per_s": n / t_q, "fp_count": int(found.sum())}
    print(f"exact mode: {es.nbytes / 2**20:.1f} MiB (16 B/item) in {len(es.runs)} sorted runs, insert "
          f"{n / t_ins / 1e6:.2f} M/s (batches of {args.exact_batch:,}), query {n / t_q / 1e6:.2f} M/s, "
          f"false positives {res['exact']['fp_count']}")
    for row in res["bloom"]:
        print(f"  Bloom p={row['p']:.0e}: {row['bytes'] / es.nbytes:.2f}x the exact set's memory "
              f"({row['bytes'] * 8 / n:.1f} bits/item vs 128; theory -log2(p)/ln2 = "
              f"{-math.log2(row['p']) / math.log(2):.1f})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
