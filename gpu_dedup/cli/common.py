"""The flags every program command takes, with one meaning (``run``, ``filter``, ``substring``, ``screen``,
``pipeline``; ``tests/cli/test_flags.py`` holds the matrix), and what they make: the ``runtime.program.Env`` a run
hands its steps.

    -q/--quiet, -v/--verbose           progress bars off / debug logging
    --threads, --device                 the CPU threads of the kernels; auto | cpu | cuda (never a silent fallback)
    --engine, --workers, --address      local or ray; a local Ray cluster of N processes, or a running one
    --work-dir, --resume                intermediate files, and reusing them to finish an interrupted run
    --overwrite                         replace an earlier run's files in OUT
    --config FILE                       a TOML or YAML file of the command's flags (``config_tokens``)
    --id-field, --text-field, --on-error, --batch-mb    how the input is read (``config.InputConfig``)
    --price cpu-hour=X,gpu-hour=Y       run.json's ``cost`` in money too (``runtime.cost.Price``)

``GUARD`` (``add_guard``): the commands whose runs remove documents for a whole corpus take them (``run``,
``filter``, ``pipeline`` and a recipe's settings):

    --source-field COLUMN               what names each document's source (default: its input file)
    --max-source-removal FRACTION       stop before the kept records when a source lost more (``SourceGuard``)

A common flag not given is None (its default is the config's, applied by ``reading`` / ``env_from_args``), so
that a recipe's or a config file's value can stand where the command line is silent. ``add_common`` adds the ones a
command's own flags do not already give (``run`` and ``filter`` make some from their
configs' field metadata: the same names, types and choices). A ``--config`` file and a recipe step hold flags by
name (without the dashes; ``_`` or ``-``): ``config_tokens`` turns such a mapping into the tokens the command's own
parser reads, so a file means exactly what the command line does.
"""
from __future__ import annotations

import argparse
import difflib
import os
import sys
from typing import Any, Mapping

from ..config import InputConfig, OnError
from ..errors import ConfigError, MissingFileError
from ..runtime.cost import Price
from ..runtime.program import Env, Reading
from ..runtime.sources import SourceGuard
from .args import DEVICES, fraction, positive_int

COMMON: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("-q", "--quiet"), {"action": "store_true", "help": "no progress bars; warnings and errors only"}),
    (("-v", "--verbose"), {"action": "store_true", "dest": "debug", "help": "debug logging (as gpu-dedup -v)"}),
    (("--threads",), {"type": positive_int, "metavar": "N", "help": "CPU threads of the kernels (default: all cores)"}),
    (("--device",), {"choices": DEVICES, "help": "auto (default: the GPU when usable), cpu or cuda (never a silent "
                                                 "fallback)"}),
    (("--engine",), {"choices": ("local", "ray"),  # None when not given: a recipe's engine stands then
                     "help": "local (default: this process) or ray (tasks on a Ray cluster)"}),
    (("--workers",), {"type": positive_int, "help": "with --engine ray: start a local Ray cluster of N processes"}),
    (("--address",), {"metavar": "auto|HOST:PORT", "help": "with --engine ray: join a running cluster"}),
    (("--work-dir",), {"metavar": "DIR", "help": "intermediate files (default with --resume: OUT/work)"}),
    (("--resume",), {"action": "store_true", "help": "finish an interrupted run: reuse what the work directory "
                                                     "holds, compute the rest; the same results"}),
    (("--overwrite",), {"action": "store_true", "help": "replace an earlier run's outputs in OUT"}),
    (("--config",), {"metavar": "FILE", "help": "a TOML or YAML file of this command's flags (names without the "
                                                "dashes); the flags given here win"}),
    (("--id-field",), {"help": "id column (default 'id'; missing -> '<file>:<row>')"}),
    (("--no-id-field",), {"action": "store_true", "help": "ignore ids in the data; use '<file>:<row>'"}),
    (("--text-field",), {"help": "text column (default 'text')"}),
    (("--on-error",), {"choices": ("raise", "skip"), "help": "bad records: stop (default) or skip and record"}),
    (("--batch-mb",), {"type": float, "metavar": "MB", "help": "text per batch in MB (default 64)"}),
    (("--price",), {"metavar": "cpu-hour=X,gpu-hour=Y", "help": "price per CPU-core-hour and per GPU-hour (one "
                                                                "currency): run.json's cost and the report's in money"}),
)
COMMON_FLAGS: tuple[str, ...] = tuple(f for names, _ in COMMON for f in names)
GUARD: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--source-field",), {"metavar": "COLUMN", "help": "the field naming each document's source (default: its "
                           "input file): run.json's sources and the report's say what each source lost"}),
    (("--max-source-removal",), {"type": fraction, "metavar": "FRACTION", "help": "fail (exit 1) when the run "
                                 "removes more than FRACTION of any source's documents, naming each such source: "
                                 "the decisions, run.json and the report are written, the kept records are not"}),
)
GUARD_FLAGS: tuple[str, ...] = tuple(f for names, _ in GUARD for f in names)
# a recipe's tables (``pipeline``, a recipe's settings): run, filter and substring have their own --table-layout
LAYOUT: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--table-layout",), {"choices": ("file", "dataset"), "help": "the per-document tables (OUT's composed "
                           "decisions, each step's decisions, scores and span tables) as one file each (the local "
                           "engine's) or as folders of per-input-file parts the Ray tasks write (the default with "
                           "--engine ray: OUT/decisions/ instead of OUT/decisions.parquet)"}),
)


def add_common(p: argparse.ArgumentParser, title: str = "common") -> None:
    """The common flags ``p`` does not have yet, in one group (``title``)."""
    have = {s for a in p._actions for s in a.option_strings}  # argparse keeps no public list of its actions
    missing = [(names, kw) for names, kw in COMMON if not set(names) & have]
    if not missing:
        return
    g = p.add_argument_group(title)
    for names, kw in missing:
        g.add_argument(*names, **kw)


def add_guard(p: argparse.ArgumentParser, title: str = "sources") -> None:
    """The source guard's flags (``GUARD``) in one group."""
    g = p.add_argument_group(title)
    for names, kw in GUARD:
        g.add_argument(*names, **kw)


def guard(args: argparse.Namespace) -> SourceGuard:
    """The ``SourceGuard`` of --source-field and --max-source-removal (the input file, no limit: not given)."""
    return SourceGuard(getattr(args, "source_field", None), getattr(args, "max_source_removal", None))


def price(args: argparse.Namespace) -> Price | None:
    """The ``Price`` of --price (None: not given)."""
    text = getattr(args, "price", None)
    return Price.parse(text) if text else None


def print_extras(s: dict) -> None:
    """The summary's lines of what each source lost and what the run cost (run.json ``sources``, ``cost``)."""
    from ..runtime.cost import line as cost_line
    from ..runtime.sources import share_line

    if s.get("sources"):
        print(share_line(s["sources"]))
    if s.get("cost"):
        print(cost_line(s["cost"]))


def table_shown(out: str, name: str) -> str:
    """OUT's per-document table ``name`` as a summary line names it, within OUT: <name>.parquet, or a Ray run's
    dataset <name>/ of per-file parts (``decisions.table_path``, the one reader of either layout)."""
    from ..decisions import table_path

    path = table_path(out, name)
    return os.path.basename(path) + (os.sep if os.path.isdir(path) else "")


def reading(args: argparse.Namespace) -> Reading:
    """How the command reads its input, from the common flags (a default where one was not given)."""
    d = InputConfig()
    mb = getattr(args, "batch_mb", None)
    batch = getattr(args, "batch_bytes", None)
    if mb is not None and batch is None:  # a command whose --batch-mb is a common flag (MB, not yet bytes)
        batch = max(1024, int(mb * 2**20))
    id_field = args.id_field if getattr(args, "id_field", None) is not None else d.id_field
    if getattr(args, "no_id_field", False):
        id_field = None
    on_error: OnError = getattr(args, "on_error", None) or d.on_error
    return Reading(id_field=id_field, text_field=getattr(args, "text_field", None) or d.text_field,
                   batch_bytes=batch, on_error=on_error)


def env_from_args(args: argparse.Namespace) -> Env:
    """The ``Env`` of the common flags."""
    return Env(device=getattr(args, "device", None) or "auto", threads=getattr(args, "threads", None),
               progress=not getattr(args, "quiet", False), reading=reading(args),
               overwrite=bool(getattr(args, "overwrite", False)), engine=getattr(args, "engine", "local") or "local",
               workers=getattr(args, "workers", None), address=getattr(args, "address", None),
               work_dir=getattr(args, "work_dir", None), resume=bool(getattr(args, "resume", False)),
               sources=guard(args), price=price(args), table_layout=getattr(args, "table_layout", None))


RAY_SETTINGS = ("workers", "address", "partitions")  # the Ray engine's own settings


def check_ray_settings(args: argparse.Namespace, source: str, keys: Any) -> None:
    """The Ray engine's settings that a file gave (``keys``: the names ``source``, a recipe or a --config file,
    set) refused without the Ray engine, naming that file: the engine's own check names them as the command
    line's flags, which the user did not pass."""
    if (getattr(args, "engine", None) or "local") == "ray":
        return
    keys = {str(k).replace("-", "_") for k in keys}
    named = [f"{k}: {getattr(args, k)}" for k in RAY_SETTINGS if k in keys and getattr(args, k, None) is not None]
    if named:
        one = len(named) == 1
        raise ConfigError(f"{source} sets {', '.join(named)}, which need{'s' if one else ''} the Ray engine: add "
                          f"engine: ray to it or pass --engine ray, or remove {'it' if one else 'them'}")


def interrupted(args: argparse.Namespace, how: str = "Ctrl-C") -> str:
    """The message of Ctrl-C or SIGTERM (``how``; cli/main.py): what was removed, what was kept, and whether
    ``--resume`` can finish the run. ``pipeline`` keeps each finished step (OUT/steps/); ``run`` keeps pass 1's
    pieces in its work directory (--work-dir, or OUT/work with --resume or --engine ray); the other commands keep
    nothing to reuse."""
    said = f"gpu-dedup: interrupted ({how}); what this run had written was removed, as on any failure"
    command = getattr(args, "command", None)
    if not hasattr(args, "resume"):  # a command that owns no run (params, report, compare, ...)
        return said
    out = getattr(args, "output", None) or "OUT"
    if command == "pipeline":
        return (f"{said}, except the steps that finished ({os.path.join(out, 'steps')}): the same command with "
                f"--resume reuses them and runs the rest")
    work = getattr(args, "work_dir", None)
    if command == "run" and work is None and (args.resume or getattr(args, "engine", "local") == "ray"):
        work = os.path.join(out, "work")
    if command == "run" and work is not None:
        return (f"{said}, except the work directory {work}: the same command with --resume finishes the run, "
                f"reusing the pieces it holds")
    if command == "run":
        return (f"{said}; nothing was kept to resume from (a run given --work-dir DIR, or --resume, keeps its "
                f"pieces there, and --resume then finishes it)")
    return f"{said}; `{command}` keeps nothing to resume from: run it again"


def load_mapping(path: str, what: str = "config file") -> dict[str, Any]:
    """The mapping of a TOML or YAML file (UTF-8; a key given twice is refused in either); any error names the
    file."""
    if os.path.isdir(path):
        raise ConfigError(f"{what} {path!r} is a directory: pass the .toml, .yaml or .yml file")
    if not os.path.isfile(path):
        raise MissingFileError(f"{what} {path!r} does not exist")
    if not path.endswith((".toml", ".yaml", ".yml")):
        raise ConfigError(f"{what} {path!r} must end in .toml, .yaml or .yml")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{what} {path!r} is not UTF-8 text (line {line}, byte {raw[exc.start]:#04x}): save it "
                          "as UTF-8") from None
    if path.endswith(".toml"):
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{what} {path!r} is not valid TOML: {exc}") from None
    else:
        import yaml

        try:
            data = yaml.load(text, Loader=_unique_keys_loader()) or {}
        except _KeyTwice as exc:
            raise ConfigError(f"{what} {path!r} gives the key {exc.key!r} twice (lines {exc.lines[0]} and "
                              f"{exc.lines[1]}): keep one") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{what} {path!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path!r} must hold a mapping at the top level, got {type(data).__name__}")
    return data


class _KeyTwice(ConfigError):  # (caught in load_mapping, which names the file)
    def __init__(self, key: Any, lines: tuple[int, int]):
        super().__init__(key)
        self.key, self.lines = key, lines


def _unique_keys_loader():
    """yaml.SafeLoader refusing a key given twice in one mapping (YAML keeps the last silently; TOML refuses it):
    a recipe with two ``rules:`` would run with one of them."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be given again
                    continue
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _KeyTwice(key, (seen[key], line))
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


def _option(parser: argparse.ArgumentParser, key: str, prefix: str) -> argparse.Action | None:
    """The action of a flag named ``key`` (without dashes; ``_`` or ``-``), or of ``prefix``-``key``."""
    by_flag = {s: a for a in parser._actions for s in a.option_strings if s.startswith("--")}
    name = "--" + str(key).replace("_", "-")
    if name in by_flag:
        return by_flag[name]
    if prefix and "--" + prefix + "-" + name[2:] in by_flag:
        return by_flag["--" + prefix + "-" + name[2:]]
    return None


def is_flag(parser: argparse.ArgumentParser, key: str) -> bool:
    """Whether ``key`` names a flag of ``parser`` (without the dashes)."""
    return _option(parser, key, "") is not None


def config_tokens(mapping: Mapping[str, Any], parser: argparse.ArgumentParser, where: str,
                  prefix: str = "", of: str = "this step") -> list[str]:
    """The command-line tokens a mapping of flags means for ``parser``: ``{"threshold": 0.9, "lang": ["en", "de"],
    "exact-verify": true}`` -> ``["--threshold", "0.9", "--lang", "en", "de", "--exact-verify"]``. A switch takes
    true / false, a repeatable flag a list (one value each), a flag of several values a list. ``prefix``: a key may
    leave out the step's prefix (``split`` for ``paragraph-split`` in a paragraph step). ``of``: whose flags the
    mapping holds (the refusal of an unknown key says it).

    Raises:
        ConfigError: a key that is no flag of the command (the message suggests the nearest), or a value of the
            wrong shape; naming ``where`` (the file, the step).
    """
    tokens: list[str] = []
    known = sorted({s[2:] for a in parser._actions for s in a.option_strings if s.startswith("--")})
    for key, value in mapping.items():
        action = _option(parser, key, prefix)
        if action is None:
            close = difflib.get_close_matches(str(key).replace("_", "-"), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: {key!r} is no flag of {of}{hint}; its flags: {', '.join(known)}")
        flag = next(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction)):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: {key!r} is a switch: give true or false, got {value!r}")
            if value:
                tokens.append(flag)
            continue
        if value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if isinstance(action, argparse._AppendAction):
            for v in values:
                tokens += [flag, _text(v)]
        elif action.nargs in ("+", "*") or isinstance(action.nargs, int):
            tokens += [flag, *(_text(v) for v in values)]
        elif len(values) == 1:
            tokens += [flag, _text(values[0])]
        else:
            raise ConfigError(f"{where}: {key!r} takes one value, got {value!r}")
    return tokens


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise ConfigError(f"a flag's value must be a number or a string, got {value!r}")
    return str(value)


class RaisingParser(argparse.ArgumentParser):
    """A parser whose errors are ``ConfigError``s naming ``where`` (a recipe's step, a config file) instead of a
    usage message and exit 2."""

    def __init__(self, *args: Any, where: str = "", **kw: Any) -> None:
        super().__init__(*args, add_help=False, **kw)
        self.where = where

    def error(self, message: str):  # noqa: D102 - argparse's hook
        raise ConfigError(f"{self.where}: {message}")
