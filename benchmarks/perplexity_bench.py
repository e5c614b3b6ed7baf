"""Perplexity scoring: our Numba scorer (gpu_dedup.filters.lm) against the kenlm package's own loop
(``model.score(line)`` per sentence in Python) on the same ARPA model and documents.

A 5-gram model is trained (by us; lmplz is not needed) on synthetic Zipf-distributed text, then both score the
same documents (several lines each, OOV words included) and must agree to 1e-4 per document. Our scorer runs
with 1 thread and with every thread numba has; kenlm's Python loop is single-threaded. Prints a table.

    python benchmarks/perplexity_bench.py [--docs 20000] [--train-sentences 200000] [--order 5]
"""
import argparse
import os
import random
import sys
import tempfile
import time

import numba
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))

from gpu_dedup.filters.kneser_ney import LMTrainConfig, train_lm  # noqa: E402
from gpu_dedup.filters.lm import LMNormalization, load_lm  # noqa: E402


def zipf_sentence(rng: random.Random, vocab: int) -> str:
    return " ".join(f"w{min(int(rng.paretovariate(0.9)), vocab)}" for _ in range(rng.randint(3, 25)))


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--train-sentences", type=int, default=200000)
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import kenlm

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "ref.txt")
        with open(ref, "w") as f:
            f.write("\n".join(zipf_sentence(rng, 50000) for _ in range(args.train_sentences)))
        arpa = os.path.join(tmp, "m.arpa")
        t = time.perf_counter()
        stats = train_lm(ref, arpa, LMTrainConfig(order=args.order, normalization=LMNormalization(mode="none")))
        t_train = time.perf_counter() - t
        t = time.perf_counter()
        lm = load_lm(arpa)
        t_load = time.perf_counter() - t
        t = time.perf_counter()
        model = kenlm.Model(arpa)
        t_kload = time.perf_counter() - t
        docs = ["\n".join(zipf_sentence(rng, 80000) for _ in range(rng.randint(1, 6))) for _ in range(args.docs)]
        words = sum(len(d.split()) for d in docs)

        def ours():
            return lm.score(docs)

        def theirs():
            return [sum(model.score(line, bos=True, eos=True) for line in d.split("\n") if line.split()) for d in docs]

        want = np.array(theirs())
        got = ours()["logprob"]
        diff = float(np.abs(got - want).max())
        threads = numba.get_num_threads()
        rows = [("kenlm model.score loop (Python)", 1, best(theirs, args.repeat))]
        numba.set_num_threads(1)
        ours()
        rows.append(("gpu_dedup NgramLM.score", 1, best(ours, args.repeat)))
        numba.set_num_threads(threads)
        if threads > 1:
            rows.append(("gpu_dedup NgramLM.score", threads, best(ours, args.repeat)))
    print(f"model: order {args.order}, n-grams {stats['ngrams']}, trained in {t_train:.1f} s "
          f"({args.train_sentences} sentences); load: ours {t_load:.2f} s, kenlm {t_kload:.2f} s")
    print(f"documents: {args.docs}, words: {words}; max |logprob difference| = {diff:.2e}")
    print(f"{'scorer':34s} {'threads':>7s} {'seconds':>8s} {'docs/s':>10s} {'words/s':>11s} {'vs kenlm':>8s}")
    base = rows[0][2]
    for name, th, sec in rows:
        print(f"{name:34s} {th:7d} {sec:8.3f} {args.docs / sec:10.0f} {words / sec:11.0f} {base / sec:7.2f}x")


if __name__ == "__main__":
    main()
