"""``gpu-dedup filter``: its flags (made from FilterConfig's and DomainConfig's field metadata: cli/fields.py), the
scoring flags ``run`` shares (``add_model_arguments``, ``model_options``), and what it runs
(``filters.filter_corpus``)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
from typing import Any

from ..errors import ConfigError
from ..filters.config import FilterConfig, parse_classifier, parse_domain_threshold, split_threshold
from ..runtime.run import seconds_line, timing_line
from . import fields
from .args import positive_int

EPILOG_FILTER = """examples:
  gpu-dedup filter crawl/ -o out --lid lid.176.ftz --lang en --lid-threshold 0.65
  gpu-dedup filter crawl/ -o out --classifier quality=quality.bin:0.5 --classifier hate=hate.bin:max0.3
  gpu-dedup filter crawl/ -o out --perplexity wiki.arpa:1000 --rules gopher
  gpu-dedup filter crawl/ -o out --dsir-target wiki.jsonl --select 0.1
  gpu-dedup filter crawl/ -o out --lid lid.176.ftz --lang en --unit paragraph --paragraph-action remove

THRESHOLD: 0.5 or min0.5 keeps scores >= 0.5; max0.3 keeps scores <= 0.3 (toxicity). Without one, the
model card train-classifier wrote beside the model gives it. Outputs: scores.parquet (one row per input
document: every score, keep, reason), filtered/ (the kept records in the input's format and layout),
audit.parquet (random accepted and rejected documents), run.json, report.html."""


# FilterConfig's fields in the order of their flags (each flag made from the field's metadata: cli/fields.py);
# MODEL_FIELDS' are the scoring flags run shares, MODELS_GIVEN the fields that make them a filter
LID_FIELDS = ("lid", "lang", "lid_threshold", "lid_short_chars", "lid_short_threshold", "domain.script_prefilter",
              "domain.relax", "domain.relaxed_lid_threshold", "domain.relaxed_factor")
SCORE_FIELDS = ("classifiers", "perplexity", "perplexity_buckets", "min_perplexity_tokens", "lm_normalization",
                "rules", "rules_off", "rule_thresholds", "order", "unit")
MODEL_FIELDS = LID_FIELDS + SCORE_FIELDS
# filter's own (run's --paragraph-action is paragraph dedup's): the paragraph rules of --unit paragraph
PARAGRAPH_FIELDS = ("min_paragraph_tokens", "short_paragraphs", "paragraph_action", "lid_sentence_agreement")
# filter's own: the domain of each document (a field of the input, or a model) and thresholds per domain
DOMAIN_FIELDS = ("domain_field", "domain_model", "domain_thresholds")
# filter's own: the reader of run (dedup's pass 1) carries no per-document URL; run writes no cut documents
URL_FIELDS = ("url_field", "url_blocklist", "c4_remove_lines")
DSIR_FIELDS = ("dsir_target", "select", "dsir_buckets", "dsir_screen", "dsir_screen_drop")
RUN_FIELDS = ("audit", "seed", "id_field", "text_field", "on_error", "batch_bytes", "device", "threads")
STEP_RUN_FIELDS = ("audit", "seed", "write_filtered")  # a filter step's own (the others are the run's: cli/common.py)
MODELS_GIVEN = ("lid", "lang", "classifiers", "perplexity", "perplexity_lang", "rules", "domain.script_prefilter")


def add_model_arguments(p: argparse.ArgumentParser, title: str = "") -> None:
    """The scoring flags shared by ``filter`` and ``run`` (which filters before deduplicating): those of
    FilterConfig's ``MODEL_FIELDS``, from their field metadata."""
    # API names of these flags that are not their dest, for errors on the command line (gpu_dedup/flags.py)
    p.set_defaults(api_names={"normalization": "lm_normalization", "perplexity_keep": "perplexity",
                              "max_perplexity": "perplexity",
                              "perplexity_lang": "perplexity"})
    fields.add_flags(p.add_argument_group(f"{title}language ID"), FilterConfig, *LID_FIELDS,
                     config_defaults=True)
    fields.add_flags(p.add_argument_group(f"{title}classifiers, language models, rules"), FilterConfig,
                     *SCORE_FIELDS, config_defaults=True)


def _named(flag: str, items: list[str], what: str) -> dict[str, str]:
    """NAME -> VALUE of a repeatable ``--flag NAME=VALUE``."""
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise ConfigError(f"{flag} {item!r}: expected NAME={what}")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def _classifiers(args: argparse.Namespace) -> dict[str, Any]:
    """FilterConfig.classifiers of --classifier NAME=MODEL[:THRESHOLD], --classifier-label NAME=LABEL and
    (filter's) --classifier-card NAME=CARD."""
    given = {"label": _named("--classifier-label", args.classifier_label, "LABEL"),
             "card": _named("--classifier-card", getattr(args, "classifier_card", None), "CARD")}
    specs = []
    for text in args.classifier:
        spec = parse_classifier(text)
        spec = dataclasses.replace(spec, **{k: v.pop(spec.name) for k, v in given.items() if spec.name in v})
        specs.append(spec)
    for key, left in given.items():
        if left:
            raise ConfigError(f"--classifier-{key} {next(iter(left))!r} names no --classifier")
    return {"classifiers": tuple(specs)}


def _domain_thresholds(args: argparse.Namespace) -> dict[str, Any]:
    """FilterConfig.domain_thresholds of --domain-threshold NAME:DOMAIN=THRESHOLD (repeatable)."""
    return {"domain_thresholds": tuple(parse_domain_threshold(x) for x in args.domain_threshold or ())}


def _perplexity(args: argparse.Namespace) -> dict[str, Any]:
    """The fields --perplexity MODEL[:MAX|:keep=FRACTION] or LANG=MODEL,LANG=MODEL gives: perplexity,
    max_perplexity, perplexity_keep, perplexity_lang."""
    ppl, max_ppl, keep = args.perplexity, None, None
    if ppl and ":keep=" in ppl and not os.path.exists(ppl):
        ppl, value = ppl.rsplit(":keep=", 1)
        if "," in value:  # LANG=MODEL:keep=F,LANG=MODEL: a threshold after a model that is not the last
            raise ConfigError(f"--perplexity {args.perplexity!r}: keep={value.split(',')[0]} follows a model that is "
                              f"not the last, giving its language a threshold of its own; one threshold applies "
                              f"to every language, after the last model (e.g. en=en.arpa,de=de.arpa:keep=0.5)")
        try:
            keep = float(value)
        except ValueError:
            raise ConfigError(f"--perplexity {args.perplexity!r}: keep={value!r} is not a fraction in (0, 1]") \
                from None
    elif ppl:
        ppl, max_ppl = split_threshold("--perplexity", ppl, directions=False)
    by_lang: tuple[tuple[str, str], ...] = ()
    if ppl and not os.path.exists(ppl) and re.match(r"^[A-Za-z][A-Za-z0-9_-]*=", ppl):
        # LANG=MODEL,LANG=MODEL: one model per language, routed by the LID label
        for item in ppl.split(","):
            lang, _, path = item.partition("=")
            if not lang.strip() or not path:
                raise ConfigError(f"--perplexity {args.perplexity!r}: {item!r} is not LANG=MODEL (e.g. "
                                  f"en=en.arpa,de=de.arpa)")
            head = path.rsplit(":", 1)[0]
            if ":" in path and not os.path.exists(path) and os.path.exists(head):
                # a threshold after one model of several: one threshold, after the last model, is for all
                raise ConfigError(f"--perplexity {args.perplexity!r}: {item!r} gives {lang.strip()!r} a threshold "
                                  f"of its own; one threshold applies to every language, after the last model "
                                  f"(e.g. en=en.arpa,de=de.arpa:1000 or ...:keep=0.5)")
            by_lang += ((lang.strip(), path),)
        ppl = None
    return {"perplexity": ppl, "max_perplexity": max_ppl, "perplexity_keep": keep, "perplexity_lang": by_lang}


PARSED = {"classifiers": _classifiers, "perplexity": _perplexity,  # the fields whose flags' text is parsed here
          "domain_thresholds": _domain_thresholds}


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """FilterConfig's scoring fields from ``add_model_arguments``' flags ({} when no model, rule or script
    pre-filter is given)."""
    values = fields.flag_values(FilterConfig, args, MODEL_FIELDS, PARSED)
    if not any(values.get(k) for k in MODELS_GIVEN):
        return {}
    return fields.nest(values, FilterConfig)


def _add_scoring_groups(p: argparse.ArgumentParser) -> None:
    """The flags a filter command and a recipe's filter step share: scoring, paragraphs, domains, URL rules, DSIR."""
    add_model_arguments(p)
    fields.add_flags(p.add_argument_group("paragraphs (--unit paragraph)"), FilterConfig, *PARAGRAPH_FIELDS,
                     config_defaults=True)
    g = p.add_argument_group("domains: thresholds per domain (002: medical, legal, fiction)")
    fields.add_flags(g, FilterConfig, *DOMAIN_FIELDS, config_defaults=True)
    g.add_argument("--classifier-card", action="append", default=[], metavar="NAME=CARD",
                   help="the model card of classifier NAME (threshold, label, thresholds per domain), e.g. one "
                        "`gpu-dedup calibrate` wrote (default: MODEL.json beside the model)")
    fields.add_flags(p.add_argument_group("rules: URL blocklist (--rules url), C4's line removal (--rules c4)"), FilterConfig, *URL_FIELDS,
                     config_defaults=True)
    fields.add_flags(p.add_argument_group("DSIR (importance resampling)"), FilterConfig, *DSIR_FIELDS,
                     config_defaults=True)


def add_filter_arguments(p: argparse.ArgumentParser) -> None:
    """``filter``'s flags: the scoring flags, DSIR's and the run's, from FilterConfig's field metadata, and
    those that are no config field (OUT, the engine, --overwrite, --quiet)."""
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories or globs (like `run`)")
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    _add_scoring_groups(p)
    p.set_defaults(api_names={**p.get_default("api_names"), "output_dir": "output"})  # filter_corpus's name of -o
    g = p.add_argument_group("run")
    fields.add_flags(g, FilterConfig, *RUN_FIELDS, config_defaults=True)
    g.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="ray: score the files in parallel Ray tasks (the same scores); see `run --engine`")
    g.add_argument("--workers", type=positive_int, help="with --engine ray: start a local Ray cluster of N processes")
    g.add_argument("--address", metavar="auto|HOST:PORT", help="with --engine ray: join a running cluster")
    g.add_argument("--table-layout", choices=("file", "dataset"), help="scores as one file (scores.parquet: the "
                   "local engine's) or a dataset of per-input-file parts the Ray tasks write (scores/: the default "
                   "with --engine ray)")
    fields.add_flags(g, FilterConfig, "write_filtered", config_defaults=True)
    g.add_argument("--overwrite", action="store_true", help="replace an earlier run's outputs in OUT")
    g.add_argument("-q", "--quiet", action="store_true")
    from .common import add_common, add_guard

    add_guard(p)
    add_common(p)


def add_step_arguments(p: argparse.ArgumentParser) -> None:
    """A filter step's flags in a recipe: ``filter``'s but the run's (its reading, device and threads are the
    pipeline's), with the step's own run settings (audit, seed, --no-filtered)."""
    _add_scoring_groups(p)
    fields.add_flags(p.add_argument_group("run"), FilterConfig, *STEP_RUN_FIELDS, config_defaults=True)


def step_config(args: argparse.Namespace) -> FilterConfig:
    """The FilterConfig of a filter step's flags (``add_step_arguments``)."""
    values = fields.flag_values(FilterConfig, args, PARAGRAPH_FIELDS + DOMAIN_FIELDS + URL_FIELDS + DSIR_FIELDS
                                + STEP_RUN_FIELDS, PARSED)
    return FilterConfig(**model_options(args), **fields.nest(values, FilterConfig))


def filter_config(args: argparse.Namespace) -> FilterConfig:
    """The FilterConfig of ``filter``'s flags (``progress``: bars unless --quiet; the API's default is off)."""
    values = fields.flag_values(FilterConfig, args, PARAGRAPH_FIELDS + DOMAIN_FIELDS + URL_FIELDS + DSIR_FIELDS
                                + RUN_FIELDS + ("write_filtered",), PARSED)
    return FilterConfig(**model_options(args), **fields.nest(values, FilterConfig), progress=not args.quiet)


def run_filter(args: argparse.Namespace) -> int:
    from ..filters.program import Filter
    from ..pipeline.engine import run_pipeline
    from .common import env_from_args, print_extras

    cfg = filter_config(args)
    # a one-step pipeline: the engine owns OUT (outside the inputs, locked, an earlier run replaced only with
    # --overwrite); errors name output_dir / overwrite=True, which main writes as --output / --overwrite
    res = run_pipeline([Filter(cfg)], args.inputs, args.output, env=env_from_args(args), layout="flat",
                       command="filter", resume=args.resume, overwrite=args.overwrite).steps[0].result
    c = res.stats["counts"]
    print(f"kept {c['kept']:,} of {c['input']:,} documents; removed by: "
          + (", ".join(f"{r} {k:,}" for r, k in sorted(c["by_reason"].items(), key=lambda x: -x[1])
                       if r != "kept") or "nothing"))
    warning = (res.stats.get("dsir") or {}).get("warning")
    if warning:  # the log line can share a line with the progress bar: the summary says it again
        print(f"note: DSIR {warning}")
    t = res.stats["timings_s"]
    print(f"device {res.stats['device']}, {seconds_line(t)}, {res.stats['throughput_docs_per_s'] or 0:,.0f} docs/s "
          f"scored")
    print(timing_line(t))
    print_extras(res.stats)
    table = os.path.join(args.output, (res.stats.get("scores") or {}).get("path", "scores.parquet"))
    print(f"wrote {table}{os.sep if os.path.isdir(table) else ''}, run.json"
          + (", filtered/" if cfg.write_filtered else "") + (", audit.parquet" if cfg.audit else "")
          + (", report.html" if os.path.exists(os.path.join(args.output, "report.html")) else ""))
    return 0


def add_command(sub) -> None:
    """Register ``filter`` on the CLI's subparsers."""
    p = sub.add_parser("filter", help="score documents (language ID, classifiers, perplexity, rules, DSIR) and "
                       "keep those that pass", epilog=EPILOG_FILTER,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_filter_arguments(p)
    p.set_defaults(func=run_filter)
