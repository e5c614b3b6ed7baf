"""Device check: GPU == CPU, on fresh data every run (the seed is printed and recorded).

In this order, each check recorded the moment it ends (in OUT/gpu_check.json: a run stopped by a timeout
keeps the checks it finished; a check that raises is a FAIL carrying its error, and the rest still run):
  0. compile + warm-up: every kernel of the checks below launched once on tiny inputs, timed apart;
  1. whole-pipeline decisions, presets default / fineweb / nemo, on real-looking text
     (gpu_dedup.testing.evalcorpus.make_corpus: exact and near copies, templates, short documents);
  2. normalize (two configurations) and exact hashes, signatures, band keys, shingle sets and Jaccard for
     four shingle/MinHash shapes (both families), on random multi-script text plus real-looking text;
  3. the same on two very long documents (~6 MB each: a document spread over many MinHash blocks).
Every array handed to a device function is moved there explicitly (gpu_dedup.runtime.device.to_device), as
CuPy requires. Exits non-zero on any mismatch or error.

    python benchmarks/gpu_check.py --docs 20000 --out $OUT          # on the GPU machine (device_run.sh)
    NUMBA_ENABLE_CUDASIM=1 [GPU_DEDUP_STRICT_DEVICE=1] python benchmarks/gpu_check.py --small --out /tmp/x
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
import warnings

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_report import write_json_atomic  # noqa: E402

# the shared device functions rely on uint64 wrap-around, which numpy scalars (simulator) warn about
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)

SCRIPTS = ["hello", "Straße", "café", "cafe\u0301", "日本語", "テキスト", "한국어", "العربية", "ΣΟΦΟΣ", "ﬁ",
           "①", "\u200b", "\u00a0", "👩\u200d💻", "русский", "हिन्दी", "ไทย", "\t", "\n\n", "ẞ", "İ"]
PRESETS = ("default", "fineweb", "nemo")


def _table_diff(a: pa.Table, b: pa.Table) -> str:
    """Where two decision tables differ (for the report of a failed check)."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return f"schemas or row counts differ: {a.num_rows} vs {b.num_rows} rows"
    ra, rb = a.to_pylist(), b.to_pylist()
    bad = [i for i, (x, y) in enumerate(zip(ra, rb)) if x != y]
    if not bad:
        return ""
    cols = sorted({k for i in bad[:100] for k in ra[i] if ra[i][k] != rb[i][k]})
    return f"{len(bad)} rows differ (columns {', '.join(cols)}); first: GPU {ra[bad[0]]} CPU {rb[bad[0]]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20000, help="documents per corpus (default 20,000)")
    ap.add_argument("--small", action="store_true", help="tiny inputs (for the CUDA simulator)")
    ap.add_argument("--seed", type=int, default=None, help="default: a fresh one every run")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="folder for gpu_check.json")
    args = ap.parse_args()
    t_start = time.perf_counter()

    import gpu_dedup
    from gpu_dedup import RunConfig
    from gpu_dedup.config import LSHConfig, MinHashConfig, NormalizeConfig, ShingleConfig
    from gpu_dedup.runtime.device import resolve_device, simulator, to_device, to_host
    from gpu_dedup.testing.evalcorpus import make_corpus
    from gpu_dedup.lexical.exact import exact_hashes
    from gpu_dedup.lexical.lsh import band_keys
    from gpu_dedup.lexical.minhash import compute_signatures
    from gpu_dedup.text.normalize import normalize_text
    from gpu_dedup.lexical.verify import jaccard, shingle_sets

    resolve_device("cuda")
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(0, 2**31))
    rng = np.random.default_rng(seed)
    n = 24 if args.small else args.docs
    state = {"script": "gpu_check", "seed": seed, "docs": n, "simulator": simulator(), "checks": [],
             "decisions": {}, "timings": [], "running": None, "done": False}

    def save() -> None:
        state["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            write_json_atomic(os.path.join(args.out, "gpu_check.json"), state)

    def check(name: str, fn) -> bool:
        """fn() -> (ok, detail). An exception is a failure with its message; the next check still runs."""
        state["running"] = name
        save()
        t = time.perf_counter()
        try:
            ok, detail = fn()
        except Exception as exc:
            traceback.print_exc()
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        state["checks"].append({"name": name, "ok": bool(ok), "seconds": round(time.perf_counter() - t, 3),
                                "detail": detail})
        state["running"] = None
        save()
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  ({detail})" if detail and not ok else ""), flush=True)
        return bool(ok)

    print(f"seed {seed}")
    # the presets' shapes: fineweb and nemo (exact family), default (fss), and fss at 64 bits
    shapes = [(ShingleConfig("word", 5), MinHashConfig(112, 42, 64, "exact"), LSHConfig(14, 8)),
              (ShingleConfig("word", 5), MinHashConfig(100, 7, 32, "fss"), LSHConfig(20, 5)),
              (ShingleConfig("char", 24), MinHashConfig(260, 42, 32, "exact"), LSHConfig(20, 13)),
              (ShingleConfig("word", 3), MinHashConfig(128, 9, 64, "fss"), LSHConfig(16, 8))]
    if args.small:  # the simulator runs every GPU thread in Python
        shapes = [(ShingleConfig("word", 5), MinHashConfig(16, 42, 64, "exact"), LSHConfig(4, 4)),
                  (ShingleConfig("char", 8), MinHashConfig(8, 42, 32, "fss"), LSHConfig(2, 4))]

    def kernel_checks(arr: pa.Array, label: str, shape_list) -> None:
        """Normalize, exact hashes, signatures, band keys, shingle sets and Jaccard: GPU == CPU on arr."""
        for ncfg in (NormalizeConfig(), NormalizeConfig(True, True)):
            def normalize_and_exact(ncfg=ncfg):
                c = normalize_text(arr, ncfg, "cpu")
                g = normalize_text(arr, ncfg, "cuda")
                same = (np.array_equal(c.data, to_host(g.data)) and np.array_equal(c.offsets, to_host(g.offsets))
                        and np.array_equal(c.words, to_host(g.words))
                        and np.array_equal(c.codepoints, to_host(g.codepoints)))
                hashes = np.array_equal(exact_hashes(c, "cpu"), to_host(exact_hashes(g, "cuda")))
                return same and hashes, f"normalized text equal: {same}, exact hashes equal: {hashes}"
            punct = "punctuation removed, digits folded" if ncfg.remove_punctuation else "default"
            check(f"{label}: normalize ({punct}) + exact hashes", normalize_and_exact)
        cn, gn = normalize_text(arr, NormalizeConfig(), "cpu"), normalize_text(arr, NormalizeConfig(), "cuda")
        for sh, mh, lsh in shape_list:
            def minhash_lsh_verify(sh=sh, mh=mh, lsh=lsh):
                c = compute_signatures(cn, sh, mh, device="cpu")
                g = compute_signatures(gn, sh, mh, device="cuda")
                ok = c.nshingles > 0  # documents without a shingle have no signature (exact path only)
                sig = (np.array_equal(c.nshingles, to_host(g.nshingles))
                       and np.array_equal(c.values[ok], to_host(g.values)[ok]))
                keys = np.array_equal(band_keys(c.values, lsh, "cpu")[ok],
                                      to_host(band_keys(g.values, lsh, "cuda"))[ok])
                docs = np.flatnonzero(ok)
                cs = shingle_sets(cn, docs, sh, "cpu")
                gs = shingle_sets(gn, to_device(docs, "cuda"), sh, "cuda")
                sets = (np.array_equal(cs.sizes, to_host(gs.sizes)) and np.array_equal(cs.offsets, to_host(gs.offsets))
                        and np.array_equal(cs.hashes, to_host(gs.hashes)))
                jac = True
                if len(docs):
                    left = rng.integers(0, len(docs), 1000)
                    right = rng.integers(0, len(docs), 1000)
                    jac = np.array_equal(jaccard(cs, left, right, "cpu"),
                                         to_host(jaccard(gs, to_device(left, "cuda"), to_device(right, "cuda"),
                                                         "cuda")))
                return sig and keys and sets and jac, (f"signatures {sig}, band keys {keys}, shingle sets {sets}, "
                                                       f"jaccard {jac}")
            check(f"{label}: {sh.kind} {sh.n}-grams, K={mh.num_perm} w{mh.width}, {lsh.bands}x{lsh.rows} bands: "
                  "signatures, band keys, shingle sets, Jaccard", minhash_lsh_verify)

    # 0: compile every kernel once, outside the timed checks
    def warm_up():
        t = time.perf_counter()
        tiny = pa.array(["a b c d e f g h", "a b c d e f g x", "日本語 テキスト ﬁ ①", ""], pa.large_string())
        for dev in ("cpu", "cuda"):
            for ncfg in (NormalizeConfig(), NormalizeConfig(True, True)):
                exact_hashes(normalize_text(tiny, ncfg, dev), dev)
            norm = normalize_text(tiny, NormalizeConfig(), dev)
            docs = to_device(np.arange(3, dtype=np.int64), dev)
            for sh, mh, lsh in shapes[:1] + shapes[-1:]:
                band_keys(compute_signatures(norm, sh, mh, device=dev).values, lsh, dev)
                sets = shingle_sets(norm, docs, sh, dev)
                jaccard(sets, to_device(np.array([0, 1]), dev), to_device(np.array([1, 2]), dev), dev)
        state["timings"].append({"stage": "compile + warm-up (kernels of the checks, CPU and GPU)",
                                 "seconds": round(time.perf_counter() - t, 3)})
        return True, ""
    check("compile + warm-up", warm_up)

    # 1: decisions on real-looking text
    state["running"] = "make_corpus"
    save()
    if args.small:
        table = make_corpus(60, seed=seed % 997, mean_words=30, template_families=1, family_size=4)
    else:
        table = make_corpus(n, seed=seed % 997, mean_words=300, template_families=4)
    table = table.select(["id", "text"])
    state["decisions_corpus"] = {"docs": table.num_rows, "text_MB": round(table["text"].nbytes / 1e6, 1),
                                 "generator": "gpu_dedup.testing.evalcorpus.make_corpus"}
    for preset in PRESETS:
        def decisions(preset=preset, table=table):
            cfg = RunConfig.preset(preset, progress=False)
            if args.small:
                cfg = cfg.replace(minhash__num_perm=16, lsh__bands=4, lsh__rows=4)
            t = time.perf_counter()
            cpu = gpu_dedup.deduplicate(table, cfg.replace(device="cpu"))
            t_cpu = time.perf_counter() - t
            t = time.perf_counter()
            gpu = gpu_dedup.deduplicate(table, cfg.replace(device="cuda"))
            t_gpu = time.perf_counter() - t
            equal = gpu.decisions.equals(cpu.decisions)
            state["decisions"][preset] = {"equal": equal, "docs": table.num_rows, "cpu_s": round(t_cpu, 3),
                                          "gpu_s": round(t_gpu, 3), "removed_cpu": cpu.stats["counts"]["removed"],
                                          "removed_gpu": gpu.stats["counts"]["removed"]}
            state["timings"].append({"stage": f"pipeline {preset}, {table.num_rows:,} docs", "gpu_s": round(t_gpu, 3),
                                     "cpu_s": round(t_cpu, 3)})
            return equal, "" if equal else _table_diff(gpu.decisions, cpu.decisions)
        check(f"decisions identical on real-looking text, preset {preset} ({table.num_rows:,} docs)", decisions)
    del table

    # 2: kernels on random multi-script text and real-looking text
    state["running"] = "corpus for the kernel checks"
    save()
    random_docs = ["".join(rng.choice(SCRIPTS, rng.integers(0, 80))) + " " + " ".join(rng.choice(SCRIPTS, 20))
                   for _ in range(n // 2)]
    if args.small:
        real = make_corpus(30, seed=seed % 1000, mean_words=30, template_families=1, family_size=4)
    else:
        real = make_corpus(max(n // 2, 100), seed=seed % 1000, mean_words=400, template_families=4)
    arr = pa.array(random_docs + real["text"].to_pylist(), pa.large_string())
    del random_docs, real
    kernel_checks(arr, f"{len(arr):,} docs ({arr.nbytes / 1e6:.1f} MB)", shapes)

    # 3: two very long documents: normalization and MinHash spread over many blocks
    long_words = 300 if args.small else 1_000_000
    long_docs = [" ".join(rng.choice(["alpha", "béta", "γάμμα", "δ", "日本"], long_words)) for _ in range(2)]
    arr = pa.array(long_docs, pa.large_string())
    kernel_checks(arr, f"2 long docs ({arr.nbytes / 1e6:.1f} MB)", shapes[:1] + shapes[-1:])

    state["done"] = True
    save()
    failed = [c for c in state["checks"] if not c["ok"]]
    print(f"\n{'check':100s} {'seconds':>8s}")
    for c in state["checks"]:
        print(f"{c['name'][:100]:100s} {c['seconds']:8.2f}")
    for p, d in state["decisions"].items():
        print(f"pipeline {p}: {d['docs']:,} docs, GPU {d['gpu_s']:.2f} s, CPU {d['cpu_s']:.2f} s")
    print(f"\n{'ALL PASS' if not failed else f'{len(failed)} FAILED'} ({len(state['checks'])} checks, seed {seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
