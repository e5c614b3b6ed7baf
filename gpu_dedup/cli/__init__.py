"""``gpu-dedup`` command line: a thin layer over the Python API. All argparse lives here, one module per command;
each maps its flags to the API and owns nothing else (OUT, devices and the stage order belong to the library).

  main.py       the parser (``build_parser``) and the entry point (``main``: errors as one line naming flags)
  run.py        ``run``: RunConfig from --preset, --config FILE and flags; the stages through ``compose.run_dedup``
  demo.py       ``demo``: the bundled sample corpus
  screen.py     ``screen``: contamination screening
  compare.py    ``compare``: lexical vs semantic decisions of a --semantic run
  report.py     ``report``: (re)write OUT/report.html
  params.py     ``params``: LSH bands x rows for a threshold (the math: gpu_dedup/lexical/params.py)
  filter.py     ``filter`` and the scoring flags ``run`` shares
  train.py      ``train-lm`` and ``train-classifier``
  substring.py  ``substring`` and ``run``'s --substring-* flags
  warmup.py     ``warmup``: compile every command's kernels ahead of the first run
  args.py       argparse types (sizes, finite and positive numbers); flags.py: API names in errors -> flags
"""
from .args import parse_size  # '2G' -> bytes
from .main import build_parser, main  # main: the `gpu-dedup` entry point (pyproject: gpu_dedup.cli:main)
from .run import config_from_args

__all__ = ["build_parser", "config_from_args", "main", "parse_size"]
