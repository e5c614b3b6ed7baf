"""Per-codepoint normalization tables (policy ``nfkc-cp-lower-v1``) built from pinned Unicode data.

The normalization kernel (CPU and GPU, over UTF-8 bytes) replaces every codepoint c by a fixed string,
its *image*, looked up in a CSR table: ``map_cp[map_off[c]:map_off[c + 1]]``. The image is:

1. surrogates U+D800..U+DFFF are treated as U+FFFD (steps 2-3 then apply to U+FFFD);
2. ``s = unicodedata.normalize("NFKC", chr(c)).lower()`` (full lowercase of the NFKC image, of this one
   character: no canonical composition with neighbours, never a final sigma), re-applied per character
   until it no longer changes (with Unicode 14.0.0 no codepoint needs this); with
   ``NormalizeConfig.lowercase=False`` (policy ``nfkc-cp-v1``, case-preserving: lowercasing code can
   merge distinct identifiers) the NFKC image without ``.lower()``;
3. each character ch of s by general category: Cc, Zs, Zl, Zp or ``ch.isspace()`` -> U+0020;
   Cf -> deleted; if ``remove_punctuation``: P*, S* -> U+0020; if ``fold_digits``: Nd -> "0"; else ch.
   Unassigned (Cn) and private-use (Co) codepoints map to themselves.

After the mapping the kernel collapses runs of U+0020 to one and trims both ends (not part of the tables).

Tables come ONLY from the shipped ``data/unicode_<version>.npz`` (made by ``tools/make_unicode_tables.py``),
never from the running interpreter's ``unicodedata``, so that every machine hashes the same text.
The independent pure-Python oracle the tests compare against is ``gpu_dedup.testing.unicode_reference``.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import NormalizeConfig
from ..constants import N_CODEPOINTS, REPLACEMENT, SPACE
from ..constants import TABLES_FORMAT_VERSION as _FORMAT_VERSION
from ..constants import TABLES_SPACE_FLAG as _SPACE_FLAG
from ..errors import DataError, MissingFileError, UsageError

logger = logging.getLogger(__name__)

POLICY_NAME = "nfkc-cp-lower-v1"
CASED_POLICY_NAME = "nfkc-cp-v1"  # NormalizeConfig.lowercase=False
SURROGATE_LO, SURROGATE_HI = 0xD800, 0xE000  # half-open
# Pinned by file name on purpose: changing the Unicode version changes every signature (contract).
DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "unicode_14.0.0.npz"
_ARRAYS = ("format_version", "unicode_version", "python_version", "gc_names", "gc", "src", "img_off", "img_cp",
           "fixpoint_src", "src_cased", "img_off_cased", "img_cp_cased", "fixpoint_src_cased")


def policy_name(cfg: NormalizeConfig) -> str:
    """The contract's name for the image rule of ``cfg`` (lowercasing or case-preserving)."""
    return POLICY_NAME if cfg.lowercase else CASED_POLICY_NAME


def _read_version(path: Path) -> str:
    if not path.is_file():
        raise MissingFileError(f"normalization data {path} is missing; reinstall gpu_dedup or regenerate it "
                               f"with `python tools/make_unicode_tables.py` under Python 3.11 (Unicode 14.0.0)")
    with np.load(path, allow_pickle=False) as z:
        return str(z["unicode_version"])


UNICODE_VERSION: str = _read_version(DATA_FILE)


@dataclass(frozen=True)
class NormTables:
    """CSR codepoint -> image table for one NormalizeConfig (arrays are read-only and shared by the cache).

    map_off: int32, shape (0x110001,), non-decreasing, map_off[0] == 0, map_off[-1] == len(map_cp).
    map_cp:  int32, shape (M,), codepoints in 0..0x10FFFF (never a surrogate); U+0020 for whitespace-like
             results. ``map_cp[map_off[c]:map_off[c + 1]]`` is the image of codepoint c (empty = deleted).
    """

    map_off: np.ndarray
    map_cp: np.ndarray


@functools.lru_cache(maxsize=1)
def shipped_arrays() -> dict[str, np.ndarray]:
    """The shipped arrays, validated (see tools/make_unicode_tables.py for the layout)."""
    with np.load(DATA_FILE, allow_pickle=False) as z:
        missing = [k for k in _ARRAYS if k not in z.files]
        if missing:
            raise DataError(f"{DATA_FILE} lacks arrays {missing}; regenerate it with tools/make_unicode_tables.py")
        data = {k: z[k] for k in _ARRAYS}
    if int(data["format_version"]) != _FORMAT_VERSION:
        raise DataError(f"{DATA_FILE} has format_version {int(data['format_version'])}, this code reads "
                        f"{_FORMAT_VERSION}; regenerate it with tools/make_unicode_tables.py")
    if data["gc"].shape != (N_CODEPOINTS,) or data["gc"].dtype != np.uint8:
        raise DataError(f"{DATA_FILE}: gc must be uint8 of shape ({N_CODEPOINTS},), got "
                        f"{data['gc'].dtype} {data['gc'].shape}")
    for suffix in ("", "_cased"):
        src, off, cp = data["src" + suffix], data["img_off" + suffix], data["img_cp" + suffix]
        if off.shape != (len(src) + 1,) or off[0] != 0 or off[-1] != len(cp) or np.any(np.diff(src) <= 0):
            raise DataError(f"{DATA_FILE}: inconsistent src{suffix}/img_off{suffix}/img_cp{suffix}; regenerate it")
        if len(cp) and (cp.min() < 0 or cp.max() >= N_CODEPOINTS):
            raise DataError(f"{DATA_FILE}: image codepoints{suffix} out of range; regenerate it")
    return data


@functools.lru_cache(maxsize=2)
def _base_images(lowercase: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-2 for every codepoint, before the category rules (of NormalizeConfig, only ``lowercase``).

    Returns (off int64 (0x110001,), cp int32 (M0,)): identity for codepoints not in the shipped sparse
    list, the shipped image for those in it, U+FFFD for surrogates.
    """
    data = shipped_arrays()
    suffix = "" if lowercase else "_cased"
    src = data["src" + suffix].astype(np.int64)
    img_off = data["img_off" + suffix].astype(np.int64)
    img_len = np.diff(img_off)
    length = np.ones(N_CODEPOINTS, dtype=np.int64)
    length[src] = img_len
    off = np.zeros(N_CODEPOINTS + 1, dtype=np.int64)
    np.cumsum(length, out=off[1:])
    cp = np.empty(int(off[-1]), dtype=np.int32)
    identity = np.ones(N_CODEPOINTS, dtype=bool)
    identity[src] = False
    ident_cps = np.flatnonzero(identity)
    cp[off[ident_cps]] = ident_cps
    # element j of img_cp belongs to src[i]; its slot is off[src[i]] + (j - img_off[i])
    shift = np.repeat(off[src] - img_off[:-1], img_len)
    cp[shift + np.arange(len(data["img_cp" + suffix]), dtype=np.int64)] = data["img_cp" + suffix]
    # step 1: a surrogate gets U+FFFD's image; surrogates are never in src, so each has exactly one slot
    surrogate_image = cp[off[REPLACEMENT]:off[REPLACEMENT + 1]]
    if len(surrogate_image) != 1:
        raise DataError(f"shipped data maps U+FFFD to {surrogate_image.tolist()}; expected a single codepoint")
    cp[off[SURROGATE_LO:SURROGATE_HI]] = surrogate_image[0]
    return off, cp


def _category_rules(cp: np.ndarray, cfg: NormalizeConfig) -> np.ndarray:
    """Step 3 on image codepoints: int32 array like ``cp`` with -1 where the codepoint is deleted."""
    data = shipped_arrays()
    names = [str(n) for n in data["gc_names"]]
    byte = data["gc"][cp]
    code = byte & 0x1F

    def members(pred: Any) -> np.ndarray:
        return np.isin(code, [i for i, n in enumerate(names) if pred(n)])

    spacey = members(lambda n: n in ("Cc", "Zs", "Zl", "Zp")) | ((byte & _SPACE_FLAG) != 0)
    out = cp.astype(np.int32, copy=True)
    # Later assignments win, so apply the rules in reverse priority order.
    if cfg.fold_digits:
        out[code == names.index("Nd")] = ord("0")
    if cfg.remove_punctuation:
        out[members(lambda n: n[0] in "PS")] = SPACE
    out[code == names.index("Cf")] = -1
    out[spacey] = SPACE
    return out


@functools.lru_cache(maxsize=None)
def load_tables(cfg: NormalizeConfig) -> NormTables:
    """Dense CSR tables for ``cfg`` from the shipped data (cached: the same object for equal configs)."""
    if not isinstance(cfg, NormalizeConfig):
        raise UsageError(f"load_tables needs a NormalizeConfig, got {cfg!r}; use NormalizeConfig(...)")
    off, cp = _base_images(cfg.lowercase)
    mapped = _category_rules(cp, cfg)
    keep = mapped >= 0
    kept_before = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(keep, out=kept_before[1:])
    map_off = kept_before[off].astype(np.int32)
    map_cp = np.ascontiguousarray(mapped[keep], dtype=np.int32)
    map_off.flags.writeable = False
    map_cp.flags.writeable = False
    logger.debug("normalization tables for %s: %d image codepoints (Unicode %s)", cfg, len(map_cp), UNICODE_VERSION)
    return NormTables(map_off=map_off, map_cp=map_cp)


def table_info() -> dict[str, Any]:
    """Facts about the shipped data: versions, how many codepoints change, which needed fixed-point iteration."""
    data = shipped_arrays()
    return {
        "policy": POLICY_NAME,
        "unicode_version": UNICODE_VERSION,
        "generated_with_python": str(data["python_version"]),
        "data_file": str(DATA_FILE),
        "n_changed_codepoints": int(len(data["src"])),
        "n_changed_codepoints_case_preserving": int(len(data["src_cased"])),
        "fixpoint_codepoints": [int(c) for c in data["fixpoint_src"]],
    }
