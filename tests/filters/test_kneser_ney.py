"""train_lm's benchmark screening (issue 25, 000 §5 "keep tests out of fitting"): a reference document that shares
a 13-gram with a benchmark item refuses the run, or with screen_drop is left out; the model then equals the one
trained on the reference without it (byte for byte). The estimates themselves are tested in test_lm.py."""
import json
import random

import pytest

from gpu_dedup.filters.kneser_ney import LMTrainConfig, train_lm
from gpu_dedup.filters.lm import LMNormalization

NONE = LMNormalization(mode="none")
ITEM = ("which of the following best describes the role of mitochondria in a eukaryotic cell during aerobic "
        "respiration and energy production")


def _lines(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(f"w{min(int(rng.paretovariate(1.0)), 300)}" for _ in range(rng.randint(2, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("kn")
    clean = _lines(1, 400)
    leaked = clean[:100] + ["so " + ITEM + " indeed"] + clean[100:]
    (d / "clean.txt").write_text("\n".join(clean) + "\n")
    (d / "leaked.txt").write_text("\n".join(leaked) + "\n")
    with open(d / "leaked.jsonl", "w") as fh:
        for i, t in enumerate(leaked):
            fh.write(json.dumps({"id": str(i), "text": t}) + "\n")
    bench = d / "bench.jsonl"
    bench.write_text(json.dumps({"id": "q1", "question": ITEM}) + "\n")
    return d, bench


def test_train_lm_screen_refuses_then_drops(files, tmp_path, capsys):
    d, bench = files
    cfg = LMTrainConfig(order=3, normalization=NONE, screen=(str(bench),))
    with pytest.raises(ValueError, match=r"`screen`: 1 of 402 reference documents share a 13-gram .*leaked\.txt:101 "
                                         r"with bench\.jsonl item q1.*screen_drop=True"):
        train_lm([d / "leaked.txt"], tmp_path / "x.arpa", cfg)
    assert not (tmp_path / "x.arpa").exists()
    ref = train_lm([d / "clean.txt"], tmp_path / "clean.arpa", LMTrainConfig(order=3, normalization=NONE))
    for src in ("leaked.txt", "leaked.jsonl"):
        out = tmp_path / f"{src}.arpa"
        stats = train_lm([d / src], out, LMTrainConfig(order=3, normalization=NONE, screen=(str(bench),),
                                                       screen_drop=True))
        assert out.read_bytes() == (tmp_path / "clean.arpa").read_bytes()
        scr = stats["screen"]
        assert scr["action"] == "drop" and scr["documents_dropped"] == 1 and scr["flagged"][0]["item_id"] == "q1"
        where = scr["flagged"][0]["where"]
        assert where.endswith("leaked.txt:101" if src == "leaked.txt" else "leaked.jsonl row 100"), where
        assert stats["sentences"] == ref["sentences"]
    from gpu_dedup.cli import main

    assert main(["train-lm", str(d / "leaked.txt"), "-o", str(tmp_path / "c.arpa"), "--order", "3",
                 "--normalization", "none", "--screen", str(tmp_path / "missing.jsonl"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "--screen: benchmark file" in err and "missing.jsonl" in err
    assert main(["train-lm", str(d / "leaked.txt"), "-o", str(tmp_path / "c.arpa"), "--order", "3",
                 "--normalization", "none", "--screen", str(bench), "--screen-drop"]) == 0
    assert "1 of 402 documents flagged, 1 dropped" in capsys.readouterr().out
    with pytest.raises(ValueError, match="screen_drop=True drops"):
        LMTrainConfig(screen_drop=True)


def test_a_directory_output_is_refused_before_training(files, tmp_path, capsys):
    d, _ = files
    out = tmp_path / "models"
    out.mkdir()
    with pytest.raises(ValueError, match=r"out_path '.*models' is a directory: name the model file .*model\.arpa"):
        train_lm([d / "clean.txt"], out, LMTrainConfig(order=3, normalization=NONE), overwrite=True)
    from gpu_dedup.cli import main

    assert main(["train-lm", str(d / "clean.txt"), "-o", str(out), "--order", "3", "--overwrite", "-q"]) == 1
    err = capsys.readouterr().err
    assert "--output" in err and "is a directory" in err and "Errno" not in err
    assert sorted(p.name for p in out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["models"]
