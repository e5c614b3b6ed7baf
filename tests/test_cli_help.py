"""The command line's surface does not drift by accident: every command's flags (names, dests, defaults, types,
choices, help text, groups) and its description/epilog equal the golden spec ``tests/data/cli_spec.json``, captured
from the parser before the argparse moved into ``gpu_dedup/cli/``. An intended change (a new flag, new help
text) is written to the golden file with ``python tests/test_cli_help.py --write`` and shows up in review as a
diff of that file."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "data" / "cli_spec.json"


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
    groups = {id(a): g.title for g in parser._action_groups for a in g._group_actions}
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
            assert n[key] == g[key], f"{cmd or 'gpu-dedup'}: {key} changed (intended? python tests/test_cli_help.py --write)"
        gf = {tuple(a["flags"]) or (a["dest"],): a for a in g["actions"]}
        nf = {tuple(a["flags"]) or (a["dest"],): a for a in n["actions"]}
        assert list(nf) == list(gf), f"{cmd}: flags added, removed or reordered"
        for k, a in gf.items():
            assert nf[k] == a, f"{cmd} {k}: changed (intended? python tests/test_cli_help.py --write)"


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
