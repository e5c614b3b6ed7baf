"""The configuration of exact-substring dedup (one dataclass, validated on construction)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from .. import constants as C
from ..config import InputConfig, NormalizeConfig, is_int, keep_column
from ..errors import ConfigError


@dataclass(frozen=True)
class SubstringConfig(InputConfig):
    """min_tokens: the shortest repeated span cut (Lee et al.: 50); tokenizer: None (the word units of the
    normalized text, ids from a stable hash) or the path of a Hugging Face ``tokenizer.json``; normalize: the
    normalization that defines a word unit's identity; keep: which occurrence stays ("first", "longest",
    "min-id", "max:<column>", "min:<column>", as in dedup); chunk_tokens: None (one suffix array over the
    corpus) or the most positions (tokens + one per document) per chunk (suffix arrays over pairs of chunks;
    same result); memory_budget: None (tokens held in memory) or bytes (``--memory-budget``, at least 1 MiB):
    the tokens and earliest copies are spilled to files in ``work_dir`` (None: the system's temporary
    directory) and chunk_tokens is chosen so one suffix array fits the budget (spans.py); min_doc_bytes:
    changed documents left with fewer bytes are flagged "short"; seam_sample: cuts shown in the statistics
    with the text on both sides (0: none); id_field / text_field / batch_bytes / on_error: as in RunConfig."""

    min_tokens: int = C.SUBSTRING_MIN_TOKENS
    tokenizer: str | None = None
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    keep: str = "first"
    chunk_tokens: int | None = None
    memory_budget: int | None = None
    work_dir: str | None = None
    min_doc_bytes: int = 50
    seam_sample: int = 20
    progress: bool = False  # bars on stderr (documents/s, ETA): off in the API, the pipeline's setting in a step

    def __post_init__(self) -> None:
        super().__post_init__()
        if not is_int(self.min_tokens) or self.min_tokens < 1:
            raise ConfigError(f"SubstringConfig.min_tokens must be an int >= 1, got {self.min_tokens!r}")
        if self.tokenizer is not None:
            if not isinstance(self.tokenizer, (str, os.PathLike)) or not os.path.isfile(self.tokenizer):
                raise ConfigError(f"SubstringConfig.tokenizer must be the path of a tokenizer.json file, got "
                                  f"{self.tokenizer!r}: no such file")
        if not isinstance(self.normalize, NormalizeConfig):
            raise ConfigError(f"SubstringConfig.normalize must be a NormalizeConfig, got {self.normalize!r}")
        keep_column(self.keep)  # raises naming the value
        if self.chunk_tokens is not None and (not is_int(self.chunk_tokens) or self.chunk_tokens < 1):
            raise ConfigError(f"SubstringConfig.chunk_tokens must be an int >= 1 or None, got "
                              f"{self.chunk_tokens!r}")
        if self.memory_budget is not None:
            if not is_int(self.memory_budget) or self.memory_budget < 1 << 20:
                raise ConfigError(f"SubstringConfig.memory_budget must be None or an int of at least 1 MiB "
                                  f"(bytes), got {self.memory_budget!r}")
            if self.chunk_tokens is not None:
                raise ConfigError("give SubstringConfig.memory_budget or SubstringConfig.chunk_tokens, not "
                                  "both: the budget chooses the chunks")
        if self.work_dir is not None and not os.path.isdir(self.work_dir):
            raise ConfigError(f"SubstringConfig.work_dir must be an existing directory, got "
                              f"{self.work_dir!r}")
        for name in ("min_doc_bytes", "seam_sample"):
            v = getattr(self, name)
            if not is_int(v) or v < 0:
                raise ConfigError(f"SubstringConfig.{name} must be an int >= 0, got {v!r}")

    @property
    def keep_column(self) -> str | None:
        return keep_column(self.keep)
