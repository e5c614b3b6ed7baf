"""``gpu-dedup run``: the RunConfig from --preset, then --config FILE, then the flags (``config_from_args``), the
span stages' and the semantic stage's configs from theirs (cli/steps.py: the same flags a recipe's steps take), all
handed to ``pipeline.compose.run_dedup``, which runs them as one flat pipeline in OUT; the summary on stdout."""
from __future__ import annotations

import argparse
import logging
import os
import textwrap

from ..config import RunConfig
from ..errors import ConfigError
from ..io.batch import read_summary
from ..paragraph.dedup import OUTPUT_DIR as PARAGRAPH_OUTPUT
from ..pipeline.compose import ORDERS
from ..runtime.run import seconds_line, timing_line
from . import steps
from . import substring as substring_cli
from .args import config_default, positive_int
from .common import add_common, add_guard, guard, price, print_extras, table_shown
from .steps import RUN_CONFIG_KEYS, add_config_flags, config_flags, config_from_args  # noqa: F401 - the run flags' API

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
                   "(sections normalize/shingle/minhash/lsh/cluster, plus top-level keys; or any flag by name)")
    add_config_flags(p, "device")
    steps.add_dedup_flags(p)
    g = p.add_argument_group("input / execution")
    add_config_flags(g, "id_field", "text_field", "on_error", "batch_bytes", "threads")
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
    g.add_argument("--table-layout", choices=("file", "dataset"), help="decisions (and the span stages' tables) as "
                   "one file each (decisions.parquet: the local engine's) or datasets of per-input-file parts the Ray "
                   "tasks write (decisions/, removed_spans/, ...: the default with --engine ray, no row passes "
                   "through the driver)")
    g.add_argument("--partitions", type=positive_int, help="with --engine ray: key ranges of the shuffle "
                   "(default: the cluster's CPUs, at most 64; more than the input's size can fill are cut, with a warning)")
    g.add_argument("--resume", action="store_true", help="finish an interrupted run: reuse valid pieces of the "
                   "work directory, recompute the rest; same decisions as an uninterrupted run")
    g = p.add_argument_group("paragraph dedup (keep-first, reversible; runs next to the document-level stages)")
    g.add_argument("--paragraph-dedup", action="store_true", help="remove later copies of repeated paragraphs: "
                   "writes removed_spans.parquet, paragraph_docs.parquet, paragraph_deduplicated/")
    g.add_argument("--paragraph-order", choices=PARAGRAPH_ORDERS, default="after",
                   help="after (default): paragraph dedup over the documents the document stages kept, so "
                   f"{PARAGRAPH_OUTPUT}/ holds both; before: the document stages read its output (and when they "
                   "remove documents it runs again over the survivors); beside: both read the input (two separate "
                   "results)")
    steps.add_paragraph_flags(g)
    _STAGE_FLAGS["paragraph_dedup"] = _stage_flags(g, "paragraph_dedup")
    g = p.add_argument_group("exact-substring dedup (suffix arrays over tokens; reversible)")
    g.add_argument("--substring-dedup", action="store_true", help="cut later copies of every span of >= "
                   "--substring-min-tokens tokens: writes substring_spans.parquet, substring_docs.parquet, "
                   "substring_deduplicated/")
    g.add_argument("--substring-order", choices=SUBSTRING_ORDERS, default="after", help="after (default): over the "
                   "documents the document stages (and an --paragraph-order after stage) kept; before: the document "
                   "stages read its output (and when they remove documents it runs again over the survivors); "
                   "beside: both on the input")
    substring_cli.add_stage_args(g, "substring-")
    _STAGE_FLAGS["substring_dedup"] = _stage_flags(g, "substring_dedup")
    g = p.add_argument_group("semantic dedup (SemDeDup: embeddings -> k-means -> within-cluster cosine)")
    g.add_argument("--semantic", action="store_true", help="also remove semantic duplicates (needs "
                   "gpu-dedup[semantic]); decisions gain cosine / semantic_nearest_id / semantic_cluster")
    steps.add_semantic_flags(g)
    g.add_argument("--semantic-order", choices=["after", "beside"], default="after",
                   help="after (default): over the documents the lexical stages kept, each semantic duplicate "
                   "removed for a kept one; beside: over every document, recorded in the semantic columns only "
                   "(the lexical decisions stand; what `gpu-dedup compare` reads)")
    g.add_argument("--no-lexical", action="store_true", help="with --semantic: skip MinHash/LSH (exact "
                   "duplicates are still removed: they are semantic duplicates at cosine 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, warnings only")
    from .filter import add_model_arguments

    add_model_arguments(p, title="filter, then deduplicate what it keeps, in one read: ")
    add_guard(p)
    add_common(p)
    # API names in the library's errors that are not a flag's dest (flags.py writes them as these flags)
    p.set_defaults(api_names={**p.get_default("api_names"), "output_dir": "output", "paragraph": "paragraph_dedup",
                              "write_deduplicated": "no_deduplicated", "lexical": "no_lexical",
                              "substring": "substring_dedup",
                              # the substring stage's fields whose bare names are the dedup's flags (or none)
                              "SubstringConfig.memory_budget": "substring_memory_budget",
                              "SubstringConfig.work_dir": "substring_work_dir",
                              "SubstringConfig.min_doc_bytes": "substring_min_doc_bytes",
                              # the semantic stage's fields: --clusters, and --semantic-keep (not the dedup's --keep)
                              "n_clusters": "clusters", "SemanticConfig.keep": "semantic_keep"})


def add_command(sub) -> None:
    """Register ``run`` on the CLI's subparsers."""
    p = sub.add_parser("run", help="deduplicate a corpus", epilog=EPILOG_RUN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_args(p)
    p.set_defaults(func=cmd_run)


# a span stage's switch (dest) -> its other flags: (dest, flag, default), recorded as the parser is built
_STAGE_FLAGS: dict[str, list[tuple[str, str, object]]] = {}


def _stage_flags(group: argparse._ArgumentGroup, switch: str) -> list[tuple[str, str, object]]:
    """The flags of a span stage's group but its switch: (dest, flag, default)."""
    return [(a.dest, a.option_strings[-1], a.default) for a in group._group_actions if a.dest != switch]


def _check_stage_flags(args: argparse.Namespace) -> None:
    """A span stage's flags without the stage were ignored without a word (the run looked like it had cut
    paragraphs with --bloom-fp 0.1); refused like the semantic flags without --semantic."""
    for switch, flags in _STAGE_FLAGS.items():
        if getattr(args, switch, False):
            continue
        from_file = getattr(args, "config_flag_keys", frozenset())  # keys of --config FILE read as flags
        given = [f"{dest} (config file {args.config!r})" if dest in from_file else flag
                 for dest, flag, default in flags if getattr(args, dest, default) != default]
        if given:
            stage, one = "--" + switch.replace("_", "-"), len(given) == 1
            raise ConfigError(f"{' / '.join(given)} {'belongs' if one else 'belong'} to the {stage} stage, which "
                              f"this run does not run: add {stage}, or leave {'it' if one else 'them'} out")


def _semantic_config(args: argparse.Namespace):
    """The SemanticConfig of the semantic flags (None without --semantic, which they need)."""
    if not args.semantic:
        if (args.no_lexical or args.model or args.eps is not None or args.clusters is not None or args.long_text
                or args.semantic_order != "after"):
            raise ConfigError("--no-lexical / --model / --eps / --clusters / --long-text / --semantic-order belong "
                              "to the semantic stage: add --semantic")
        return None
    return steps.semantic_config(args)


def cmd_run(args: argparse.Namespace) -> int:
    from ..pipeline.compose import run_dedup

    cfg = config_from_args(args)
    _check_stage_flags(args)
    semantic = _semantic_config(args)
    res = run_dedup(args.inputs, cfg, args.output,
                    paragraph=steps.paragraph_config(args) if args.paragraph_dedup else None,
                    paragraph_order=args.paragraph_order,
                    substring=substring_cli.stage_config(args) if args.substring_dedup else None,
                    substring_order=args.substring_order, lexical=not args.no_lexical, semantic=semantic,
                    semantic_order=args.semantic_order,
                    against=args.against, save_index=args.save_index, work_dir=args.work_dir, resume=args.resume,
                    engine=args.engine, workers=args.workers, address=args.address, partitions=args.partitions,
                    overwrite=args.overwrite, prefilter=_prefilter(args, cfg), sources=guard(args), price=price(args),
                    table_layout=args.table_layout)
    for stage in res.order:
        done = {"paragraph": res.paragraph, "substring": res.substring}.get(stage, res)
        if done is None:  # the stages before it (the filter flags, dedup) left it no document; the log said so
            print(f"{stage} dedup: not run, no document was left to it")
        elif stage == "paragraph":
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
    from ..paragraph.dedup import SPANS_TABLE

    c = res.stats["counts"]
    print(f"paragraph dedup: {c['units_removed']:,} of {c['units']:,} paragraphs cut from "
          f"{c['documents_changed']:,} documents ({c['bytes_cut']:,} bytes) -> "
          f"{table_shown(res.output_dir, SPANS_TABLE)}, {PARAGRAPH_OUTPUT}/")
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
    print(timing_line(t))
    print_extras(s)
    table = os.path.join(result.output_dir, (s.get("decisions") or {}).get("path", "decisions.parquet"))
    print(f"wrote {table}{os.sep if os.path.isdir(table) else ''}, run.json"
          + (", deduplicated/" if "deduplicated" in s else "")
          + (", report.html" if os.path.exists(os.path.join(result.output_dir, "report.html")) else ""))
    if "work_dir" in s:
        w = s["work_dir"]
        print(f"work dir {w['path']}: {w['pieces_reused']} pieces reused, {w['pieces_computed']} computed")
    for line in read_summary(s["read"]):
        print(line)
