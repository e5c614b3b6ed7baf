"""Write the demo sample corpus gpu_dedup/data/sample.jsonl.gz (used by ``gpu-dedup demo``).

About 2,000 documents from gpu_dedup.testing.evalcorpus.make_corpus with a fixed seed and every kind of
document (unique, exact / near copies, chained template families, short). One JSON object per line:
{"id": ..., "text": ..., "url": "https://example.com/...", "kind": ...}. The gzip header carries no
file name and mtime 0, so the output is byte-reproducible (for a given numpy and zlib). Usage:

    PYTHONPATH=. python tools/make_sample.py [--out PATH]
"""
from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import io
import json
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
sys.path.insert(0, ROOT)
from gpu_dedup.testing.evalcorpus import make_corpus  # noqa: E402

DEFAULT_OUT = os.path.join(ROOT, "gpu_dedup", "data", "sample.jsonl.gz")
SEED = 20240501
N_DOCS = 2000
MAX_BYTES = 400_000   # keep the wheel small


def sample_bytes() -> bytes:
    """The gzip-compressed JSON-lines sample."""
    table = make_corpus(N_DOCS, SEED, mean_words=70, exact_dup_frac=0.06, near_dup_frac=0.12,
                        template_families=3, family_size=20, short_frac=0.03)
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
        for row in table.select(["id", "text", "kind"]).to_pylist():
            line = {"id": row["id"], "text": row["text"], "url": f"https://example.com/articles/{row['id']}",
                    "kind": row["kind"]}
            gz.write(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
    return raw.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    data = sample_bytes()
    if len(data) > MAX_BYTES:
        raise SystemExit(f"sample is {len(data):,} bytes, over the {MAX_BYTES:,} limit; lower N_DOCS or mean_words")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(data)
    with gzip.open(args.out, "rt", encoding="utf-8") as f:
        kinds = collections.Counter(json.loads(line)["kind"] for line in f)
    print(f"wrote {args.out}: {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}, "
          f"{sum(kinds.values()):,} documents: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
