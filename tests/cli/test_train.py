"""The train-lm command line (cli/train.py): the flags its errors name exist."""
import json
import random

from gpu_dedup.cli import main


def test_train_lm_on_error_skip_is_a_flag_and_the_skipped_records_are_said(tmp_path, capsys):
    rng = random.Random(0)
    lines = [" ".join(f"w{min(int(rng.paretovariate(1.0)), 300)}" for _ in range(rng.randint(2, 9)))
             for _ in range(400)]
    src = tmp_path / "ref.jsonl"
    rows = [json.dumps({"id": str(i), "text": t}) for i, t in enumerate(lines)]
    src.write_text("\n".join(rows[:3] + ["not json {"] + rows[3:]) + "\n")
    out = tmp_path / "m.arpa"
    assert main(["train-lm", str(src), "-o", str(out), "--order", "3", "-q"]) == 1
    err = capsys.readouterr().err
    assert "ref.jsonl:4" in err and "--on-error skip" in err  # the error's fix ...
    assert main(["train-lm", str(src), "-o", str(out), "--order", "3", "-q", "--on-error", "skip"]) == 0  # ... works
    said = capsys.readouterr().out
    assert "skipped 1 bad record" in said and out.exists()
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(rows) + "\n")
    assert main(["train-lm", str(clean), "-o", str(tmp_path / "c.arpa"), "--order", "3", "-q"]) == 0
    strip = [x for x in out.read_text().splitlines() if not x.startswith("#")]  # the header names the input
    assert strip == [x for x in (tmp_path / "c.arpa").read_text().splitlines() if not x.startswith("#")]
