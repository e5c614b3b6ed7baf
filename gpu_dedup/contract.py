"""The contract: everything that must match for two signature sets (or band keys, or an index) to be comparable.

Recorded in ``run.json``, in every work-dir piece and in an index manifest, with a short fingerprint; every
value comes from the constant or config it describes, so a change of any of them changes the fingerprint.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from .config import MinHashConfig, RunConfig
from .constants import EXACT_SEED_HI, EXACT_SEED_LO, FSS_ROUNDS, MERSENNE61
from .errors import DataError
from .text.unicode_tables import UNICODE_VERSION, policy_name

CONTRACT_VERSION = 1


def contract(cfg: RunConfig) -> dict[str, Any]:
    """What must match for signatures / band keys from two runs to be comparable."""
    seeds = [f"0x{seed:016X}" for seed in (EXACT_SEED_LO, EXACT_SEED_HI)]
    # lowercasing is named by the policy (nfkc-cp-lower-v1 / nfkc-cp-v1), not as a field, so that contracts
    # (and the indexes and work dirs they guard) made before the field existed still match
    normalize = {k: v for k, v in dataclasses.asdict(cfg.normalize).items() if k != "lowercase"}
    return {
        "contract_version": CONTRACT_VERSION,
        "normalize": {**normalize, "policy": policy_name(cfg.normalize), "unicode_version": UNICODE_VERSION},
        "shingle": {**dataclasses.asdict(cfg.shingle), "hash": "xxh64", "unit_bytes": "utf-8"},
        "minhash": minhash_contract(cfg.minhash),
        "lsh": {**dataclasses.asdict(cfg.lsh), "band_hash": "xxh64(seed=band) of little-endian values"},
        "exact": {"hash": "xxh64 x2 of normalized UTF-8", "seeds": seeds},
    }


def minhash_contract(cfg: MinHashConfig) -> dict[str, Any]:
    """The signature family's part of the contract. The exact family's entry is the one every contract before the
    family field recorded (no "family" key), so that their work dirs and indexes still match under
    ``family="exact"``; the fss family names itself, its rounds and how its values and parameters are made."""
    fields = dataclasses.asdict(cfg)
    if cfg.family == "exact":
        del fields["family"]
        return {**fields, "prime": f"2^{MERSENNE61.bit_length()}-1", "params": "splitmix64-rejection"}
    return {**fields, "rounds": FSS_ROUNDS, "value": "a*h+b mod 2^64, a odd; width 32: its high half",
            "bucket": "(value >> 32) * K >> 32", "params": "splitmix64, rounds then buckets"}


def contract_fingerprint(c: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(c, sort_keys=True).encode()).hexdigest()[:16]


def check_contract(expected: dict[str, Any], found: dict[str, Any], what: str) -> None:
    """Raise a clear error listing every field that differs."""
    if expected == found:
        return
    diffs: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                walk(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}" if path else k)
        elif a != b:
            diffs.append(f"{path}: this run has {a!r}, {what} has {b!r}")

    walk(expected, found, "")
    raise DataError(f"{what} was made under a different contract and cannot be mixed with this run:\n  "
                    + "\n  ".join(diffs) + "\nRecompute it with this run's settings, or run with its settings.")
