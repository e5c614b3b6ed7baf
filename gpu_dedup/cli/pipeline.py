"""``gpu-dedup pipeline RECIPE INPUT... -o OUT``: a recipe's steps over the input, in one owned OUT
(``pipeline.engine.run_pipeline``, layout "steps"); the recipe's settings, then ``--config``, then these flags."""
from __future__ import annotations

import argparse
import os
import textwrap

from ..runtime.run import seconds_line, timing_line
from .common import (COMMON, GUARD, LAYOUT, add_common, add_guard, check_ray_settings, env_from_args, load_mapping,
                     print_extras)

EPILOG = textwrap.dedent("""\
    examples:
      gpu-dedup pipeline recipes/sample.yaml data/ -o out
      gpu-dedup pipeline recipes/seeds.yaml 'crawl/**/*.jsonl.zst' -o out --device cuda --resume

    recipe (YAML or TOML): the run's settings (common flags by name), then `steps`, each a step name with
    its flags by name: filter, dedup, paragraph, substring, semantic, screen (cli/recipe.py; recipes/).
    outputs (in OUT): decisions.parquet (every input document once: the step and reason that removed it and
    the document kept for it; with --engine ray a folder decisions/ of one part per input file, unless
    --table-layout file), deduplicated/ (the final records), run.json, report.html, and each step's own
    outputs in steps/NN-name/.
    """)


def add_command(sub) -> None:
    """Register ``pipeline`` on the CLI's subparsers."""
    p = sub.add_parser("pipeline", help="run a recipe of steps (filter, dedup, paragraph, substring, semantic, "
                       "screen) over a corpus", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", metavar="RECIPE", help="a YAML or TOML recipe (recipes/ has examples)")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="jsonl / jsonl.gz / jsonl.zst / parquet files, "
                   "directories (searched recursively) or glob patterns")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    add_common(p, "run")
    for names, kw in LAYOUT:
        p.add_argument(*names, **kw)
    add_guard(p)
    p.set_defaults(func=cmd_pipeline, api_names={"output_dir": "output"})


def _with_recipe_settings(args: argparse.Namespace, recipe: dict, path: str) -> argparse.Namespace:
    """The command line's flags over the recipe's settings: a recipe value stands where the flag was not given."""
    from .recipe import recipe_settings

    settings = recipe_settings(recipe, path)
    defaults = {kw.get("dest", names[-1].lstrip("-").replace("-", "_")): kw.get("default")
                for names, kw in COMMON + GUARD + LAYOUT}
    merged = argparse.Namespace(**vars(args))
    taken = set()
    for dest, default in defaults.items():
        if getattr(args, dest, default) in (default, None, False) and getattr(settings, dest, None) not in (None, False):
            setattr(merged, dest, getattr(settings, dest))
            taken.add(dest)
    # a Ray setting without the Ray engine: named where it was set (the engine's check names command-line flags)
    check_ray_settings(merged, f"config file {getattr(args, 'config', None)!r}", getattr(args, "config_flag_keys", ()))
    check_ray_settings(merged, f"recipe {path!r}", taken)
    return merged


def cmd_pipeline(args: argparse.Namespace) -> int:
    from ..pipeline.engine import run_pipeline
    from .recipe import recipe_steps

    recipe = load_mapping(args.recipe, "recipe")
    steps = recipe_steps(recipe, args.recipe)
    args = _with_recipe_settings(args, recipe, args.recipe)
    res = run_pipeline(steps, args.inputs, args.output, env=env_from_args(args), resume=args.resume,
                       overwrite=args.overwrite)
    print_result(res)
    return 0


def print_result(res) -> None:
    """A pipeline run's summary lines on stdout (``pipeline`` and ``demo``)."""

    print(res.summary())
    for r in res.steps:
        phase = "" if r.phase == "main" else f" ({r.phase})"
        rate = f", {r.seen / r.seconds:,.0f} docs/s" if r.seconds > 0 and not r.reused else ""
        print(f"  {r.index}. {r.name}{phase}: {r.seen:,} documents in, {r.removed:,} removed, {r.seconds:.2f} s"
              + rate + (" (reused)" if r.reused else "") + f" -> {r.directory}/")
    s = res.stats
    print(f"device {s['device']}, {seconds_line(s['timings_s'])}")
    print(timing_line(s["timings_s"]))
    print_extras(s)
    table = (s.get("tables") or {}).get("decisions", {}).get("path", "decisions.parquet")  # a Ray run's: decisions/
    print(f"wrote {os.path.join(res.output_dir, table)}{'/' if not table.endswith('.parquet') else ''}, "
          + ("deduplicated/, " if "deduplicated" in s else "") + "run.json, report.html")
