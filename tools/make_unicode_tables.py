"""Generate the pinned Unicode data file behind gpu_dedup's normalization tables.

Run once, with the Python whose ``unicodedata`` has the Unicode version to pin (Python 3.11 -> 14.0.0):

    python tools/make_unicode_tables.py            # writes gpu_dedup/data/unicode_<version>.npz
    python tools/make_unicode_tables.py --check    # regenerate in memory, compare with the shipped file

The file holds Unicode facts only; the policy (surrogates, whitespace, Cf deletion, flags) is applied at
load time by ``gpu_dedup.text.unicode_tables.load_tables``:

  unicode_version  <U str   unicodedata.unidata_version used to build the file
  python_version   <U str   the generating interpreter (for the record)
  format_version   int64    layout version of this file (FORMAT_VERSION)
  gc_names         <U2 (30,)            general-category names; index = category code
  gc               uint8 (0x110000,)    per codepoint: category code (low 5 bits) | 0x80 if chr(c).isspace()
  src              int32 (N,)           sorted codepoints whose NFKC+lower image differs from themselves
                                        (surrogates excluded: the policy maps them, not the data)
  img_off          int32 (N+1,)         CSR offsets into img_cp
  img_cp           int32 (sum,)         image codepoints: img_cp[img_off[i]:img_off[i+1]] is the image of src[i]
  fixpoint_src     int32 (K,)           codepoints whose image had to be iterated to a fixed point
  src_cased, img_off_cased, img_cp_cased, fixpoint_src_cased
                   the same for the case-preserving policy (NormalizeConfig.lowercase=False): NFKC images
                   without lowercasing

The image of c is ``unicodedata.normalize("NFKC", chr(c)).lower()`` (``_cased``: without ``.lower()``),
re-applied per character until stable so that the per-codepoint mapping is idempotent. The script refuses to overwrite a file made under
another Unicode version: the version is part of the signature contract.
"""
from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_dedup.constants import IMAGE_MAX_ITERATIONS as MAX_ITERATIONS  # noqa: E402
from gpu_dedup.constants import N_CODEPOINTS  # noqa: E402
from gpu_dedup.constants import TABLES_FORMAT_VERSION as FORMAT_VERSION  # noqa: E402
from gpu_dedup.constants import TABLES_SPACE_FLAG as SPACE_FLAG  # noqa: E402

SURROGATES = range(0xD800, 0xE000)
# The 30 general categories of the Unicode standard, in a fixed order (the order only has to match the
# gc_names array shipped next to the codes).
GC_NAMES = ("Cc", "Cf", "Cn", "Co", "Cs", "Ll", "Lm", "Lo", "Lt", "Lu", "Mc", "Me", "Mn", "Nd", "Nl",
            "No", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "Sc", "Sk", "Sm", "So", "Zl", "Zp", "Zs")
DEFAULT_DIR = Path(__file__).resolve().parents[1] / "gpu_dedup" / "data"


def _nfkc(s: str, lower: bool = True) -> str:
    s = unicodedata.normalize("NFKC", s)
    return s.lower() if lower else s


def _per_char(s: str, lower: bool = True) -> str:
    """Apply NFKC(+lower) to each character separately (the per-codepoint mapping on a string)."""
    return "".join(_nfkc(ch, lower) for ch in s)


def codepoint_image(c: int, lower: bool = True) -> tuple[str, int]:
    """NFKC(+lower) image of codepoint c iterated to a fixed point; returns (image, iterations needed)."""
    s = _nfkc(chr(c), lower)
    for iterations in range(MAX_ITERATIONS):
        nxt = _per_char(s, lower)
        if nxt == s:
            return s, iterations
        s = nxt
    raise RuntimeError(f"image of U+{c:04X} did not reach a fixed point in {MAX_ITERATIONS} iterations")


def compute_images(lower: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (src int32 (N,), img_off int32 (N+1,), img_cp int32 (M,), fixpoint_src int32 (K,))."""
    src: list[int] = []
    lengths: list[int] = []
    images: list[str] = []
    fixpoint: list[int] = []
    for c in range(N_CODEPOINTS):
        if c in SURROGATES:
            continue
        image, iterations = codepoint_image(c, lower)
        if iterations:
            fixpoint.append(c)
        if image != chr(c):
            src.append(c)
            lengths.append(len(image))
            images.append(image)
    img_cp = np.frombuffer("".join(images).encode("utf-32-le"), dtype="<u4").astype(np.int32)
    img_off = np.zeros(len(src) + 1, dtype=np.int32)
    np.cumsum(lengths, out=img_off[1:])
    return (np.asarray(src, dtype=np.int32), img_off, img_cp, np.asarray(fixpoint, dtype=np.int32))


def compute_categories() -> np.ndarray:
    """uint8 (0x110000,): general-category code | SPACE_FLAG when str.isspace() (Python's whitespace)."""
    code = {name: i for i, name in enumerate(GC_NAMES)}
    gc = np.empty(N_CODEPOINTS, dtype=np.uint8)
    for c in range(N_CODEPOINTS):
        ch = chr(c)
        gc[c] = code[unicodedata.category(ch)] | (SPACE_FLAG if ch.isspace() else 0)
    return gc


def build() -> dict[str, np.ndarray]:
    src, img_off, img_cp, fixpoint_src = compute_images()
    cased = dict(zip(("src_cased", "img_off_cased", "img_cp_cased", "fixpoint_src_cased"),
                     compute_images(lower=False)))
    return {**cased,
        "format_version": np.asarray(FORMAT_VERSION, dtype=np.int64),
        "unicode_version": np.asarray(unicodedata.unidata_version),
        "python_version": np.asarray(sys.version.split()[0]),
        "gc_names": np.asarray(GC_NAMES),
        "gc": compute_categories(),
        "src": src,
        "img_off": img_off,
        "img_cp": img_cp,
        "fixpoint_src": fixpoint_src,
    }


def stored_version(path: Path) -> str:
    with np.load(path, allow_pickle=False) as z:
        return str(z["unicode_version"])


def same_content(a: dict[str, np.ndarray], path: Path) -> list[str]:
    """Names of arrays that differ between a fresh build and the file (python_version is only a record)."""
    with np.load(path, allow_pickle=False) as z:
        keys = set(z.files) | set(a)
        return sorted(k for k in keys if k != "python_version"
                      and (k not in z.files or k not in a or not np.array_equal(z[k], a[k])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="output .npz (default: gpu_dedup/data/unicode_<unidata_version>.npz)")
    ap.add_argument("--check", action="store_true",
                    help="do not write; rebuild and compare with the existing file (exit 1 on a difference)")
    args = ap.parse_args(argv)
    version = unicodedata.unidata_version
    out: Path = args.out or DEFAULT_DIR / f"unicode_{version}.npz"

    if out.exists():
        found = stored_version(out)
        if found != version:
            print(f"refusing to touch {out}: it holds Unicode {found}, this Python has unicodedata {version}. "
                  f"Run this script with a Python whose unicodedata.unidata_version == {found!r}, or write a "
                  f"new file with --out (changing the Unicode version changes the signature contract).",
                  file=sys.stderr)
            return 2
    elif args.check:
        print(f"--check: {out} does not exist; run without --check to create it", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    arrays = build()
    elapsed = time.perf_counter() - t0
    n_src = len(arrays["src"])
    print(f"unicodedata {version} (Python {arrays['python_version']}): {n_src} codepoints with an NFKC+lower "
          f"image != themselves, {len(arrays['img_cp'])} image codepoints, longest image "
          f"{int(np.diff(arrays['img_off']).max())}; {len(arrays['fixpoint_src'])} needed iteration to a fixed "
          f"point; built in {elapsed:.1f} s")

    if args.check:
        diff = same_content(arrays, out)
        if diff:
            print(f"MISMATCH with {out}: {diff}", file=sys.stderr)
            return 1
        print(f"{out} matches a fresh build")
        return 0

    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **arrays)
    print(f"wrote {out} ({out.stat().st_size / 1024:.1f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
