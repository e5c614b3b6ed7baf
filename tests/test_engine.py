"""gpu_dedup/engine.py: the progress bar and the log lines written while it is open."""
import json
import os
import subprocess
import sys


def test_a_warning_during_the_bar_gets_a_line_of_its_own(tmp_path):
    """Issue 28 item 8's "the message lands inside the progress bar", for every log line: a warning logged while
    filter's bar is open (a mistyped --id-field, said per file as the batches are read) is written above the bar
    (the bar's line cleared first), not appended to it. Before, stderr read "...[00:00, ?doc/s]WARNING ..."."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"some words in document number {i} here"}) + "\n"
                           for i in range(20)))
    r = subprocess.run([sys.executable, "-m", "gpu_dedup.cli", "filter", str(src), "-o", str(tmp_path / "o"),
                        "--rules", "gopher", "--id-field", "nope"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"}, timeout=600)
    assert r.returncode == 0, r.stderr
    err = r.stderr
    at = err.index("WARNING gpu_dedup.io")
    assert "doc/s]" in err[:at], err[:at]  # the bar was drawn before the warning
    assert err[at - 1] in "\r\n", repr(err[max(0, at - 60):at + 20])
