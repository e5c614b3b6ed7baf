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
from .errors import GpuDedupError


def deduplicate(source, config=None, output_dir=None, **overrides):
    """Deduplicate a corpus; returns a ``DedupResult`` with one decisions row per input document.

    source: path(s), glob(s) or directories of .jsonl / .jsonl.gz / .jsonl.zst / .parquet files, a pyarrow
        Table or a pandas DataFrame (columns ``id`` and ``text`` by default: ``id_field=``, ``text_field=``).
    config: a ``RunConfig`` (default: ``RunConfig()``, the default preset); ``RunConfig.preset(name)`` for
        "default", "fineweb" or "nemo".
    output_dir: where decisions.parquet, run.json, deduplicated/ (the kept records, verbatim) and
        report.html are written; None keeps everything in memory.
    overrides: settings applied to ``config``, e.g. ``cluster__threshold=0.9``, ``cluster__keep="longest"``,
        ``device="cpu"``, ``progress=True`` (progress bars are off in the API unless asked for); and the run
        options ``against=``, ``save_index=``, ``semantic=``, ``work_dir=``, ``resume=``, ``engine=``,
        ``workers=``, ``address=``, ``partitions=`` (see :func:`gpu_dedup.pipeline.deduplicate`).

    The result: ``.decisions`` (pyarrow Table: id, keep, reason, cluster_id, representative_id, matched_id,
    jaccard, cluster_size, source), ``.stats`` (run.json), ``.summary()``, ``.keep_mask``, ``.kept_ids()``,
    ``.filter(table_or_dataframe)`` (the kept rows of an in-memory source), ``.to_pandas()``.

        >>> result = gpu_dedup.deduplicate(df, cluster__threshold=0.9)
        >>> deduplicated_df = result.filter(df)
    """
    from .pipeline import deduplicate as _run

    return _run(source, config, output_dir, **overrides)


def substring_dedup(source, config=None, output_dir=None, device="cpu"):
    """Exact-substring dedup (Lee et al. 2022): cut every later copy (in keep order) of a span of at least
    ``config.min_tokens`` tokens (default 50), found with suffix arrays over the corpus' tokens (CPU:
    pydivsufsort; GPU: prefix doubling). config: a ``gpu_dedup.substring.SubstringConfig``; output_dir:
    where substring_spans.parquet, substring_docs.parquet, substring_deduplicated/ and substring_dedup.json
    are written (None: ``.spans`` and ``.documents`` in memory). Every cut is logged and reversible.

        >>> from gpu_dedup.substring import SubstringConfig
        >>> res = gpu_dedup.substring_dedup("data/", SubstringConfig(min_tokens=50), "sub-out")
    """
    from .substring.dedup import substring_dedup as _run

    return _run(source, config, output_dir, device)


__all__ = ["ClusterConfig", "GpuDedupError", "LSHConfig", "MinHashConfig", "NormalizeConfig", "RunConfig",
           "ShingleConfig", "deduplicate", "substring_dedup", "__version__"]
