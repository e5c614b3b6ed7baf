"""gpu_dedup: deduplicate text corpora for LLM pre-training, on a GPU or on CPUs, with decisions you can audit.

    >>> import gpu_dedup
    >>> result = gpu_dedup.deduplicate("data/*.jsonl", gpu_dedup.RunConfig.preset("default"), output_dir="out")
    >>> result.decisions  # one row per input document: keep, reason, representative, jaccard, ...

Heavy modules (numba kernels, GPU libraries) load on first use, so importing the package is cheap.
"""
from ._version import __version__
from .config import (
    ClusterConfig,
    LSHConfig,
    MinHashConfig,
    NormalizeConfig,
    RunConfig,
    ShingleConfig,
)


def deduplicate(source, config=None, output_dir=None, **overrides):
    """See :func:`gpu_dedup.pipeline.deduplicate`."""
    from .pipeline import deduplicate as _run

    return _run(source, config, output_dir, **overrides)


__all__ = ["ClusterConfig", "LSHConfig", "MinHashConfig", "NormalizeConfig", "RunConfig", "ShingleConfig",
           "deduplicate", "__version__"]
