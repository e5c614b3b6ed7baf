"""Device check: GPU == CPU on fresh random and real-looking text, then a quick time per stage.

Run on a machine with a GPU (see benchmarks/device_run.sh); under NUMBA_ENABLE_CUDASIM=1 with --small
it checks the script itself on the CPU. Exits non-zero on any mismatch.

    python benchmarks/gpu_check.py [--docs 20000] [--small]
"""
import argparse
import sys
import time
import warnings

import numpy as np
import pyarrow as pa


# the shared device functions rely on uint64 wrap-around, which numpy scalars (simulator) warn about
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--small", action="store_true", help="tiny inputs (for the CUDA simulator)")
    args = ap.parse_args()

    import gpu_dedup
    from gpu_dedup import RunConfig
    from gpu_dedup.config import LSHConfig, MinHashConfig, NormalizeConfig, ShingleConfig
    from gpu_dedup.device import resolve_device, to_host
    from gpu_dedup.evalcorpus import make_corpus
    from gpu_dedup.exact import exact_hashes
    from gpu_dedup.lsh import band_keys
    from gpu_dedup.minhash import compute_signatures
    from gpu_dedup.normalize import normalize_text
    from gpu_dedup.verify import jaccard, shingle_sets

    resolve_device("cuda")
    n = 40 if args.small else args.docs
    rng = np.random.default_rng(int(time.time()))  # fresh data every run; the seed is printed
    seed = int(rng.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    scripts = ["hello", "Straße", "café", "cafe\u0301", "日本語", "テキスト", "한국어", "العربية", "ΣΟΦΟΣ", "ﬁ",
               "①", "\u200b", "\u00a0", "👩\u200d💻", "русский", "हिन्दी", "ไทย", "\t", "\n\n", "ẞ", "İ"]
    random_docs = ["".join(rng.choice(scripts, rng.integers(0, 80))) + " " + " ".join(rng.choice(scripts, 20))
                   for _ in range(n // 2)]
    real = make_corpus(max(n // 2, 100), seed=seed % 1000, mean_words=60 if args.small else 400,
                       template_families=1 if args.small else 4)["text"].to_pylist()
    long_words = 300 if args.small else 1_000_000  # ~6 MB documents spread over many blocks
    long_docs = [" ".join(rng.choice(["alpha", "béta", "γάμμα", "δ", "日本"], long_words)) for _ in range(2)]
    texts = random_docs + real + long_docs
    arr = pa.array(texts, pa.large_string())
    print(f"{len(texts):,} documents, {arr.nbytes / 1e6:.1f} MB, two of {long_words:,} words")

    failures = 0

    def check(name: str, ok: bool) -> None:
        nonlocal failures
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}")

    timings = []
    for ncfg in (NormalizeConfig(), NormalizeConfig(True, True)):
        c = normalize_text(arr, ncfg, "cpu")
        t = time.perf_counter()
        g = normalize_text(arr, ncfg, "cuda")
        timings.append(("normalize (H2D + kernel)", time.perf_counter() - t))
        check(f"normalize {ncfg}", np.array_equal(c.data, to_host(g.data)) and
              np.array_equal(c.offsets, to_host(g.offsets)) and np.array_equal(c.words, to_host(g.words)))
        check("exact hashes", np.array_equal(exact_hashes(c, "cpu"), to_host(exact_hashes(g, "cuda"))))
    shapes = [(ShingleConfig("word", 5), MinHashConfig(112, 42, 64), LSHConfig(14, 8)),
              (ShingleConfig("word", 5), MinHashConfig(100, 7, 32), LSHConfig(20, 5)),
              (ShingleConfig("char", 24), MinHashConfig(260, 42, 32), LSHConfig(20, 13))]
    if args.small:  # the simulator runs every GPU thread in Python
        shapes = [(ShingleConfig("word", 5), MinHashConfig(16, 42, 64), LSHConfig(4, 4)),
                  (ShingleConfig("char", 8), MinHashConfig(8, 42, 32), LSHConfig(2, 4))]
    for sh, mh, lsh in shapes:
        c = compute_signatures(normalize_text(arr, NormalizeConfig(), "cpu"), sh, mh, device="cpu")
        gn = normalize_text(arr, NormalizeConfig(), "cuda")
        t = time.perf_counter()
        g = compute_signatures(gn, sh, mh, device="cuda")
        _ = to_host(g.values[:1])
        timings.append((f"signatures {sh.kind} {sh.n}, K={mh.num_perm}", time.perf_counter() - t))
        ok = c.nshingles > 0
        check(f"signatures {sh.kind}-{sh.n} K={mh.num_perm} w{mh.width}",
              np.array_equal(c.nshingles, to_host(g.nshingles)) and np.array_equal(c.values[ok], to_host(g.values)[ok]))
        check("band keys", np.array_equal(band_keys(c.values, lsh, "cpu")[ok],
                                          to_host(band_keys(g.values, lsh, "cuda"))[ok]))
        docs = np.flatnonzero(ok)
        cs = shingle_sets(normalize_text(arr, NormalizeConfig(), "cpu"), docs, sh, "cpu")
        gs = shingle_sets(gn, docs, sh, "cuda")
        same = (np.array_equal(cs.sizes, to_host(gs.sizes)) and np.array_equal(cs.offsets, to_host(gs.offsets))
                and np.array_equal(cs.hashes, to_host(gs.hashes)))
        check("shingle sets", same)
        left = rng.integers(0, len(docs), 1000)
        right = rng.integers(0, len(docs), 1000)
        check("jaccard", np.array_equal(jaccard(cs, left, right, "cpu"), to_host(jaccard(gs, left, right, "cuda"))))

    table = make_corpus(120 if args.small else args.docs, seed=seed % 997, mean_words=40 if args.small else 300,
                        template_families=1 if args.small else 4)
    for preset in ("default", "fineweb", "nemo"):
        cfg = RunConfig.preset(preset, progress=False)
        if args.small:
            cfg = cfg.replace(minhash__num_perm=16, lsh__bands=4, lsh__rows=4)
        t = time.perf_counter()
        cpu = gpu_dedup.deduplicate(table, cfg.replace(device="cpu")).decisions
        t_cpu = time.perf_counter() - t
        t = time.perf_counter()
        gpu = gpu_dedup.deduplicate(table, cfg.replace(device="cuda")).decisions
        t_gpu = time.perf_counter() - t
        timings.append((f"pipeline {preset} ({table.num_rows:,} docs) cpu {t_cpu:.2f} s", t_gpu))
        check(f"decisions identical, preset {preset}", gpu.equals(cpu))

    print(f"\n{'stage (GPU)':58s} {'seconds':>9s}")
    for name, sec in timings:
        print(f"{name:58s} {sec:9.3f}")
    print(f"\n{'ALL PASS' if failures == 0 else f'{failures} FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
