"""gpu_dedup/cli/flags.py: errors name the flags on the command line and the arguments in the API (issue 28 item
5), from each command's own parser; and the CLI errors of wrong thresholds (item 4)."""
import json

import pytest

from gpu_dedup.cli import build_parser, main
from gpu_dedup.cli.flags import cli_message, command_flags, subcommand_parser


def _flags(command):
    return command_flags(subcommand_parser(build_parser(), command))


@pytest.mark.parametrize("command, api, cli", [
    ("filter", "FilterConfig.select needs dsir_target (the target text)",
     "--select needs --dsir-target (the target text)"),
    ("filter", "m.arpa has no header: pass normalization=LMNormalization(...) describing it",
     "m.arpa has no header: pass --lm-normalization MODE describing it"),
    ("train-lm", "x.arpa exists; pass overwrite=True (or choose another path)", "x.arpa exists; pass --overwrite (or "
     "choose another path)"),
    ("train-classifier", "give every document a group, or set group_field=None to", "give every document a group, "
     "or set --no-group-field to"),
    ("train-classifier", "name the field with text_field=NAME", "name the field with --text-field NAME"),
    ("run", "paragraph_order='after' cuts paragraphs from OUT/deduplicated/, which write_deduplicated=False turns "
     "off", "--paragraph-order 'after' cuts paragraphs from OUT/deduplicated/, which --no-deduplicated turns off"),
    ("run", "`paragraph` runs in one process; output_dir '/x' is the input; lexical=False needs it",
     "--paragraph-dedup runs in one process; --output '/x' is the input; --no-lexical needs it"),
    ("filter", "select the documents; the id_field value; /data/dsir_target/a.jsonl", "select the documents; the "
     "--id-field value; /data/dsir_target/a.jsonl"),  # plain words and paths are left alone
    # issue 36 item 12: a field's flag whose dest is not the field's name (--score sets scores), a switch that sets
    # its field to False (--no-verify), and messages that give both forms, each written once
    ("run", "which scores='q=...' would compute", "which --score 'q=...' would compute"),
    ("run", "policy='representative' needs verify=True", "--policy 'representative' needs no --no-verify"),
    ("run", "verify=False needs policy='components'", "--no-verify needs --policy 'components'"),
    ("run", "annotate=True annotates deduplicated/, which write_deduplicated=False turns off",
     "--annotate annotates deduplicated/, which --no-deduplicated turns off"),
    ("run", "drop bad rows with --on-error skip (Python: on_error='skip')",
     "drop bad rows with --on-error skip (Python: on_error='skip')"),
    ("run", "ids (--no-id-field; Python: id_field=None), or fix the data",
     "ids (--no-id-field; Python: id_field=None), or fix the data"),
    ("run", "raise text_cache_bytes or cache_bytes (--text-cache)", "raise text_cache_bytes or --text-cache"),
    ("run", "--threshold: ClusterConfig.threshold must be in (0, 1]", "--threshold must be in (0, 1]"),
    ("run", "--ngram: n must be >= 1", "--ngram: n must be >= 1"),  # a prefix naming another word stays
    ("run", "--perplexity: perplexity_buckets needs a model", "--perplexity: --perplexity-buckets needs a model"),
    # two flags where one's name begins the other's, and a NAME=F inside a flag's value: written as they are
    ("run", "perplexity_keep / perplexity_buckets rank the whole corpus: run `gpu-dedup filter ... --perplexity "
     "MODEL:keep=F` first", "--perplexity / --perplexity-buckets rank the whole corpus: run `gpu-dedup filter ... "
     "--perplexity MODEL:keep=F` first"),
    # a stage's field whose bare name is another flag's: run's --substring-* flags, not the dedup's --memory-budget
    ("run", "SubstringConfig.memory_budget must be None", "--substring-memory-budget must be None"),
    ("run", "give SubstringConfig.memory_budget or SubstringConfig.chunk_tokens, not both",
     "give --substring-memory-budget or --substring-chunk-tokens, not both"),
    ("run", "SubstringConfig.work_dir must be an existing directory",
     "--substring-work-dir must be an existing directory"),
    ("run", "memory_budget must be None; RunConfig.work_dir", "--memory-budget must be None; --work-dir"),
    ("run", "not a tokenizer.json file (SubstringConfig.tokenizer)",
     "not a tokenizer.json file (--substring-tokenizer)"),
    ("substring", "SubstringConfig.memory_budget must be None", "--memory-budget must be None"),
    ("substring", "SubstringConfig.min_doc_bytes must be", "--min-doc-bytes must be"),
    ("compare", "n_examples must be a non-negative int, got -1", "--examples must be a non-negative int, got -1"),
    # the hostile-input sweep: the semantic stage's fields are run's --clusters / --semantic-keep (not --keep), and
    # train-classifier's bound names both flags
    ("run", "SemanticConfig.n_clusters must be a positive int", "--clusters must be a positive int"),
    ("run", "keep column 'x' is not in any row; add it or choose another keep policy (SemanticConfig.keep)",
     "keep column 'x' is not in any row; add it or choose another keep policy (--semantic-keep)"),
    ("train-classifier", "TrainClassifierConfig.minn (5) must be <= TrainClassifierConfig.maxn (2); n-grams",
     "--minn (5) must be <= --maxn (2); n-grams"),
    ("train-classifier", "char n-grams of minn..maxn characters are used (maxn=0: none)",
     "char n-grams of minn..maxn characters are used (--maxn 0: none)"),
])
def test_api_names_become_the_commands_flags(command, api, cli):
    assert cli_message(api, _flags(command)) == cli


def _corpus(tmp_path):
    p = tmp_path / "in" / "c.jsonl"
    p.parent.mkdir(exist_ok=True)
    p.write_text("".join(json.dumps({"id": f"d{i}", "text": f"some words here {i}"}) + "\n" for i in range(5)))
    return str(p)


@pytest.mark.parametrize("argv, said", [
    (["--substring-memory-budget", "1K"], "--substring-memory-budget must be None or an int of at least 1 MiB"),
    (["--substring-memory-budget", "2G", "--substring-chunk-tokens", "100"],
     "give --substring-memory-budget or --substring-chunk-tokens, not both"),
    (["--substring-memory-budget", "2M", "--substring-work-dir", "FILE"],
     "--substring-work-dir must be an existing directory"),
    (["--substring-tokenizer", "FILE"], "tokenizer.json file (--substring-tokenizer)"),
    (["--substring-min-doc-bytes", "-1"], "--substring-min-doc-bytes must be an int >= 0"),
])
def test_run_substring_errors_name_runs_substring_flags(tmp_path, capsys, argv, said):
    """run --substring-dedup's errors named the substring command's flags (--chunk-tokens, --tokenizer) or the
    dedup's (--memory-budget, --work-dir): flags this run did not take or that set something else."""
    src = _corpus(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("not json")
    argv = [str(afile) if a == "FILE" else a for a in argv]
    assert main(["run", src, "-o", str(tmp_path / "o"), "-q", "--substring-dedup", *argv]) == 1
    err = capsys.readouterr().err
    assert said in err, err
    for wrong in ("(--memory-budget", " --memory-budget ", "--chunk-tokens)", "(--tokenizer)", "(--work-dir)"):
        assert wrong not in err, err


ARPA = "\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\t0\n-0.5\t</s>\n-0.5\tsome\n\n\\end\\\n"


def test_command_line_errors_name_flags(tmp_path, capsys):
    corpus = _corpus(tmp_path)
    (tmp_path / "m.arpa").write_text(ARPA)
    assert main(["filter", corpus, "-o", str(tmp_path / "o1"), "--rules", "gopher", "--select", "3"]) == 1
    err = capsys.readouterr().err
    assert "--select needs --dsir-target" in err and "FilterConfig" not in err
    assert main(["filter", corpus, "-o", str(tmp_path / "o2"), "--perplexity", str(tmp_path / "m.arpa")]) == 1
    err = capsys.readouterr().err
    assert "--lm-normalization MODE" in err and "LMNormalization(" not in err
    (tmp_path / "exists.arpa").write_text("x")
    assert main(["train-lm", corpus, "-o", str(tmp_path / "exists.arpa")]) == 1
    err = capsys.readouterr().err
    assert "pass --overwrite" in err and "overwrite=True" not in err


def test_hints_are_not_mangled(tmp_path, capsys):
    """Issue 36 item 12: the command line's errors name each setting once, as its flag, and leave the API's
    own hint as the API writes it."""
    corpus = _corpus(tmp_path)
    with open(corpus, "a") as fh:
        fh.write("{bad\n")
    assert main(["run", corpus, "-o", str(tmp_path / "o1"), "--device", "cpu", "-q"]) == 1
    err = capsys.readouterr().err
    assert "--on-error skip (Python: on_error='skip')" in err, err
    assert main(["run", corpus, "-o", str(tmp_path / "o2"), "--threshold", "1.5"]) == 1
    assert capsys.readouterr().err == "gpu-dedup: error: --threshold must be in (0, 1], got 1.5\n"


@pytest.mark.parametrize("flag, value, tail", [
    ("--classifier", "q=Q:maxx", "'maxx'"), ("--classifier", "q=Q:nan", "'nan'"), ("--classifier", "q=Q:", "''"),
    ("--perplexity", "M:abc", "'abc'"), ("--perplexity", "M:max1000", "'max1000'"), ("--perplexity", "M:inf", "'inf'"),
])
def test_a_wrong_threshold_is_not_reported_as_a_missing_file(tmp_path, capsys, flag, value, tail):
    corpus = _corpus(tmp_path)
    for name in ("q.bin", "m.arpa"):
        (tmp_path / name).write_bytes(b"x")
    value = value.replace("Q", str(tmp_path / "q.bin")).replace("M", str(tmp_path / "m.arpa"))
    assert main(["filter", corpus, "-o", str(tmp_path / "o"), flag, value]) == 1
    err = capsys.readouterr().err
    assert f"{tail} after the last ':' is not a threshold; write MODEL:" in err and "does not exist" not in err
    # no such file either: said after the threshold
    assert main(["filter", corpus, "-o", str(tmp_path / "o"), flag, value.replace("q.bin", "nope.bin")
                 .replace("m.arpa", "nope.arpa")]) == 1
    err = capsys.readouterr().err
    assert err.index("is not a threshold") < err.index("no model file")


def test_a_path_with_a_colon_is_still_a_model(tmp_path):
    from gpu_dedup.filters.config import split_threshold

    odd = tmp_path / "a:b.bin"
    odd.write_bytes(b"x")
    assert split_threshold("--perplexity", str(odd), directions=False) == (str(odd), None)
    assert split_threshold("--classifier", f"{odd}:max0.3") == (str(odd), (0.3, "max"))
    assert split_threshold("--perplexity", "m.arpa:1000", directions=False) == ("m.arpa", 1000.0)


@pytest.mark.parametrize("argv, said", [
    (["run", "x.jsonl", "-o", "o", "--treshold", "0.9"], "gpu-dedup run: error: unrecognized arguments: --treshold "
     "(did you mean --threshold?) 0.9; `gpu-dedup run --help` lists its flags"),
    (["filter", "x.jsonl", "-o", "o", "--lid-treshold=0.3"], "--lid-treshold=0.3 (did you mean --lid-threshold?)"),
    (["substring", "x.jsonl", "-o", "o", "--min-tokns", "9"], "--min-tokns (did you mean --min-tokens?)"),
    (["run", "x.jsonl", "-o", "o", "--zzzzzz"], "unrecognized arguments: --zzzzzz; `gpu-dedup run --help`"),
])
def test_a_mistyped_flag_names_the_nearest_flag_of_its_command(capsys, argv, said):
    """Issue 36 item 14: a mistyped flag is said by the command that was run (not the top-level usage), with
    the nearest of that command's flags; nothing near: no guess."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and said in err and "usage: gpu-dedup [-h]" not in err, err


@pytest.mark.parametrize("argv, said", [
    (["run", "C", "-o", "O", "--semantic", "--model", "D", "--clusters", "0"],
     "argument --clusters: expected a whole number >= 1, got '0'"),
    (["run", "C", "-o", "O", "--threads", "0"], "argument --threads: expected a whole number >= 1, got '0'"),
    (["filter", "C", "-o", "O", "--threads", "0"], "argument --threads: expected a whole number >= 1, got '0'"),
    (["run", "C", "-o", "O", "--batch-mb", "0.000001"],
     "argument --batch-mb: expected a number of MB >= 0.0009765625 (1 KiB), got '0.000001'"),
    (["filter", "C", "-o", "O", "--rules", "gopher", "--batch-mb", "0"], "argument --batch-mb: expected a number > 0"),
])
def test_bad_numbers_are_said_in_the_flags_terms(tmp_path, capsys, argv, said):
    """The hostile-input sweep: --threads 0 was "a positive int or None", --batch-mb 0.000001 "an int >= 1024"
    (bytes, to a flag in MB), --clusters 0 named SemanticConfig.n_clusters: refused by the flag, in its terms."""
    argv = [_corpus(tmp_path) if a == "C" else str(tmp_path / "o") if a == "O" else str(tmp_path) if a == "D" else a
            for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and said in err and "None" not in err.splitlines()[-1], err


def test_screen_file_errors_name_the_flag(tmp_path, capsys):
    """screen --benchmark DIR said the directory "does not exist"; --common-phrases FILE that is not there gave a bare
    "[Errno 2] ..."; train-lm --screen pointed at screen's --benchmark-field, which train-lm does not have."""
    corpus, out = _corpus(tmp_path), str(tmp_path / "o")
    (tmp_path / "bench").mkdir()
    assert main(["screen", corpus, "-o", out, "-q", "--benchmark", str(tmp_path / "bench")]) == 1
    err = capsys.readouterr().err
    assert f"error: --benchmark '{tmp_path / 'bench'}' is a directory; give the benchmark files in it" in err, err
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "i1", "text": "some words here and more"}) + "\n")
    assert main(["screen", corpus, "-o", out, "-q", "--benchmark", str(items), "--common-phrases", "nope.txt"]) == 1
    err = capsys.readouterr().err
    assert "error: --common-phrases: common-phrase file 'nope.txt' does not exist; give a text file" in err, err
    assert main(["train-lm", corpus, "-o", str(tmp_path / "m.arpa"), "--screen", str(items)]) == 1
    err = capsys.readouterr().err
    assert "--screen: benchmark file" in err and "benchmark-field" not in err and "fields=" not in err, err
    assert "give JSON Lines / JSON / Parquet benchmark items (fields prompt, question" in err, err


def _helps(command):
    return {a.option_strings[-1]: a.help for a in subcommand_parser(build_parser(), command)._actions
            if a.option_strings}


def test_run_help_names_the_substring_stages_own_flags():
    """run --substring-memory-budget's help said tokens spill to --work-dir (the dedup's): --substring-work-dir."""
    helps = _helps("run")
    assert "tokens spilled to --substring-work-dir and" in helps["--substring-memory-budget"]
    assert "spilled tokens with --substring-memory-budget (" in helps["--substring-work-dir"]
    helps = _helps("substring")
    assert "tokens spilled to --work-dir and" in helps["--memory-budget"]  # the substring command's own --work-dir
