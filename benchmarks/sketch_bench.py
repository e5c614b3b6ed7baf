"""Our MinHash sketch vs rensa's RMinHash, per core, on the same shingles, in one process (issue 38 item 1).

Documents: ``gpu_dedup.testing.evalcorpus.make_corpus`` text (--docs, about --words words each), normalized by our
kernel. Their word n-gram shingles (--ngram) are the same for every lane:

  from shingle hashes  the shingles' 64-bit XXH64 (what our pipeline hashes them to) as one flat uint64 array and
                       row offsets: rensa's ``RMinHash.digest_matrix_from_flat_token_hashes(hashes, offsets, K, seed)``
                       (its full-set R-MinHash over pre-hashed tokens: every token counts, 32-bit values; not its
                       sampled "rho" sketch) vs ours, ``lexical.minhash.signatures_from_hashes`` (fss and exact
                       families, width 32): the sketches alone, like for like.
  from shingle strings rensa's ``digest_matrix_from_token_sets`` over each document's shingles as Python strings (its
                       own token hashing included; how its users call it, and the issue's 141,000 documents/s).
  from normalized text ours end to end from the normalized bytes: finding each shingle, XXH64 over it, the sketch
                       (``compute_signatures``, what pass 1 runs); rensa has no such entry point.

K = --num-perm (112), seed 42, one thread each: RAYON_NUM_THREADS=1 for rensa (set before it is imported),
``numba.set_num_threads(1)`` for ours. The per-core rate is documents per CPU second of the process (best of
--repeats, the lanes interleaved round by round, so that load from other processes reaches all of them alike);
the wall-clock rate and CPU time over wall time (1.0: one core, all the time) are printed beside it.
rensa is a benchmark dependency only (pyproject's ``bench`` extra: rensa==0.5.0).

    python benchmarks/sketch_bench.py [--docs 20000] [--words 400] [--num-perm 112] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # rensa's thread pool: one core (read when the pool starts)

import numpy as np  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--ngram", type=int, default=5)
    ap.add_argument("--num-perm", type=int, default=112)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import numba
    import pyarrow as pa
    import rensa
    from importlib.metadata import version

    from gpu_dedup.config import MinHashConfig, NormalizeConfig, ShingleConfig
    from gpu_dedup.lexical.minhash import compute_signatures, permutation_params, signatures_from_hashes
    from gpu_dedup.lexical.verify import shingle_sets
    from gpu_dedup.testing.evalcorpus import make_corpus
    from gpu_dedup.text.normalize import normalize_text

    numba.set_num_threads(1)
    K, n = args.num_perm, args.ngram
    table = make_corpus(args.docs, seed=0, mean_words=args.words, exact_dup_frac=0, near_dup_frac=0,
                        template_families=0, short_frac=0)
    norm = normalize_text(table["text"].combine_chunks().cast(pa.large_string()), NormalizeConfig())
    shingle = ShingleConfig("word", n)
    docs = len(norm)
    # the same shingles for every lane: their XXH64 per document (repeats kept, as a token list has them) ...
    sets = shingle_sets(norm, np.arange(docs, dtype=np.int64), shingle)
    hashes = np.concatenate([sets.get(j) for j in range(docs)])
    offsets = np.zeros(docs + 1, np.int64)
    np.cumsum(sets.sizes, out=offsets[1:])
    # ... and as strings (the shingles of the same normalized text)
    strings = []
    for i in range(docs):
        w = norm.text(i).split(" ")
        strings.append([" ".join(w[j:j + n]) for j in range(len(w) - n + 1)])
    shingles = sum(len(s) for s in strings)
    print(f"{docs:,} documents, {shingles / docs:.0f} word {n}-grams each ({offsets[-1] / docs:.0f} distinct), "
          f"K = {K}, 1 thread; rensa {version('rensa')}, RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}")

    fss, exact = MinHashConfig(K, 42, 32, "fss"), MinHashConfig(K, 42, 32, "exact")
    fss_params = permutation_params(fss)
    flat_offsets = offsets.astype(np.uint64)
    lanes = {
        "rensa RMinHash, from shingle hashes": lambda: rensa.RMinHash.digest_matrix_from_flat_token_hashes(
            hashes, flat_offsets, K, 42),
        "ours fss, from shingle hashes": lambda: signatures_from_hashes(hashes, offsets, fss),
        "ours exact, from shingle hashes": lambda: signatures_from_hashes(hashes, offsets, exact),
        "rensa RMinHash, from shingle strings": lambda: rensa.RMinHash.digest_matrix_from_token_sets(strings, K, 42),
        "ours fss, from normalized text": lambda: compute_signatures(norm, shingle, fss, fss_params),
        "ours exact, from normalized text": lambda: compute_signatures(norm, shingle, exact),
    }
    for fn in lanes.values():  # compile / warm up outside the timing
        fn()
    wall = dict.fromkeys(lanes, float("inf"))
    cpu = dict.fromkeys(lanes, float("inf"))
    for _ in range(args.repeats):
        for name, fn in lanes.items():
            c, t = time.process_time(), time.perf_counter()
            fn()
            wall[name] = min(wall[name], time.perf_counter() - t)
            cpu[name] = min(cpu[name], time.process_time() - c)
    # per core: documents per CPU second of the one thread (on a machine other jobs share, the wall clock also
    # counts the time the thread waited for a core); wall-clock rates beside them
    rate = {name: docs / t for name, t in cpu.items()}
    ref_h, ref_s = rate["rensa RMinHash, from shingle hashes"], rate["rensa RMinHash, from shingle strings"]
    print(f"\n{'lane':40s} {'docs/CPU-s':>11s} {'ns/shingle':>11s} {'vs rensa':>9s} {'docs/s wall':>12s} {'cpu/wall':>9s}")
    for name, r in rate.items():
        ref = ref_h if "hashes" in name else ref_s
        print(f"{name:40s} {r:11,.0f} {1e9 / (r * shingles / docs):11.1f} {r / ref:8.2f}x {docs / wall[name]:12,.0f} "
              f"{cpu[name] / wall[name]:9.2f}")
    print(f"\nper core, same shingle hashes: fss {rate['ours fss, from shingle hashes'] / ref_h:.2f}x rensa "
          f"(target >= 1); end to end from normalized text {rate['ours fss, from normalized text'] / ref_s:.2f}x "
          "rensa from shingle strings")

if __name__ == "__main__":
    main()
