"""gpu_dedup: deduplicate text corpora for LLM pre-training, on a GPU or on CPUs, with decisions you can audit.

    >>> import gpu_dedup
    >>> result = gpu_dedup.deduplicate("data/*.jsonl", gpu_dedup.RunConfig.preset("default"), output_dir="out")
    >>> result.decisions  # one row per input document: keep, reason, representative, jaccard, ...

Heavy modules (numba kernels, GPU libraries) load on first use, so importing the package is cheap.
"""
__version__ = "0.1.0"

import os as _os

# The kernels live at the top of the source tree (kernels/, device code only) and install as
# gpu_dedup.kernels. When running from a source checkout (no install), let the subpackage resolve there.
_here = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_here, "kernels")) and _os.path.isfile(
        _os.path.join(_here, _os.pardir, "kernels", "hashing.py")):
    __path__.append(_os.path.join(_here, _os.pardir))  # type: ignore[name-defined]  # noqa: F821

from .config import (ClusterConfig, LSHConfig, MinHashConfig, NormalizeConfig, RunConfig,  # noqa: E402
                     ShingleConfig)


def deduplicate(source, config=None, output_dir=None, **overrides):
    """See :func:`gpu_dedup.pipeline.deduplicate`."""
    from .pipeline import deduplicate as _run

    return _run(source, config, output_dir, **overrides)


__all__ = ["ClusterConfig", "LSHConfig", "MinHashConfig", "NormalizeConfig", "RunConfig", "ShingleConfig",
           "deduplicate", "__version__"]
