"""config.py, constants.py and contract.py: one source for every constant, one shared input config."""
import dataclasses

import numpy as np
import pytest

from gpu_dedup import constants as C
from gpu_dedup.cli import build_parser
from gpu_dedup.config import InputConfig, RunConfig
from gpu_dedup.contract import contract
from gpu_dedup.kernels import core
from gpu_dedup.paragraph.bloom import HASH_DESCRIPTION, SEED1, SEED2
from gpu_dedup.paragraph.dedup import ParagraphConfig
from gpu_dedup.screen.screening import ScreenConfig


def test_kernels_contract_and_bloom_take_their_numbers_from_constants():
    assert (int(core.EXACT_SEED_LO), int(core.EXACT_SEED_HI)) == (C.EXACT_SEED_LO, C.EXACT_SEED_HI)
    assert int(core.MERSENNE61) == C.MERSENNE61 == (1 << 61) - 1 and core.MERSENNE61.dtype == np.uint64
    c = contract(RunConfig())
    assert c["exact"]["seeds"] == [f"0x{C.EXACT_SEED_LO:016X}", f"0x{C.EXACT_SEED_HI:016X}"]
    assert c["minhash"]["family"] == "fss" and c["minhash"]["rounds"] == C.FSS_ROUNDS
    assert contract(RunConfig.preset("fineweb"))["minhash"]["prime"] == "2^61-1"
    assert (SEED1, SEED2) == (C.EXACT_SEED_LO, C.EXACT_SEED_HI)
    assert f"{C.EXACT_SEED_LO:#x}".upper()[2:] in HASH_DESCRIPTION.upper()


@pytest.mark.parametrize("cls", [RunConfig, ParagraphConfig, ScreenConfig])
def test_every_reader_config_shares_the_input_fields_and_their_checks(cls):
    names = {f.name for f in dataclasses.fields(InputConfig)}
    assert names == {"id_field", "text_field", "batch_bytes", "on_error"}
    assert issubclass(cls, InputConfig) and names <= {f.name for f in dataclasses.fields(cls)}
    for bad in ({"on_error": "ignore"}, {"text_field": ""}, {"id_field": ""}, {"batch_bytes": 10},
                {"batch_bytes": True}):
        with pytest.raises(ValueError, match=f"{cls.__name__}.{next(iter(bad))}"):
            cls(**bad)
    assert cls(id_field=None, batch_bytes=4096).reader_options()["batch_bytes"] == 4096


def test_input_fields_stay_keyword_only_so_positional_fields_keep_their_order():
    assert ParagraphConfig("line").split == "line"
    assert ScreenConfig(13, 2).min_matches == 2


def test_flags_take_their_defaults_from_the_configs():
    from gpu_dedup.cli.common import env_from_args

    screen = build_parser().parse_args(["screen", "c.jsonl", "--benchmark", "b.jsonl", "-o", "o"])
    d = ScreenConfig()
    reading = env_from_args(screen).reading  # a common flag not given reads as the config's default
    assert (screen.ngram, screen.min_matches, screen.min_ngram, screen.benchmark_text_unit, reading.id_field,
            reading.text_field, reading.on_error) == (d.ngram, d.min_matches, d.min_ngram, d.text_unit, d.id_field,
                                                      d.text_field, d.on_error)
    run = build_parser().parse_args(["run", "c.jsonl", "-o", "o"])
    p = ParagraphConfig()
    assert (run.paragraph_split, run.bloom_fp, run.expected_paragraphs) == (p.split, p.bloom.fp_rate,
                                                                           p.bloom.expected_items)


def test_unused_permutations_are_a_warning_once(caplog):
    """Issue 28 item 6: num_perm above bands x rows computes permutations no band uses: said, once."""
    from gpu_dedup.config import LSHConfig, MinHashConfig, RunConfig

    with caplog.at_level("WARNING", logger="gpu_dedup.config"):
        cfg = RunConfig(minhash=MinHashConfig(num_perm=137), lsh=LSHConfig(bands=20, rows=5))
        dataclasses.replace(cfg, threads=1)
        RunConfig(minhash=MinHashConfig(num_perm=100), lsh=LSHConfig(bands=20, rows=5))
    said = [r.getMessage() for r in caplog.records]
    assert said == ["num_perm = 137 but bands x rows = 20x5 = 100: 37 permutations are computed that no LSH band "
                    "uses; set num_perm=100 to save their time, or raise bands/rows"]


def test_minhash_family_is_validated_recorded_and_pinned_by_the_peer_presets():
    """Issue 38 item 1: MinHashConfig.family, a Literal; the contract (and its fingerprint) records it; the exact
    family's contract entry is the one contracts had before the field (no "family" key), so their work dirs and
    indexes still match under family="exact"; fineweb and nemo (unverified) pin the exact family."""
    from gpu_dedup.config import MinHashConfig
    from gpu_dedup.contract import contract_fingerprint

    assert MinHashConfig().family == "fss" and RunConfig.preset("default").minhash.family == "fss"
    assert {RunConfig.preset(p).minhash.family for p in ("fineweb", "nemo")} == {"exact"}
    with pytest.raises(ValueError, match=r"MinHashConfig.family must be one of \('fss', 'exact'\), got 'oph'"):
        MinHashConfig(family="oph")
    exact = RunConfig(minhash=MinHashConfig(family="exact"))
    entry = contract(exact)["minhash"]
    assert entry == {"num_perm": 100, "seed": 42, "width": 32, "prime": "2^61-1", "params": "splitmix64-rejection"}
    fss = contract(RunConfig())["minhash"]
    assert fss["family"] == "fss" and fss["rounds"] == C.FSS_ROUNDS
    assert contract_fingerprint(contract(exact)) != contract_fingerprint(contract(RunConfig()))
    assert RunConfig.from_dict({"minhash": {"family": "exact"}}).minhash.family == "exact"
    run = build_parser().parse_args(["run", "c.jsonl", "-o", "o", "--family", "exact"])
    assert run.family == "exact"
