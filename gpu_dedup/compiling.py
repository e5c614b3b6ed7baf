"""Which CPU kernels each stage compiles and which of them have no cached machine code yet: what a first run
says before its progress bar (``device.note_compiling``) and what ``gpu-dedup warmup`` compiles ahead
(``warmup``). Imports only the kernel modules, so that device.py can use it."""
from __future__ import annotations

import gzip
import importlib
import os
from importlib import resources

# What each stage compiles on the CPU: (family, kernel names) with family the module kernels/<family>_cpu.py;
# read from the cache index files an empty NUMBA_CACHE_DIR holds after each warm-up step.
_NORMALIZE = ("core", ("normalize_sizes", "normalize_write"))
KERNELS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "dedup": (("core", ("normalize_sizes", "normalize_write", "exact_hashes", "shingle_sets", "minhash_signatures",
                    "band_keys", "union_find", "_find", "representative_components")),),
    "paragraph": (("bloom", ("span_norm_sizes", "span_norm_hash", "split_count", "split_write", "cut_copy",
                             "bloom_insert", "bloom_query")),),
    "screen": (("bloom", ("word_spans", "ngram_hashes", "member_sorted")), _NORMALIZE),
    "lm-train": (("lm", ("lm_count_words", "lm_word_hashes")), _NORMALIZE),
    "lm-score": (("lm", ("lm_span_hashes", "lm_ngram_keys", "lm_score_docs", "lm_build_table", "lm_build_vocab")),
                 _NORMALIZE),
    "domain": (("domain", ("domain_stats",)),),
    "rules": (("features", ("rule_stats", "_ngram_stats", "_sorted_groups_dup", "char_counts")),),
    "dsir": (("features", ("feature_ids", "feature_log_weights")),),
    "fasttext": (("fasttext", ("ft_hidden", "ft_label_prob", "ft_predict", "ft_build_vocab_table", "ft_hash_spans",
                               "ft_vocab_subwords")),),
    # the CPU's LCP array is pydivsufsort's Kasai: substring_cpu.lcp_kasai (the GPU kernel's twin, for tests) is not
    # compiled by a CPU run, and listing it made every warm substring run announce "compiling 1 kernel"
    "substring": (("bloom", ("span_norm_sizes", "span_norm_hash", "cut_copy")),),
}
# command -> the stages (KERNELS) its warm-up compiles
COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("dedup",),
    "paragraph": ("paragraph",),
    "screen": ("screen",),
    "train-lm": ("lm-train",),
    "filter": ("domain", "rules", "dsir", "lm-score", "fasttext"),
    "substring": ("substring",),
}
def cpu_kernels(family: str) -> list:
    """The cached CPU kernels (numba dispatchers with ``cache=True``) of ``kernels/<family>_cpu.py``."""
    mod = importlib.import_module(f"{__package__}.kernels.{family}_cpu")
    return [v for v in vars(mod).values() if getattr(v, "_cache", None) is not None and hasattr(v, "py_func")
            and getattr(v, "__module__", None) == mod.__name__]


def _index_path(k) -> str | None:
    return getattr(getattr(getattr(k, "_cache", None), "_cache_file", None), "_index_path", None)


def uncached(stages: tuple[str, ...]) -> int:
    """How many CPU kernels of ``stages`` (``KERNELS``' names) have no cached machine code yet."""
    seen, n = set(), 0
    for stage in stages:
        for fam, names in KERNELS[stage]:
            by_name = {k.__name__: k for k in cpu_kernels(fam)}
            for name in names:
                p = _index_path(by_name[name])
                if p and p not in seen and not os.path.exists(p):
                    seen.add(p)
                    n += 1
    return n


SAMPLE_DOCS = 60  # documents of the bundled sample a warm-up (or precompile) run reads


def write_sample(path: str, n: int = SAMPLE_DOCS) -> str:
    """The first ``n`` documents of the bundled sample as a JSON Lines file at ``path``: what a warm-up or
    precompile run reads."""
    data = (resources.files(__package__) / "data" / "sample.jsonl.gz").read_bytes()
    with open(path, "wb") as fh:
        fh.write(b"\n".join(gzip.decompress(data).splitlines()[:n]) + b"\n")
    return path
