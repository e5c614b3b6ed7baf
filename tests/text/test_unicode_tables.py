"""Tests for gpu_dedup.text.unicode_tables (shipped Unicode 14.0.0 data, policy nfkc-cp-lower-v1)."""
from __future__ import annotations

import importlib.util
import shutil
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from gpu_dedup.text import unicode_tables as ut
from gpu_dedup.testing import unicode_reference as uref
from gpu_dedup.config import NormalizeConfig

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [NormalizeConfig(False, False), NormalizeConfig(True, False), NormalizeConfig(False, True),
           NormalizeConfig(True, True), NormalizeConfig(lowercase=False), NormalizeConfig(True, True, False)]
CFG_IDS = ["plain", "punct", "digits", "punct+digits", "cased", "cased+punct+digits"]
DEFAULT = NormalizeConfig()
BOTH = NormalizeConfig(remove_punctuation=True, fold_digits=True)
needs_same_unicode = pytest.mark.skipif(
    not uref.reference_matches_tables(),
    reason=f"running unicodedata {unicodedata.unidata_version} != shipped {ut.UNICODE_VERSION}: reference invalid")


def image(tables: ut.NormTables, c: int) -> str:
    return "".join(map(chr, tables.map_cp[tables.map_off[c]:tables.map_off[c + 1]].tolist()))


def test_version_is_pinned_and_recorded() -> None:
    assert ut.UNICODE_VERSION == "14.0.0"
    assert ut.DATA_FILE.name == f"unicode_{ut.UNICODE_VERSION}.npz"
    with np.load(ut.DATA_FILE, allow_pickle=False) as z:
        assert str(z["unicode_version"]) == ut.UNICODE_VERSION
    assert ut.DATA_FILE.stat().st_size < 1_000_000
    info = ut.table_info()
    assert info["policy"] == ut.POLICY_NAME == "nfkc-cp-lower-v1"
    assert info["unicode_version"] == "14.0.0"


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
def test_table_layout(cfg: NormalizeConfig) -> None:
    t = ut.load_tables(cfg)
    assert t.map_off.dtype == np.int32 and t.map_off.shape == (0x110001,)
    assert t.map_cp.dtype == np.int32 and t.map_cp.ndim == 1
    assert t.map_off[0] == 0 and t.map_off[-1] == len(t.map_cp)
    assert np.all(np.diff(t.map_off) >= 0)
    assert t.map_cp.min() >= 0 and t.map_cp.max() < 0x110000
    assert not np.any((t.map_cp >= 0xD800) & (t.map_cp < 0xE000)), "surrogates must never be emitted"
    assert not t.map_off.flags.writeable and not t.map_cp.flags.writeable  # shared through the cache


def test_load_tables_is_cached() -> None:
    a = ut.load_tables(NormalizeConfig())
    b = ut.load_tables(NormalizeConfig(remove_punctuation=False, fold_digits=False))
    assert a is b
    assert ut.load_tables(BOTH) is not a


def test_load_tables_rejects_wrong_type() -> None:
    with pytest.raises(TypeError, match="NormalizeConfig"):
        ut.load_tables((False, False))  # type: ignore[arg-type]


@needs_same_unicode
@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
def test_tables_equal_reference_for_every_codepoint(cfg: NormalizeConfig) -> None:
    images = [uref.reference_codepoint_image(c, cfg) for c in range(0x110000)]
    lengths = np.fromiter(map(len, images), dtype=np.int64, count=len(images))
    ref_cp = np.frombuffer("".join(images).encode("utf-32-le"), dtype="<u4").astype(np.int32)
    t = ut.load_tables(cfg)
    bad = np.flatnonzero(np.diff(t.map_off) != lengths)
    assert len(bad) == 0, [(hex(c), images[c], image(t, c)) for c in bad[:10]]
    mismatch = np.flatnonzero(ref_cp != t.map_cp)
    assert len(mismatch) == 0, f"{len(mismatch)} image codepoints differ, first at map_cp[{mismatch[:1]}]"


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
def test_mapping_is_idempotent(cfg: NormalizeConfig) -> None:
    """map(map(c)) == map(c) for every codepoint, computed on the tables with numpy."""
    t = ut.load_tables(cfg)
    off, cp = t.map_off.astype(np.int64), t.map_cp.astype(np.int64)
    lens = np.diff(off)
    # image of each element of map_cp, concatenated in order
    second_len = lens[cp]
    second_off = np.zeros(len(cp) + 1, dtype=np.int64)
    np.cumsum(second_len, out=second_off[1:])
    starts = np.repeat(off[cp] - second_off[:-1], second_len)
    second_cp = cp[starts + np.arange(second_off[-1])]
    # per-codepoint length of map(map(c)): sum of second_len over c's image
    per_cp = second_off[off]
    assert np.array_equal(per_cp, off), f"lengths change for {np.flatnonzero(np.diff(per_cp) != lens)[:10]}"
    assert np.array_equal(second_cp, cp)
    assert ut.table_info()["fixpoint_codepoints"] == []  # Unicode 14.0.0: NFKC+lower is already idempotent


GOLDEN_DEFAULT = [
    ("\ufb01", "fi"),                  # LATIN SMALL LIGATURE FI
    ("\uff21", "a"),                   # FULLWIDTH LATIN CAPITAL LETTER A
    ("\u2460", "1"),                   # CIRCLED DIGIT ONE
    ("\u1e9e", "\u00df"),              # LATIN CAPITAL LETTER SHARP S -> ß
    ("\u0130", "i\u0307"),             # İ: full lowercase = i + COMBINING DOT ABOVE
    ("a\u00a0b", "a b"),               # NO-BREAK SPACE -> space
    ("a\u200bb", "ab"),                # ZERO WIDTH SPACE (Cf) deleted
    ("co\u00adop", "coop"),            # SOFT HYPHEN (Cf) deleted
    ("\ufeffhi", "hi"),                # BOM (Cf) deleted
    ("a\tb\nc", "a b c"),              # controls -> space
    ("\u00bd", "1\u20442"),            # ½ -> 1 FRACTION SLASH 2 (decomposition <fraction> 0031 2044 0032)
    ("\u338f", "kg"),                  # SQUARE KG
    ("\u03a3", "\u03c3"),              # Σ -> σ
    ("\u039f\u0394\u039f\u03a3", "\u03bf\u03b4\u03bf\u03c3"),  # per codepoint: never a final sigma
    ("\u03c2", "\u03c2"),              # an input final sigma stays
    ("\u0663", "\u0663"),              # ARABIC-INDIC DIGIT THREE unchanged without fold_digits
    ("a,b", "a,b"),
    ("e\u0301", "e\u0301"),            # no canonical composition
    ("\u00c9", "\u00e9"),
    ("  a \t\u3000 b  ", "a b"),       # collapse + trim (IDEOGRAPHIC SPACE is Zs)
    ("\ud800x", "\ufffdx"),            # lone surrogate -> U+FFFD
    ("\U000f0000", "\U000f0000"),      # private use unchanged
    ("\U0001e030", "\U0001e030"),      # unassigned in 14.0.0 (Unicode 15 maps it to а): stays
]
GOLDEN_BOTH = [
    ("\u0663", "0"),                   # Nd folded
    ("\u2460", "0"),                   # NFKC gives '1', then folded
    ("a,b", "a b"),                    # Po -> space
    ("\u00bd", "0 0"),                 # FRACTION SLASH is Sm
    ("x+y=\u20ac5!", "x y 0"),         # Sm, Sc, Po -> space, collapsed and trimmed
    ("\ud800x", "x"),                  # U+FFFD is So -> space -> trimmed
    ("a\u200bb", "ab"),
]
IMPLEMENTATIONS = {
    "tables": lambda text, cfg: uref.apply_tables_python(text, ut.load_tables(cfg)),
    "reference": pytest.param(uref.normalize_reference, marks=needs_same_unicode),
}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())
@pytest.mark.parametrize(("cfg", "text", "expected"),
                         [(DEFAULT, t, e) for t, e in GOLDEN_DEFAULT] + [(BOTH, t, e) for t, e in GOLDEN_BOTH])
def test_golden(impl, cfg: NormalizeConfig, text: str, expected: str) -> None:
    assert impl(text, cfg) == expected


def test_flags_are_independent() -> None:
    text = "A,b ٣!"
    assert uref.apply_tables_python(text, ut.load_tables(NormalizeConfig(True, False))) == "a b ٣"
    assert uref.apply_tables_python(text, ut.load_tables(NormalizeConfig(False, True))) == "a,b 0!"


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
def test_surrogates_take_the_replacement_image(cfg: NormalizeConfig) -> None:
    t = ut.load_tables(cfg)
    fffd = image(t, 0xFFFD)
    for c in (0xD800, 0xDBFF, 0xDC00, 0xDFFF):
        assert image(t, c) == fffd
    assert fffd == (" " if cfg.remove_punctuation else "\ufffd")


@needs_same_unicode
@pytest.mark.parametrize("cfg", [DEFAULT, BOTH], ids=["plain", "punct+digits"])
def test_reference_equals_tables_on_mixed_text(cfg: NormalizeConfig) -> None:
    text = ("Ｈｅｌｌｏ, Wörld! İstanbul ΟΔΟΣ ﬁne ①②③ ½ ㎏ \u1112\u1161\u11ab e\u0301 \u200d👨\u200d👩 "
            "\u00ad\ufeff ٣٤ מים नमस्क़ार ﻼ ㍿ \u3000 end\t")
    assert uref.normalize_reference(text, cfg) == uref.apply_tables_python(text, ut.load_tables(cfg))


def _generator():
    spec = importlib.util.spec_from_file_location("make_unicode_tables", ROOT / "tools" / "make_unicode_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generator_refuses_other_unicode_version(tmp_path: Path) -> None:
    other = tmp_path / "other.npz"
    np.savez_compressed(other, unicode_version=np.asarray("99.0.0"))
    before = other.read_bytes()
    assert _generator().main(["--out", str(other)]) == 2
    assert other.read_bytes() == before


@needs_same_unicode
def test_shipped_file_matches_fresh_build(tmp_path: Path) -> None:
    copy = tmp_path / ut.DATA_FILE.name
    shutil.copy(ut.DATA_FILE, copy)
    assert _generator().main(["--out", str(copy), "--check"]) == 0


def test_case_preserving_policy_keeps_case_and_still_folds_compatibility_forms() -> None:
    cased = NormalizeConfig(lowercase=False)
    assert uref.apply_tables_python("getValue GetValue ＡＢＣ ﬁ Ⅻ", ut.load_tables(cased)) == "getValue GetValue ABC fi XII"
    assert uref.apply_tables_python("getValue GetValue ＡＢＣ ﬁ Ⅻ", ut.load_tables(DEFAULT)) == "getvalue getvalue abc fi xii"
    assert ut.policy_name(cased) == "nfkc-cp-v1" and ut.policy_name(DEFAULT) == ut.POLICY_NAME
