"""Signature stage on the CPU vs datasketch, same documents, same run.

Ours: Arrow text -> normalization kernel -> word 5-gram XXH64 -> exact (a*h+b) mod 2^61-1 minima,
K=112 (the fineweb preset). datasketch: lowercase + whitespace split -> word 5-grams -> MinHash(num_perm=112)
.update_batch (SHA-1 based hashing, its default). Prints docs/s and ratios; nothing here is a unit test.

    python benchmarks/cpu_minhash.py --docs 20000 --words 400
"""
import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--datasketch-docs", type=int, default=2000, help="datasketch is slow: time it on a prefix")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import numba
    import pyarrow as pa

    from gpu_dedup.config import MinHashConfig, NormalizeConfig, ShingleConfig
    from gpu_dedup.testing.evalcorpus import make_corpus
    from gpu_dedup.lexical.minhash import compute_signatures, permutation_params
    from gpu_dedup.text.normalize import normalize_text

    t = time.perf_counter()
    table = make_corpus(args.docs, seed=0, mean_words=args.words, exact_dup_frac=0, near_dup_frac=0,
                        template_families=0, short_frac=0)
    text = table["text"].combine_chunks().cast(pa.large_string())
    mb = text.nbytes / 1e6
    words = np.mean([len(s.split()) for s in text.slice(0, 1000).to_pylist()])
    print(f"corpus: {len(text):,} docs, mean {words:.0f} words, {mb:.1f} MB (made in {time.perf_counter() - t:.1f} s)")

    sh, mh = ShingleConfig("word", 5), MinHashConfig(112, 42, 64, "exact")  # the fss family: sketch_bench.py
    params = permutation_params(mh)

    def ours(threads: int) -> tuple[float, float]:
        numba.set_num_threads(threads)
        best_all = best_kernel = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            norm = normalize_text(text, NormalizeConfig())
            t1 = time.perf_counter()
            compute_signatures(norm, sh, mh, params)
            t2 = time.perf_counter()
            best_all = min(best_all, t2 - t0)
            best_kernel = min(best_kernel, t2 - t1)
        return len(text) / best_all, len(text) / best_kernel

    normalize_text(text.slice(0, 10), NormalizeConfig())  # compile / load cache outside the timing
    compute_signatures(normalize_text(text.slice(0, 10), NormalizeConfig()), sh, mh, params)
    one_all, one_kernel = ours(1)
    cores = numba.config.NUMBA_NUM_THREADS
    many_all, many_kernel = ours(cores)

    from importlib.metadata import version

    from datasketch import MinHash

    docs = text.slice(0, args.datasketch_docs).to_pylist()
    t0 = time.perf_counter()
    for d in docs:
        w = d.lower().split()
        m = MinHash(num_perm=112, seed=42)
        m.update_batch([" ".join(w[i:i + 5]).encode() for i in range(len(w) - 4)])
    ds = len(docs) / (time.perf_counter() - t0)

    rows = [(f"datasketch {version('datasketch')} MinHash, 1 core (incl. shingling)", ds, 1.0),
            ("gpu_dedup CPU, 1 thread: normalize + signatures", one_all, one_all / ds),
            ("gpu_dedup CPU, 1 thread: signatures only", one_kernel, one_kernel / ds),
            (f"gpu_dedup CPU, {cores} threads: normalize + signatures", many_all, many_all / ds),
            (f"gpu_dedup CPU, {cores} threads: signatures only", many_kernel, many_kernel / ds)]
    print(f"\n{'stage (K=112, word 5-grams)':58s} {'docs/s':>10s} {'vs datasketch':>14s}")
    for name, rate, ratio in rows:
        print(f"{name:58s} {rate:10,.0f} {ratio:13.1f}x")
    print(f"\nper-core ratio vs datasketch: {one_all / ds:.1f}x (target >= 5x); "
          f"{cores}-thread speed-up: {many_all / one_all:.2f}x (target >= 1.8x on 2 cores)")


if __name__ == "__main__":
    main()
