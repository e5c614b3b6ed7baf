"""``gpu-dedup filter``: its flags, the scoring flags ``run`` shares (``add_model_arguments``, ``model_options``),
and what it runs (``filters.filter_corpus``)."""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
from typing import Any

from ..errors import ConfigError
from ..filters.config import DomainConfig, FilterConfig, parse_classifier, split_threshold
from .args import positive_float

EPILOG_FILTER = """examples:
  gpu-dedup filter crawl/ -o out --lid lid.176.ftz --lang en --lid-threshold 0.65
  gpu-dedup filter crawl/ -o out --classifier quality=quality.bin:0.5 --classifier hate=hate.bin:max0.3
  gpu-dedup filter crawl/ -o out --perplexity wiki.arpa:1000 --rules gopher
  gpu-dedup filter crawl/ -o out --dsir-target wiki.jsonl --select 0.1

THRESHOLD: 0.5 or min0.5 keeps scores >= 0.5; max0.3 keeps scores <= 0.3 (toxicity). Without one, the
model card train-classifier wrote beside the model gives it. Outputs: scores.parquet (one row per input
document: every score, keep, reason), filtered/ (the kept records in the input's format and layout),
audit.parquet (random accepted and rejected documents), run.json, report.html."""


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a probability in [0, 1]")
    return v


def _select(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a count (100000) nor a fraction (0.1)") from None
    if not math.isfinite(v) or not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: a fraction must be in (0, 1]; a count is a whole number")
    return v


def _order(text: str) -> tuple[str, ...]:
    from ..filters.config import FAMILIES

    order = tuple(x.strip() for x in text.split(","))
    if sorted(order) != sorted(FAMILIES):
        raise argparse.ArgumentTypeError(f"{text!r} must name each of {','.join(FAMILIES)} once, comma-separated")
    return order


def _cuts(text: str) -> tuple[float, float]:
    try:
        cuts = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not two numbers A,B (e.g. 0.33,0.67)") from None
    if len(cuts) != 2 or not 0.0 < cuts[0] < cuts[1] < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be two fractions 0 < A < B < 1 (e.g. 0.33,0.67)")
    return cuts


def add_model_arguments(p: argparse.ArgumentParser, title: str = "") -> None:
    """The scoring flags shared by ``filter`` and ``run`` (which filters before deduplicating)."""
    # API names of these flags that are not their dest, for errors on the command line (gpu_dedup/flags.py)
    p.set_defaults(api_names={"normalization": "lm_normalization", "perplexity_keep": "perplexity",
                              "max_perplexity": "perplexity",
                              "perplexity_lang": "perplexity"})
    d = {f.name: f.default for f in dataclasses.fields(FilterConfig)}
    dd = {f.name: f.default for f in dataclasses.fields(DomainConfig)}
    g = p.add_argument_group(f"{title}language ID")
    g.add_argument("--lid", metavar="MODEL", help="fastText language-ID model (.bin / .ftz, e.g. lid.176.ftz)")
    g.add_argument("--lang", action="append", metavar="CODE", help="language to keep (repeatable; e.g. en)")
    g.add_argument("--lid-threshold", type=_fraction, default=d["lid_threshold"],
                   help=f"probability of the top language needed (default {d['lid_threshold']})")
    g.add_argument("--script-prefilter", action="store_true",
                   help="a document more than half in a script one language writes (Hangul, kana, Thai, Greek, "
                        "...) gets that language without the model")
    g.add_argument("--domain-relax", action="store_true",
                   help="code and math documents (density rules) get --relaxed-lid-threshold and classifier "
                        "thresholds x --relaxed-factor")
    g.add_argument("--relaxed-lid-threshold", type=_fraction, default=dd["relaxed_lid_threshold"])
    g.add_argument("--relaxed-factor", type=_fraction, default=dd["relaxed_factor"])
    g = p.add_argument_group(f"{title}classifiers, language models, rules")
    g.add_argument("--classifier", action="append", metavar="NAME=MODEL[:THRESHOLD]", default=[],
                   help="fastText classifier; column NAME_score (repeatable)")
    g.add_argument("--classifier-label", action="append", metavar="NAME=LABEL", default=[],
                   help="the label whose probability is NAME's score (default: the model card's, else "
                        "__label__NAME)")
    g.add_argument("--perplexity", metavar="MODEL[:MAX|:keep=FRACTION]",
                   help="n-gram LM (ARPA or KenLM binary); documents above MAX perplexity are removed, or all but "
                        "the FRACTION with the lowest perplexity (by rank, ties by input order); "
                        "LANG=MODEL,LANG=MODEL: one model per language, by the LID label")
    g.add_argument("--perplexity-buckets", type=_cuts, metavar="A,B",
                   help="CCNet's buckets: column perplexity_bucket = head (lowest A), middle, tail (above B)")
    g.add_argument("--lm-normalization", metavar="MODE",
                   help="the normalization an ARPA without gpu-dedup's header was trained with: none | "
                        "nfkc-lower[,remove-punctuation][,fold-digits]")
    g.add_argument("--rules", choices=("gopher", "gopher_quality", "gopher_repetition"),
                   help="heuristic rules: gopher = quality + repetition rules at the paper's thresholds")
    g.add_argument("--rule-off", action="append", metavar="COLUMN", default=[],
                   help="switch one rule off, e.g. gopher_stop_words (repeatable)")
    g.add_argument("--order", type=_order, default=d["order"], metavar="FAMILIES",
                   help="the order of the tests for the reason column: a permutation of "
                        f"{','.join(d['order'])} (the default: language ID first)")
    g.add_argument("--unit", choices=("document", "paragraph"), default=d["unit"],
                   help="score whole documents (default) or paragraphs (byte-weighted per document)")


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """FilterConfig's scoring fields from ``add_model_arguments``' flags ({} when none is given)."""
    labels: dict[str, str] = {}
    for item in args.classifier_label:
        if "=" not in item:
            raise ConfigError(f"--classifier-label {item!r}: expected NAME=LABEL")
        k, v = item.split("=", 1)
        labels[k] = v
    specs = []
    for text in args.classifier:
        spec = parse_classifier(text)
        if spec.name in labels:
            spec = dataclasses.replace(spec, label=labels.pop(spec.name))
        specs.append(spec)
    if labels:
        raise ConfigError(f"--classifier-label {next(iter(labels))!r} names no --classifier")
    ppl, max_ppl, keep = args.perplexity, None, None
    if ppl and ":keep=" in ppl and not os.path.exists(ppl):
        ppl, value = ppl.rsplit(":keep=", 1)
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
            by_lang += ((lang.strip(), path),)
        ppl = None
    given = bool(args.lid or args.lang or specs or ppl or by_lang or args.rules or args.script_prefilter)
    if not given:
        return {}
    return dict(lid=args.lid, lang=tuple(args.lang or ()), lid_threshold=args.lid_threshold,
                classifiers=tuple(specs), perplexity=ppl, max_perplexity=max_ppl, perplexity_keep=keep,
                perplexity_buckets=tuple(args.perplexity_buckets or ()), perplexity_lang=by_lang,
                lm_normalization=args.lm_normalization, rules=args.rules, rules_off=tuple(args.rule_off),
                unit=args.unit, order=args.order,
                domain=DomainConfig(script_prefilter=args.script_prefilter, relax=args.domain_relax,
                                    relaxed_lid_threshold=args.relaxed_lid_threshold,
                                    relaxed_factor=args.relaxed_factor))


def add_filter_arguments(p: argparse.ArgumentParser) -> None:
    d = {f.name: f.default for f in dataclasses.fields(FilterConfig)}
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories or globs (like `run`)")
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    add_model_arguments(p)
    p.set_defaults(api_names={**p.get_default("api_names"), "output_dir": "output"})  # filter_corpus's name of -o
    g = p.add_argument_group("DSIR (importance resampling)")
    g.add_argument("--dsir-target", nargs="+", metavar="FILE", help="target-domain documents for DSIR")
    g.add_argument("--select", type=_select, metavar="K|FRACTION", help="documents DSIR keeps")
    g.add_argument("--dsir-buckets", type=int, default=d["dsir_buckets"])
    g = p.add_argument_group("run")
    g.add_argument("--audit", type=int, default=d["audit"],
                   help=f"random accepted and rejected documents kept for auditing, each (default {d['audit']})")
    g.add_argument("--seed", type=int, default=d["seed"])
    g.add_argument("--id-field", default=d["id_field"])
    g.add_argument("--no-id-field", action="store_true", help="the input has no ids: make them from file and row")
    g.add_argument("--text-field", default=d["text_field"])
    g.add_argument("--on-error", choices=("raise", "skip"), default=d["on_error"])
    g.add_argument("--batch-mb", type=positive_float, help="MiB of text per batch")
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), default=d["device"])
    g.add_argument("--threads", type=int)
    g.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="ray: score the files in parallel Ray tasks (the same scores); see `run --engine`")
    g.add_argument("--workers", type=int, help="with --engine ray: start a local Ray cluster of N processes")
    g.add_argument("--address", metavar="auto|HOST:PORT", help="with --engine ray: join a running cluster")
    g.add_argument("--no-filtered", action="store_true", help="do not write filtered/")
    g.add_argument("--overwrite", action="store_true", help="replace an earlier run's outputs in OUT")
    g.add_argument("-q", "--quiet", action="store_true")


def filter_config(args: argparse.Namespace) -> FilterConfig:
    kw: dict[str, Any] = dict(
        model_options(args), dsir_target=tuple(args.dsir_target or ()), select=args.select,
        dsir_buckets=args.dsir_buckets, audit=args.audit, seed=args.seed,
        id_field=None if args.no_id_field else args.id_field, text_field=args.text_field, on_error=args.on_error,
        device=args.device, threads=args.threads, progress=not args.quiet, write_filtered=not args.no_filtered)
    if args.batch_mb is not None:
        kw["batch_bytes"] = max(1024, int(args.batch_mb * 2**20))
    return FilterConfig(**kw)


def run_filter(args: argparse.Namespace) -> int:
    from ..filters.stage import filter_corpus

    cfg = filter_config(args)
    # filter_corpus owns OUT (outside the inputs, locked, an earlier run replaced only with --overwrite); its
    # errors name output_dir / overwrite=True, which main writes as --output / --overwrite (api_names)
    res = filter_corpus(args.inputs, cfg, args.output, overwrite=args.overwrite, engine=args.engine,
                        workers=args.workers, address=args.address)
    c = res.stats["counts"]
    print(f"kept {c['kept']:,} of {c['input']:,} documents; removed by: "
          + (", ".join(f"{r} {k:,}" for r, k in sorted(c["by_reason"].items(), key=lambda x: -x[1])
                       if r != "kept") or "nothing"))
    t = res.stats["timings_s"]
    print(f"device {res.stats['device']}, {t['total']:.2f} s, {res.stats['throughput_docs_per_s'] or 0:,.0f} docs/s "
          f"scored")
    print(f"wrote {os.path.join(args.output, 'scores.parquet')}, run.json"
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
