"""Candidate MinHash families: speed per core and candidate rate against the S-curve (issue 38 item 1).

Candidates are verified on the exact shingle sets, so a family decides recall only; this script measures, for each
family, how fast it sketches (documents per CPU second, one thread, from the same 64-bit shingle hashes) and whether
its LSH candidate rate per Jaccard bin follows the S-curve 1 - (1 - J^r)^b on a labelled corpus. The default family
is the fastest one that follows it (gpu_dedup/lexical/minhash.py; the decision is recorded in docs/performance.md).

Families (K positions; the prototypes below exist only here, to be measured):
  exact      K permutations (a*h + b) mod 2^61-1 (kernels/core.py permute61), the minimum over the shingles
  mul32      K multiply-adds (a*h + b) mod 2^32 on a 32-bit fold of h (rensa-style, 16 lanes of AVX-512)
  cminhash   C-MinHash (Li & Koenig 2022): sigma(h), then K circulant shifts of one permutation pi, pi((sigma + k)
             mod 2^32) with pi, sigma murmur3's fmix32 under a seed
  oph        one permutation hashing with optimal densification (Shrivastava 2017): the fss family's round 0,
             then each empty bin copies the bin a seeded probe sequence finds first non-empty
  fssR       the fss family (kernels/core.py fss_sketch: fast similarity sketching, Dahlgaard, Knudsen & Thorup
             2017) with R random rounds before each empty bucket takes its own MinHash; fss3 is the default

Speed: ``make_corpus`` documents of --words words (several sizes), their distinct word 5-gram XXH64 hashes as CSR,
K = 112, one thread, documents per CPU second (best of --repeats). S-curve: a labelled corpus (near copies at edit
rates 0.03-0.4, chained template families) with mean --curve-words words, every pair at exact Jaccard >= 0.25
(``testing.reference.exact_pairs`` over the same hashed sets), K = 100 = 20 bands x 5 rows; each of --seeds seeds
re-draws every family's parameters, and the candidate rate per Jaccard bin is compared with the bin's mean S-curve.
The standard error is the spread of the bin's rate over the seeds (pairs sharing a document are not independent
trials; at least the binomial one over all trials, and one trial), z = (rate - curve) / SE. Also printed: the mean of (matching positions / K - J) (bias), and the mean squared
error of that estimate over J(1-J)/K, K independent permutations' (1.0).

    python benchmarks/sketch_families.py [--words 30,100,400,1500] [--curve-words 300,30] [--seeds 30]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
from numba import njit

M32 = np.uint64(0xFFFFFFFF)
FAMILIES = ("exact", "mul32", "cminhash", "oph", "fss1", "fss2", "fss3", "fss4")


@njit(inline="always")
def _fmix32(h):
    """murmur3's 32-bit finalizer (h < 2^32 in a uint64)."""
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & M32
    return h ^ (h >> np.uint64(16))


@njit(inline="always")
def _fold32(h):
    return np.uint32((h ^ (h >> np.uint64(32))) & M32)


@njit(nogil=True)
def mul32(hashes, offsets, a, b, out):
    """(a_k * h32 + b_k) mod 2^32, uint32 lanes (a, b: uint32 (K,))."""
    K = a.shape[0]
    sig = np.empty(K, np.uint32)
    for i in range(offsets.shape[0] - 1):
        sig[:] = np.uint32(0xFFFFFFFF)
        for h in hashes[offsets[i]:offsets[i + 1]]:
            x = _fold32(h)
            for k in range(K):
                v = np.uint32(a[k] * x + b[k])
                sig[k] = v if v < sig[k] else sig[k]
        out[i, :] = sig


@njit(nogil=True)
def cminhash(hashes, offsets, s0, s1, out):
    """min over h of fmix32(((fmix32(h32 ^ s0) + k) mod 2^32) ^ s1) for k < K."""
    K = out.shape[1]
    sig = np.empty(K, np.uint64)
    for i in range(offsets.shape[0] - 1):
        sig[:] = M32
        for h in hashes[offsets[i]:offsets[i + 1]]:
            sg = _fmix32(np.uint64(_fold32(h)) ^ s0)
            for k in range(K):
                v = _fmix32(((sg + np.uint64(k)) & M32) ^ s1)
                sig[k] = v if v < sig[k] else sig[k]
        out[i, :] = sig


def _oph_kernel():
    """The oph prototype, built on the fss family's own device functions (same values, same bins)."""
    from gpu_dedup.kernels.core_cpu import _D

    fss_offer, fss_open = _D["fss_offer"], _D["fss_open"]
    empty = np.uint64(0xFFFFFFFFFFFFFFFF)

    @njit(nogil=True)
    def oph(hashes, offsets, a, b, probe, out):
        K = out.shape[1]
        Ku = np.uint64(K)
        most = 0
        for i in range(offsets.shape[0] - 1):
            most = max(most, offsets[i + 1] - offsets[i])
        vals = np.empty(most, np.uint64)
        bkts = np.empty(most, np.int64)
        sig = np.empty(K, np.uint64)
        opened = np.empty(K, np.uint8)
        for i in range(offsets.shape[0] - 1):
            hh = hashes[offsets[i]:offsets[i + 1]]
            sig[:] = empty
            if hh.shape[0] == 0:
                out[i, :] = sig
                continue
            fss_offer(hh, a[0], b[0], Ku, sig, vals, bkts, opened, True)
            fss_open(sig, opened)
            for j in range(K):
                if opened[j] != 0:  # optimal densification: probe bins by a hash of (j, attempt)
                    t = np.uint64(0)
                    while True:
                        c = (_fmix32(((np.uint64(j) << np.uint64(16)) + t) ^ probe) * Ku) >> np.uint64(32)
                        if opened[c] == 0:
                            break
                        t += np.uint64(1)
                    out[i, j] = sig[c]
                else:
                    out[i, j] = sig[j]
    return oph


def splitmix_words(n: int, seed: int) -> np.ndarray:
    from gpu_dedup.lexical.minhash import splitmix64

    out, state = np.empty(n, np.uint64), seed
    for i in range(n):
        state, out[i] = splitmix64(state)
    return out


def signatures(family: str, hashes, offsets, K: int, seed: int, oph=None) -> np.ndarray:
    """(docs, K) signatures of the CSR sets under ``family`` (uint64, 32-bit values except exact's 61)."""
    from gpu_dedup.config import MinHashConfig
    from gpu_dedup.lexical.minhash import permutation_params
    from gpu_dedup.ops import core

    docs = offsets.shape[0] - 1
    if family == "exact":
        a, b = permutation_params(MinHashConfig(K, seed, 64, "exact"))
        return core.minhash_of_hashes_host(hashes, offsets, a, b, 64, "exact")
    if family.startswith("fss"):
        rounds = int(family[3:])
        a, b = permutation_params(MinHashConfig(K, seed, 32, "fss"), rounds)
        return core.minhash_of_hashes_host(hashes, offsets, a, b, 32, "fss", rounds)
    out = np.empty((docs, K), np.uint64)
    w = splitmix_words(2 * K + 2, seed)
    if family == "mul32":
        o32 = np.empty((docs, K), np.uint32)
        mul32(hashes, offsets, ((w[:K] | np.uint64(1)) & M32).astype(np.uint32), (w[K:2 * K] & M32).astype(np.uint32),
              o32)
        return o32.astype(np.uint64)
    if family == "cminhash":
        cminhash(hashes, offsets, w[0] & M32, w[1] & M32, out)
        return out
    if family == "oph":
        a, b = permutation_params(MinHashConfig(K, seed, 32, "fss"), 1)
        oph(hashes, offsets, a, b, w[0] & M32, out)
        return out >> np.uint64(32)
    raise ValueError(family)


def shingle_csr(table, ngram: int = 5):
    """(hashes uint64, offsets int64): each document's distinct word n-gram XXH64, as the pipeline hashes them."""
    import pyarrow as pa

    from gpu_dedup.config import NormalizeConfig, ShingleConfig
    from gpu_dedup.lexical.verify import shingle_sets
    from gpu_dedup.text.normalize import normalize_text

    norm = normalize_text(table["text"].combine_chunks().cast(pa.large_string()), NormalizeConfig())
    sets = shingle_sets(norm, np.arange(len(norm), dtype=np.int64), ShingleConfig("word", ngram))
    offsets = np.zeros(len(norm) + 1, np.int64)
    np.cumsum(sets.sizes, out=offsets[1:])
    return np.concatenate([sets.get(j) for j in range(len(norm))]), offsets


def speed(words: list[int], docs: int, repeats: int, oph) -> None:
    from gpu_dedup.testing.evalcorpus import make_corpus

    K = 112
    print(f"speed: documents per CPU second, 1 thread, K = {K}, from the same shingle hashes")
    print(f"{'words':>6s} {'shingles':>9s} " + " ".join(f"{f:>10s}" for f in FAMILIES))
    for w in words:
        table = make_corpus(docs, seed=0, mean_words=max(20, w), exact_dup_frac=0, near_dup_frac=0,
                            template_families=0, short_frac=0)
        hashes, offsets = shingle_csr(table)
        rates = []
        for fam in FAMILIES:
            signatures(fam, hashes, offsets, K, 1, oph)  # compile / warm up
            best = float("inf")
            for _ in range(repeats):
                t = time.process_time()
                signatures(fam, hashes, offsets, K, 1, oph)
                best = min(best, time.process_time() - t)
            rates.append(docs / best)
        print(f"{w:6d} {offsets[-1] / docs:9.0f} " + " ".join(f"{r:10,.0f}" for r in rates))


def s_curve(curve_words: int, docs: int, seeds: int, oph, b: int = 20, r: int = 5) -> None:
    from gpu_dedup.config import LSHConfig
    from gpu_dedup.lexical.lsh import band_keys
    from gpu_dedup.testing import reference
    from gpu_dedup.testing.evalcorpus import make_corpus

    K = b * r
    table = make_corpus(docs, seed=7, mean_words=curve_words, exact_dup_frac=0.0, near_dup_frac=0.4,
                        edit_rates=(0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.4), template_families=docs // 200,
                        family_size=20, short_frac=0)
    hashes, offsets = shingle_csr(table)
    sets = [set(hashes[offsets[j]:offsets[j + 1]].tolist()) for j in range(docs)]
    pairs = reference.exact_pairs(sets, 0.25)
    pi = np.array([p[0] for p in pairs], np.int64)
    pj = np.array([p[1] for p in pairs], np.int64)
    jac = np.fromiter(pairs.values(), float, len(pairs))
    edges = [0.25, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0001]
    sizes = np.diff(offsets)
    print(f"\nS-curve: {docs:,} documents of mean {curve_words} words ({sizes.mean():.0f} distinct shingles, "
          f"{(sizes < K).mean():.0%} with fewer than K = {K}), {len(pairs):,} pairs at J >= 0.25, b x r = {b} x {r}, "
          f"{seeds} seeds; per bin: candidate rate - curve (z)")
    print(f"{'family':9s} " + " ".join(f"{f'[{lo:.2f},{min(hi, 1):.2f})':>17s}" for lo, hi in zip(edges, edges[1:]))
          + f" {'max|z|':>7s} {'bias':>8s} {'MSE/th':>7s}")
    for fam in FAMILIES:
        cand = np.zeros((seeds, len(pairs)), bool)
        err = np.zeros((seeds, len(pairs)))
        for s in range(seeds):
            sig = signatures(fam, hashes, offsets, K, 1000 + s, oph)
            keys = band_keys(sig.astype(np.uint32) if fam != "exact" else sig, LSHConfig(b, r))
            cand[s] = (keys[pi] == keys[pj]).any(axis=1)
            err[s] = (sig[pi] == sig[pj]).mean(axis=1) - jac
        cells, zs = [], []
        for lo, hi in zip(edges, edges[1:]):
            sel = (jac >= lo) & (jac < hi)
            if not sel.any():
                cells.append(f"{'-':>17s}")
                continue
            p = 1 - (1 - jac[sel] ** r) ** b
            curve = p.mean()
            rates = cand[:, sel].mean(axis=1)
            trials = int(sel.sum()) * seeds  # floor: the binomial SE over all trials, and one trial in them
            se = max(rates.std(ddof=1) / math.sqrt(seeds), math.sqrt((p * (1 - p)).mean() / trials), 1 / trials)
            z = (rates.mean() - curve) / se
            zs.append(z)
            cells.append(f"{rates.mean() - curve:+9.4f} ({z:+4.1f})")
        mse = (err ** 2).mean() / (jac * (1 - jac) / K).mean()
        print(f"{fam:9s} " + " ".join(cells) + f" {max(map(abs, zs)):7.1f} {err.mean():+8.5f} {mse:7.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", default="30,100,400,1500", help="document sizes of the speed table")
    ap.add_argument("--docs", type=int, default=3000, help="documents per speed corpus")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--curve-words", default="300,30", help="mean words of the S-curve corpora")
    ap.add_argument("--curve-docs", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=30)
    args = ap.parse_args()

    import numba

    numba.set_num_threads(1)
    oph = _oph_kernel()
    speed([int(w) for w in args.words.split(",") if w], args.docs, args.repeats, oph)
    for w in [int(w) for w in args.curve_words.split(",") if w]:
        s_curve(w, args.curve_docs, args.seeds, oph)


if __name__ == "__main__":
    main()
