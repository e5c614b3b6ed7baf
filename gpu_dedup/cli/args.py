"""argparse types of the command line: sizes (2G, 500M), finite and positive numbers. Their errors name the
flag (argparse prefixes "argument --flag:")."""
from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any, get_args

from ..config import Device
from ..errors import ConfigError


def parse_size(text: str) -> int:
    """'2G', '500M', '64k', '1.5GB' or plain bytes -> bytes (binary multiples)."""
    t = text.strip().upper().removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:] if t else "", 1)
    try:
        value = float(t[:-1] if mult > 1 else t)
    except ValueError:
        raise ConfigError(f"cannot read size {text!r}: use a number with K, M, G or T, e.g. 2G") from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"size {text!r} must be a finite number >= 0 with K, M, G or T, e.g. 2G")
    return int(value * mult)


def size_arg(text: str) -> int:
    """argparse type of a size flag: its errors name the flag (argparse prefixes "argument --flag:")."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def finite_float(text: str) -> float:
    """argparse type of a number flag: 'inf', 'nan' and non-numbers are refused with the flag named."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def mib(text: str) -> float:
    """A size in MB (MiB) of at least 1 KiB, the least batch the readers take (``InputConfig.batch_bytes``):
    refused here, in MB, not later as a byte count the flag never took."""
    value = finite_float(text)
    if value * 2**20 < 1024:
        raise argparse.ArgumentTypeError(f"expected a number of MB >= {1 / 1024} (1 KiB), got {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1] (argparse's type)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a fraction in [0, 1]")
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


# the argparse types a config field's flag names (``config.flag(type=...)``; cli/fields.py)
TYPES = {"int": int, "finite": finite_float, "size": size_arg, "mib": mib, "mib_floor": positive_float,
         "count": positive_int, "fraction": fraction,
         "select": _select, "order": _order, "cuts": _cuts}

DEVICES = get_args(Device)  # the --device choices


def config_default(cls: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls``: flags take their defaults from the configs, never
    repeat them."""
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)
