"""``gpu-dedup train-lm``, ``gpu-dedup train-classifier`` and ``gpu-dedup calibrate``: the models ``filter`` scores
with, and the cards it reads their thresholds from."""
from __future__ import annotations

import argparse
import dataclasses


def add_command(sub) -> None:
    """Register ``train-lm`` and ``train-classifier`` on the CLI's subparsers."""
    p = sub.add_parser("train-lm", help="train an n-gram language model (interpolated modified Kneser-Ney, ARPA) "
                       "for --perplexity", epilog="example:\n  gpu-dedup train-lm wiki.jsonl -o wiki.arpa --order 5\n\n"
                       "the model records its normalization; scoring with another is refused",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="REFERENCE", help="jsonl / parquet files or directories, or .txt "
                   "files with one document per line")
    p.add_argument("-o", "--output", required=True, metavar="MODEL.arpa")
    p.add_argument("--order", type=int, default=5, help="n-gram order, 1..6 (default 5)")
    p.add_argument("--normalization", default="nfkc-lower",
                   help="none | nfkc-lower[,remove-punctuation][,fold-digits] (default nfkc-lower)")
    p.add_argument("--text-field", default="text")
    # the reading errors name --on-error skip as their fix (gpu_dedup.io): the flag must exist here too
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise", help="bad records: stop (default) or "
                   "skip them (the summary line says how many)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--screen", nargs="+", default=[], metavar="BENCHMARK", help="benchmark files: a reference "
                   "document sharing a 13-gram with an item refuses the run (as `gpu-dedup screen` matches them)")
    p.add_argument("--screen-drop", action="store_true", help="leave the documents --screen flags out of the "
                   "counts (listed in the statistics) instead of refusing")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model file")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=run_train_lm, api_names={"out_path": "output"})  # train_lm's name of -o, in its errors
    p = sub.add_parser("train-classifier", help="train a fastText classifier (quality, toxicity, ...) with a "
                       "group-disjoint validation split, a confusion matrix and a chosen threshold",
                       epilog="example:\n  gpu-dedup train-classifier labelled.jsonl -o quality.bin --group-field "
                       "domain --positive-label hq\n  gpu-dedup filter crawl/ -o out --classifier quality=quality.bin"
                       "\n\nthe card (MODEL.json) holds the threshold, the metrics, the seed and the versions",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _train_classifier_arguments(p)
    p.set_defaults(func=run_train_classifier, api_names={"out": "output"})  # train_classifier's name of -o
    p = sub.add_parser("calibrate", help="score a labelled sample with any fastText classifier: reliability, ECE, "
                       "Brier, precision/recall per threshold, a chosen threshold, false rejection per group with an "
                       "alarm, thresholds per domain, written into a card filter reads",
                       epilog=EPILOG_CALIBRATE, formatter_class=argparse.RawDescriptionHelpFormatter)
    _calibrate_arguments(p)
    p.set_defaults(func=run_calibrate, api_names={"out": "output", "group_fields": "group_field"})


EPILOG_CALIBRATE = """examples:
  gpu-dedup calibrate jigsaw.bin audited.jsonl --label toxic --direction max --group-field dialect
  gpu-dedup filter crawl/ -o out --classifier hate=jigsaw.bin          # the card beside the model applies
  gpu-dedup calibrate quality.bin sample.jsonl -o q.card.json --domain-field domain --threshold-rule precision \\
      --threshold-target 0.9
  gpu-dedup filter crawl/ -o out --classifier q=quality.bin --classifier-card q=q.card.json --domain-field domain

the card holds the threshold, the reliability table (ECE, Brier), precision/recall per threshold, false
rejection per group (an ALARM at --audit-ratio x the sample's rate: 002 says 3-5x) and thresholds per domain;
without -o it is written beside the model (MODEL.json), where filter finds it."""


def _calibrate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="a fastText classifier (.bin / .ftz)")
    p.add_argument("inputs", nargs="+", metavar="LABELLED", help="the labelled sample: JSON Lines / Parquet files or "
                   "directories with a text and a label field")
    p.add_argument("-o", "--output", metavar="CARD", help="where the card goes (default: MODEL.json, beside the "
                   "model, where filter reads it)")
    p.add_argument("--text-field", default="text")
    p.add_argument("--label-field", default="label", help="the sample's label field (default label)")
    p.add_argument("--group-field", action="append", default=[], metavar="COLUMN", help="a column (dialect, "
                   "demographic group, source) whose values get their own false-rejection rate and an alarm "
                   "(repeatable)")
    p.add_argument("--domain-field", metavar="COLUMN", help="a column whose values get their own threshold, which "
                   "filter --domain-field COLUMN applies")
    p.add_argument("--label", metavar="LABEL", help="the model's label whose probability is the score (default: "
                   "a two-label model's label named like a positive class)")
    p.add_argument("--positive-value", metavar="VALUE", help="the sample's label that means positive (default: "
                   "--label's name)")
    p.add_argument("--direction", choices=("min", "max"), default="min", help="min (default): the filter keeps "
                   "score >= threshold (quality); max: it removes score > threshold (toxicity)")
    p.add_argument("--threshold-rule", choices=("f1", "precision", "retention"), default="f1")
    p.add_argument("--threshold-target", type=float, metavar="X", help="the precision or retention target")
    p.add_argument("--threshold", type=float, metavar="T", help="a fixed threshold: choose nothing, measure it "
                   "(confirm a threshold on a second sample)")
    p.add_argument("--audit-ratio", type=float, default=3.0, metavar="R", help="an alarm when a group's false "
                   "rejection is at least R times the sample's (default 3; the seed says 3-5)")
    p.add_argument("--bins", type=int, default=10, help="reliability-table bins (default 10)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--overwrite", action="store_true", help="replace an existing card")
    p.add_argument("-q", "--quiet", action="store_true")


def run_calibrate(args: argparse.Namespace) -> int:
    from ..filters.calibrate import CalibrateConfig, calibrate
    from ..filters.cards import format_calibration

    cfg = CalibrateConfig(text_field=args.text_field, label_field=args.label_field,
                          group_fields=tuple(args.group_field), domain_field=args.domain_field, label=args.label,
                          positive_value=args.positive_value, direction=args.direction,
                          threshold_rule=args.threshold_rule, threshold_target=args.threshold_target,
                          threshold=args.threshold, audit_ratio=args.audit_ratio, bins=args.bins,
                          device=args.device)
    card = calibrate(args.model, list(args.inputs), args.output, cfg, overwrite=args.overwrite)
    print(format_calibration(card))
    from ..filters.train import card_path

    print(f"wrote {args.output or card_path(args.model)}")
    return 0


def run_train_lm(args: argparse.Namespace) -> int:
    from ..filters.kneser_ney import LMTrainConfig, train_lm
    from ..filters.lm import LMNormalization
    from ..runtime.run import seconds_line

    cfg = LMTrainConfig(order=args.order, normalization=LMNormalization.parse(args.normalization),
                        text_field=args.text_field, on_error=args.on_error, screen=tuple(args.screen),
                        screen_drop=args.screen_drop)
    stats = train_lm(args.inputs, args.output, cfg, device=args.device, overwrite=args.overwrite)
    counts = stats.get("ngrams") or stats.get("counts")
    print(f"trained a {stats['order']}-gram model on {stats['sentences']:,} sentences ({stats['words']:,} words, "
          f"vocabulary {stats['vocab_size']:,}) in "
          f"{seconds_line({'total': stats['seconds_total'], 'compile': stats['seconds_compile']})} -> {args.output}"
          + (f"; n-grams per order: {counts}" if counts else ""))
    from ..io.batch import read_summary

    for line in read_summary(stats["read"], where="not counted"):  # what --on-error skip left out
        print(line)
    scr = stats.get("screen")
    if scr:
        print(f"screened against {len(scr['benchmarks'])} benchmark file(s): {scr['documents_flagged']} of "
              f"{scr['documents_screened']} documents flagged, {scr['documents_dropped']} dropped")
    return 0


def _train_classifier_arguments(p: argparse.ArgumentParser) -> None:
    """One flag per TrainClassifierConfig field (--text-field, --epoch, --quantize, ...), defaults from it."""
    import typing

    from ..filters.train import TrainClassifierConfig

    p.add_argument("inputs", nargs="+", metavar="LABELLED", help="JSON Lines / Parquet files or directories with "
                   "text, label and (optional) group fields, or fastText .txt files (__label__X text)")
    p.add_argument("-o", "--output", required=True, metavar="MODEL", help="model path (.bin, or .ftz with "
                   "--quantize); the card is written beside it as MODEL.json")
    hints = typing.get_type_hints(TrainClassifierConfig)
    own = {  # the fields whose flags are not one plain value
        "audit_fields": dict(flags=("--audit-field",), action="append", default=None, metavar="COLUMN",
                             help="a column (dialect, source, ...) whose values get their own retention and false "
                                  "rejection in the card (repeatable)"),
        "screen": dict(nargs="+", default=None, metavar="BENCHMARK",
                       help="benchmark files: a labelled document sharing a 13-gram with an item is refused "
                            "(as `gpu-dedup screen` matches them)"),
        "screen_drop": dict(action="store_true", default=None,
                            help="drop the documents --screen flags (listed in the card) instead of refusing"),
        "stratify_field": dict(default=None, metavar="COLUMN",
                               help="stratify validation and test by this column (source / language / domain)"),
        "direction": dict(choices=("min", "max"), default=None, help="min (default): the filter keeps score >= "
                          "threshold (quality); max: it removes score > threshold (toxicity: the positive label is "
                          "the harm)"),
        "test_fraction": dict(type=float, default=None, help="the held-out test side, scored once at the end "
                                                             "(default 0.1; 0: none)"),
        "label_tokens": dict(flags=("--strip-label-tokens",), action="store_const", const="strip", default=None,
                             help="remove the __label__ tokens a text holds (counted in the card); by default such "
                                  "a text is refused, as the seed's procedure does"),
        "head_of": dict(default=None, metavar="MODEL",
                        help="keep this fastText model's words and embeddings and fit only a new output layer on "
                             "the labels (002: fine-tune the output layer on new labels or a new domain)"),
        "head_l2": dict(type=float, default=None, metavar="C",
                        help="with --head-of: the output layer's L2 weight, relative to the hidden vectors' scale "
                             "(default 0.001)"),
    }
    for f in dataclasses.fields(TrainClassifierConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.name in own:
            kw = dict(own[f.name])
            p.add_argument(*kw.pop("flags", (flag,)), dest=f.name, **kw)
            continue
        choices = typing.get_args(hints[f.name])
        if f.default is False:
            p.add_argument(flag, action="store_true", default=None)
        elif choices and all(isinstance(c, str) for c in choices):
            p.add_argument(flag, choices=choices, default=None, help=f"(default {f.default})")
        else:
            kind = int if isinstance(f.default, int) or int in choices else \
                float if isinstance(f.default, float) or f.name.endswith(("_target", "_fraction")) else str
            p.add_argument(flag, type=kind, default=None,
                           help="(default: from the data)" if f.name == "bucket" else f"(default {f.default})")
    p.add_argument("--no-group-field", action="store_true", help="train without groups: every document is its own "
                   "group (near-copies can then sit on both sides; the card records it)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model and card")
    p.add_argument("-q", "--quiet", action="store_true")


def run_train_classifier(args: argparse.Namespace) -> int:
    from ..filters.train import TrainClassifierConfig, format_summary, train_classifier

    kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainClassifierConfig)
          if getattr(args, f.name, None) is not None}
    if args.no_group_field:
        kw["group_field"] = None
    card = train_classifier(list(args.inputs), args.output, TrainClassifierConfig(**kw), overwrite=args.overwrite)
    print(format_summary(card))
    return 0
