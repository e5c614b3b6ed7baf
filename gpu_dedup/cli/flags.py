"""Errors in the words of the interface that was used: the Python API names arguments (``overwrite=True``,
``FilterConfig.select``, ``normalization=LMNormalization(...)``), the command line names flags.

One mechanism, not a string per call site: API code always names its arguments; ``cli_message`` rewrites
an error's message for the command that failed, from that command's own argparse flags: each flag's ``dest``,
the config field a flag made from field metadata sets (cli/fields.py records it on the flag: ``--score`` sets
``scores``, ``--no-verify`` sets ``verify`` to False), plus the command's ``api_names`` (other API names that
differ from a dest, set with ``parser.set_defaults(api_names={...})``). Rewritten forms:

    NAME=True                 -> --flag                (a store_true flag that sets NAME to True)
    NAME=False                -> --flag                (a store_true flag that sets NAME to False, --no-...)
    NAME=True                 -> no --flag             (... that sets NAME to False: the flag must be dropped)
    NAME=None                 -> --no-NAME             (where the command has that flag)
    NAME=Something(...)       -> --flag METAVAR
    NAME=VALUE                -> --flag VALUE
    SomeConfig.NAME, `NAME`   -> --flag                (``api_names`` may name ``SomeConfig.NAME`` itself: a
                                                       stage's field whose bare name is another flag's, as
                                                       run's ``--substring-memory-budget``)
    a bare NAME with an ``_`` -> --flag                (``needs dsir_target``; plain words are left alone)

A NAME right after ``:`` is part of a flag's value (``--perplexity MODEL:keep=F``) and is left alone.

A message may give both forms itself; neither is written twice:

    "... --on-error skip (Python: on_error='skip')"   the "Python: ..." part is the API's, left as written
    "expected_items (--expected-paragraphs)"          -> --expected-paragraphs (not the flag, then it again)
    "threshold: ClusterConfig.threshold must be ..."  -> --threshold must be ... (a prefix naming the same flag)
"""
from __future__ import annotations

import argparse
import difflib
import re
from typing import Mapping

_NAME = r"[a-z][a-z0-9_]*"
_FORMS = re.compile(
    rf"(?<![\w.\-/:])(?P<cfg>[A-Z][A-Za-z]*Config\.)?(?P<tick>`)?(?P<name>{_NAME})(?P=tick)?(?![\w\-/])"
    rf"(?P<assign>=(?P<call>[A-Z][A-Za-z.]*\(\.\.\.\))?(?P<value>True\b|False\b|None\b)?)?")


FlagInfo = tuple[str, "str | None", "bool | None"]  # (flag, metavar, the value a switch gives the name: None for
# a flag that takes a value)


def command_flags(parser: argparse.ArgumentParser) -> dict[str, FlagInfo]:
    """API name -> (flag, metavar, what a store_true flag sets the name to, None for a valued flag) of one
    (sub)command's parser: each flag's dest, the config field it sets (``api_field``, recorded by cli/fields.py)
    and the command's ``api_names``."""
    out: dict[str, FlagInfo] = {}
    fields: dict[str, FlagInfo] = {}
    for a in parser._actions:  # argparse keeps no public list of a parser's actions
        longs = [s for s in a.option_strings if s.startswith("--")]
        if not longs or a.dest in ("help",):
            continue
        meta = a.metavar if isinstance(a.metavar, str) else a.dest.upper()
        switch = isinstance(a, argparse._StoreTrueAction)
        out.setdefault(a.dest, (longs[0], meta, True if switch else None))
        field = getattr(a, "api_field", None)  # (name, the value a switch sets)
        if field is not None:
            fields.setdefault(field[0], (longs[0], meta, field[1] if switch else None))
    for name, info in fields.items():
        out.setdefault(name, info)
    for api, dest in (parser.get_default("api_names") or {}).items():
        if dest in out and api not in fields:  # a field's own flag is known exactly
            flag, meta, sets = out[dest]
            # a "--no-..." dest named for an API name without the "no": the switch sets that name to False
            out[api] = (flag, meta, (not sets) if sets is not None and dest == f"no_{api}" else sets)
    return out


# the API's own words inside a message that gives both forms: "(Python: on_error='skip')", "; Python: x=None)"
_PYTHON_PART = re.compile(r"\bPython: [^)]*")
_FLAG = r"--[a-z0-9][a-z0-9-]*(?: [A-Z][A-Z0-9_=]*)?"
_TWICE = ((re.compile(rf"(?P<f>{_FLAG}) \((?P=f)\)"), r"\g<f>"),  # "expected_items (--expected-paragraphs)"
          (re.compile(rf"(?P<f>{_FLAG}) / (?P=f)(?![\w-])"), r"\g<f>"),  # "read_inputs=False / --no-inputs"
          (re.compile(r"^(?P<f>--[a-z0-9][a-z0-9-]*): (?=(?P=f)(?![\w-]))"), ""))  # "--threshold: ClusterConfig.threshold"


def cli_message(message: str, flags: Mapping[str, FlagInfo]) -> str:
    """``message`` with every API argument name that ``flags`` (``command_flags``) knows written as its flag
    (the forms in this module's docstring). An error about a ``--config`` file is left as it is: that file is
    written with the API's names; so is a "Python: ..." part, which names the API's arguments on purpose."""
    if message.startswith("config file "):
        return message

    def sub(m: re.Match) -> str:
        name = m.group("name")
        qualified = f"{m.group('cfg')}{name}"  # "SubstringConfig.memory_budget": its own flag, where named
        if m.group("cfg") and qualified in flags:
            name = qualified
        elif name not in flags or not (m.group("cfg") or m.group("tick") or m.group("assign") or "_" in name):
            return m.group(0)
        flag, meta, sets = flags[name]
        if m.group("assign") is None:
            return flag
        value = m.group("value")
        if value == "None" and f"no_{name}" in flags:
            return flags[f"no_{name}"][0]
        if sets is not None and value in ("True", "False") and (value == "True") != sets:
            return f"no {flag}"  # the switch sets the other value: the flag is to be left out
        if value or sets is not None:
            return flag
        if m.group("call"):
            return f"{flag} {meta}"
        return f"{flag} "

    out, at = [], 0
    for py in _PYTHON_PART.finditer(message):
        out += [_FORMS.sub(sub, message[at:py.start()]), py.group(0)]
        at = py.end()
    out.append(_FORMS.sub(sub, message[at:]))
    text = "".join(out)
    for twice, once in _TWICE:
        text = twice.sub(once, text)
    return text


def subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser | None:
    """The parser of ``command`` among ``parser``'s subcommands (None if there is none)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices.get(command)
    return None


def unknown_arguments(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """argparse's "unrecognized arguments" message for ``extras`` (what ``parse_known_args`` left), with the
    nearest flag of ``parser`` (the command that was run) for each mistyped one: "--treshold (did you mean
    --threshold?)". ``parser.error`` then prints that command's usage, not the top-level one."""
    options = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    words = []
    for token in extras:
        flag = token.split("=", 1)[0]
        near = difflib.get_close_matches(flag, options, n=1, cutoff=0.6) if flag.startswith("--") else []
        words.append(f"{token} (did you mean {near[0]}?)" if near else token)
    return "unrecognized arguments: " + " ".join(words)
