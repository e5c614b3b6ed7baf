"""The gpu-dedup command line (in-process through cli.main, plus one real subprocess)."""
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import build_parser, config_from_args, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROWS = [{"id": "a", "text": "one two three four five six seven"},
        {"id": "b", "text": "ONE two three four five six seven"},
        {"id": "c", "text": "entirely different words go right here now"}]


def test_run_writes_outputs_and_refuses_to_overwrite(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out"
    assert main(["run", str(src), "-o", str(out), "-q"]) == 0
    assert "3 documents: 2 kept, 1 removed" in capsys.readouterr().out
    assert pq.read_table(out / "decisions.parquet")["keep"].to_pylist() == [True, False, True]
    assert main(["run", str(src), "-o", str(out), "-q"]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main(["run", str(src), "-o", str(out), "-q", "--overwrite", "--threshold", "0.9"]) == 0


def test_config_file_then_flags_precedence(tmp_path):
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text('preset = "fineweb"\nid_field = "url"\n[cluster]\nthreshold = 0.7\n[lsh]\nbands = 7\n')
    args = build_parser().parse_args(["run", "x", "-o", "o", "--config", str(cfg_file), "--threshold", "0.85"])
    cfg = config_from_args(args)
    assert cfg.preset_name == "fineweb" and cfg.minhash.num_perm == 112
    assert cfg.lsh.bands == 7 and cfg.id_field == "url"
    assert cfg.cluster.threshold == 0.85  # the flag wins over the file
    assert cfg.cache_bytes is None
    for size, want in (("0", 0), ("256M", 256 << 20)):
        args = build_parser().parse_args(["run", "x", "-o", "o", "--text-cache", size])
        assert config_from_args(args).cache_bytes == want
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\nthreshhold = 0.7\n")
    with pytest.raises(ValueError, match="threshhold"):
        config_from_args(build_parser().parse_args(["run", "x", "-o", "o", "--config", str(bad)]))


def test_bad_input_error_names_file_and_line(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": \n')
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--on-error", "skip"]) == 0
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["read"]["skipped"][0]["line"] == 2


def test_no_verify_needs_components(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "--no-verify", "-q"]) == 1
    assert "--policy components" in capsys.readouterr().err
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "--no-verify", "--policy", "components", "-q"]) == 0


def test_params_and_help_show_examples(capsys):
    assert main(["params", "--threshold", "0.8", "--num-perm", "112", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "p50" in out
    for sub in (["--help"], ["run", "--help"], ["demo", "--help"], ["params", "--help"]):
        with pytest.raises(SystemExit):
            main(sub)
        assert "example" in capsys.readouterr().out


def test_demo_subprocess(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gpu_dedup.cli", "demo", "-o", str(tmp_path / "d"), "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "2,000 documents" in r.stdout
    assert (tmp_path / "d" / "decisions.parquet").exists()


def test_paragraph_dedup_and_screen_commands(tmp_path, capsys):
    para = "a repeated boilerplate paragraph that appears in several documents of the crawl"
    rows = [{"id": f"p{i}", "text": f"unique opening number {i} with words\n\n{para}\n\nclosing line {i}"}
            for i in range(3)]
    src = _jsonl(tmp_path / "in.jsonl", rows)
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--paragraph-dedup", "--paragraph-exact"]) == 0
    assert "2 of 9 paragraphs cut" in capsys.readouterr().out
    spans = pq.read_table(tmp_path / "o" / "removed_spans.parquet")
    assert spans.column(0).to_pylist() == ["p1", "p2"]
    bench = _jsonl(tmp_path / "bench.jsonl", [{"id": "q1", "prompt": "Unique opening number 1 with words: "
                                               "a repeated boilerplate paragraph"}])
    assert main(["screen", str(src), "--benchmark", str(bench), "-o", str(tmp_path / "s"), "--ngram", "8"]) == 0
    out = capsys.readouterr().out
    assert "Nothing was removed" in out
    m = pq.read_table(tmp_path / "s" / "matches.parquet")
    assert m.column(0).to_pylist() == ["p1"]


def test_semantic_run_and_compare(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("sentence_transformers")
    from gpu_dedup.testing.evalcorpus import make_corpus
    from gpu_dedup.testing.models import build_random_model

    model = build_random_model(tmp_path / "tiny-model")
    rows = make_corpus(120, seed=3, mean_words=60, template_families=1).select(["id", "text"]).to_pylist()
    src = _jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "o"
    assert main(["run", str(src), "-o", str(out), "-q", "--semantic", "--model", model, "--eps", "0.05"]) == 0
    d = pq.read_table(out / "decisions.parquet")
    assert {"cosine", "semantic_nearest_id", "semantic_cluster"} <= set(d.column_names)
    assert d.num_rows == 120
    # the default order saw only the lexical survivors: compare asks for the semantic stage beside them
    assert main(["compare", str(out)]) == 1
    assert "--semantic-order beside" in capsys.readouterr().err
    assert main(["run", str(src), "-o", str(out), "-q", "--semantic", "--model", model, "--eps", "0.05",
                 "--semantic-order", "beside", "--overwrite"]) == 0
    assert main(["compare", str(out)]) == 0
    assert "semantic" in capsys.readouterr().out.lower()
    assert (out / "compare.png").exists()
    with pytest.raises(SystemExit):
        main(["run", str(src), "-o", str(tmp_path / "x"), "--eps", "0.1", "--bad-flag"])
    assert main(["run", str(src), "-o", str(tmp_path / "x"), "--eps", "0.1", "-q"]) == 1
    assert "--semantic" in capsys.readouterr().err


@pytest.mark.parametrize("text, expect", [
    ("[shingle]\nn = true\n", ["c.toml", "ShingleConfig.n", "True"]),         # bool is not an int
    ("[cluster]\nthreshold = true\n", ["c.toml", "ClusterConfig.threshold"]),
    ("[shingle\nn = 3\n", ["c.toml", "not valid TOML", "line 1"]),
    ("[clustr]\nthreshold = 0.9\n", ["c.toml", "clustr", "did you mean 'cluster'"]),
    ("[cluster]\ntreshold = 0.9\n", ["c.toml", "treshold", "did you mean 'threshold'"]),
    ("thread = 2\n", ["c.toml", "did you mean 'threads'"]),
])
def test_config_file_errors_name_the_file_and_the_key(tmp_path, capsys, text, expect):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(e in err for e in expect), err
    assert not (tmp_path / "o").exists()


def test_yaml_config_errors_name_the_file(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    for text, expect in (("- a\n- b\n", "mapping at the top level"), ("cluster: [\n", "not valid YAML"),
                         ("cluster:\n  threshold: 0.85\n", None)):
        cfg = tmp_path / "c.yaml"
        cfg.write_text(text)
        code = main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--config", str(cfg), "--overwrite"])
        err = capsys.readouterr().err
        if expect is None:
            assert code == 0, err
        else:
            assert code == 1 and "c.yaml" in err and expect in err, err


@pytest.mark.parametrize("flag, value, expect", [
    ("--batch-mb", "inf", "argument --batch-mb: expected a finite number"),
    ("--batch-mb", "nan", "argument --batch-mb: expected a finite number"),
    ("--batch-mb", "-1", "argument --batch-mb: expected a number of MB >= 0.0009765625 (1 KiB), got '-1'"),
    ("--threshold", "nan", "argument --threshold"),
    ("--memory-budget", "1e999G", "argument --memory-budget"),
    ("--text-cache", "lots", "argument --text-cache"),
    ("--workers", "0", "argument --workers: expected a whole number >= 1, got '0'"),  # issue 28 item 6
    ("--workers", "-2", "argument --workers: expected a whole number >= 1"),
])
def test_bad_numbers_name_the_flag(tmp_path, capsys, flag, value, expect):
    with pytest.raises(SystemExit) as exc:
        main(["run", "x.jsonl", "-o", str(tmp_path / "o"), flag, value])
    assert exc.value.code == 2 and expect in capsys.readouterr().err


def test_flag_values_the_config_refuses_name_the_flag(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    for flag, value in (("--threshold", "1.5"), ("--ngram", "0"), ("--bands", "0")):
        assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", flag, value]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"gpu-dedup: error: {flag}") and err.count(flag) == 1, err  # once (issue 36 item 12)


def test_progress_bars_on_in_the_cli_off_in_the_api():
    from gpu_dedup import RunConfig

    assert RunConfig().progress is False and RunConfig.preset("fineweb").progress is False
    assert config_from_args(build_parser().parse_args(["run", "x", "-o", "o"])).progress is True
    assert config_from_args(build_parser().parse_args(["run", "x", "-o", "o", "-q"])).progress is False


@pytest.mark.parametrize("order, kept, para_rows", [("after", 6, 6), ("before", 7, 7), ("beside", 6, 7)])
def test_paragraph_and_document_dedup_chain_in_the_stated_order(tmp_path, capsys, order, kept, para_rows):
    boiler = "Subscribe to our newsletter for weekly updates on everything."
    docs = [{"id": f"d{i}", "text": f"Title number {i} is here and long enough\n"
             + " ".join(f"w{i}_{k}" for k in range(40)) + f"\n{boiler}"} for i in range(6)]
    docs.append({"id": "dup", "text": docs[0]["text"]})  # an exact copy of d0
    src = tmp_path / "in"
    src.mkdir()
    _jsonl(src / "a.jsonl", docs)
    out = tmp_path / "out"
    assert main(["run", str(src), "-o", str(out), "-q", "--paragraph-dedup", "--paragraph-order", order]) == 0
    decisions = pq.read_table(out / "decisions.parquet")
    assert sum(decisions["keep"].to_pylist()) == kept
    cut = [json.loads(line) for line in (out / "paragraph_deduplicated" / "a.jsonl").read_text().splitlines()]
    assert len(cut) == para_rows
    assert sum(boiler in r["text"] for r in cut) == 1  # the repeated line survives once, in d0
    if order == "before":  # the copy's paragraphs were all seen: it reaches the document stages empty
        assert {r["id"]: r["text"] for r in cut}["dup"] == ""


@pytest.mark.parametrize("flags, said", [
    (["--bloom-fp", "0.1"], "--bloom-fp belongs to the --paragraph-dedup stage"),
    (["--paragraph-order", "before", "--paragraph-exact"],
     "--paragraph-order / --paragraph-exact belong to the --paragraph-dedup stage"),
    (["--substring-min-tokens", "10"], "--substring-min-tokens belongs to the --substring-dedup stage"),
    (["--paragraph-dedup", "--substring-memory-budget", "2G"],
     "--substring-memory-budget belongs to the --substring-dedup stage"),
])
def test_a_span_stages_flags_without_the_stage_are_refused(tmp_path, capsys, flags, said):
    """run --bloom-fp 0.1 (no --paragraph-dedup) ran, rc 0, without the stage and without a word about the flag."""
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", *flags]) == 1
    err = capsys.readouterr().err
    assert said in err and "which this run does not run" in err, err
    assert not (tmp_path / "o" / "decisions.parquet").exists()


def test_a_span_stages_flags_at_their_defaults_or_with_the_stage_run(tmp_path):
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["run", str(src), "-o", str(tmp_path / "o1"), "-q", "--bloom-fp", "1e-9"]) == 0
    assert main(["run", str(src), "-o", str(tmp_path / "o2"), "-q", "--paragraph-dedup", "--bloom-fp", "0.01"]) == 0


def test_paragraph_after_needs_the_deduplicated_documents(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--paragraph-dedup", "--no-deduplicated"]) == 1
    assert "--paragraph-order" in capsys.readouterr().err


def test_screen_refuses_an_output_inside_its_inputs(tmp_path, capsys):
    src = tmp_path / "corpus"
    src.mkdir()
    _jsonl(src / "a.jsonl", ROWS)
    bench = _jsonl(tmp_path / "bench.jsonl", [{"id": "q", "question": ROWS[0]["text"]}])
    assert main(["screen", str(src), "--benchmark", str(bench), "-o", str(src / "screen"), "-q"]) == 1
    assert "lies inside the input" in capsys.readouterr().err and not (src / "screen").exists()


def test_ctrl_c_is_one_line_and_cleans_up(tmp_path, capsys, monkeypatch):
    """Issue 28 item 10: Ctrl-C in the middle of a run prints one line (no traceback), exits 130, and the run's
    outputs are removed as on any failure (OUT, which the run made, is gone)."""
    from gpu_dedup.filters import stage

    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"some words {i}"}) + "\n" for i in range(5)))

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(stage, "_score_pass", interrupted, raising=True)
    assert main(["filter", str(src), "-o", str(tmp_path / "out"), "--rules", "gopher", "-q"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == ("gpu-dedup: interrupted (Ctrl-C); what this run had written was removed, as on any "
                           "failure; `filter` keeps nothing to resume from: run it again")
    assert not (tmp_path / "out").exists()


def _interrupt_at(monkeypatch, point, k):
    """Ctrl-C the k-th time the run passes checkpoint ``point`` (runtime/workdir.checkpoint)."""
    from gpu_dedup.runtime.workdir import CHECKPOINT_HOOKS

    seen = []

    def hook(name):
        if name == point:
            seen.append(name)
            if len(seen) == k:
                raise KeyboardInterrupt

    monkeypatch.setattr("gpu_dedup.runtime.workdir.CHECKPOINT_HOOKS", CHECKPOINT_HOOKS + [hook])


def _run_with_work_dir(tmp_path):
    """Three small JSON Lines files, and `run` over them with a work directory: (src, out, work, argv)."""
    src = tmp_path / "in"
    src.mkdir()
    for f in range(3):
        _jsonl(src / f"p{f}.jsonl", [dict(r, id=f"{f}-{r['id']}") for r in ROWS])
    out, work = tmp_path / "out", tmp_path / "work"
    return src, out, work, ["run", str(src), "-o", str(out), "--device", "cpu", "-q", "--work-dir", str(work)]


def test_ctrl_c_says_when_resume_can_finish_the_run(tmp_path, capsys, monkeypatch):
    """Issue 36 item 14: Ctrl-C's line says whether --resume can finish the run, and it can where it says so:
    a run with a work directory keeps its pieces there (the same command with --resume reuses them); one
    without is told how to keep them next time."""
    src, out, work, argv = _run_with_work_dir(tmp_path)
    _interrupt_at(monkeypatch, "piece", 2)
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err == (f"gpu-dedup: interrupted (Ctrl-C); what this run had written was removed, as on any failure, "
                   f"except the work directory {work}: the same command with --resume finishes the run, reusing "
                   f"the pieces it holds"), err
    monkeypatch.undo()
    assert main(argv + ["--resume"]) == 0
    assert json.loads((out / "run.json").read_text())["work_dir"]["pieces_reused"] == 2
    _interrupt_at(monkeypatch, "batch", 1)
    assert main(["run", str(src), "-o", str(tmp_path / "o2"), "--device", "cpu", "-q"]) == 130
    assert "nothing was kept to resume from (a run given --work-dir DIR, or --resume, keeps its pieces there" in \
        capsys.readouterr().err


_SIGTERM_AT_PIECE = """
import os, signal, sys
from gpu_dedup.cli.main import main
from gpu_dedup.runtime import workdir
seen = []
def hook(name):
    if name == "piece":
        seen.append(name)
        if len(seen) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
workdir.CHECKPOINT_HOOKS.append(hook)
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_is_handled_as_ctrl_c(tmp_path):
    """A scheduler's stop (SIGTERM) killed the process: exit -15, the lock file and half a run left in OUT, no
    word. It now goes the way of Ctrl-C: what the run wrote is removed, the work directory stays, the line says
    so, and the exit status is 143 (128 + 15); --resume then finishes the run."""
    import subprocess
    import sys

    src, out, work, argv = _run_with_work_dir(tmp_path)
    r = subprocess.run([sys.executable, "-c", _SIGTERM_AT_PIECE, *argv], capture_output=True, text=True)
    assert r.returncode == 143, (r.returncode, r.stderr[-2000:])
    assert r.stderr.strip().endswith(f"gpu-dedup: interrupted (SIGTERM); what this run had written was removed, as "
                                     f"on any failure, except the work directory {work}: the same command with "
                                     f"--resume finishes the run, reusing the pieces it holds"), r.stderr[-2000:]
    assert not out.exists() or not any(out.iterdir())
    assert main(argv + ["--resume"]) == 0
    assert json.loads((out / "run.json").read_text())["work_dir"]["pieces_reused"] == 2


def test_workers_below_one_refused_in_the_api(tmp_path):
    """Issue 28 item 6: workers=0 is refused by the Python API too (the CLI's parser refuses --workers 0)."""
    from gpu_dedup import RunConfig, deduplicate

    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match=r"workers=.* is no number of Ray worker processes"):
            deduplicate(src, RunConfig(), tmp_path / "o", engine="ray", workers=bad)


@pytest.mark.parametrize("argv, said", [
    (["run", "--workers", "2"], "--workers 2 needs --engine 'ray': add it, or leave it out"),
    (["run", "--workers", "2", "--partitions", "3"], "--workers 2, --partitions 3 need --engine 'ray'"),
    (["run", "--address", "auto", "--semantic"], "--address 'auto' needs --engine 'ray'"),
    (["filter", "--rules", "gopher", "--workers", "2"], "--workers 2 needs --engine 'ray'"),
])
def test_ray_flags_without_engine_ray_are_refused_before_anything_is_written(tmp_path, capsys, argv, said):
    """`run --workers 2` ran on one process without a word (the API refused it; `run` dropped the arguments
    before its check): every command refuses a Ray flag without --engine ray, naming it and its value, before
    OUT exists."""
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out"
    assert main([argv[0], str(src), "-o", str(out), *argv[1:], "-q"]) == 1
    assert said in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("command", [["run"], ["filter", "--rules", "gopher"]])
def test_a_ray_setting_of_a_config_file_without_engine_ray_names_the_file(tmp_path, capsys, command):
    """`--config F` whose F sets workers without the Ray engine: refused naming F (not a --workers flag nobody
    passed), before OUT exists; with engine: ray in F too, the check passes."""
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workers: 2\npartitions: 3\n" if command == ["run"] else "workers: 2\n")
    out = tmp_path / "out"
    assert main([command[0], str(src), "-o", str(out), *command[1:], "--config", str(cfg), "-q"]) == 1
    err = capsys.readouterr().err
    assert f"config file '{cfg}' sets workers: 2" in err and "add engine: ray to it or pass --engine ray" in err
    assert not out.exists()


def test_ray_arguments_without_engine_ray_are_refused_by_the_api(tmp_path):
    from gpu_dedup import Pipeline
    from gpu_dedup.lexical.program import Dedup
    from gpu_dedup.pipeline.compose import run_dedup
    from gpu_dedup.runtime.program import Env

    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    with pytest.raises(ValueError, match=r"^workers=2 needs engine='ray'"):
        run_dedup(src, None, tmp_path / "o", workers=2)
    with pytest.raises(ValueError, match=r"^address='auto' needs engine='ray'"):
        Env(address="auto")
    with pytest.raises(ValueError, match=r"^workers=3 needs engine='ray'"):
        Pipeline([Dedup()]).run(src, tmp_path / "p", workers=3)
    assert not (tmp_path / "o").exists() and not (tmp_path / "p").exists()


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_filter_workers_below_one_refused_before_ray_starts(tmp_path, capsys, bad):
    """`filter --engine ray --workers 0` ran (a cluster of every CPU, as if --workers were left out) and
    --workers -3 ended in Ray's traceback: filter's parser took any int where the other commands' take a whole
    number >= 1."""
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        main(["filter", str(src), "-o", str(out), "--rules", "gopher", "--engine", "ray", "--workers", bad, "-q"])
    assert f"argument --workers: expected a whole number >= 1, got '{bad}'" in capsys.readouterr().err
    assert not out.exists()


def test_workers_below_one_refused_by_every_api_before_ray_starts(tmp_path):
    """deduplicate refused workers=0 (issue 28); filter_corpus, Env and Pipeline.run took it (a cluster of every
    CPU) or handed -1 to Ray (its traceback), after OUT was made."""
    from gpu_dedup import Pipeline
    from gpu_dedup.filters.config import FilterConfig
    from gpu_dedup.filters.stage import filter_corpus
    from gpu_dedup.lexical.program import Dedup
    from gpu_dedup.runtime.program import Env

    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    for bad in (0, -1, True, 2.0):
        said = rf"^workers={bad!r} is no number of Ray worker processes"
        with pytest.raises(ValueError, match=said):
            Env(engine="ray", workers=bad)
        with pytest.raises(ValueError, match=said):
            filter_corpus(src, FilterConfig(rules="gopher"), tmp_path / "f", engine="ray", workers=bad)
        with pytest.raises(ValueError, match=said):
            Pipeline([Dedup()]).run(src, tmp_path / "p", engine="ray", workers=bad)
    assert not (tmp_path / "f").exists() and not (tmp_path / "p").exists()


def test_paragraph_unit_action_and_fp_sample_flags_set_the_config(capsys):
    """--paragraph-split sentence|span3, --paragraph-action and --paragraph-fp-sample reach ParagraphConfig; the
    defaults are the config's; a fraction outside [0, 1] is refused naming the flag."""
    from gpu_dedup.cli.steps import paragraph_config as _paragraph_config
    from gpu_dedup.paragraph.dedup import ParagraphConfig

    args = build_parser().parse_args(["run", "c.jsonl", "-o", "o", "--paragraph-dedup", "--paragraph-split", "span3",
                                      "--paragraph-action", "remove-all", "--paragraph-fp-sample", "0.25"])
    p = _paragraph_config(args)
    assert (p.split, p.action, p.fp_sample) == ("span3", "remove-all", 0.25)
    d = _paragraph_config(build_parser().parse_args(["run", "c.jsonl", "-o", "o", "--paragraph-dedup"]))
    assert (d.split, d.action, d.fp_sample) == (ParagraphConfig().split, "keep-first", 0.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "c.jsonl", "-o", "o", "--paragraph-fp-sample", "1.5"])
    assert "--paragraph-fp-sample" in capsys.readouterr().err


# Imported by neither the command line nor a CPU `run` that does not use them (issue 38 item 2: start-up <= 1 s):
# matplotlib (report.html draws SVG), numba.cuda (device=auto on a machine without an NVIDIA device), the GPU,
# model and cluster libraries. pandas is not on the list: pyarrow imports it as it builds an array.
HEAVY = ("matplotlib", "PIL", "numba.cuda", "cupy", "cudf", "torch", "ray", "sklearn", "transformers",
         "sentence_transformers", "datasketch", "fasttext", "kenlm")


def _imported(code: str, tmp_path) -> list[str]:
    """The modules of HEAVY that ``code`` (then ``print(LOADED)``) imported, in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_CUDA_DRIVER")}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    probe = (f"\nimport sys\nprint('LOADED', sorted(m for m in {HEAVY!r} if sys.modules.get(m) is not None))\n")
    r = subprocess.run([sys.executable, "-c", code + probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("LOADED ")][-1]
    return json.loads(line[len("LOADED "):].replace("'", '"'))


def test_the_command_line_imports_nothing_heavy(tmp_path):
    assert _imported("import gpu_dedup.cli\nimport sys\nassert 'numba' not in sys.modules", tmp_path) == []


def test_a_cpu_run_imports_only_what_it_uses(tmp_path):
    """A whole `gpu-dedup run` with its report, device auto on a machine without an NVIDIA device (the device
    paths pointed at nothing, so the test says the same on a GPU machine)."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": f"shared words of a document number {i % 9} " * 20})
                           + "\n" for i in range(60)))
    code = ("from gpu_dedup.runtime import device\n"
            f"device.GPU_DEVICE_PATHS = ({str(tmp_path / 'nvidiactl')!r},)\n"
            "from gpu_dedup.cli import main\n"
            f"assert main(['run', {str(src)!r}, '-o', {str(tmp_path / 'out')!r}, '-q']) == 0\n")
    assert _imported(code, tmp_path) == []
    assert (tmp_path / "out" / "report.html").exists() and (tmp_path / "out" / "report" / "counts.svg").exists()
