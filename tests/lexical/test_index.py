"""Incremental dedup against a saved index."""
import json

import numpy as np
import pyarrow as pa
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.testing.evalcorpus import make_corpus


def _split():
    t = make_corpus(600, seed=11, mean_words=120).select(["id", "text"])
    return t.slice(0, 300), t.slice(300)


@pytest.mark.parametrize("preset", ["default", "fineweb"])
def test_incremental_equals_joint_run_when_a_is_deduplicated(tmp_path, preset):
    a, b = _split()
    cfg = RunConfig.preset(preset, progress=False)
    # make A duplicate-free first, as the incremental contract assumes
    da = gpu_dedup.deduplicate(a, cfg).decisions
    a = a.filter(da["keep"])
    gpu_dedup.deduplicate(a, cfg, save_index=tmp_path / "idx")
    joint = gpu_dedup.deduplicate(pa.concat_tables([a, b]), cfg).decisions.slice(a.num_rows)
    inc = gpu_dedup.deduplicate(b, cfg, against=tmp_path / "idx").decisions
    assert inc["id"].equals(joint["id"])
    assert inc["keep"].equals(joint["keep"])
    assert inc["representative_id"].equals(joint["representative_id"])
    assert not np.asarray(inc["keep"]).all()
    # some B documents are removed in favour of indexed (A) documents: negative cluster ids
    a_ids = set(a["id"].to_pylist())
    from_index = [r for r in inc.to_pylist() if not r["keep"] and r["representative_id"] in a_ids]
    assert from_index and all(r["cluster_id"] < 0 for r in from_index)


def test_index_extension_and_contract_mismatch(tmp_path):
    a, b = _split()
    cfg = RunConfig(progress=False)
    gpu_dedup.deduplicate(a, cfg, save_index=tmp_path / "g1")
    res = gpu_dedup.deduplicate(b, cfg, against=tmp_path / "g1", save_index=tmp_path / "g2")
    m1 = json.loads((tmp_path / "g1" / "manifest.json").read_text())
    m2 = json.loads((tmp_path / "g2" / "manifest.json").read_text())
    assert m2["generation"] == 2 and m2["documents"] == m1["documents"] + res.kept
    # a third batch with b's texts (under new ids) is entirely removed against generation 2
    b_again = b.set_column(0, "id", pa.array([f"again-{i}" for i in range(b.num_rows)]))
    again = gpu_dedup.deduplicate(b_again, cfg, against=tmp_path / "g2").decisions
    assert not any(again["keep"].to_pylist())
    with pytest.raises(ValueError, match="minhash.seed"):
        gpu_dedup.deduplicate(b, cfg.replace(minhash__seed=7), against=tmp_path / "g1")
    with pytest.raises(ValueError, match="versioned"):
        gpu_dedup.deduplicate(b, cfg, against=tmp_path / "g1", save_index=tmp_path / "g1")
    with pytest.raises(FileNotFoundError, match="manifest"):
        gpu_dedup.deduplicate(b, cfg, against=tmp_path / "nope")


def test_an_id_already_in_the_index_is_an_error_naming_both_files(tmp_path):
    a, b = _split()
    cfg = RunConfig(progress=False)
    gpu_dedup.deduplicate(a, cfg, save_index=tmp_path / "idx")
    reused = a["id"][5].as_py()
    new = b.slice(0, 20).to_pylist()
    new[3]["id"] = reused
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "new.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new))
    with pytest.raises(gpu_dedup.io.InputError, match=(rf"1 id\(s\) .* indexed documents in .*idx.documents\.parquet: "
                                                       rf"'{reused}' \(new\.jsonl:4\).*--id-field")):
        gpu_dedup.deduplicate(tmp_path / "in", cfg, against=tmp_path / "idx")
    # the same texts under ids of their own run (and are removed against the index as usual)
    new[3]["id"] = "fresh-3"
    (tmp_path / "in" / "new.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new))
    assert gpu_dedup.deduplicate(tmp_path / "in", cfg, against=tmp_path / "idx").decisions.num_rows == 20
