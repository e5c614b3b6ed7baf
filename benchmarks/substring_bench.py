"""Exact-substring dedup: suffix-array construction speed of our CPU path (pydivsufsort over token ids) against
pydivsufsort over the UTF-8 bytes of the same text (the yardstick), in the same run; the doubling path (the GPU
algorithm) on the CPU or, with --device cuda, on the GPU; tokens/s end to end; peak memory per token.

    python benchmarks/substring_bench.py --docs 2000 --words 200      # small: ~0.5M tokens
    python benchmarks/substring_bench.py --device cuda                # GPU figures too (real GPU only)
    python benchmarks/substring_bench.py --docs 2000 --memory-budget 32M   # also under a memory budget
The corpus is synthetic: documents of random words (Zipf) with shared 80-word boilerplate blocks.
Peak memory: ru_maxrss growth of a fresh child process per measurement (after a warm-up run on 20 documents
that loads the kernels), divided by the tokens; the corpus' text is already in memory before it (an in-memory
table input), the outputs are written to a temporary directory. --memory-budget adds a run under that budget
(tokens spilled to the system's temporary directory, chunk pairs).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time

import numpy as np
import pyarrow as pa


def corpus(docs: int, words: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(20000)])
    blocks = [" ".join(vocab[rng.zipf(1.3, 80) % 20000]) for _ in range(20)]
    texts = []
    for d in range(docs):
        body = " ".join(vocab[rng.zipf(1.3, words) % 20000])
        if d % 3 == 0:
            body = body + "\n" + blocks[d % 20] + "\n" + body[:200]
        texts.append(body)
    return pa.table({"id": [str(i) for i in range(docs)], "text": texts})


def _child(kind: str, docs: int, words: int, device: str, q) -> None:
    from gpu_dedup.io.text import arrow_text_buffers
    from gpu_dedup.substring import SubstringConfig, substring_dedup
    from gpu_dedup.substring.dedup import tokenize
    from gpu_dedup.substring.suffix import corpus_text, suffix_array, suffix_array_doubling

    t = corpus(docs, words)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if kind.startswith("e2e"):
        budget = int(kind.split(":")[1]) if ":" in kind else None
        import tempfile

        with tempfile.TemporaryDirectory() as out:  # kernels compiled, readers and writers loaded
            substring_dedup(corpus(20, 60, seed=1), SubstringConfig(memory_budget=budget), out, device=device)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as out:  # written outputs: nothing but the statistics held
            res = substring_dedup(t, SubstringConfig(memory_budget=budget), out, device=device)
        dt = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        c = res.stats["counts"]
        q.put({"seconds": dt, "tokens": c["tokens"], "bytes": c["bytes_in"], "tokens_cut": c["tokens_cut"],
               "peak_growth_bytes": peak - base, "stages_s": res.stats["timings_s"],
               "suffix_arrays": res.stats["suffix_arrays"]["suffix_arrays"]})
        return
    cfg = SubstringConfig()
    text_col = t.column("text").combine_chunks().cast(pa.large_string())
    data, off = arrow_text_buffers(text_col)
    toks = tokenize(data, off, text_col, cfg, None)
    ids, _ = corpus_text(toks.doc_off, toks.ident, np.arange(len(toks), dtype=np.int64))
    raw = np.ascontiguousarray(data[off[0]:off[-1]])
    t0 = time.perf_counter()
    if kind == "bytes":
        import pydivsufsort

        pydivsufsort.divsufsort(raw)
    elif kind == "tokens":
        suffix_array(ids)
    elif kind == "doubling":
        suffix_array_doubling(ids)
    elif kind == "doubling_gpu":  # the GPU path: prefix doubling with CuPy, then the Kasai kernel
        import cupy

        from gpu_dedup.substring.suffix import lcp_array

        d = cupy.asarray(ids)
        lcp_array(d, suffix_array_doubling(d, cupy), "cuda")  # warm-up: CuPy's sort and the kernel compile
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        lcp_array(d, suffix_array_doubling(d, cupy), "cuda")
        cupy.cuda.Device().synchronize()
    dt = time.perf_counter() - t0
    q.put({"seconds": dt, "mb": raw.shape[0] / 1e6, "positions": int(ids.shape[0])})


def measure(kind: str, docs: int, words: int, device: str = "cpu") -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(kind, docs, words, device, q))
    p.start()
    r = q.get()
    p.join()
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100000)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--e2e-only", action="store_true", help="skip the suffix-array yardsticks")
    ap.add_argument("--memory-budget", default=None, help="also run end to end under this budget (e.g. 64M): "
                    "tokens spilled, chunk pairs; peak memory per token with and without it")
    a = ap.parse_args()
    kinds = ("bytes", "tokens", "doubling") + (("doubling_gpu",) if a.device == "cuda" else ())
    kinds = () if a.e2e_only else kinds
    out = {k: measure(k, a.docs, a.words) for k in kinds}
    out["e2e"] = measure("e2e", a.docs, a.words, a.device)
    if a.memory_budget:
        from gpu_dedup.cli import parse_size

        out["e2e_budget"] = measure(f"e2e:{parse_size(a.memory_budget)}", a.docs, a.words, a.device)
    e = out["e2e"]
    mb = e["bytes"] / 1e6
    print(json.dumps({
        "corpus": {"docs": a.docs, "words_per_doc": a.words, "mb": mb, "tokens": e["tokens"]},
        **({} if a.e2e_only else {"sa_mb_per_s": {"pydivsufsort_bytes": mb / out["bytes"]["seconds"],
                        "ours_cpu_tokens": mb / out["tokens"]["seconds"],
                        "doubling_on_cpu": mb / out["doubling"]["seconds"],
                        **({"gpu_doubling_and_lcp": mb / out["doubling_gpu"]["seconds"]} if "doubling_gpu" in out
                           else {})},
        "ratio_ours_vs_bytes": out["bytes"]["seconds"] / out["tokens"]["seconds"]}),
        "e2e": {"device": a.device, "tokens_per_s": e["tokens"] / e["seconds"], "seconds": e["seconds"],
                "peak_bytes_per_token": e["peak_growth_bytes"] / max(e["tokens"], 1), "tokens_cut": e["tokens_cut"],
                "stages_s": e["stages_s"]},
        **({"e2e_budget": {"memory_budget": a.memory_budget, "suffix_arrays": out["e2e_budget"]["suffix_arrays"],
                           "tokens_per_s": e["tokens"] / out["e2e_budget"]["seconds"],
                           "seconds": out["e2e_budget"]["seconds"],
                           "peak_bytes_per_token": out["e2e_budget"]["peak_growth_bytes"] / max(e["tokens"], 1)}}
           if a.memory_budget else {}),
    }, indent=1))


if __name__ == "__main__":
    main()
