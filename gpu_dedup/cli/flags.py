"""Errors in the words of the interface that was used: the Python API names arguments (``overwrite=True``,
``FilterConfig.select``, ``normalization=LMNormalization(...)``), the command line names flags.

One mechanism, not a string per call site: API code always names its arguments; ``cli_message`` rewrites
an error's message for the command that failed, from that command's own argparse flags (each flag's
``dest`` is the API name it sets) plus the command's ``api_names`` (API names that differ from a dest,
set with ``parser.set_defaults(api_names={...})``). Rewritten forms:

    NAME=True                 -> --flag                (a store_true flag)
    NAME=False                -> --flag                (a store_true flag that sets NAME to False, --no-...)
    NAME=None                 -> --no-NAME             (where the command has that flag)
    NAME=Something(...)       -> --flag METAVAR
    NAME=VALUE                -> --flag VALUE
    SomeConfig.NAME, `NAME`   -> --flag
    a bare NAME with an ``_`` -> --flag                (``needs dsir_target``; plain words are left alone)
"""
from __future__ import annotations

import argparse
import re
from typing import Mapping

_NAME = r"[a-z][a-z0-9_]*"
_FORMS = re.compile(
    rf"(?<![\w.\-/])(?P<cfg>[A-Z][A-Za-z]*Config\.)?(?P<tick>`)?(?P<name>{_NAME})(?P=tick)?(?![\w\-/])"
    rf"(?P<assign>=(?P<call>[A-Z][A-Za-z.]*\(\.\.\.\))?(?P<value>True\b|False\b|None\b)?)?")


def command_flags(parser: argparse.ArgumentParser) -> dict[str, tuple[str, str | None, bool]]:
    """API name -> (flag, metavar, is a store_true flag) of one (sub)command's parser."""
    out: dict[str, tuple[str, str | None, bool]] = {}
    for a in parser._actions:  # argparse keeps no public list of a parser's actions
        longs = [s for s in a.option_strings if s.startswith("--")]
        if not longs or a.dest in ("help",):
            continue
        meta = a.metavar if isinstance(a.metavar, str) else a.dest.upper()
        out.setdefault(a.dest, (longs[0], meta, isinstance(a, argparse._StoreTrueAction)))
    for api, dest in (parser.get_default("api_names") or {}).items():
        if dest in out:
            out[api] = out[dest]
    return out


def cli_message(message: str, flags: Mapping[str, tuple[str, str | None, bool]]) -> str:
    """``message`` with every API argument name that ``flags`` (``command_flags``) knows written as its flag.
    An error about a ``--config`` file is left as it is: that file is written with the API's names."""
    if message.startswith("config file "):
        return message

    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in flags or not (m.group("cfg") or m.group("tick") or m.group("assign") or "_" in name):
            return m.group(0)
        flag, meta, is_switch = flags[name]
        if m.group("assign") is None:
            return flag
        if m.group("value") == "None" and f"no_{name}" in flags:
            return flags[f"no_{name}"][0]
        if m.group("value") or is_switch:
            return flag
        if m.group("call"):
            return f"{flag} {meta}"
        return f"{flag} "

    return _FORMS.sub(sub, message)


def subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser | None:
    """The parser of ``command`` among ``parser``'s subcommands (None if there is none)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices.get(command)
    return None
