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
    "minhash.width": ("64", 64), "minhash.seed": ("7", 7), "id_field": ("url", "url"),
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
