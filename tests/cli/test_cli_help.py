"""The command line's surface does not drift by accident: every command's flags (names, dests, defaults, types,
choices, help text, groups) and its description/epilog equal the golden spec ``tests/data/cli_spec.json``, captured
from the parser before the argparse moved into ``gpu_dedup/cli/``. An intended change (a new flag, new help
text) is written to the golden file with ``python tests/cli/test_cli_help.py --write`` and shows up in review as a
diff of that file."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent.parent / "data" / "cli_spec.json"


def _name(x) -> object:
    """A JSON form of an argparse attribute: types and functions by name, tuples as lists."""
    if callable(x) and hasattr(x, "__name__"):
        return x.__name__
    if isinstance(x, (tuple, list)):
        return [_name(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)


def parser_spec(parser: argparse.ArgumentParser) -> dict:
    """What ``--help`` shows and what parsing does, of ``parser`` and each of its subcommands."""
    # argparse's own two groups by role: their titles differ between Python versions ("optional arguments")
    role = {id(parser._optionals): "<optional>", id(parser._positionals): "<positional>"}
    groups = {id(a): role.get(id(g), g.title) for g in parser._action_groups for a in g._group_actions}
    actions = []
    subs = {}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            subs = {name: {"help": helps.get(name), **parser_spec(p)} for name, p in a.choices.items()}
            continue
        actions.append({"flags": list(a.option_strings), "dest": a.dest, "group": groups.get(id(a)),
                        "kind": type(a).__name__, "default": _name(a.default), "type": _name(a.type),
                        "choices": _name(a.choices), "nargs": _name(a.nargs), "metavar": _name(a.metavar),
                        "required": a.required, "help": a.help})
    defaults = {k: _name(v) for k, v in sorted(parser._defaults.items()) if k not in ("func", "api_names")}  # internal: not shown
    return {"description": parser.description, "epilog": parser.epilog, "usage": parser.usage,
            "actions": actions, "defaults": defaults, "commands": subs}


def current_spec() -> dict:
    from gpu_dedup.cli import build_parser

    return parser_spec(build_parser())


def test_cli_surface_matches_golden_spec():
    golden = json.loads(GOLDEN.read_text())
    now = json.loads(json.dumps(current_spec()))
    assert sorted(now["commands"]) == sorted(golden["commands"]), "commands added or removed"
    for cmd in [None, *golden["commands"]]:
        g = golden if cmd is None else golden["commands"][cmd]
        n = now if cmd is None else now["commands"][cmd]
        for key in ("description", "epilog", "usage", "defaults") + (("help",) if cmd else ()):
            assert n[key] == g[key], f"{cmd or 'gpu-dedup'}: {key} changed (intended? python tests/cli/test_cli_help.py --write)"
        gf = {tuple(a["flags"]) or (a["dest"],): a for a in g["actions"]}
        nf = {tuple(a["flags"]) or (a["dest"],): a for a in n["actions"]}
        assert list(nf) == list(gf), f"{cmd}: flags added, removed or reordered"
        for k, a in gf.items():
            assert nf[k] == a, f"{cmd} {k}: changed (intended? python tests/cli/test_cli_help.py --write)"


def test_help_of_every_command_renders(capsys):
    from gpu_dedup.cli import build_parser

    for cmd in [None, *current_spec()["commands"]]:
        try:
            build_parser().parse_args([cmd, "--help"] if cmd else ["--help"])
        except SystemExit as e:
            assert e.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: gpu-dedup")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(json.dumps(current_spec(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}")


# ------------------------------------------------------------------------ run's flags from RunConfig's metadata
OFF_THE_COMMAND_LINE = {"shingle.seed", "cluster.max_representatives_per_bucket", "preset_name", "progress"}
HAND_FLAGS_SETTING_A_FIELD = {"--preset": "preset_name", "--quiet": "progress", "--scope": "cluster.scope_field"}
SAMPLES = {  # a valid non-default value of every valued config flag, and the field value it becomes
    "device": ("cpu", "cpu"), "reader": ("pyarrow", "pyarrow"), "cluster.threshold": ("0.7", 0.7),
    "cluster.policy": ("components", "components"), "cluster.keep": ("longest", "longest"),
    "scores": ("q=q.bin", ("q=q.bin",)), "cluster.remove_clusters_larger_than": ("3", 3),  # --score: with --keep
    "cluster.keep_copies": ("2", 2), "cluster.scope_field": ("lang", "lang"), "shingle.kind": ("char", "char"),
    "shingle.n": ("3", 3), "minhash.num_perm": ("128", 128), "lsh.bands": ("10", 10), "lsh.rows": ("4", 4),
    "minhash.width": ("64", 64), "minhash.seed": ("7", 7), "minhash.family": ("exact", "exact"), "id_field": ("url", "url"),
    "text_field": ("body", "body"), "on_error": ("skip", "skip"), "batch_bytes": ("2", 2 << 20),
    "threads": ("2", 2), "memory_budget": ("2G", 2 << 30), "cache_bytes": ("0", 0)}


def _leaf_fields(cls, prefix=""):
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _leaf_fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


def _get(cfg, path):
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def test_every_run_config_field_has_a_flag_and_every_flag_maps_to_a_field():
    from gpu_dedup.cli import build_parser
    from gpu_dedup.cli.flags import subcommand_parser
    from gpu_dedup.cli.run import config_flags
    from gpu_dedup.config import RunConfig

    flags = config_flags()
    assert set(flags) | OFF_THE_COMMAND_LINE == set(_leaf_fields(RunConfig)), "a RunConfig field has no flag"
    assert not set(flags) & OFF_THE_COMMAND_LINE
    run = subcommand_parser(build_parser(), "run")
    options = {s for a in run._actions for s in a.option_strings}
    generated = {name for fl in flags.values() for name, _, _ in fl}
    assert generated <= options, "a config flag is not on the run command"
    leaf_names = {p.rsplit(".", 1)[-1] for p in _leaf_fields(RunConfig)}
    for a in run._actions:  # a hand-written flag never sets a config field behind the metadata's back
        longs = [s for s in a.option_strings if s.startswith("--")]
        if longs and longs[0] not in generated and longs[0] not in HAND_FLAGS_SETTING_A_FIELD:
            assert a.dest not in leaf_names or a.dest in ("seed",), (longs[0], a.dest)


def test_each_config_flag_sets_its_field(caplog):
    from gpu_dedup.cli import build_parser, config_from_args
    from gpu_dedup.cli.run import config_flags

    base = ["run", "x", "-o", "o"]
    default = config_from_args(build_parser().parse_args(base))
    valued = {p for p, fl in config_flags().items() for _, _, spec in fl if "set" not in spec}
    assert valued == set(SAMPLES), "give a new valued config flag a sample"
    for path, fl in config_flags().items():
        for name, _, spec in fl:
            if "set" in spec:
                argv = [name] + (["--policy", "components"] if name == "--no-verify" else [])
                expect = spec["set"]
            else:
                argv, expect = [name, SAMPLES[path][0]], SAMPLES[path][1]
                argv += ["--keep", "max:q_score"] if name == "--score" else []
            cfg = config_from_args(build_parser().parse_args(base + argv))
            assert _get(cfg, path) == expect != _get(default, path), name


# ------------------------------------------------------- filter's flags from FilterConfig's / DomainConfig's metadata
FILTER_OFF_THE_COMMAND_LINE = {  # FilterConfig fields without a flag of their own, and why
    "max_perplexity": "--perplexity MODEL:MAX", "perplexity_keep": "--perplexity MODEL:keep=FRACTION",
    "perplexity_lang": "--perplexity LANG=MODEL,LANG=MODEL",  # one flag's text, parsed in cli/filter.py
    "progress": "--quiet (a hand flag: bars are on by default on the command line, off in the API)",
    # the domain detectors' tuning: the API only, the command line keeps the published rules' values
    "domain.script_fraction": "API only", "domain.math_line_fraction": "API only",
    "domain.code_symbol_density": "API only", "domain.code_keyword_fraction": "API only"}


def _filter_samples(d):
    """Flag -> [(argv, field path, the value it becomes)]: a valid non-default use of every generated filter flag
    (and of --perplexity's forms that set the fields on FILTER_OFF_THE_COMMAND_LINE); ``d``: a folder with the
    model files (FilterConfig checks that they exist)."""
    from gpu_dedup.filters.config import ClassifierSpec

    lid, q, lm = (str(d / n) for n in ("lid.bin", "q.bin", "lm.arpa"))
    return {
        "--lid": [(["--lid", lid], "lid", lid)],
        "--lang": [(["--lid", lid, "--lang", "en", "--lang", "de"], "lang", ("en", "de"))],
        "--lid-threshold": [(["--lid-threshold", "0.7"], "lid_threshold", 0.7)],
        "--script-prefilter": [(["--script-prefilter"], "domain.script_prefilter", True)],
        "--domain-relax": [(["--domain-relax"], "domain.relax", True)],
        "--relaxed-lid-threshold": [(["--relaxed-lid-threshold", "0.2"], "domain.relaxed_lid_threshold", 0.2)],
        "--relaxed-factor": [(["--relaxed-factor", "0.25"], "domain.relaxed_factor", 0.25)],
        "--classifier": [(["--classifier", f"q={q}:max0.3"], "classifiers",
                          (ClassifierSpec("q", q, 0.3, "max"),))],
        "--classifier-label": [(["--classifier", f"q={q}", "--classifier-label", "q=hq"], "classifiers",
                                (ClassifierSpec("q", q, label="hq"),))],
        "--perplexity": [(["--perplexity", f"{lm}:1000"], "perplexity", lm),
                         (["--perplexity", f"{lm}:1000"], "max_perplexity", 1000.0),
                         (["--perplexity", f"{lm}:keep=0.3"], "perplexity_keep", 0.3),
                         (["--lid", lid, "--perplexity", f"en={lm}"], "perplexity_lang", (("en", lm),))],
        "--perplexity-buckets": [(["--perplexity", lm, "--perplexity-buckets", "0.3,0.6"], "perplexity_buckets",
                                  (0.3, 0.6))],
        "--lm-normalization": [(["--lm-normalization", "none"], "lm_normalization", "none")],
        "--rules": [(["--rules", "gopher_quality"], "rules", "gopher_quality"),
                    (["--rules", "gopher,c4,fineweb"], "rules", "gopher,c4,fineweb")],
        "--rule-off": [(["--rule-off", "gopher_stop_words"], "rules_off", ("gopher_stop_words",))],
        "--rule-threshold": [(["--rule-threshold", "gopher_stop_words=3"], "rule_thresholds",
                              ("gopher_stop_words=3",))],
        "--url-field": [(["--rules", "url", "--url-field", "link", "--url-blocklist", "b.txt"], "url_field", "link")],
        "--url-blocklist": [(["--rules", "url", "--url-field", "link", "--url-blocklist", "b.txt"], "url_blocklist",
                             "b.txt")],
        "--c4-remove-lines": [(["--rules", "c4", "--c4-remove-lines"], "c4_remove_lines", True)],
        "--order": [(["--order", "rules,lid,perplexity,classifiers"], "order",
                     ("rules", "lid", "perplexity", "classifiers"))],
        "--unit": [(["--unit", "paragraph"], "unit", "paragraph")],
        "--lid-short-chars": [(["--lid-short-chars", "30"], "lid_short_chars", 30)],
        "--lid-short-threshold": [(["--lid", lid, "--lid-short-threshold", "0.2"], "lid_short_threshold", 0.2)],
        "--min-paragraph-tokens": [(["--min-paragraph-tokens", "80"], "min_paragraph_tokens", 80)],
        "--min-perplexity-tokens": [(["--min-perplexity-tokens", "100"], "min_perplexity_tokens", 100)],
        "--lid-sentence-agreement": [(["--lid", lid, "--unit", "paragraph", "--paragraph-action", "remove",
                                       "--lid-sentence-agreement", "0.8"], "lid_sentence_agreement", 0.8)],
        "--domain-field": [(["--domain-field", "source"], "domain_field", "source")],
        "--domain-model": [(["--domain-model", q], "domain_model", q)],
        "--domain-threshold": [(["--classifier", f"q={q}:max0.3", "--domain-field", "topic", "--domain-threshold",
                                 "q:medical=max0.6"], "domain_thresholds", (("q", "medical", 0.6, "max"),))],
        "--short-paragraphs": [(["--short-paragraphs", "skip"], "short_paragraphs", "skip")],
        "--paragraph-action": [(["--lid", lid, "--unit", "paragraph", "--paragraph-action", "remove"],
                                "paragraph_action", "remove")],
        "--dsir-target": [(["--dsir-target", "t.jsonl", "u.jsonl", "--select", "5"], "dsir_target",
                           ("t.jsonl", "u.jsonl"))],
        "--select": [(["--dsir-target", "t.jsonl", "--select", "0.5"], "select", 0.5)],
        "--dsir-buckets": [(["--dsir-buckets", "100"], "dsir_buckets", 100)],
        "--dsir-screen": [(["--dsir-target", "t.jsonl", "--select", "5", "--dsir-screen", "b.jsonl", "c.jsonl"],
                           "dsir_screen", ("b.jsonl", "c.jsonl"))],
        "--dsir-screen-drop": [(["--dsir-target", "t.jsonl", "--select", "5", "--dsir-screen", "b.jsonl",
                                 "--dsir-screen-drop"], "dsir_screen_drop", True)],
        "--audit": [(["--audit", "3"], "audit", 3)],
        "--seed": [(["--seed", "7"], "seed", 7)],
        "--id-field": [(["--id-field", "url"], "id_field", "url")],
        "--no-id-field": [(["--no-id-field"], "id_field", None)],
        "--text-field": [(["--text-field", "body"], "text_field", "body")],
        "--on-error": [(["--on-error", "skip"], "on_error", "skip")],
        "--batch-mb": [(["--batch-mb", "2"], "batch_bytes", 2 << 20),
                       (["--batch-mb", "0.0001"], "batch_bytes", 1024)],  # at least InputConfig's minimum
        "--device": [(["--device", "cpu"], "device", "cpu")],
        "--threads": [(["--threads", "2"], "threads", 2)],
        "--no-filtered": [(["--no-filtered"], "write_filtered", False)]}


def test_every_filter_config_field_has_a_flag_and_every_flag_maps_to_a_field():
    from gpu_dedup.cli import build_parser
    from gpu_dedup.cli.fields import config_flags
    from gpu_dedup.cli.flags import subcommand_parser
    from gpu_dedup.filters.config import FilterConfig

    flags = config_flags(FilterConfig)
    leaves = set(_leaf_fields(FilterConfig))
    assert set(flags) | set(FILTER_OFF_THE_COMMAND_LINE) == leaves, "a FilterConfig field has no flag"
    assert not set(flags) & set(FILTER_OFF_THE_COMMAND_LINE)
    generated = {name for fl in flags.values() for name, _, _ in fl}
    for cmd in ("filter", "run"):  # run shares the scoring flags (cli/filter.py add_model_arguments)
        p = subcommand_parser(build_parser(), cmd)
        options = {s for a in p._actions for s in a.option_strings}
        if cmd == "filter":
            assert generated <= options, "a FilterConfig flag is not on the filter command"
            leaf_names = {x.rsplit(".", 1)[-1] for x in leaves}
            for a in p._actions:  # a hand-written flag never sets a config field behind the metadata's back
                longs = [s for s in a.option_strings if s.startswith("--")]
                if longs and longs[0] not in generated and longs[0] != "--quiet":
                    assert a.dest not in leaf_names, (longs[0], a.dest)
        else:
            from gpu_dedup.cli.filter import MODEL_FIELDS

            assert {n for x in MODEL_FIELDS for n, _, _ in flags[x]} <= options


def test_each_filter_flag_sets_its_field(tmp_path):
    from gpu_dedup.cli import build_parser
    from gpu_dedup.cli.fields import config_flags
    from gpu_dedup.cli.filter import filter_config
    from gpu_dedup.filters.config import FilterConfig

    for name in ("lid.bin", "q.bin", "lm.arpa"):
        (tmp_path / name).write_bytes(b"")
    samples = _filter_samples(tmp_path)
    generated = {name for fl in config_flags(FilterConfig).values() for name, _, _ in fl}
    assert generated == set(samples), "give a new filter flag a sample"
    assert {p for s in samples.values() for _, p, _ in s} >= set(FILTER_OFF_THE_COMMAND_LINE) - {
        "progress", "domain.script_fraction", "domain.math_line_fraction", "domain.code_symbol_density",
        "domain.code_keyword_fraction"}
    base = ["filter", "x", "-o", "o", "--rules", "gopher"]
    default = filter_config(build_parser().parse_args(base))
    assert default == FilterConfig(rules="gopher", progress=True)  # no flag: the config's defaults
    for name, uses in samples.items():
        for argv, path, expect in uses:
            cfg = filter_config(build_parser().parse_args(base + argv))
            assert _get(cfg, path) == expect != _get(default, path), (name, argv)
    assert filter_config(build_parser().parse_args(base + ["-q"])).progress is False
