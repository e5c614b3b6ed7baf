"""Command-line flags made from config dataclasses' field metadata (``config.flag`` / ``config.cli``), as dolma makes
its CLI from ``field(help=...)``: one source for each flag's name, help, type, choices and metavar, and for the field
it sets. ``config_flags`` reads the metadata, ``add_flags`` puts the flags on a parser, ``field_value`` turns one
parsed flag into its field's value and ``flag_values`` does that for every flag of a config (``filter``, whose flags
carry the configs' defaults; ``run`` layers preset, config file and flags itself: cli/run.py)."""
from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any, Callable, Literal, Union, get_args

from .args import TYPES

Flag = tuple[str, dict[str, Any], dict]  # (flag, argparse keywords, the metadata's spec)


def _choices(hint: Any) -> list | None:
    """The values of a Literal annotation (also of ``Literal[...] | None``); None for any other type."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        lits = [h for h in get_args(hint) if typing.get_origin(h) is Literal]
        return list(get_args(lits[0])) if len(lits) == 1 else None
    return list(get_args(hint)) if typing.get_origin(hint) is Literal else None


def config_flags(cls: type, prefix: str = "", config_defaults: bool = False) -> dict[str, list[Flag]]:
    """Field path ("cluster.threshold", "domain.relax") -> its flags in order, from the field metadata of ``cls``
    and of its dataclass sections.

    Args:
        cls: a config dataclass whose fields carry ``metadata=cli(flag(...))``.
        prefix: the path of ``cls`` inside an outer config ("domain.").
        config_defaults: each valued flag's default is its field's default (shown in ``--help``; the command
            builds its config from every flag: ``flag_values``) instead of None ("not given": ``run``).

    Returns:
        The mapping. Besides ``config.flag``'s keys (``set``, ``type``, ``metavar``, ``append``) a spec may hold
        ``nargs`` ("+": several values, a tuple), ``choices`` (for a field that is not a Literal), ``default``
        (the argparse default where it is not the field's: an append flag's ``[]``) and ``floor`` (the least
        bytes of a ``mib`` flag); ``{default}`` in a help text is the field's default. A Literal field's values
        (also of ``Literal[...] | None``) are the flag's choices.
    """
    hints = typing.get_type_hints(cls)
    out: dict[str, list[Flag]] = {}
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out.update(config_flags(hints[f.name], f"{prefix}{f.name}.", config_defaults))
            continue
        for spec in f.metadata.get("cli", ()):
            help_ = spec["help"]
            kw: dict[str, Any] = {"help": help_.replace("{default}", str(f.default)) if help_ else help_}
            if "set" in spec:
                kw["action"] = "store_true"
            elif spec.get("append"):
                kw["action"] = "append"
            else:
                if spec.get("type"):
                    # a mib flag with a floor raises a smaller size to it (filter's --batch-mb); one without refuses
                    # a size below 1 KiB in MB, the flag's unit
                    kw["type"] = TYPES["mib_floor" if spec["type"] == "mib" and "floor" in spec else spec["type"]]
                if spec.get("nargs"):
                    kw["nargs"] = spec["nargs"]
                choices = spec.get("choices") or _choices(hints[f.name])
                if choices:
                    kw["choices"] = list(choices)
                if config_defaults and not spec.get("nargs"):
                    kw["default"] = f.default
            if "default" in spec and "set" not in spec:
                kw["default"] = spec["default"]
            if spec.get("metavar"):
                kw["metavar"] = spec["metavar"]
            out.setdefault(prefix + f.name, []).append((spec["name"] or "--" + f.name.replace("_", "-"), kw, spec))
    return out


def add_flags(g: Any, cls: type, *paths: str, config_defaults: bool = False) -> None:
    """Add the flags of these fields of ``cls`` (``config_flags``) to parser or group ``g``, in this order."""
    flags = config_flags(cls, config_defaults=config_defaults)
    for path in paths:
        for name, kw, spec in flags[path]:
            # the field it sets, and the value a switch gives it: errors name the field, the CLI the flag (flags.py)
            g.add_argument(name, **kw).api_field = (path.rsplit(".", 1)[-1], spec.get("set"))


def dest(flag: str) -> str:
    """argparse's attribute of a long flag: ``--batch-mb`` -> ``batch_mb``."""
    return flag.lstrip("-").replace("-", "_")


def field_value(spec: dict[str, Any], value: Any) -> Any:
    """The config value of a flag's parsed ``value`` (None: the flag was not given)."""
    if "set" in spec:
        return spec["set"] if value else None
    if value is None:
        return None
    if spec.get("type") == "mib":
        return max(spec.get("floor", 0), int(value * 2**20))
    return tuple(value) if spec.get("append") or spec.get("nargs") else value


def flag_values(cls: type, args: argparse.Namespace, paths: typing.Iterable[str] | None = None,
                parse: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Field path -> the value its flags give, for the fields of ``cls`` with flags made with ``config_defaults``
    (``paths``: only these). A switch not given and a flag left at None set nothing (the field keeps its
    default); an append flag not given sets ``()``. ``parse``: field path -> the function that reads that
    field's flags itself and returns the field paths it sets (one flag's text that fills several fields)."""
    flags = config_flags(cls)
    out: dict[str, Any] = {}
    for path in flags if paths is None else paths:
        if parse and path in parse:
            out.update(parse[path](args))
            continue
        for name, _, spec in flags[path]:
            value = getattr(args, dest(name))
            if "set" in spec:
                if value:
                    out[path] = spec["set"]
            elif spec.get("append") or spec.get("nargs"):
                out[path] = tuple(value or ())
            elif value is not None:
                out[path] = field_value(spec, value)
    return out


def nest(values: dict[str, Any], cls: type) -> dict[str, Any]:
    """``values`` by field path ("domain.relax") as keyword arguments of ``cls``: each section's paths become
    that section's dataclass (its other fields at their defaults)."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        head, _, rest = path.partition(".")
        if rest:
            sections.setdefault(head, {})[rest] = value
        else:
            out[path] = value
    for head, kw in sections.items():
        out[head] = hints[head](**nest(kw, hints[head]))
    return out
