"""``gpu-dedup demo``: deduplicate the bundled sample corpus and say what to look at next."""
from __future__ import annotations

import argparse

from ..config import PRESETS, RunConfig
from .args import DEVICES, config_default
from .run import print_summary


def add_command(sub) -> None:
    """Register ``demo`` on the CLI's subparsers."""
    p = sub.add_parser("demo", help="run on the bundled sample corpus",
                       epilog="example:\n  gpu-dedup demo -o demo-out --preset fineweb",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="gpu-dedup-demo", help="output directory (default gpu-dedup-demo)")
    p.add_argument("--preset", choices=PRESETS, default="default")
    p.add_argument("--device", choices=DEVICES, default=config_default(RunConfig, "device"))
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from importlib import resources

    from ..runtime.outputs import input_roots, own
    from ..lexical.dedup import deduplicate

    sample = resources.files("gpu_dedup") / "data" / "sample.jsonl.gz"
    out = args.output
    cfg = RunConfig.preset(args.preset, device=args.device, progress=not args.quiet)
    # the demo replaces its own earlier output (a directory whose manifest says the demo wrote it), nothing else
    with resources.as_file(sample) as path, own(out, command="demo", overwrite=args.overwrite,
                                                 roots=input_roots([str(path)]), overwrite_same_command=True):
        result = deduplicate([str(path)], cfg, out)
    print_summary(result)
    import pyarrow.compute as pc

    d = result.decisions
    removed = d.filter(pc.equal(d["reason"], "near_duplicate"))
    if removed.num_rows:
        top = removed.sort_by([("jaccard", "ascending")]).slice(0, 3).to_pylist()
        print("\nnear duplicates closest to the threshold (id -> kept representative, exact Jaccard):")
        for row in top:
            print(f"  {row['id']} -> {row['representative_id']}  J={row['jaccard']:.3f}")
        print(f"\nnext: open {out}/report.html in a browser (clusters side by side, S-curve, timings), or load "
              f"the decisions:\n  python -c \"import pyarrow.parquet as pq; "
              f"print(pq.read_table('{out}/decisions.parquet').to_pandas().head())\"")
    return 0
