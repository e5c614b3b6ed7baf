"""Paragraph-level perplexity (``filter --perplexity M --unit paragraph``): our scorer (``Scorers.columns``:
the paragraphs split by the one splitter, scored by the Numba LM, pooled per document) against the kenlm
package scoring every paragraph on its own in a Python loop (``model.score(line)`` per line) and pooling the
same way, on the same ARPA model and documents.

Documents are 1-6 paragraphs of 1-3 Zipf lines, separated by blank lines; a paragraph with fewer than
``--min-tokens`` LM words (``</s>`` not counted) inherits its document's score (the default policy), so the document's perplexity is
10^(-sum log10 p / sum tokens) over its long paragraphs (all of them when none is long). Both must agree to
1e-6 relative per document. Ours runs with 1 thread and with every thread numba has; kenlm's loop is
single-threaded. Prints a table.

    python benchmarks/paragraph_bench.py [--docs 20000] [--train-sentences 100000] [--order 3] [--min-tokens 10]
"""
import argparse
import os
import random
import sys
import tempfile

import numba
import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))

from gpu_dedup.filters.config import FilterConfig  # noqa: E402
from gpu_dedup.filters.kneser_ney import LMTrainConfig, train_lm  # noqa: E402
from gpu_dedup.filters.lm import LMNormalization  # noqa: E402
from gpu_dedup.filters.scorers import Scorers  # noqa: E402
from perplexity_bench import best  # noqa: E402  (this directory is on sys.path when a script runs)


def zipf_line(rng: random.Random, vocab: int) -> str:
    return " ".join(f"w{min(int(rng.paretovariate(0.9)), vocab)}" for _ in range(rng.randint(2, 14)))


def document(rng: random.Random) -> str:
    return "\n\n".join("\n".join(zipf_line(rng, 80000) for _ in range(rng.randint(1, 3)))
                       for _ in range(rng.randint(1, 6)))


def kenlm_pooled(model, docs: list[str], min_tokens: int) -> np.ndarray:
    """Each document's perplexity from its paragraphs, each scored alone by kenlm (the reference)."""
    out = np.empty(len(docs))
    for i, d in enumerate(docs):
        scored = []
        for para in d.split("\n\n"):
            lines = [ln for ln in para.split("\n") if ln.split()]
            if lines:
                lp = sum(model.score(ln, bos=True, eos=True) for ln in lines)
                words = sum(len(ln.split()) for ln in lines)
                scored.append((lp, words + len(lines), words))  # tokens count each line's </s>
        long = [s for s in scored if s[2] >= min_tokens] or scored
        out[i] = 10.0 ** (-sum(s[0] for s in long) / sum(s[1] for s in long))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--train-sentences", type=int, default=100000)
    ap.add_argument("--order", type=int, default=3)
    ap.add_argument("--min-tokens", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import kenlm

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(tmp, "ref.txt")
        with open(ref, "w") as f:
            f.write("\n".join(zipf_line(rng, 50000) for _ in range(args.train_sentences)))
        arpa = os.path.join(tmp, "m.arpa")
        train_lm(ref, arpa, LMTrainConfig(order=args.order, normalization=LMNormalization(mode="none")))
        model = kenlm.Model(arpa)
        scorers = Scorers.load(FilterConfig(perplexity=arpa, unit="paragraph", min_paragraph_tokens=args.min_tokens,
                                            device="cpu", audit=0), "cpu")
        docs = [document(rng) for _ in range(args.docs)]
        text = pa.array(docs, pa.large_string())
        ids = pa.array([str(i) for i in range(len(docs))])
        paragraphs = sum(len([p for p in d.split("\n\n") if p.split()]) for d in docs)

        def ours():
            return scorers.columns(text, ids, 0)["perplexity"]

        def theirs():
            return kenlm_pooled(model, docs, args.min_tokens)

        want = theirs()
        got = np.asarray(ours(), np.float64)
        rel = float(np.max(np.abs(got - want) / want))
        assert rel < 1e-6, f"paragraph perplexities differ from kenlm's: max relative difference {rel:.2e}"
        threads = numba.get_num_threads()
        rows = [("kenlm per paragraph (Python loop)", 1, best(theirs, args.repeat))]
        numba.set_num_threads(1)
        ours()
        rows.append(("gpu_dedup Scorers (--unit paragraph)", 1, best(ours, args.repeat)))
        numba.set_num_threads(threads)
        if threads > 1:
            rows.append(("gpu_dedup Scorers (--unit paragraph)", threads, best(ours, args.repeat)))
    print(f"documents: {args.docs}, paragraphs: {paragraphs}, order {args.order}, min tokens {args.min_tokens}; "
          f"max relative perplexity difference = {rel:.2e}")
    print(f"{'scorer':38s} {'threads':>7s} {'seconds':>8s} {'docs/s':>10s} {'paragraphs/s':>13s} {'vs kenlm':>8s}")
    base = rows[0][2]
    for name, th, sec in rows:
        print(f"{name:38s} {th:7d} {sec:8.3f} {args.docs / sec:10.0f} {paragraphs / sec:13.0f} {base / sec:7.2f}x")


if __name__ == "__main__":
    main()
