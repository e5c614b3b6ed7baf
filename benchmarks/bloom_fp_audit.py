"""The paragraph stage's measured Bloom false positives (``--paragraph-fp-sample``) on a corpus with a known answer.

n synthetic documents, each a unique line plus one footer line shared by all: the exact rule keeps n + 1 units, so
every other removal is a false positive. Runs paragraph_dedup with a Bloom filter designed for ``--design`` items at
``--fp``, sampling all keys and a tenth of them, and prints the audit (false removals, the measured rate and its 95%
interval, the target, the flag). Everything printed is measured here.

    python benchmarks/bloom_fp_audit.py                        # n = 20,000; design 20,000 and 5,000 (undersized)
    python benchmarks/bloom_fp_audit.py --n 1000000 --design 1000000 --fp 1e-4 --device cuda
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))

import pyarrow as pa  # noqa: E402

from gpu_dedup.paragraph.bloom import BloomConfig  # noqa: E402
from gpu_dedup.paragraph.dedup import ParagraphConfig, paragraph_dedup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--design", type=int, nargs="+", default=[20_000, 5_000])
    ap.add_argument("--fp", type=float, default=0.01)
    ap.add_argument("--samples", type=float, nargs="+", default=[1.0, 0.1])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    docs = [f"Unique line number {i} of this synthetic corpus.\nThe same footer line for every document here."
            for i in range(args.n)]
    table = pa.table({"id": [str(i) for i in range(args.n)], "text": docs})
    print("design  fp  sample  kept_by_exact  false_removals  measured  ci95  target  over  seconds")
    for design in args.design:
        for sample in args.samples:
            t = time.perf_counter()
            r = paragraph_dedup(table, ParagraphConfig(bloom=BloomConfig(design, args.fp), fp_sample=sample,
                                                       batch_bytes=1 << 16), device=args.device)
            a = r.stats["fp_audit"]
            print(f"{design} {args.fp:g} {sample:g} {a['units_kept_by_exact_rule']} {a['false_removals']} "
                  f"{a['measured_fp_rate']:.4g} [{a['ci95'][0]:.4g}, {a['ci95'][1]:.4g}] {a['target_fp_rate']:g} "
                  f"{a['exceeds_target']} {time.perf_counter() - t:.1f}")


if __name__ == "__main__":
    main()
