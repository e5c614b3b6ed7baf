"""``gpu-dedup screen``: flag corpus documents that share word n-grams with benchmark items (a report; removes
nothing). Its flags are a screen step's in a recipe too (``add_screen_arguments``, ``screen_config``), where a
flagged document is removed as ``contaminated``."""
from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any, get_args

from ..errors import MissingFileError
from ..screen import ScreenConfig, TextUnit
from ..screen.screening import ITEM_ID_FIELDS
from .common import add_common, env_from_args


def add_screen_arguments(p: Any, required: bool = True) -> None:
    """The benchmark files and ScreenConfig's flags."""
    p.add_argument("--benchmark", nargs="+", required=required, metavar="FILE",
                   help="benchmark files: jsonl / parquet (fields below) or plain text")
    d = {f.name: f.default for f in dataclasses.fields(ScreenConfig)}
    p.add_argument("--ngram", type=int, default=d["ngram"], help=f"words per n-gram (default {d['ngram']})")
    p.add_argument("--min-matches", type=int, default=d["min_matches"],
                   help=f"shared n-grams needed to flag (default {d['min_matches']})")
    p.add_argument("--min-ngram", type=int, default=d["min_ngram"],
                   help=f"smallest n accepted (default {d['min_ngram']})")
    p.add_argument("--benchmark-field", action="append", help="benchmark record field to index (repeatable; "
                   f"default {', '.join(d['fields'])})")
    p.add_argument("--benchmark-id-field", metavar="FIELD", help="benchmark record field that names an item "
                   "(default: the first of " + ", ".join(ITEM_ID_FIELDS) + " a file has, else '<file>:<record>')")
    p.add_argument("--benchmark-text-unit", choices=get_args(TextUnit), default=d["text_unit"],
                   help="plain-text benchmark files: one item per line (default) or per file")
    p.add_argument("--common-phrases", metavar="FILE", help="phrases (one per line) whose n-grams never count")
    p.add_argument("--max-items-per-ngram", type=int, help="ignore n-grams in more items (0 = keep all)")


def screen_config(args: argparse.Namespace) -> ScreenConfig:
    """The ScreenConfig of the screen flags (its reading settings are the run's)."""
    from ..screen import load_phrases

    kw: dict[str, Any] = {"ngram": args.ngram, "min_matches": args.min_matches, "min_ngram": args.min_ngram,
                          "text_unit": args.benchmark_text_unit, "item_id_field": args.benchmark_id_field}
    if args.benchmark_field:
        kw["fields"] = tuple(args.benchmark_field)
    if args.common_phrases:
        try:
            kw["common_phrases"] = load_phrases(args.common_phrases)
        except MissingFileError as e:
            raise MissingFileError(f"--common-phrases: {e}") from None
    if args.max_items_per_ngram is not None:
        kw["max_items_per_ngram"] = args.max_items_per_ngram or None
    return ScreenConfig(**kw)


def add_command(sub) -> None:
    """Register ``screen`` on the CLI's subparsers."""
    p = sub.add_parser("screen", help="flag corpus documents sharing word n-grams with benchmark items "
                       "(contamination report; removes nothing)",
                       epilog="examples:\n  gpu-dedup screen crawl/ --benchmark gsm8k.jsonl mmlu.parquet -o screen-out\n"
                              "  gpu-dedup screen crawl/ --benchmark items.txt -o out --ngram 8 --common-phrases "
                              "boilerplate.txt\n\npolicy: n >= 8 unless --min-ngram is lowered; n-grams found in "
                              "more than --max-items-per-ngram items (default 10) or in --common-phrases are ignored",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="+", metavar="CORPUS", help="files, directories or globs (like `run`)")
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    add_screen_arguments(p)
    add_common(p)
    p.set_defaults(func=cmd_screen, api_names={"output_dir": "output"})  # screen()'s name of -o, in its errors


def _benchmark_files(paths: list[str]) -> tuple[str, ...]:
    """--benchmark's files, each checked before the corpus is read, so that the error names the flag."""
    from ..screen.benchmarks import check_benchmark_file

    for p in paths:
        check_benchmark_file(p, "--benchmark")
    return tuple(paths)


def cmd_screen(args: argparse.Namespace) -> int:
    from ..pipeline.engine import run_pipeline
    from ..screen.program import Screen

    step = Screen(_benchmark_files(args.benchmark), screen_config(args))
    res = run_pipeline([step], args.corpus, args.output, env=env_from_args(args), layout="flat", command="screen",
                       resume=args.resume, overwrite=args.overwrite).steps[0].result
    print(f"screened against {len(args.benchmark)} benchmark file(s): {res.matches.num_rows:,} (document, item) "
          f"matches in {len(res.flagged_ids):,} documents "
          f"-> {os.path.join(args.output, 'matches.parquet')}, counts.json. Nothing was removed.")
    return 0
