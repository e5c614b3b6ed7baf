"""``gpu-dedup substring`` and ``run``'s ``--substring-*`` flags (the stage itself: ``substring.substring_dedup``;
its place in ``run``: ``compose.run_dedup``)."""
from __future__ import annotations

import argparse
import os
from typing import Any

from .. import constants as C
from ..errors import ConfigError
from .args import positive_int, size_arg
EPILOG = ("examples:\n  gpu-dedup substring data/ -o sub-out --min-tokens 50\n"
          "  gpu-dedup substring data/*.parquet -o sub-out --tokenizer gpt2/tokenizer.json --keep longest\n"
          "outputs: substring_spans.parquet (every cut: byte and token range, the kept copy, the cut text),\n"
          "substring_docs.parquet (one row per document; with --engine ray both are by default folders of\n"
          "per-input-file parts: --table-layout), substring_deduplicated/ (the input's format),\n"
          "substring_dedup.json (statistics, seam rule and a sample of seams)")


def add_stage_args(g: Any, prefix: str) -> None:
    """The options shared by ``substring`` and ``run --substring-dedup`` (``prefix`` "substring-" in run)."""
    g.add_argument(f"--{prefix or ''}min-tokens", dest="min_tokens", type=int, default=C.SUBSTRING_MIN_TOKENS,
                   help=f"shortest repeated span cut, in tokens (default {C.SUBSTRING_MIN_TOKENS}, Lee et al.)")
    g.add_argument(f"--{prefix}tokenizer", dest="tokenizer", metavar="TOKENIZER_JSON", help="a Hugging Face "
                   "tokenizer.json (loaded from the path, never downloaded); default: the normalized word units")
    g.add_argument(f"--{prefix}chunk-tokens", dest="chunk_tokens", type=positive_int, metavar="N",
                   help="tokens per chunk for corpora larger than memory: suffix arrays over pairs of chunks, the "
                        "same cuts as one array")
    g.add_argument(f"--{prefix}memory-budget", dest="substring_memory_budget", type=size_arg, metavar="SIZE",
                   help=f"bound the suffix-array stage's memory (e.g. 2G): tokens spilled to --{prefix}work-dir and "
                        "chunks chosen to fit; the same cuts")
    if prefix:  # the substring command's --work-dir is the common one (cli/common.py): where intermediate files go
        g.add_argument(f"--{prefix}work-dir", dest="substring_work_dir", metavar="DIR", help="directory for the "
                       f"spilled tokens with --{prefix}memory-budget (default: the system's temporary directory; "
                       "~32 B per token)")
    g.add_argument(f"--{prefix}min-doc-bytes", dest="substring_min_doc_bytes", type=int, default=50,
                   help="changed documents left with fewer bytes are flagged 'short' (default 50)")


def add_command(sub: Any) -> None:
    """Register ``substring`` on the CLI's subparsers."""
    from .common import add_common

    p = sub.add_parser("substring", help="cut repeated spans of >= --min-tokens tokens (exact-substring dedup with "
                       "suffix arrays; reversible)", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="jsonl / jsonl.gz / jsonl.zst / parquet files, "
                   "directories or glob patterns")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    add_stage_args(p, "")
    p.add_argument("--table-layout", choices=("file", "dataset"), help="the spans and documents tables as one file "
                   "each (substring_spans.parquet, substring_docs.parquet: the local engine's) or datasets of "
                   "per-input-file parts the Ray tasks write (substring_spans/, substring_docs/: the default with "
                   "--engine ray, no row passes through the driver)")
    p.add_argument("--keep", default="first", help="which copy stays: first | longest | min-id | max:<column> | "
                   "min:<column> (default first)")
    p.add_argument("--skip-bad-records", action="store_true", help="skip (and count) bad records instead of "
                   "stopping at the first (the same as --on-error skip)")
    add_common(p)
    # substring_dedup's name of -o; SubstringConfig's fields whose flag's dest differs
    p.set_defaults(func=cmd_substring, api_names={"output_dir": "output", "memory_budget": "substring_memory_budget",
                                                  "min_doc_bytes": "substring_min_doc_bytes"})


def config_from(args: argparse.Namespace, **input_kw: Any):
    from ..substring.config import SubstringConfig

    return SubstringConfig(min_tokens=args.min_tokens, tokenizer=args.tokenizer, chunk_tokens=args.chunk_tokens,
                           memory_budget=args.substring_memory_budget,
                           work_dir=getattr(args, "substring_work_dir", None),
                           min_doc_bytes=args.substring_min_doc_bytes, **input_kw)


def cmd_substring(args: argparse.Namespace) -> int:
    from ..pipeline.engine import run_pipeline
    from ..substring.program import Substring
    from .common import env_from_args

    if args.min_tokens < 1:
        raise ConfigError(f"--min-tokens must be >= 1, got {args.min_tokens}")
    if args.skip_bad_records:
        args.on_error = "skip"
    env = env_from_args(args)
    step = Substring(config_from(args, keep=args.keep))
    run = run_pipeline([step], args.inputs, args.output, env=env, layout="flat", command="substring",
                       resume=args.resume, overwrite=args.overwrite)
    summary(run.steps[0].result)
    return 0


def stage_config(args: argparse.Namespace):
    """``run --substring-dedup``'s SubstringConfig (its keep order, normalization and reading settings are the
    run's: compose.stage_configs)."""
    if args.min_tokens < 1:
        raise ConfigError(f"--substring-min-tokens must be >= 1, got {args.min_tokens}")
    return config_from(args)


def summary(res: Any) -> None:
    """The substring stage's summary line on stdout (its spans table: the file, or a Ray run's dataset)."""
    from ..substring.dedup import OUTPUT_DIR, SPANS_TABLE
    from .common import table_shown

    c = res.stats["counts"]
    print(f"substring dedup: {c['spans_cut']:,} spans ({c['tokens_cut']:,} of {c['tokens']:,} tokens, "
          f"{c['bytes_cut']:,} bytes) cut from {c['documents_changed']:,} of {c['documents']:,} documents "
          f"-> {os.path.join(res.output_dir, table_shown(res.output_dir, SPANS_TABLE))}, {OUTPUT_DIR}/")
