"""The CPU MinHash kernel against its arithmetic limit, one thread.

Usage: python benchmarks/minhash_limit.py [--docs 3000] [--words 400] [--repeats 5]

Runs ``kernels/core_cpu.py:minhash_signatures`` (word 5-grams) over ``gpu_dedup.testing.evalcorpus.make_corpus`` text at
several K (permutations per shingle) and fits time = S * (fixed + K / rate) over the S shingles: ``rate`` is
what the permutations (exact (a*h+b) mod 2^61-1 and the running minimum) cost per permutation at the margin,
``fixed`` what each shingle costs besides them (finding it, XXH64 over its bytes, the loop). The arithmetic
limit at K is S * K / rate: the run if shingles were free. The table prints, per K, the measured time, that
limit and their ratio (the share of the run spent on the permutations themselves). Last, the exact-duplicate
hash of the same documents (``exact_hashes``: two XXH64 per document), the other XXH64 loop of the CPU path.

The kernels compile into a private Numba cache directory (unless NUMBA_CACHE_DIR is set): Numba validates a
cached kernel against kernels/core_cpu.py's mtime only, so an edit of kernels/core.py could otherwise be
measured with a stale kernel.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

if "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="minhash_limit_numba_")

import numba  # noqa: E402
import numpy as np  # noqa: E402

from gpu_dedup.config import MinHashConfig, NormalizeConfig  # noqa: E402
from gpu_dedup.testing.evalcorpus import make_corpus  # noqa: E402
from gpu_dedup.kernels import core_cpu as cpu  # noqa: E402
from gpu_dedup.lexical.minhash import permutation_params  # noqa: E402
from gpu_dedup.text.normalize import normalize_text  # noqa: E402

KS = (8, 32, 64, 100, 128, 256)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    numba.set_num_threads(1)
    norm = normalize_text(make_corpus(args.docs, seed=1, mean_words=args.words)["text"].combine_chunks(),
                          NormalizeConfig())
    n = len(norm)
    counts = norm.shingle_counts(5, False)
    best = {}
    shingles = 0
    for k in KS:
        a, b = permutation_params(MinHashConfig(num_perm=k, family="exact"))
        out = np.empty((n, k), np.uint64)
        nsh = np.empty(n, np.int64)

        def run(a=a, b=b, out=out, nsh=nsh) -> None:
            cpu.minhash_signatures(norm.data, norm.offsets, counts, False, 5, np.uint64(0), a, b, np.uint64(2**64 - 1),
                                   out, nsh)
        run()  # compile / warm up
        best[k] = min(_timed(run) for _ in range(args.repeats))
        shingles = int(nsh.sum())
    exact = np.empty((n, 2), np.uint64)
    cpu.exact_hashes(norm.data, norm.offsets, exact)
    exact_best = min(_timed(lambda: cpu.exact_hashes(norm.data, norm.offsets, exact)) for _ in range(args.repeats))
    ks = np.array(KS, float)
    ts = np.array([best[k] for k in KS])
    slope, intercept = np.polyfit(ks, ts, 1)  # seconds per K (all shingles), seconds at K = 0
    rate = shingles / slope
    fixed_ns = intercept / shingles * 1e9
    print(f"{n:,} documents, {shingles:,} word 5-gram shingles, 1 thread, best of {args.repeats}")
    print(f"fit: permutations at {rate / 1e9:.2f} G/s; {fixed_ns:.1f} ns per shingle besides them\n")
    print(f"{'K':>5s} {'ms':>8s} {'M shingles/s':>13s} {'G perm/s':>9s} {'limit ms':>9s} {'limit/measured':>15s}")
    for k in KS:
        limit = shingles * k / rate
        print(f"{k:5d} {best[k] * 1e3:8.1f} {shingles / best[k] / 1e6:13.1f} {shingles * k / best[k] / 1e9:9.2f} "
              f"{limit * 1e3:9.1f} {limit / best[k]:15.2f}")
    text_mb = int(norm.offsets[-1]) / 1e6
    print(f"\nexact hashes (2 x XXH64 per document): {exact_best * 1e3:.1f} ms, {text_mb / exact_best:,.0f} MB/s")


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
