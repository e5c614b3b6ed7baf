"""The C4 and FineWeb rule sets against datatrove's own filters (C4QualityFilter, also as FineWeb runs it without
the terminal-punctuation rule, and FineWebQualityFilter) on the same
documents: agreement of the keep decisions and throughput per thread; the character and URL rules timed beside
them (datatrove has no filter of those definitions: they are NeMo Curator's).

Usage: python benchmarks/rules_bench.py [--docs 20000] [--seed 0] [--repeats 3]
(needs the ``bench`` extra: ``pip install -e .[bench]`` brings datatrove.)

Documents: web-like pages made here, deterministic in ``--seed``: 3-25 lines of English-like sentences with,
at random, lines without terminal punctuation, short menu lines, repeated lines, citations, "javascript" /
policy / "lorem ipsum" / "{" lines, URLs, non-ASCII words, trailing spaces and CRLF ends, so that every
rule rejects some pages and keeps others.

datatrove's English sentence and word splitters load NLTK's punkt model, which is downloaded at run time (not
allowed here, and NLTK is not installed): the benchmark gives datatrove's filters gpu_dedup's splitters
(``rulesets.count_sentences``'s sentences, ``str.split`` words) in their place, so the agreement measures
everything else of the definitions (line cuts, order of the line rules, thresholds); datatrove's time
then includes no NLTK tokenization either (with it, datatrove is slower). One thread: both are Python string
work; gpu_dedup's column passes are ``rule_scores`` (all rule columns of the set) + ``rule_decisions``.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an "
         "they you were her she there been one all we their has would when if so no out up into do any time "
         "people river market garden history system music water language").split()


def make_pages(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)

    def sentence() -> str:
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
        return s[0].upper() + s[1:] + rng.choice([".", ".", ".", "!", "?", "...", "", ".\"", " [12]."])

    extras = ["Home | About | Contact", "Share this", "This site uses cookies to improve it.",
              "Enable JavaScript to see this page properly.", "Lorem ipsum dolor sit amet, consectetur.",
              "var x = {a: 1}; done.", "See https://example.com/some/path?q=1 for more.",
              "Caf\u00e9 na\u00efve r\u00e9sum\u00e9.",
              "\u4eca\u65e5\u306f\u3044\u3044\u5929\u6c17\u3067\u3059\u3002", "Read more", "Terms of Use apply here."]
    pages = []
    for _ in range(n):
        lines = []
        for _ in range(rng.randint(3, 25)):
            r = rng.random()
            if r < 0.12:
                lines.append(rng.choice(extras))
            elif r < 0.18 and lines:
                lines.append(rng.choice(lines))
            else:
                lines.append(" ".join(sentence() for _ in range(rng.randint(1, 4))))
            if rng.random() < 0.03:
                lines[-1] += " "
        sep = "\r\n" if rng.random() < 0.05 else "\n"
        pages.append(sep.join(lines))
    return pages


def _median(fn, repeats: int) -> tuple[float, object]:
    out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    import datatrove.pipeline.filters.c4_filters as dt_c4
    import datatrove.pipeline.filters.fineweb_quality_filter as dt_fw
    import numpy as np
    import pyarrow as pa
    from datatrove.data import Document

    from gpu_dedup.filters import rulesets
    from gpu_dedup.filters.rules import RulesConfig, rule_decisions, rule_scores

    # datatrove's punkt splitters -> ours (see the module doc)
    dt_c4.split_into_sentences = lambda text, language=None: [text] * rulesets.count_sentences(text)
    dt_fw.split_into_words = lambda text, language=None: text.split()

    pages = make_pages(args.docs, args.seed)
    arr = pa.array(pages, pa.large_string())
    mb = sum(len(p.encode()) for p in pages) / 1e6
    from importlib.metadata import version

    print(f"# {len(pages)} pages, {mb:.1f} MB, datatrove {version('datatrove')}, 1 thread, median of {args.repeats}")
    print(f"{'rule set':10s} {'ours docs/s':>12s} {'datatrove docs/s':>17s} {'ratio':>6s} {'agree':>8s} "
          f"{'kept (ours)':>12s}")
    for name, dt_filter in (("c4", dt_c4.C4QualityFilter()),
                            ("c4_fineweb", dt_c4.C4QualityFilter(filter_no_terminal_punct=False)),
                            ("fineweb", dt_fw.FineWebQualityFilter())):
        cfg = RulesConfig.preset(name)
        t_ours, (keep, _) = _median(lambda: rule_decisions(rule_scores(arr, cfg), cfg), args.repeats)

        def run_dt():
            return np.array([dt_filter.filter(Document(text=p, id=str(i))) is True for i, p in enumerate(pages)])

        t_dt, dt_keep = _median(run_dt, args.repeats)
        agree = float(np.mean(keep == dt_keep))
        print(f"{name:10s} {len(pages) / t_ours:12.0f} {len(pages) / t_dt:17.0f} {t_dt / t_ours:6.2f} {agree:8.4%} "
              f"{int(keep.sum()):12d}")
    for name in ("chars", "url"):
        cfg = RulesConfig.preset(name)
        t_ours, (keep, _) = _median(lambda: rule_decisions(rule_scores(arr, cfg), cfg), args.repeats)
        print(f"{name:10s} {len(pages) / t_ours:12.0f} {'-':>17s} {'-':>6s} {'-':>8s} {int(keep.sum()):12d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
