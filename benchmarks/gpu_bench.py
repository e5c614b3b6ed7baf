"""GPU throughput per stage vs the measured ceilings of the lent H200, with the CPU path in the same run.

Makes its own corpus on the device (vectorized: token ids drawn with the array module, bytes written by
one kernel thread per document), 400-word documents, fineweb preset (K=112 = 14x8, word 5-grams), and
prints one table: time, docs/s, GB/s and the fraction of a ceiling for
  1. signatures from UTF-8 bytes already on the device (normalize + shingle hash + MinHash);
  2. the whole MinHash stage from parquet on local disk (read + H2D + normalize + signatures);
  3. the whole fuzzy pipeline, read -> decisions written, on --docs documents;
  4. the same pipeline on the CPU for --cpu-docs documents (the GPU/CPU ratio comes from this run).
Targets (issue 3): 1 >= 3 M docs/s, 2 >= 1 M docs/s, 3 >= 500 k docs/s.

    python benchmarks/gpu_bench.py --docs 2000000 --out $OUT
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu_bench.py --docs 200 --cpu-docs 100 --words 40   # script check
"""
import argparse
import json
import os
import shutil
import tempfile
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CEILINGS = {"minhash_docs_s": 7.9e6, "d2d_GBs": 4180.0, "h2d_pinned_GBs": 54.5}


def _materialize_kernel(target: str):
    """One thread per document writes its tokens' bytes separated by single spaces."""
    def body(i, tokens, vocab, voff, doc_off, out):
        pos = doc_off[i]
        for w in range(tokens.shape[1]):
            t = tokens[i, w]
            if w:
                out[pos] = 32
                pos += 1
            for j in range(voff[t], voff[t + 1]):
                out[pos] = vocab[j]
                pos += 1

    if target == "cuda":
        from numba import cuda

        dev = cuda.jit(device=True)(body)

        @cuda.jit
        def kernel(tokens, vocab, voff, doc_off, out):
            i = cuda.grid(1)
            if i < tokens.shape[0]:
                dev(i, tokens, vocab, voff, doc_off, out)

        return lambda *a: kernel[(a[0].shape[0] + 127) // 128, 128](*a)
    from numba import njit, prange

    dev = njit(body)

    @njit(parallel=True)
    def cpu_kernel(tokens, vocab, voff, doc_off, out):
        for i in prange(tokens.shape[0]):
            dev(i, tokens, vocab, voff, doc_off, out)

    return cpu_kernel


def make_corpus(xp, n: int, words: int, seed: int = 0, dup_frac: float = 0.2, edit_frac: float = 0.02):
    """(data uint8, offsets int64) of n documents on the device: Zipf-like token ids over a 30k-word
    vocabulary, with dup_frac of the documents copied from earlier ones with edit_frac of tokens changed."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    lens = rng.integers(2, 11, 30000)
    vocab_h = letters[rng.integers(0, 26, int(lens.sum()))]
    voff_h = np.zeros(lens.shape[0] + 1, np.int64)
    np.cumsum(lens, out=voff_h[1:])
    r = xp.random.default_rng(seed) if hasattr(xp.random, "default_rng") else xp.random
    u = r.random((n, words))
    tokens = xp.minimum((30000 ** u - 1).astype(xp.int64), 29999)  # log-uniform ranks ~ Zipf
    ndup = int(n * dup_frac)
    if ndup:
        src = (r.random(ndup) * (n - ndup)).astype(xp.int64)
        dst = xp.arange(n - ndup, n, dtype=xp.int64)
        tokens[dst] = tokens[src]
        edit = r.random((ndup, words)) < edit_frac
        repl = (r.random((ndup, words)) * 30000).astype(xp.int64)
        tokens[dst] = xp.where(edit, repl, tokens[dst])
    vocab, voff = xp.asarray(vocab_h), xp.asarray(voff_h)
    tok_len = (voff[1:] - voff[:-1])[tokens]
    doc_len = tok_len.sum(axis=1) + (words - 1)
    offsets = xp.zeros(n + 1, xp.int64)
    xp.cumsum(doc_len, out=offsets[1:])
    data = xp.empty(int(offsets[-1]), xp.uint8)
    target = "cuda" if xp.__name__ == "cupy" else "cpu"
    _materialize_kernel(target)(tokens, vocab, voff, offsets, data)
    return data, offsets


def _sync(xp) -> None:
    if xp.__name__ == "cupy":
        xp.cuda.get_current_stream().synchronize()


# the shared device functions rely on uint64 wrap-around, which numpy scalars (simulator) warn about
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2_000_000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--cpu-docs", type=int, default=50_000)
    ap.add_argument("--work", default=None, help="scratch directory for parquet (default: a temp dir)")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="where to write gpu_bench.json")
    args = ap.parse_args()

    import gpu_dedup
    from gpu_dedup import RunConfig
    from gpu_dedup.device import array_module, resolve_device, to_host
    from gpu_dedup.minhash import compute_signatures, permutation_params
    from gpu_dedup.normalize import normalize_arrays

    device = resolve_device("cuda")
    xp = array_module(device)
    cfg = RunConfig.preset("fineweb", device=device, progress=False)
    rows = []

    def row(stage: str, sec: float, docs: int, nbytes: float, ceiling: str | None, frac: float | None):
        rows.append({"stage": stage, "seconds": sec, "docs_per_s": docs / sec if sec else None,
                     "GB_per_s": nbytes / sec / 1e9 if sec else None, "ceiling": ceiling, "fraction": frac})

    t = time.perf_counter()
    data, offsets = make_corpus(xp, args.docs, args.words)
    _sync(xp)
    gen = time.perf_counter() - t
    nbytes = int(data.shape[0])
    row("generate corpus on the device (not a pipeline stage)", gen, args.docs, nbytes, None, None)

    params = permutation_params(cfg.minhash)
    # warm-up on a slice: compiles the kernels outside the timings
    normalize_arrays(data[:int(offsets[64])], offsets[:65], cfg.normalize, device)
    compute_signatures(normalize_arrays(data[:int(offsets[64])], offsets[:65], cfg.normalize, device),
                       cfg.shingle, cfg.minhash, params, device)
    _sync(xp)
    step = 250_000
    t_norm = t_sig = 0.0
    for lo in range(0, args.docs, step):
        hi = min(lo + step, args.docs)
        off = offsets[lo:hi + 1]
        t = time.perf_counter()
        norm = normalize_arrays(data, off, cfg.normalize, device)
        _sync(xp)
        t1 = time.perf_counter()
        compute_signatures(norm, cfg.shingle, cfg.minhash, params, device)
        _sync(xp)
        t_norm += t1 - t
        t_sig += time.perf_counter() - t1
    row("1a normalize (bytes on device)", t_norm, args.docs, nbytes, "4.18 TB/s copy", nbytes * 2 / t_norm / 4.18e12)
    row("1b shingle hash + MinHash K=112", t_sig, args.docs, nbytes, "7.9 M docs/s roofline",
        args.docs / t_sig / CEILINGS["minhash_docs_s"])
    row("1  signature stage from device bytes (target 3 M/s)", t_norm + t_sig, args.docs, nbytes,
        "7.9 M docs/s roofline", args.docs / (t_norm + t_sig) / CEILINGS["minhash_docs_s"])

    work = args.work or tempfile.mkdtemp(prefix="gd-bench-")
    src = os.path.join(work, "corpus")
    os.makedirs(src, exist_ok=True)
    data_h, off_h = to_host(data), to_host(offsets)
    del data
    shard = 500_000
    for k, lo in enumerate(range(0, args.docs, shard)):
        hi = min(lo + shard, args.docs)
        text = pa.LargeStringArray.from_buffers(hi - lo, pa.py_buffer(off_h[lo:hi + 1] - off_h[lo]),
                                                pa.py_buffer(data_h[off_h[lo]:off_h[hi]]))
        ids = pa.array(np.char.add("d", np.arange(lo, hi).astype(str)))
        pq.write_table(pa.table({"id": ids, "text": text}), os.path.join(src, f"part-{k:03d}.parquet"))
    del data_h

    from gpu_dedup import io
    from gpu_dedup.device import to_device
    from gpu_dedup.normalize import arrow_text_buffers

    from gpu_dedup.gpu_io import resolve_reader

    files = io.resolve_inputs([src])
    device_reader = resolve_reader("auto", device)  # what the pipeline picks: cudf when installed
    reader_name = device_reader.name if device_reader is not None else "pyarrow"
    t = time.perf_counter()
    t_h2d = 0.0
    for batch in io.iter_batches(files, id_field="id", text_field="text", batch_bytes=1 << 30, on_error="raise",
                                 device_reader=device_reader):
        if batch.device_text is not None:
            dd, od = batch.device_text.data, batch.device_text.offsets
        else:
            d, o = arrow_text_buffers(batch.text)
            t0 = time.perf_counter()
            dd, od = to_device(d, device), to_device(o, device)
            _sync(xp)
            t_h2d += time.perf_counter() - t0
        compute_signatures(normalize_arrays(dd, od, cfg.normalize, device), cfg.shingle, cfg.minhash, params,
                           device)
    _sync(xp)
    whole = time.perf_counter() - t
    row("   host->device copy of text (inside 2)", t_h2d, args.docs, nbytes, "54.5 GB/s pinned",
        nbytes / t_h2d / 54.5e9 if t_h2d else None)
    row(f"2  MinHash stage from parquet, {reader_name} (target 1 M/s)", whole, args.docs, nbytes, None, None)

    out = os.path.join(work, "out")
    t = time.perf_counter()
    res = gpu_dedup.deduplicate([src], cfg, output_dir=out)
    pipe = time.perf_counter() - t
    row("3  whole pipeline read -> decisions (target 500 k/s)", pipe, args.docs, nbytes, None, None)
    for stage, sec in res.stats["timings_s"].items():
        if stage != "total":
            row(f"     {stage}", sec, args.docs, nbytes, None, None)

    cpu_src = os.path.join(work, "cpu-sample")
    os.makedirs(cpu_src, exist_ok=True)
    pq.write_table(pq.read_table(os.path.join(src, "part-000.parquet")).slice(0, args.cpu_docs),
                   os.path.join(cpu_src, "part.parquet"))
    t = time.perf_counter()
    gpu_dedup.deduplicate([cpu_src], cfg.replace(device="cpu"), output_dir=os.path.join(work, "out-cpu"))
    cpu = time.perf_counter() - t
    row(f"4  same pipeline on the CPU ({args.cpu_docs:,} docs)", cpu, args.cpu_docs, 0, None, None)
    ratio = (args.docs / pipe) / (args.cpu_docs / cpu)

    print(f"\n{args.docs:,} docs x {args.words} words, {nbytes / 1e9:.2f} GB text, fineweb preset, device {device}, "
          f"parquet text read by {reader_name}")
    print(f"{'stage':56s} {'s':>8s} {'docs/s':>12s} {'GB/s':>7s}  {'of ceiling':>10s}")
    for r in rows:
        frac = f"{r['fraction']:.1%}" if r["fraction"] is not None else ""
        gbs = f"{r['GB_per_s']:.2f}" if r["GB_per_s"] else ""
        print(f"{r['stage']:56s} {r['seconds']:8.2f} {r['docs_per_s'] or 0:12,.0f} {gbs:>7s}  {frac:>10s}")
    print(f"\nGPU/CPU whole-pipeline throughput ratio (this run): {ratio:.1f}x "
          f"({res.stats['counts']['removed']:,} of {args.docs:,} removed)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_bench.json"), "w") as f:
            json.dump({"rows": rows, "ratio": ratio, "reader": reader_name, "docs": args.docs, "words": args.words}, f, indent=2)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
