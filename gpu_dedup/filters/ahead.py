"""A first filter run's model-free kernels compiled ahead, in a second process (``compiling.start_ahead``): the
rules' and the domain rules' kernels compile there while this process loads the models and compiles the
fastText, LM and DSIR kernels, so a first run on two or more cores waits for the longer half, not the sum.

    compile_stages  the stages whose kernels a run with a given config compiles
    filter_ahead  at the start of a local CPU run: start the helper when both halves have something to compile
    ahead_main    the helper: the bundled sample's first documents scored by those stages only
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..runtime.compiling import Ahead
    from .config import FilterConfig

_KERNEL_RULE_SETS = ("gopher", "gopher_quality", "gopher_repetition", "chars")  # the rule sets with CPU kernels
_AHEAD_CODE = "from gpu_dedup.filters.ahead import ahead_main; ahead_main()"


def compile_stages(cfg: FilterConfig) -> tuple[str, ...]:
    """The stages (``compiling.KERNELS``' names) whose CPU kernels a filter run with ``cfg`` compiles."""
    return tuple(st for st, on in (
        ("domain", cfg.domain.script_prefilter or cfg.domain.relax), ("rules", bool(cfg.rules)),
        ("dsir", bool(cfg.dsir_target)), ("lm-score", cfg.has_lm), ("fasttext", bool(cfg.lid or cfg.classifiers)))
        if on)


def filter_ahead(cfg: FilterConfig) -> Ahead | None:
    """At the start of a local CPU filter run: a helper process (``compiling.start_ahead``) compiling the kernels
    of the stages that need no model, the rules and the domain rules, while this process loads the models and
    compiles the fastText, LM and DSIR kernels. Returns the ``compiling.Ahead`` to wait for, or None (nothing to
    overlap, one core, or GPU_DEDUP_COMPILE_AHEAD=0)."""
    from ..runtime.compiling import start_ahead

    sets = [x.strip() for x in cfg.rules.split(",")] if isinstance(cfg.rules, str) else []
    rules = ",".join(x for x in sets if x in _KERNEL_RULE_SETS)
    on = compile_stages(cfg)
    domain = "domain" in on
    stages = (("rules",) if rules else ()) + (("domain",) if domain else ())
    others = tuple(st for st in on if st not in ("rules", "domain"))
    if not stages or not others:
        return None
    return start_ahead(stages, others, _AHEAD_CODE, {"rules": rules or None, "domain": domain})


def ahead_main() -> None:
    """The helper process of ``filter_ahead`` (``python -c`` with a JSON argument {"rules": str | None, "domain":
    bool}): score the bundled sample's first documents with those stages only, on the CPU, as a filter batch is
    scored, so that their kernels are compiled for a real run's argument types and cached."""
    import sys

    import pyarrow as pa

    from ..runtime.compiling import sample_texts
    from .config import DomainConfig, FilterConfig
    from .domain import domain_stats
    from .scorers import Scorers, text_buffers

    logging.getLogger("gpu_dedup").setLevel(logging.ERROR)
    args = json.loads(sys.argv[1])
    text = pa.array(sample_texts(), pa.large_string())
    if args["domain"]:
        domain_stats(text, DomainConfig(), "cpu", buffers=text_buffers(text, "cpu"))
    if args["rules"]:
        ids = pa.array([str(i) for i in range(len(text))], pa.string())
        Scorers.load(FilterConfig(rules=args["rules"], device="cpu"), "cpu").columns(text, ids, 0)
