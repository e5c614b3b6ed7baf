"""Configuration dataclasses and presets.

One frozen dataclass per algorithm, validated in ``__post_init__``. ``RunConfig`` bundles them with the
I/O and execution settings. What two runs must share to be comparable is ``gpu_dedup.contract``.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .constants import MAX_NGRAM, MAX_NUM_PERM
from .errors import ConfigError

logger = logging.getLogger(__name__)
_UNUSED_PERM_SAID: set[tuple[int, int, int]] = set()  # (num_perm, bands, rows) already warned about

Device = Literal["auto", "cpu", "cuda"]
ShingleKind = Literal["word", "char"]
Policy = Literal["representative", "components"]
MinHashFamily = Literal["fss", "exact"]
OnError = Literal["raise", "skip"]
Reader = Literal["auto", "pyarrow", "cudf"]
PRESETS = ("default", "fineweb", "nemo")


def is_int(value: Any) -> bool:
    """An int that is not a bool (``True`` is an int in Python; a config value ``n = true`` is a mistake)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A finite real number (Python or NumPy) that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def did_you_mean(name: str, choices: Any) -> str:
    """'; did you mean 'x'?' for the closest of ``choices``, or '' when none is close."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def flag(help: str | None, name: str | None = None, **how: Any) -> dict[str, Any]:
    """One command-line flag of a config field: ``gpu-dedup run`` and ``gpu-dedup filter`` make their flags from
    their configs' field metadata (``metadata=cli(flag(...))``; gpu_dedup/cli/fields.py), as dolma makes its CLI
    from ``field(help=...)``. See ``cli.fields.config_flags`` for the further keys (``nargs``, ``choices``,
    ``default``, ``floor``).
    ``help``: the flag's help text; ``name``: the flag, when it is not ``--`` + the field's name; ``how``:
    ``set=VALUE`` (a switch that sets the field to VALUE), ``type`` ("int" | "count": an int >= 1 | "finite" |
    "size": 2G, 500M | "mib": MiB as bytes, at least 1 KiB or raised to ``floor``), ``metavar``, ``append=True``
    (repeatable, a tuple). A Literal field's values are the flag's choices."""
    return {"help": help, "name": name, **how}


def cli(*flags: dict[str, Any]) -> dict[str, Any]:
    """Field metadata holding the field's command-line flags (``flag``)."""
    return {"cli": flags}


def check_literal(name: str, value: Any, lit: Any) -> None:
    allowed = get_args(lit)
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {allowed}, got {value!r}")


@dataclass(frozen=True)
class NormalizeConfig:
    """Text normalization applied before hashing (table-driven kernel, same on CPU and GPU).

    Always: per-codepoint NFKC mapping, whitespace/control characters -> one space, runs collapsed, ends
    trimmed, format characters (Cf: zero-width space, soft hyphen, BOM...) deleted. By default lowercase
    (full Unicode lowercase of the NFKC image); ``lowercase=False`` keeps case (lowercasing code can merge
    distinct identifiers; a contract of its own). Optional: punctuation (Unicode P*, S*) -> space,
    decimal digits (Nd) -> '0'. See ``gpu_dedup.text.unicode_tables`` for the exact policy.
    """

    remove_punctuation: bool = field(default=False, metadata=cli(flag(
        "normalize punctuation/symbols to spaces", set=True)))
    fold_digits: bool = field(default=False, metadata=cli(flag("normalize every decimal digit to 0", set=True)))
    lowercase: bool = field(default=True, metadata=cli(flag(
        "keep letter case (normalize.lowercase=false; e.g. for code, where lowercasing merges distinct identifiers)",
        "--case-sensitive", set=False)))

    def __post_init__(self) -> None:
        for name in ("remove_punctuation", "fold_digits", "lowercase"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"NormalizeConfig.{name} must be a bool, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class ShingleConfig:
    """Shingles: word n-grams (words = space-separated runs of the normalized text) or character
    n-grams (n codepoints of the normalized text). Each shingle is hashed with XXH64(seed) over its
    UTF-8 bytes. Set semantics: repeated shingles count once."""

    kind: ShingleKind = field(default="word", metadata=cli(flag("shingle unit", "--shingle")))
    n: int = field(default=5, metadata=cli(flag("shingle size n", "--ngram", type="int")))
    seed: int = 0

    def __post_init__(self) -> None:
        check_literal("ShingleConfig.kind", self.kind, ShingleKind)
        if not is_int(self.n) or not 1 <= self.n <= MAX_NGRAM:
            raise ConfigError(f"ShingleConfig.n must be an int in [1, {MAX_NGRAM}], got {self.n!r}")
        if not is_int(self.seed) or not 0 <= self.seed < 2**64:
            raise ConfigError(f"ShingleConfig.seed must be an int in [0, 2**64), got {self.seed!r}")


@dataclass(frozen=True)
class MinHashConfig:
    """K signature values per document from its shingle hashes h (64-bit XXH64), by one of two families.

    ``family="fss"`` (default): fast similarity sketching (Dahlgaard, Knudsen & Thorup 2017). Each shingle falls
    into one of K buckets, keeping the bucket's least value v = a*h + b mod 2^64, in FSS_ROUNDS random rounds (a
    round only fills buckets still empty); a bucket still empty after them takes its own MinHash, the least
    a_j*h + b_j over all shingles. Two documents agree in a bucket with probability exactly their Jaccard, as
    with K permutations, at the cost of about one hash per shingle instead of K (benchmarks/sketch_families.py).
    Stored as the high 32 bits of v (width=32) or all 64.
    ``family="exact"``: K permutations h -> (a_k * h + b_k) mod (2^61 - 1), computed exactly, the minimum over
    the shingles; stored as the low 32 bits (width=32) or all 61 bits (width=64).
    Parameters (a, b) come from SplitMix64(seed) (``lexical.minhash.permutation_params``); the family, and for
    fss the rounds, are part of the contract."""

    num_perm: int = field(default=100, metadata=cli(flag("MinHash permutations K", type="int")))
    seed: int = field(default=42, metadata=cli(flag("MinHash seed", type="int")))
    width: Literal[32, 64] = field(default=32, metadata=cli(flag("stored signature width in bits", type="int")))
    family: MinHashFamily = field(default="fss", metadata=cli(flag(
        "signature family: fss (default: fast similarity sketching, about one hash per shingle) or exact (K "
        "permutations mod 2^61-1, the fineweb/nemo presets')")))

    def __post_init__(self) -> None:
        if not is_int(self.num_perm) or not 1 <= self.num_perm <= MAX_NUM_PERM:
            raise ConfigError(f"MinHashConfig.num_perm must be an int in [1, {MAX_NUM_PERM}], got {self.num_perm!r}")
        if not is_int(self.seed) or not 0 <= self.seed < 2**64:
            raise ConfigError(f"MinHashConfig.seed must be an int in [0, 2**64), got {self.seed!r}")
        if not is_int(self.width) or self.width not in (32, 64):
            raise ConfigError(f"MinHashConfig.width must be 32 or 64, got {self.width!r}")
        check_literal("MinHashConfig.family", self.family, MinHashFamily)


@dataclass(frozen=True)
class LSHConfig:
    """b bands x r rows; a band key is XXH64(seed=band index) of the band's r signature values
    (little-endian bytes). Two documents are candidates when any band key is equal."""

    bands: int = field(default=20, metadata=cli(flag("LSH bands b", type="int")))
    rows: int = field(default=5, metadata=cli(flag("LSH rows per band r", type="int")))

    def __post_init__(self) -> None:
        for name in ("bands", "rows"):
            v = getattr(self, name)
            if not is_int(v) or v < 1:
                raise ConfigError(f"LSHConfig.{name} must be a positive int, got {v!r}")


@dataclass(frozen=True)
class ClusterConfig:
    """How candidates become removals.

    policy="representative" (default): visit documents in keep order; remove a document only if it
    has verified Jaccard >= threshold with an already KEPT document sharing an LSH bucket.
    policy="components": connected components over LSH chain edges (verified edges when verify=True),
    one survivor per component (FineWeb / NeMo semantics).
    keep: "first" (input order) | "longest" (most UTF-8 bytes of raw text) | "min-id" (smallest id,
    string order) | "max:<column>" / "min:<column>" (largest / smallest value of a numeric input column,
    or of a score computed in pass 1: ``RunConfig.scores``); ties by input order, missing values last.
    exact: run the exact-duplicate stage before LSH (short documents always use it).
    exact_verify: byte-compare each exact group's normalized texts (a second read; guards against the
    2^-128 hash collision). near=False: exact dedup only (no MinHash/LSH).
    remove_clusters_larger_than: None (default: every cluster's duplicates are removed) or N >= 1: only
    clusters of more than N documents lose their duplicates; the members of smaller ones all stay (reason
    ``kept_small_cluster``). FineWeb (seed 001) found the gain of dedup in removing large clusters, and
    deduplicating clusters of fewer than ~100 copies could harm performance.
    keep_copies: K >= 1 (default 1): up to K members of each cluster stay, the first K in keep order (reason
    ``kept_copy`` for all but the representative); FineWeb-2's "rehydration" direction.
    scope_field: None (default: one global scope) or a column (string or integer values): documents are
    deduplicated only within each value of it (per crawl, per source; FineWeb's per-snapshot dedup, seed
    001), in one read: every decision equals the one a run over that scope's documents alone gives.
    """

    policy: Policy = field(default="representative", metadata=cli(flag(
        "removal policy (default representative: remove only for a verified kept document)")))
    threshold: float = field(default=0.8, metadata=cli(flag("Jaccard threshold theta (default 0.8)", type="finite")))
    verify: bool = field(default=True, metadata=cli(flag("components policy without exact-Jaccard checks",
                                                         "--no-verify", set=False)))
    keep: str = field(default="first", metadata=cli(flag(
        "keep order: first | longest | min-id | max:<column> | min:<column>")))
    exact: bool = field(default=True, metadata=cli(flag("skip the separate exact-duplicate stage", "--no-exact",
                                                        set=False)))
    exact_verify: bool = field(default=False, metadata=cli(flag(
        "byte-compare exact groups (guards against 128-bit hash collisions; one more read)", set=True)))
    near: bool = field(default=True, metadata=cli(flag("exact dedup only (no MinHash/LSH)", "--exact-only",
                                                       set=False)))
    max_representatives_per_bucket: int = 1000
    remove_clusters_larger_than: int | None = field(default=None, metadata=cli(flag(
        "remove duplicates only from clusters of more than N documents; smaller clusters keep every member (reason "
        "kept_small_cluster)", type="int", metavar="N")))
    keep_copies: int = field(default=1, metadata=cli(flag(
        "keep up to K members of each cluster, the first K in keep order (reason kept_copy; default 1)", type="int",
        metavar="K")))
    scope_field: str | None = field(default=None, metadata=cli(flag(
        "deduplicate within each value of COLUMN (per snapshot, source, language: strings or integers), in one "
        "read; run.json has the per-scope counts", metavar="COLUMN")))

    def __post_init__(self) -> None:
        check_literal("ClusterConfig.policy", self.policy, Policy)
        if self.scope_field is not None and (not isinstance(self.scope_field, str) or not self.scope_field):
            raise ConfigError(f"ClusterConfig.scope_field must be None (global) or a column name, got "
                              f"{self.scope_field!r}")
        if self.remove_clusters_larger_than is not None and (not is_int(self.remove_clusters_larger_than)
                                                             or self.remove_clusters_larger_than < 1):
            raise ConfigError("ClusterConfig.remove_clusters_larger_than must be None or an int >= 1 (clusters "
                              f"of at most that many documents keep every member), got "
                              f"{self.remove_clusters_larger_than!r}")
        if not is_int(self.keep_copies) or self.keep_copies < 1:
            raise ConfigError(f"ClusterConfig.keep_copies must be an int >= 1 (members kept per cluster), got "
                              f"{self.keep_copies!r}")
        if not is_real(self.threshold) or not 0.0 < float(self.threshold) <= 1.0:
            raise ConfigError(f"ClusterConfig.threshold must be in (0, 1], got {self.threshold!r}")
        for name in ("verify", "exact", "exact_verify", "near"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"ClusterConfig.{name} must be a bool, got {getattr(self, name)!r}")
        if self.exact_verify and not self.exact:
            raise ConfigError("exact_verify=True needs exact=True")
        if self.policy == "representative" and not self.verify:
            raise ConfigError("policy='representative' needs verify=True (it removes a document only for a "
                              "verified kept representative); use policy='components' to skip verification")
        keep_column(self.keep)  # validates
        if not is_int(self.max_representatives_per_bucket) or self.max_representatives_per_bucket < 1:
            raise ConfigError("ClusterConfig.max_representatives_per_bucket must be a positive int, got "
                              f"{self.max_representatives_per_bucket!r}")


def keep_column(keep: str) -> str | None:
    """Validate a keep policy string; return the column name for ``max:<column>`` / ``min:<column>``, else
    None."""
    if keep in ("first", "longest", "min-id"):
        return None
    if isinstance(keep, str) and keep.startswith(("max:", "min:")) and len(keep) > 4:
        return keep[4:]
    raise ConfigError(f"keep must be 'first', 'longest', 'min-id', 'max:<column>' or 'min:<column>', got {keep!r}")


SCORE_RE = re.compile(r"^([a-z][a-z0-9_]{0,39})=(.+)$")


def score_columns(scores: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """``RunConfig.scores`` entries ``NAME=MODEL`` -> {"NAME_score": (NAME, MODEL)}, validated."""
    if isinstance(scores, str) or not isinstance(scores, (tuple, list)):
        raise ConfigError(f"scores must be a tuple of 'NAME=MODEL' strings, got {scores!r}")
    out: dict[str, tuple[str, str]] = {}
    for item in scores:
        m = SCORE_RE.match(item) if isinstance(item, str) else None
        if m is None:
            raise ConfigError(f"score {item!r} must be NAME=MODEL (NAME: lowercase letters, digits, '_'), e.g. "
                              f"quality=quality.bin")
        if f"{m.group(1)}_score" in out:
            raise ConfigError(f"score name {m.group(1)!r} is given twice")
        out[f"{m.group(1)}_score"] = (m.group(1), m.group(2))
    return out


@dataclass(frozen=True, kw_only=True)
class InputConfig:
    """How a corpus is read, shared by every stage that reads one (RunConfig, ParagraphConfig, ScreenConfig):
    the id and text fields (id_field=None: ids are generated from file and row), what a bad record does
    (on_error="raise" stops naming the file and line; "skip" drops it and counts it), and the batch size.
    Keyword-only, so a subclass's positional fields keep their order."""

    id_field: str | None = field(default="id", metadata=cli(
        flag("id column (default 'id'; missing -> '<file>:<row>')"),
        flag("ignore ids in the data; use '<file>:<row>'", "--no-id-field", set=None)))
    text_field: str = field(default="text", metadata=cli(flag("text column (default 'text')")))
    # None: 64 MiB on the CPU, sized from free device memory on a GPU
    batch_bytes: int | None = field(default=None, metadata=cli(flag("text per batch in MB (default 64)", "--batch-mb",
                                                                    type="mib")))
    on_error: OnError = field(default="raise", metadata=cli(flag("bad records: stop (default) or skip and record")))

    def __post_init__(self) -> None:
        owner = type(self).__name__
        check_literal(f"{owner}.on_error", self.on_error, OnError)
        if not isinstance(self.text_field, str) or not self.text_field:
            raise ConfigError(f"{owner}.text_field must be a non-empty string, got {self.text_field!r}")
        if self.id_field is not None and (not isinstance(self.id_field, str) or not self.id_field):
            raise ConfigError(f"{owner}.id_field must be a non-empty string or None, got {self.id_field!r}")
        if self.batch_bytes is not None and (not is_int(self.batch_bytes) or self.batch_bytes < 1024):
            raise ConfigError(f"{owner}.batch_bytes must be an int >= 1024 or None (automatic), got "
                              f"{self.batch_bytes!r}")

    def reader_options(self) -> dict[str, Any]:
        """The keyword arguments of ``io.iter_batches`` / ``io.iter_rows``: every pass over one input must
        read it exactly the same way so that row numbers agree."""
        return {"id_field": self.id_field, "text_field": self.text_field, "batch_bytes": self.batch_bytes,
                "on_error": self.on_error, "keep_column": None}


@dataclass(frozen=True)
class RunConfig(InputConfig):
    """Everything one run needs. Build with ``RunConfig.preset(name, **overrides)`` or directly."""

    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    shingle: ShingleConfig = field(default_factory=ShingleConfig)
    minhash: MinHashConfig = field(default_factory=MinHashConfig)
    lsh: LSHConfig = field(default_factory=LSHConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    device: Device = field(default="auto", metadata=cli(flag("auto picks the GPU when usable")))
    # Parquet text on a GPU run: "cudf" decodes on the device, "pyarrow" on the host
    reader: Reader = field(default="auto", metadata=cli(flag(
        "Parquet text on a GPU run: cudf decodes it on the device (auto: when cudf is installed)")))
    threads: int | None = field(default=None, metadata=cli(flag("CPU threads (default: all cores)", type="count")))
    # bytes for bucket grouping (device memory on a GPU); None: unbounded
    memory_budget: int | None = field(default=None, metadata=cli(flag(
        "bound the bucket grouping's memory (device memory on a GPU), e.g. 2G or 500M: key-range partitions per "
        "band; with --work-dir the band keys stay on disk", type="size", metavar="SIZE")))
    # normalized text kept from pass 1 for verification instead of re-reading the input (device memory on a
    # GPU); None: automatic (device.cache_bytes), 0: always re-read
    cache_bytes: int | None = field(default=None, metadata=cli(flag(
        "keep pass 1's normalized text, up to SIZE, for the verification pass instead of reading the input again "
        "(default 1G on the CPU, a quarter of the free device memory on a GPU; 0: always re-read)", "--text-cache",
        type="size", metavar="SIZE")))
    write_deduplicated: bool = field(default=True, metadata=cli(flag("write decisions only, not deduplicated/",
                                                                     "--no-deduplicated", set=False)))
    # the kept records in deduplicated/ carry their cluster's size and id (dup_cluster_size, dup_cluster_id;
    # FineWeb-2: a later sampler can upweight by cluster size)
    annotate: bool = field(default=False, metadata=cli(flag(
        "kept records in deduplicated/ get dup_cluster_size and dup_cluster_id (columns; JSON Lines: members "
        "appended, the rest of the line unchanged)", set=True)))
    progress: bool = False  # tqdm bars on stderr: off in the API unless asked for; the CLI turns them on
    preset_name: str = "default"
    # fastText classifiers scored in pass 1 ("NAME=MODEL": column NAME_score, the probability of the model's
    # positive label), for keep="max:NAME_score": the best document of each duplicate group survives
    scores: tuple[str, ...] = field(default=(), metadata=cli(flag(
        "fastText classifier scored in pass 1 as column NAME_score, for --keep max:NAME_score", "--score",
        metavar="NAME=MODEL", append=True)))

    def __post_init__(self) -> None:
        super().__post_init__()
        check_literal("device", self.device, Device)
        check_literal("reader", self.reader, Reader)
        if self.lsh.bands * self.lsh.rows > self.minhash.num_perm:
            raise ConfigError(f"bands x rows = {self.lsh.bands}x{self.lsh.rows} = {self.lsh.bands * self.lsh.rows} "
                              f"exceeds num_perm = {self.minhash.num_perm}; raise num_perm or lower bands/rows")
        used = self.lsh.bands * self.lsh.rows
        key = (self.minhash.num_perm, self.lsh.bands, self.lsh.rows)
        if used < self.minhash.num_perm and key not in _UNUSED_PERM_SAID:
            _UNUSED_PERM_SAID.add(key)  # once per combination: RunConfig is rebuilt by replace() and presets
            logger.warning("num_perm = %d but bands x rows = %dx%d = %d: %d permutations are computed that no LSH "
                           "band uses; set num_perm=%d to save their time, "
                           "or raise bands/rows", self.minhash.num_perm, self.lsh.bands, self.lsh.rows, used,
                           self.minhash.num_perm - used, used)
        if self.memory_budget is not None and (not is_int(self.memory_budget) or self.memory_budget < 1 << 20):
            raise ConfigError(f"memory_budget must be None or an int of at least 1 MiB (bytes), got "
                              f"{self.memory_budget!r}")
        if self.cache_bytes is not None and (not is_int(self.cache_bytes) or self.cache_bytes < 0):
            raise ConfigError(f"cache_bytes must be None (automatic) or an int >= 0 (bytes; 0 = always re-read), "
                              f"got {self.cache_bytes!r}")
        if not isinstance(self.annotate, bool):
            raise ConfigError(f"annotate must be a bool, got {self.annotate!r}")
        if self.annotate and not self.write_deduplicated:
            raise ConfigError("annotate=True annotates the records of deduplicated/, which write_deduplicated=False "
                              "turns off: drop one of them")
        if self.threads is not None and (not is_int(self.threads) or self.threads < 1):
            raise ConfigError(f"threads must be a positive int or None, got {self.threads!r}")
        check_literal("preset_name", self.preset_name, Literal["default", "fineweb", "nemo", "custom"])
        object.__setattr__(self, "scores", tuple(self.scores) if isinstance(self.scores, list) else self.scores)
        scored = score_columns(self.scores)
        kc = keep_column(self.cluster.keep)
        if scored and kc not in scored:
            unknown = (f"keep={self.cluster.keep!r} names {kc!r}, which is none of the scores {list(scored)}; "
                       if kc is not None else "")
            raise ConfigError(f"{unknown}scores {list(scored)} are computed only to choose which duplicate survives: "
                              f"add keep='max:{next(iter(scored))}'")

    @staticmethod
    def preset(name: str = "default", **overrides: Any) -> "RunConfig":
        """Presets: ``default`` (word 5-grams, K=100=20x5 of the fss family, verified, representative, theta 0.8),
        ``fineweb`` (word 5-grams, 112=14x8 exact permutations, 64-bit, components, no verification),
        ``nemo`` (char 24-grams, 260=20x13 exact permutations, components, no verification). The two peer presets
        pin the exact family: they decide without verification, so the family is part of their semantics."""
        if name == "default":
            base = RunConfig()
        elif name == "fineweb":
            base = RunConfig(shingle=ShingleConfig("word", 5), minhash=MinHashConfig(112, 42, 64, "exact"),
                             lsh=LSHConfig(14, 8), cluster=ClusterConfig("components", 0.8, verify=False),
                             preset_name="fineweb")
        elif name == "nemo":
            base = RunConfig(shingle=ShingleConfig("char", 24), minhash=MinHashConfig(260, 42, 32, "exact"),
                             lsh=LSHConfig(20, 13), cluster=ClusterConfig("components", 0.8, verify=False),
                             preset_name="nemo")
        else:
            raise ConfigError(f"unknown preset {name!r}{did_you_mean(name, PRESETS)} (presets: {', '.join(PRESETS)})")
        return base.replace(**overrides) if overrides else base

    def replace(self, **overrides: Any) -> "RunConfig":
        """Return a copy with fields replaced. Nested fields use ``section__field`` keys, e.g.
        ``replace(cluster__threshold=0.9, lsh__bands=10)``."""
        nested: dict[str, dict[str, Any]] = {}
        top: dict[str, Any] = {}
        for key, value in overrides.items():
            if "__" in key:
                section, name = key.split("__", 1)
                if section not in _SECTIONS:
                    raise ConfigError(f"unknown config section {section!r} in {key!r}{did_you_mean(section, _SECTIONS)}"
                                      f" (sections: {', '.join(sorted(_SECTIONS))})")
                valid = {f.name for f in dataclasses.fields(_SECTIONS[section])}
                if name not in valid:
                    raise ConfigError(f"unknown setting {key!r}{did_you_mean(name, valid)} ({section} has "
                                      f"{', '.join(sorted(valid))})")
                nested.setdefault(section, {})[name] = value
            else:
                names = {f.name for f in dataclasses.fields(RunConfig)}
                if key not in names:
                    raise ConfigError(f"unknown setting {key!r}{did_you_mean(key, names)}")
                top[key] = value
        for section, values in nested.items():
            top[section] = dataclasses.replace(getattr(self, section), **values)
        return dataclasses.replace(self, **top)

    def reader_options(self) -> dict[str, Any]:
        """As InputConfig's, with the keep policy's column (``max:<column>``) read as well, unless pass 1
        computes it (``scores``)."""
        kc = keep_column(self.cluster.keep)
        return {**super().reader_options(), "keep_column": None if kc in score_columns(self.scores) else kc,
                "scope_field": self.cluster.scope_field}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "RunConfig":
        """Inverse of ``to_dict``; also accepts a config file's mapping (unknown keys are errors)."""
        d = dict(d)
        preset = d.pop("preset", d.pop("preset_name", "default"))
        overrides: dict[str, Any] = {}
        for key, value in d.items():
            if key in _SECTIONS:
                if not isinstance(value, dict):
                    raise ConfigError(f"config section {key!r} must be a table/mapping, got {value!r}")
                for name, v in value.items():
                    overrides[f"{key}__{name}"] = v
            else:
                overrides[key] = value
        return RunConfig.preset(preset if preset != "custom" else "default", **overrides)


_SECTIONS = {"normalize": NormalizeConfig, "shingle": ShingleConfig, "minhash": MinHashConfig,
             "lsh": LSHConfig, "cluster": ClusterConfig}
