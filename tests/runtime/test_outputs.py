"""What the tool owns (gpu_dedup/runtime/outputs.py, issue #14): outputs never inside the inputs, --overwrite replaces
exactly the earlier run's files, locks, input fingerprints for --resume, impossible output paths, foreign
manifests, and a demo that can run twice."""
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest

import gpu_dedup
from gpu_dedup import RunConfig, io
from gpu_dedup.runtime import workdir as wdmod
from gpu_dedup.cli import main
from gpu_dedup.runtime.outputs import (
    JOURNAL,
    LOCK,
    LOCK_INFO,
    MANIFEST,
    LockedError,
    ManifestError,
    OutputPathError,
    locked,
    own,
)
from gpu_dedup.errors import OutputExistsError
from gpu_dedup.testing.evalcorpus import make_corpus

CFG = RunConfig(progress=False)


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _rows(n, seed):
    t = make_corpus(n, seed=seed, mean_words=40, template_families=1, family_size=10)
    return [{"id": i, "text": x} for i, x in zip(t["id"].to_pylist(), t["text"].to_pylist())]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """data/a.jsonl, data/b.jsonl (ids distinct), outside any output directory."""
    root = tmp_path_factory.mktemp("corpus")
    a, b = _rows(60, 1), _rows(60, 2)
    for r in b:
        r["id"] = "b-" + r["id"]
    _jsonl(root / "data" / "a.jsonl", a)
    _jsonl(root / "data" / "b.jsonl", b)
    return root / "data"


def _one_error(capsys):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("gpu-dedup: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
                  for d, _, names in os.walk(root) for n in names)


# 1. outputs never at or under an input ------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["-o", "--work-dir", "--save-index"])
def test_outputs_inside_an_input_directory_are_refused(corpus, tmp_path, capsys, flag):
    inside = corpus / "sub" / "x"
    args = ["run", str(corpus), "-o", str(tmp_path / "out"), "-q"]
    if flag == "-o":
        args[3] = str(inside)
    else:
        args += [flag, str(inside)]
    before = _files(corpus)
    assert main(args) == 1
    line = _one_error(capsys)
    assert str(inside) in line and str(corpus) in line and flag in line
    assert _files(corpus) == before and not (corpus / "sub").exists()


def _refuse_screen(corpus, inside):
    from gpu_dedup.screen.screening import screen

    screen(str(corpus), [str(corpus / "a.jsonl")], output_dir=inside)


def _refuse_substring(corpus, inside):
    from gpu_dedup.substring.dedup import substring_dedup

    substring_dedup(str(corpus), output_dir=inside)


def _refuse_train_lm(corpus, inside):
    from gpu_dedup.filters.kneser_ney import train_lm

    train_lm([str(corpus)], inside / "lm.arpa")


def _refuse_train_classifier(corpus, inside):
    from gpu_dedup.filters.train import TrainClassifierConfig, train_classifier

    train_classifier([str(corpus)], str(inside / "m.bin"), TrainClassifierConfig())


@pytest.mark.parametrize("run", [_refuse_screen, _refuse_substring, _refuse_train_lm, _refuse_train_classifier])
def test_every_program_refuses_an_output_inside_its_inputs_through_the_api(corpus, run):
    """The library owns that rule, not the command line: each program refuses before reading or writing."""
    inside = corpus / "sub"
    before = _files(corpus)
    with pytest.raises(gpu_dedup.GpuDedupError, match="lies inside the input"):
        run(corpus, inside)
    assert _files(corpus) == before and not inside.exists()


@pytest.mark.parametrize("command", [["screen", "{c}", "--benchmark", "{c}/a.jsonl"], ["substring", "{c}"],
                                     ["train-lm", "{c}"], ["train-classifier", "{c}"]])
def test_every_command_names_its_output_flag_when_it_lies_inside_the_input(corpus, capsys, command):
    out = corpus / "sub" / ("m.bin" if command[0].startswith("train") else "o")
    assert main([a.format(c=corpus) for a in command] + ["-o", str(out)]) == 1
    line = _one_error(capsys)
    assert "--output" in line and "lies inside the input" in line, line


def test_output_equal_to_input_dir_or_glob_match_is_refused_but_a_file_inputs_directory_is_not(corpus, tmp_path,
                                                                                               capsys):
    with pytest.raises(ValueError, match="is the input"):
        gpu_dedup.deduplicate(str(corpus), CFG, corpus)
    with pytest.raises(ValueError, match="lies inside the input"):
        gpu_dedup.deduplicate(str(corpus.parent / "da*"), CFG, corpus / "out")  # a glob matching the directory
    with pytest.raises(ValueError, match="save_index"):
        gpu_dedup.deduplicate(str(corpus), CFG, save_index=corpus / "idx")
    # a file input: its directory does not count
    src = _jsonl(tmp_path / "in.jsonl", _rows(20, 3))
    assert main(["run", str(src), "-o", str(tmp_path / "out"), "-q"]) == 0
    assert (tmp_path / "out" / "decisions.parquet").exists()


# 2. --overwrite replaces exactly what the earlier run wrote ---------------------------------------------------

def test_overwrite_replaces_every_file_of_the_earlier_run_and_nothing_else(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(corpus), "-o", str(out), "-q", "--paragraph-dedup"]) == 0
    first = json.loads((out / MANIFEST).read_text())
    assert first["state"] == "complete" and first["command"] == "run"
    assert {"decisions.parquet", "run.json", "report.html", "deduplicated/a.jsonl", "deduplicated/b.jsonl",
            "removed_spans.parquet", "paragraph_docs.parquet"} <= set(first["files"])
    assert set(first["files"]) == set(_files(out)) - {MANIFEST, LOCK}  # the manifest lists every file written
    (out / "notes.txt").write_text("mine")
    (out / "deduplicated" / "mine.txt").write_text("mine too")
    stamps = {f: (os.stat(out / f).st_ino, os.stat(out / f).st_mtime_ns) for f in first["files"]}

    assert main(["run", str(corpus / "a.jsonl"), "-o", str(out), "-q"]) == 1  # a finished run: --overwrite needed
    assert "--overwrite" in _one_error(capsys)
    assert main(["run", str(corpus / "a.jsonl"), "-o", str(out), "-q", "--overwrite"]) == 0
    second = json.loads((out / MANIFEST).read_text())
    assert "deduplicated/b.jsonl" not in second["files"] and "removed_spans.parquet" not in second["files"]
    assert set(_files(out)) == set(second["files"]) | {MANIFEST, LOCK, "notes.txt", "deduplicated/mine.txt"}
    for f in first["files"]:  # every file of the first run is gone or was written again by the second
        assert not (out / f).exists() or (os.stat(out / f).st_ino, os.stat(out / f).st_mtime_ns) != stamps[f], f
    assert (out / "notes.txt").read_text() == "mine"


def test_overwrite_removes_semantic_and_derived_outputs_and_keeps_caches_on_resume(tmp_path):
    out = tmp_path / "out"
    with own(out, command="run", overwrite=False):
        io.write_json_atomic({}, out / "semantic.json")
        io.write_parquet_atomic(pa.table({"a": [1]}), out / "semantic_decisions.parquet")
        io.write_json_atomic({}, out / "semantic" / "embeddings" / "k" / "meta.json")
        io.write_json_atomic({}, out / "work" / "manifest.json")
        io.write_json_atomic({}, out / "decisions.parquet")
    assert set(json.loads((out / MANIFEST).read_text())["derived"]) == {"compare.md", "compare.png"}
    (out / "compare.md").write_text("written by gpu-dedup compare")
    with own(out, command="run", overwrite=False, resume=True):  # resume: caches stay, the rest goes
        pass
    assert _files(out) == sorted([LOCK, MANIFEST, "semantic/embeddings/k/meta.json", "work/manifest.json"])
    with own(out, command="run", overwrite=True):
        pass
    assert _files(out) == sorted([LOCK, MANIFEST]) and json.loads((out / MANIFEST).read_text())["files"] == []


@pytest.mark.parametrize("table", ["paragraph_docs", "substring_docs"])
def test_a_span_programs_dataset_is_a_finished_runs_result(tmp_path, table):
    """A Ray span program's per-document table as a dataset (OUT/<table>/part-<k>.parquet, the tasks' parts):
    OUT holds a finished run's results, replaced only with --overwrite (was: an earlier run's files replaced
    without it, as if OUT held none)."""
    out = tmp_path / "out"
    with own(out, command="run", overwrite=False):  # a task's part (journaled: the write hook)
        io.write_parquet_atomic(pa.table({"id": ["a"]}), out / table / "part-000000.parquet")
    with pytest.raises(OutputExistsError, match=f"earlier run.*{table}"), own(out, command="run", overwrite=False):
        pass
    with own(out, command="run", overwrite=True):
        pass
    assert not (out / table).exists()


def test_killed_run_is_recorded_and_its_files_replaced_and_inputs_are_never_removed(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "from gpu_dedup.testing.faults import run_cli_killed_at; run_cli_killed_at()",
           "decisions:1", "run", str(corpus), "-o", str(out), "-q"]
    killed = subprocess.run(cmd, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL
    journal = (out / JOURNAL).read_text().split()
    assert "deduplicated/b.jsonl" in journal and (out / "deduplicated" / "b.jsonl").exists()
    # an unfinished run needs no --overwrite; its files go, b.jsonl with them
    assert main(["run", str(corpus / "a.jsonl"), "-o", str(out), "-q"]) == 0
    assert not (out / "deduplicated" / "b.jsonl").exists() and not (out / JOURNAL).exists()
    # the earlier run's outputs as this run's input: replacing that run would delete them
    kept = (out / "deduplicated" / "a.jsonl").read_bytes()
    assert main(["run", str(out / "deduplicated"), "-o", str(out), "-q", "--overwrite"]) == 1
    assert "is an input of this run" in _one_error(capsys)
    assert (out / "deduplicated" / "a.jsonl").read_bytes() == kept


def test_an_index_saved_in_out_is_not_removed_while_a_run_reads_it(corpus, tmp_path):
    out = tmp_path / "out"
    gpu_dedup.deduplicate(str(corpus / "a.jsonl"), CFG, out, save_index=out / "idx")
    before = (out / "idx" / "documents.parquet").read_bytes()
    with pytest.raises(ValueError, match="is an input of this run"):
        gpu_dedup.deduplicate(str(corpus / "b.jsonl"), CFG, out, against=out / "idx")
    assert (out / "idx" / "documents.parquet").read_bytes() == before
    gpu_dedup.deduplicate(str(corpus / "b.jsonl"), CFG, tmp_path / "o2", against=out / "idx")


def test_a_failed_run_removes_what_it_wrote(tmp_path, monkeypatch):
    src = _jsonl(tmp_path / "in" / "x.jsonl", _rows(30, 4))
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("mine")

    def boom(*a, **k):
        raise RuntimeError("report writer and decisions both fail")

    from gpu_dedup.lexical import dedup

    monkeypatch.setattr(dedup, "write_tables", boom)  # decisions.parquet, written after deduplicated/
    with pytest.raises(RuntimeError):
        gpu_dedup.deduplicate(str(src), CFG, out)
    assert _files(out) == [LOCK, "mine.txt"]  # deduplicated/x.jsonl was written, then removed


# 3. locks ---------------------------------------------------------------------------------------------------

HOLD = ("import sys, time\nfrom gpu_dedup.runtime.outputs import locked\ncm = locked(sys.argv[1], 'output directory')\n"
        "cm.__enter__()\nprint('held', flush=True)\ntime.sleep(120)\n")


def _holder(path):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_run_fails_at_once_naming_the_holder_and_a_killed_holder_does_not_block(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    holder = _holder(out)
    try:
        t = time.perf_counter()
        assert main(["run", str(corpus), "-o", str(out), "-q"]) == 1
        line = _one_error(capsys)
        assert time.perf_counter() - t < 10
        assert "locked" in line and f"pid {holder.pid}" in line and str(out) in line
        with pytest.raises(LockedError, match=f"pid {holder.pid}"):  # the work dir and the index too
            gpu_dedup.deduplicate(str(corpus), CFG, tmp_path / "o2", work_dir=out)
        with pytest.raises(LockedError, match="index directory"):
            gpu_dedup.deduplicate(str(corpus), CFG, save_index=out)
        assert not (tmp_path / "o2").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert json.loads((out / LOCK_INFO).read_text())["pid"] == holder.pid  # stale: its process is gone
    assert main(["run", str(corpus), "-o", str(out), "-q"]) == 0
    assert not (out / LOCK_INFO).exists()  # removed when the run let go of the lock


def test_stale_info_is_not_taken_for_the_holder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    (out / LOCK_INFO).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": "x"}))
    code = "import filelock, sys, time\nlk = filelock.FileLock(sys.argv[1])\nlk.acquire()\n" \
           "print('held', flush=True)\ntime.sleep(120)\n"
    p = subprocess.Popen([sys.executable, "-c", code, str(out / LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(LockedError, match=f"last recorded holder, pid {dead.pid}.*is gone"):
            with locked(out, "output directory"):
                pass
    finally:
        p.kill()
        p.wait()


def test_another_thread_of_the_same_process_is_refused_and_the_same_thread_nests(tmp_path):
    out = tmp_path / "out"
    errors = []
    with locked(out, "output directory"):
        with locked(out, "output directory"):  # nested: the CLI around the API
            pass

        def other():
            try:
                with locked(out, "output directory"):
                    pass
            except LockedError as exc:
                errors.append(str(exc))

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors and "another run in this process" in errors[0]


# 4. --resume proves each input's identity -----------------------------------------------------------------

def test_same_size_rewrite_with_restored_mtime_is_recomputed(tmp_path, caplog, monkeypatch):
    src = tmp_path / "src"
    for k in range(3):
        _jsonl(src / f"part-{k}.jsonl", [{**r, "id": f"{k}-{r['id']}"} for r in _rows(40, 10 + k)])
    w, out = tmp_path / "w", tmp_path / "out"
    first = gpu_dedup.deduplicate(str(src), CFG, out, work_dir=w)

    hashed = []
    real = wdmod.content_hash
    monkeypatch.setattr(wdmod, "content_hash", lambda p: hashed.append(p) or real(p))
    again = gpu_dedup.deduplicate(str(src), CFG, out, work_dir=w, resume=True)
    assert again.stats["work_dir"]["pieces_reused"] == 3 and hashed == []  # untouched: not even read
    touched = src / "part-0.jsonl"
    os.utime(touched, ns=(time.time_ns(), time.time_ns()))  # same bytes, new mtime: hashed, reused
    again = gpu_dedup.deduplicate(str(src), CFG, out, work_dir=w, resume=True)
    assert again.stats["work_dir"]["pieces_reused"] == 3 and hashed == [str(touched)]

    shard = src / "part-1.jsonl"
    st = os.stat(shard)
    lines = shard.read_text().splitlines(keepends=True)
    shard.write_text("".join(reversed(lines)))  # same size, other content
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(shard).st_size == st.st_size and os.stat(shard).st_mtime_ns == st.st_mtime_ns
    with caplog.at_level(logging.WARNING, logger="gpu_dedup"):
        resumed = gpu_dedup.deduplicate(str(src), CFG, out, work_dir=w, resume=True)
    assert resumed.stats["work_dir"]["pieces_reused"] == 2 and resumed.stats["work_dir"]["pieces_computed"] == 1
    assert "part-1.jsonl changed since its piece was written" in caplog.text and "mtime restored" in caplog.text
    fresh = gpu_dedup.deduplicate(str(src), CFG)
    assert resumed.decisions.equals(fresh.decisions) and not resumed.decisions.equals(first.decisions)
    manifest = json.loads((w / "manifest.json").read_text())
    assert manifest["version"] == wdmod.VERSION
    assert manifest["pieces"]["1"]["input"]["content"].startswith(("xxh3_128:", "blake2b_128:"))


def test_remote_input_identity_for_resume(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    rows = [{**r, "id": f"m-{r['id']}"} for r in _rows(30, 20)]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    fs.pipe("/gpu-dedup-test-resume/a.jsonl", data)
    url = "memory://gpu-dedup-test-resume/a.jsonl"
    w = tmp_path / "w"
    try:
        gpu_dedup.deduplicate(url, CFG, work_dir=w)
        assert gpu_dedup.deduplicate(url, CFG, work_dir=w, resume=True).stats["work_dir"]["pieces_reused"] == 1
        time.sleep(0.01)
        fs.pipe("/gpu-dedup-test-resume/a.jsonl", data)  # rewritten (same bytes): its "created" changes
        assert gpu_dedup.deduplicate(url, CFG, work_dir=w, resume=True).stats["work_dir"]["pieces_computed"] == 1
    finally:
        fs.rm("/gpu-dedup-test-resume", recursive=True)


# 5. impossible output paths ----------------------------------------------------------------------------------

def test_output_path_that_is_a_file_or_under_one(corpus, tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["run", str(corpus), "-o", str(f), "-q"]) == 1
    line = _one_error(capsys)
    assert str(f) in line and "not a directory" in line
    assert main(["run", str(corpus), "-o", str(f / "out"), "-q"]) == 1
    assert "is a file" in _one_error(capsys)
    assert main(["run", str(corpus), "-o", str(tmp_path / "o"), "-q", "--work-dir", str(f)]) == 1
    assert "work directory" in _one_error(capsys)
    with pytest.raises(OutputPathError, match="not a directory") as info:
        gpu_dedup.deduplicate(str(corpus), CFG, f)
    assert isinstance(info.value, OSError) and f.read_text() == "x"


def test_read_only_output_directory(corpus, tmp_path, capsys):
    if os.geteuid() == 0:  # root writes through permission bits: use a file system that refuses everyone
        target = "/sys/gpu-dedup-test-out"
        try:
            os.mkdir(target)
        except OSError:
            pass
        else:
            os.rmdir(target)
            pytest.skip("/sys accepts new directories here")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = str(ro / "out")
    assert main(["run", str(corpus), "-o", target, "-q"]) == 1
    line = _one_error(capsys)
    assert target in line and ("not writable" in line or "not permitted" in line or "denied" in line)


# 6. manifests that are not the tool's -------------------------------------------------------------------------

BAD = [("{not json", "invalid JSON"), ("[1, 2]", "JSON list"), ('{"version": 1}', 'no "format" key'),
       ('{"format": "something-else", "version": 1}', "'something-else'")]


@pytest.fixture(scope="module")
def index(corpus, tmp_path_factory):
    idx = tmp_path_factory.mktemp("idx") / "idx"
    gpu_dedup.deduplicate(str(corpus / "a.jsonl"), CFG, save_index=idx)
    return idx


@pytest.mark.parametrize("text,why", BAD + [("missing-contract", "'contract'")])
def test_foreign_index_manifest_is_named(corpus, index, tmp_path, capsys, text, why):
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "documents.parquet").write_bytes((index / "documents.parquet").read_bytes())
    if text == "missing-contract":
        m = json.loads((index / "manifest.json").read_text())
        del m["contract"]
        text = json.dumps(m)
    (idx / "manifest.json").write_text(text)
    with pytest.raises(ManifestError, match=why):
        gpu_dedup.deduplicate(str(corpus / "b.jsonl"), CFG, against=idx)
    assert main(["run", str(corpus / "b.jsonl"), "-o", str(tmp_path / "o"), "-q", "--against", str(idx)]) == 1
    line = _one_error(capsys)
    assert str(idx / "manifest.json") in line
    # an index is never saved over a manifest that is not an index's
    if "format" not in text or "something-else" in text or not text.startswith("{\""):
        with pytest.raises(ManifestError):
            gpu_dedup.deduplicate(str(corpus / "b.jsonl"), CFG, save_index=idx)
        assert (idx / "manifest.json").read_text() == text


def test_index_is_not_saved_into_a_directory_of_other_files(corpus, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "report.pdf").write_text("mine")
    with pytest.raises(ValueError, match="not a gpu_dedup index"):
        gpu_dedup.deduplicate(str(corpus / "a.jsonl"), CFG, save_index=d)
    assert _files(d) == ["report.pdf"]


@pytest.mark.parametrize("text,why", BAD + [('{"format": "gpu_dedup-workdir", "version": 3}', "'pieces'")])
def test_foreign_work_dir_manifest_is_named(corpus, tmp_path, capsys, text, why):
    w = tmp_path / "w"
    w.mkdir()
    (w / "manifest.json").write_text(text)
    with pytest.raises(ManifestError, match=why):
        gpu_dedup.deduplicate(str(corpus), CFG, work_dir=w)
    assert main(["run", str(corpus), "-o", str(tmp_path / "o"), "-q", "--work-dir", str(w), "--resume"]) == 1
    assert str(w / "manifest.json") in _one_error(capsys)
    assert (w / "manifest.json").read_text() == text  # never written over


# 7. the demo twice -----------------------------------------------------------------------------------------------

def test_demo_runs_twice_and_replaces_only_its_own_output(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "-o", str(out), "-q"]) == 0
    assert json.loads((out / MANIFEST).read_text())["command"] == "demo"
    assert main(["demo", "-o", str(out), "-q"]) == 0
    assert "2,000 documents" in capsys.readouterr().out
    other = tmp_path / "other"
    src = _jsonl(tmp_path / "in.jsonl", _rows(20, 5))
    assert main(["run", str(src), "-o", str(other), "-q"]) == 0
    assert main(["demo", "-o", str(other), "-q"]) == 1  # not a demo's directory: --overwrite needed
    assert "--overwrite" in _one_error(capsys)
