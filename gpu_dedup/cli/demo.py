"""``gpu-dedup demo``: the bundled recipe (gpu_dedup/data/demo.yaml: rules, dedup, paragraph dedup) over the bundled
sample corpus, and what to look at next."""
from __future__ import annotations

import argparse
import dataclasses
import os

from ..config import PRESETS, RunConfig
from .args import DEVICES, config_default
from .pipeline import print_result


def add_command(sub) -> None:
    """Register ``demo`` on the CLI's subparsers."""
    p = sub.add_parser("demo", help="run the bundled recipe on the bundled sample corpus",
                       epilog="example:\n  gpu-dedup demo -o demo-out --preset fineweb",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="gpu-dedup-demo", help="output directory (default gpu-dedup-demo)")
    p.add_argument("--preset", choices=PRESETS, default="default", help="the dedup step's preset (default default)")
    p.add_argument("--device", choices=DEVICES, default=config_default(RunConfig, "device"))
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from importlib import resources

    import pyarrow.compute as pc

    from ..lexical.program import Dedup
    from ..pipeline.engine import run_pipeline
    from ..runtime.program import Env
    from .recipe import load_recipe

    data = resources.files("gpu_dedup") / "data"
    pipeline = load_recipe(str(data / "demo.yaml"))
    steps = [dataclasses.replace(s, config=RunConfig.preset(args.preset)) if isinstance(s, Dedup) else s
             for s in pipeline.steps]
    env = Env(device=args.device, progress=not args.quiet, reading=pipeline.env.reading, overwrite=args.overwrite)
    out = args.output
    # the demo replaces its own earlier output (a directory whose manifest says the demo wrote it), nothing else
    with resources.as_file(data / "sample.jsonl.gz") as path:
        result = run_pipeline(steps, [str(path)], out, env=env, command="demo", overwrite=args.overwrite,
                              replace_own=True)
    print_result(result)
    d = result.decisions
    removed = d.filter(pc.equal(d["reason"], "near_duplicate"))
    if removed.num_rows:
        top = removed.sort_by([("jaccard", "ascending")]).slice(0, 3).to_pylist()
        print("\nnear duplicates closest to the threshold (id -> kept representative, exact Jaccard):")
        for row in top:
            print(f"  {row['id']} -> {row['representative_id']}  J={row['jaccard']:.3f}")
    print(f"\nnext: open {os.path.join(out, 'report.html')} in a browser (every step, and each step's own report), "
          f"write your own recipe (recipes/ in the repository), or load the decisions:\n  python -c \"import "
          f"pyarrow.parquet as pq; print(pq.read_table('{out}/decisions.parquet').to_pandas().head())\"")
    return 0
