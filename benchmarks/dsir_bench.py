"""Throughput of DSIR feature extraction (hashed word unigrams + bigrams) and of the Gopher rule statistics,
against a plain-Python baseline in the style of the reference DSIR package (data-selection 1.0.3).

Usage: python benchmarks/dsir_bench.py [--docs 4000] [--seed 0] [--repeats 3] [--threads 1] [--device cpu|cuda]
                                      [--baseline-docs 1000]

Text: ``gpu_dedup.testing.evalcorpus.make_corpus(docs, seed)`` (English-like documents, ~300 words each).

Contenders (docs/s, median of ``--repeats`` rounds after a warm-up call; ratios against the baselines):
- "ours fit_counts": normalization kernel + feature-id kernel + bincount (what fitting a bag model runs);
- "ours log_weights": normalization kernel + the fused feature/dot-product kernel (what weighting runs);
- "python dsir (sha256)": DSIR's featurizer as its package does it: ``text.lower()``, a WordPunct-style
  regex tokenization (``\\w+|[^\\w\\s]+``), unigrams + space-joined bigrams, each hashed with
  ``int(sha256(utf8).hexdigest(), 16) % buckets`` into a dense per-document count vector;
- "python xxh64": the same with ``xxhash.xxh64_intdigest`` (a fast fixed hash, same pipeline);
- "ours rule_scores": the Gopher statistics (all 20 columns) from the CPU kernel.
The Python baselines run on one core; pass ``--threads 1`` (the default) for a per-core comparison.
With ``--device cuda`` (a GPU), fit_counts / log_weights are also timed on the device (transfers included).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

TOKEN = re.compile(r"\w+|[^\w\s]+")


def python_features(texts: list[str], buckets: int, hasher) -> np.ndarray:
    """DSIR-package-style featurization of every document: (n, buckets) dense counts."""
    out = np.zeros((len(texts), buckets), np.float32)
    for i, text in enumerate(texts):
        words = TOKEN.findall(text.lower())
        grams = words + [" ".join(words[j:j + 2]) for j in range(len(words) - 1)]
        row = out[i]
        for g in grams:
            row[hasher(g) % buckets] += 1
    return out


def sha256_hash(s: str) -> int:
    return int(hashlib.sha256(s.encode("utf-8")).hexdigest(), 16)


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--baseline-docs", type=int, default=1000, help="documents for the (slow) Python baselines")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args(argv)

    import numba
    import xxhash

    from gpu_dedup.runtime.device import set_threads
    from gpu_dedup.filters import dsir, rules
    from gpu_dedup.testing.evalcorpus import make_corpus

    threads = set_threads(args.threads)
    table = make_corpus(args.docs, args.seed)
    texts = table.column("text").combine_chunks()
    pylist = texts.to_pylist()
    mb = sum(len(t.encode("utf-8")) for t in pylist) / 1e6
    cfg = dsir.DSIRConfig()
    target = dsir.BagModel.from_counts(dsir.fit_counts(pylist[: len(pylist) // 4], cfg), cfg.alpha)
    raw = dsir.BagModel.from_counts(dsir.fit_counts(pylist, cfg), cfg.alpha)
    rcfg = rules.RulesConfig()
    base_texts = pylist[: args.baseline_docs]
    seed = int(dsir.DSIR_SEED)

    rows: list[tuple[str, int, float]] = []
    rows.append(("python dsir (sha256), 1 core", len(base_texts),
                 _median_time(lambda: python_features(base_texts, cfg.buckets, sha256_hash), args.repeats)))
    def xxh(s: str) -> int:
        return xxhash.xxh64_intdigest(s.encode("utf-8"), seed=seed)

    rows.append(("python xxh64, 1 core", len(base_texts),
                 _median_time(lambda: python_features(base_texts, cfg.buckets, xxh), args.repeats)))
    rows.append((f"ours fit_counts cpu, {threads} thr", len(pylist),
                 _median_time(lambda: dsir.fit_counts(texts, cfg, "cpu"), args.repeats)))
    rows.append((f"ours log_weights cpu, {threads} thr", len(pylist),
                 _median_time(lambda: dsir.log_weights(texts, target, raw, cfg, "cpu"), args.repeats)))
    if args.device == "cuda":
        rows.append(("ours fit_counts cuda", len(pylist),
                     _median_time(lambda: dsir.fit_counts(texts, cfg, "cuda"), args.repeats)))
        rows.append(("ours log_weights cuda", len(pylist),
                     _median_time(lambda: dsir.log_weights(texts, target, raw, cfg, "cuda"), args.repeats)))
    rows.append((f"ours rule_scores (gopher) cpu, {threads} thr", len(pylist),
                 _median_time(lambda: rules.rule_scores(texts, rcfg), args.repeats)))

    print(f"# {len(pylist)} documents, {mb:.1f} MB ({mb * 1e6 / len(pylist):.0f} B/doc), numba {numba.__version__}, "
          f"threads {threads}, device {args.device}")
    sha_rate = rows[0][1] / rows[0][2]
    xxh_rate = rows[1][1] / rows[1][2]
    print(f"{'contender':44s} {'docs':>7s} {'docs/s':>10s} {'MB/s':>8s} {'x sha256':>9s} {'x xxh64':>8s}")
    for name, n, sec in rows:
        rate = n / sec
        mbs = rate * mb / len(pylist)
        print(f"{name:44s} {n:7d} {rate:10.0f} {mbs:8.1f} {rate / sha_rate:9.1f} {rate / xxh_rate:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
