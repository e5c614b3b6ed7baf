"""Labelled input (filters/labelled.py): a damaged file is an error naming it, on the command line too."""
import gzip
import json

import pytest

from gpu_dedup.cli import main
from gpu_dedup.filters.labelled import LabelledInputError, read_labelled


def _truncated_gzip(path):
    rows = [{"text": f"document number {i} about things", "label": "hq" if i % 2 else "lq", "group": f"g{i % 5}"}
            for i in range(200)]
    data = gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode())
    path.write_bytes(data[:len(data) // 2])
    return path


def test_a_truncated_gzip_input_is_an_error_naming_the_file(tmp_path):
    src = _truncated_gzip(tmp_path / "lab.jsonl.gz")
    with pytest.raises(LabelledInputError, match=r"lab\.jsonl\.gz: the file cannot be read whole \(.*[Tt]runcated"):
        read_labelled([str(src)])


def test_train_classifier_names_a_truncated_file(tmp_path, capsys):
    src = _truncated_gzip(tmp_path / "lab.jsonl.gz")
    assert main(["train-classifier", str(src), "-o", str(tmp_path / "m.bin"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpu-dedup: error: ") and "lab.jsonl.gz: the file cannot be read whole" in err
    assert "Traceback" not in err


def test_label_token_error_names_the_flag_once(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps({"text": "x __label__hq y", "label": "lq", "group": "g"}) + "\n")
    with pytest.raises(LabelledInputError) as e:
        read_labelled([str(src)])
    assert "(--strip-label-tokens; Python: label_tokens='strip')" in str(e.value)
