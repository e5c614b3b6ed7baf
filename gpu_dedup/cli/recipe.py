"""Recipes: a pipeline written down once, in YAML or TOML, run with ``gpu-dedup pipeline RECIPE INPUT -o OUT`` or
``gpu_dedup.load_recipe(path).run(...)``.

    # recipes/sample.yaml
    device: auto                     # the run's settings: any common flag (cli/common.py) by name
    steps:                           # in order; each a step name, or a step name with its flags by name
      - filter: {rules: gopher}
      - dedup: {threshold: 0.8}
      - substring: {min-tokens: 50}
      - semantic                     # its defaults

A step's keys are the flags its command takes (cli/steps.py: ``gpu-dedup run --help`` lists dedup's, paragraph's,
substring's and semantic's; ``gpu-dedup filter --help`` the filter's; ``gpu-dedup screen --help`` the screen's),
without the dashes, ``-`` or ``_``; a key may leave out the step's prefix (``split`` for ``paragraph-split``). A
string value may name an environment variable, ``${LID_MODEL}`` (a model path per machine); an unset one is an
error naming it. Precedence: the recipe's settings, then ``--config FILE``, then the command line's flags.
"""
from __future__ import annotations

import argparse
import os
import re
from typing import Any, Mapping

from ..errors import ConfigError, GpuDedupError
from .common import LAYOUT, RaisingParser, add_common, add_guard, config_tokens, env_from_args, load_mapping
from .steps import STEP_FLAGS, build_step

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: Any, where: str) -> Any:
    """``${NAME}`` in a string (or in a list's strings) replaced by the environment variable's value."""
    if isinstance(value, list):
        return [_expand(v, where) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(1) not in os.environ:
            raise ConfigError(f"{where}: ${{{m.group(1)}}} names an environment variable that is not set: set it "
                              f"(export {m.group(1)}=...) or write the value in the recipe")
        return os.environ[m.group(1)]

    return _VAR.sub(sub, value)


def recipe_steps(recipe: Mapping[str, Any], path: str) -> list[Any]:
    """The steps of a recipe's ``steps`` list.

    Raises:
        ConfigError: no steps, an unknown step, a key that is no flag of its step, a bad value (naming the recipe,
            the step's position and name, and the key).
    """
    entries = recipe.get("steps")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"recipe {path!r} needs a list `steps` of at least one step (e.g. steps: [dedup]); its "
                          f"steps can be {', '.join(STEP_FLAGS)}")
    steps = []
    for i, entry in enumerate(entries, 1):
        if isinstance(entry, str):
            name, flags = entry, {}
        elif isinstance(entry, Mapping) and len(entry) == 1:
            name, flags = next(iter(entry.items()))
            flags = flags or {}
        else:
            raise ConfigError(f"recipe {path!r}: step {i} must be a step name or one step name with its flags "
                              f"(e.g. - dedup: {{threshold: 0.8}}), got {entry!r}")
        where = f"recipe {path!r}, step {i} ({name})"
        if name not in STEP_FLAGS:
            raise ConfigError(f"recipe {path!r}: step {i} is {name!r}, no step; the steps: {', '.join(STEP_FLAGS)}")
        if not isinstance(flags, Mapping):
            raise ConfigError(f"{where}: its flags must be a mapping (flag: value), got {flags!r}")
        parser = RaisingParser(prog=name, where=where)
        STEP_FLAGS[name].add(parser)
        tokens = config_tokens({k: _expand(v, where) for k, v in flags.items()}, parser, where,
                               STEP_FLAGS[name].prefix)
        args = parser.parse_args(tokens)
        try:
            steps.append(build_step(name, args))
        except GpuDedupError as exc:  # the step's own check: name where it is
            raise type(exc)(f"{where}: {exc}") from None
    return steps


def recipe_settings(recipe: Mapping[str, Any], path: str) -> argparse.Namespace:
    """A recipe's run settings (its keys besides ``steps``: common flags by name), parsed as the command line's."""
    parser = RaisingParser(prog="pipeline", where=f"recipe {path!r}")
    add_common(parser)
    add_guard(parser)
    for names, kw in LAYOUT:
        parser.add_argument(*names, **kw)
    where = f"recipe {path!r}"
    settings = {k: _expand(v, where) for k, v in recipe.items() if k != "steps"}
    return parser.parse_args(config_tokens(settings, parser, where, of="a recipe's run settings (its keys beside "
                                                                       "steps)"))


def load_recipe(path: str | os.PathLike) -> Any:
    """The ``Pipeline`` a recipe file describes (module docstring).

    Args:
        path: a .yaml / .yml / .toml recipe.

    Returns:
        A ``gpu_dedup.Pipeline`` (its ``run(source, output_dir)`` runs it).

    Raises:
        ConfigError: the file or a step is not valid (the message names the file, the step and the key).
        MissingFileError: the file does not exist.
    """
    from ..pipeline import Pipeline

    path = os.fspath(path)
    recipe = load_mapping(path, "recipe")
    steps = recipe_steps(recipe, path)
    env = env_from_args(recipe_settings(recipe, path))
    return Pipeline(steps, device=env.device, threads=env.threads, reading=env.reading, progress=False,
                    sources=env.sources, price=env.price)
