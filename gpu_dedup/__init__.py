"""gpu_dedup: deduplicate text corpora for LLM pre-training, on a GPU or on CPUs, with decisions you can audit.

    >>> import gpu_dedup
    >>> result = gpu_dedup.deduplicate("data/*.jsonl", gpu_dedup.RunConfig.preset("default"), output_dir="out")
    >>> result.decisions  # one row per input document: keep, reason, representative, jaccard, ...

    >>> from gpu_dedup import Pipeline, Filter, Dedup, Substring, FilterConfig
    >>> Pipeline([Filter(FilterConfig(rules="gopher")), Dedup(), Substring()]).run("data/", "out")
    >>> gpu_dedup.load_recipe("recipes/sample.yaml").run("data/", "out")  # the same, written down once

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
    """Deduplicate a corpus: one decisions row per input document.

        >>> result = gpu_dedup.deduplicate(df, cluster__threshold=0.9)
        >>> deduplicated_df = result.filter(df)

    Args:
        source: path(s), glob(s) or directories of .jsonl / .jsonl.gz / .jsonl.zst / .parquet files, a pyarrow
            Table or a pandas DataFrame. Columns ``id`` and ``text`` by default (``id_field=``, ``text_field=``).
        config: a ``RunConfig``. Default: ``RunConfig()``, the default preset. ``RunConfig.preset(name)`` gives
            "default", "fineweb" or "nemo".
        output_dir: where decisions.parquet, run.json, deduplicated/ (the kept records, verbatim) and
            report.html go. None keeps everything in memory.
        **overrides: settings applied to ``config``, e.g. ``cluster__threshold=0.9``, ``cluster__keep="longest"``,
            ``device="cpu"``, ``progress=True`` (progress bars are off in the API unless asked for). Also the run
            options ``against=``, ``save_index=``, ``semantic=``, ``work_dir=``, ``resume=``, ``engine=``,
            ``workers=``, ``address=``, ``partitions=`` (see :func:`gpu_dedup.pipeline.deduplicate`).

    Returns:
        A ``DedupResult``: ``.decisions`` (pyarrow Table: id, keep, reason, cluster_id, representative_id,
        matched_id, jaccard, cluster_size, source), ``.stats`` (run.json), ``.summary()``, ``.keep_mask``,
        ``.kept_ids()``, ``.filter(table_or_dataframe)`` (the kept rows of an in-memory source), ``.to_pandas()``.

    Raises:
        GpuDedupError: a bad setting or input (``ConfigError``, ``io.InputError``, ...), a device that is not
            there, or an output directory that cannot be used. The message names the value and the fix.
    """
    from .lexical.dedup import deduplicate as _run

    return _run(source, config, output_dir, **overrides)


def substring_dedup(source, config=None, output_dir=None, device="cpu"):
    """Exact-substring dedup (Lee et al. 2022): cut every later copy, in keep order, of a long repeated span.

    Spans of at least ``config.min_tokens`` tokens (default 50) are found with suffix arrays over the corpus'
    tokens (CPU: pydivsufsort; GPU: prefix doubling). Every cut is logged and reversible.

        >>> from gpu_dedup.substring import SubstringConfig
        >>> res = gpu_dedup.substring_dedup("data/", SubstringConfig(min_tokens=50), "sub-out")

    Args:
        source: path(s), glob(s) or directories of input files, a pyarrow Table or a pandas DataFrame.
        config: a ``gpu_dedup.substring.SubstringConfig`` (default: its defaults).
        output_dir: where substring_spans.parquet, substring_docs.parquet, substring_deduplicated/ and
            substring_dedup.json go. None keeps ``.spans`` and ``.documents`` in memory.
        device: "cpu", "cuda" or "auto".

    Returns:
        A ``SubstringResult`` with the statistics, and the spans and cut documents when in memory.

    Raises:
        GpuDedupError: a bad setting, an input that cannot be read, or a document too long for one suffix array.
    """
    from .substring.dedup import substring_dedup as _run

    return _run(source, config, output_dir, device)


def run_dedup(source, config=None, output_dir=None, **kwargs):
    """``deduplicate`` with paragraph dedup and/or exact-substring dedup after, before or beside it, all into one
    owned ``output_dir`` (what ``gpu-dedup run --paragraph-dedup --paragraph-order after`` does).

        >>> from gpu_dedup.paragraph.dedup import ParagraphConfig
        >>> res = gpu_dedup.run_dedup("data/", output_dir="out", paragraph=ParagraphConfig(), paragraph_order="after")

    Args:
        source, config, output_dir, kwargs: as :func:`gpu_dedup.pipeline.compose.run_dedup` (``paragraph``,
            ``paragraph_order``, ``substring``, ``substring_order``, ``lexical`` and ``deduplicate``'s keywords).

    Returns:
        A ``RunStages`` (``.dedup``, ``.paragraph``, ``.substring``, ``.order``).

    Raises:
        ConfigError: stages that cannot run in the order asked for, or what ``deduplicate`` raises.
    """
    from .pipeline.compose import run_dedup as _run

    return _run(source, config, output_dir, **kwargs)


# The one pipeline and its steps, and every program's config: imported on first use (``__getattr__``), so that
# importing the package stays cheap. name -> (module, attribute)
_LAZY = {
    "Pipeline": ("pipeline", "Pipeline"), "Reading": ("runtime.program", "Reading"),
    "load_recipe": ("cli.recipe", "load_recipe"),
    "Filter": ("filters.program", "Filter"), "Dedup": ("lexical.program", "Dedup"),
    "Paragraph": ("paragraph.program", "Paragraph"), "Substring": ("substring.program", "Substring"),
    "Semantic": ("semantic.program", "Semantic"), "Screen": ("screen.program", "Screen"),
    "FilterConfig": ("filters.config", "FilterConfig"), "ParagraphConfig": ("paragraph.dedup", "ParagraphConfig"),
    "SubstringConfig": ("substring.config", "SubstringConfig"), "SemanticConfig": ("semantic.config", "SemanticConfig"),
    "ScreenConfig": ("screen.screening", "ScreenConfig"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ClusterConfig", "Dedup", "Filter", "FilterConfig", "GpuDedupError", "LSHConfig", "MinHashConfig",
           "NormalizeConfig", "Paragraph", "ParagraphConfig", "Pipeline", "Reading", "RunConfig", "Screen",
           "ScreenConfig", "Semantic", "SemanticConfig", "ShingleConfig", "Substring", "SubstringConfig",
           "deduplicate", "load_recipe", "run_dedup", "substring_dedup", "__version__"]
