"""One command-line surface (gpu_dedup/cli/common.py, issue 34 item 4): every program command takes every common
flag, with the same choices, and the flags do what they say there (--on-error, --overwrite, --config, -v, --threads)."""
import json

import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import build_parser, main
from gpu_dedup.cli.common import COMMON, COMMON_FLAGS, config_tokens, env_from_args
from gpu_dedup.cli.flags import subcommand_parser
from gpu_dedup.errors import ConfigError

PROGRAMS = ("run", "filter", "substring", "screen", "pipeline")


def _actions(command):
    return {s: a for a in subcommand_parser(build_parser(), command)._actions for s in a.option_strings}


@pytest.mark.parametrize("command", PROGRAMS)
def test_every_program_command_takes_every_common_flag_with_one_meaning(command):
    actions = _actions(command)
    missing = [f for f in COMMON_FLAGS if f not in actions]
    assert not missing, f"{command} lacks {missing}"
    for names, kw in COMMON:
        a = actions[names[-1]]
        if "choices" in kw:
            assert list(a.choices) == list(kw["choices"]), (command, names)
        if kw.get("action") == "store_true":
            assert a.nargs == 0 and a.const is True, (command, names)
        assert a.dest == kw.get("dest", names[-1].lstrip("-").replace("-", "_")), (command, names, a.dest)


def test_the_common_flags_make_the_runs_env():
    args = build_parser().parse_args(["substring", "x", "-o", "o", "--device", "cpu", "--threads", "2", "--on-error",
                                      "skip", "--id-field", "url", "--text-field", "body", "--batch-mb", "8", "-q",
                                      "--work-dir", "w", "--overwrite"])
    env = env_from_args(args)
    assert (env.device, env.threads, env.progress, env.overwrite, env.work_dir) == ("cpu", 2, False, True, "w")
    assert (env.reading.id_field, env.reading.text_field, env.reading.on_error, env.reading.batch_bytes) == \
        ("url", "body", "skip", 8 << 20)


def _bad_corpus(tmp_path) -> str:
    p = tmp_path / "in" / "c.jsonl"
    p.parent.mkdir()
    good = [json.dumps({"id": f"d{i}", "text": f"words of document {i} " * 20}) for i in range(4)]
    p.write_text("\n".join(good[:2] + ["{not json"] + good[2:]) + "\n")
    return str(p)


def test_on_error_overwrite_and_config_mean_the_same_on_screen_and_substring(tmp_path, capsys):
    pytest.importorskip("pydivsufsort")
    src = _bad_corpus(tmp_path)
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "q", "question": "words of document 1 " * 5}) + "\n")
    for cmd in (["substring", src], ["screen", src, "--benchmark", str(bench), "--ngram", "8"]):
        out = str(tmp_path / cmd[0])
        assert main(cmd + ["-o", out, "-q"]) == 1  # the bad line stops the run, naming it
        assert "c.jsonl:3" in capsys.readouterr().err
        assert main(cmd + ["-o", out, "-q", "--on-error", "skip"]) == 0
        capsys.readouterr()
        assert main(cmd + ["-o", out, "-q", "--on-error", "skip"]) == 1  # a finished run needs --overwrite
        assert "--overwrite" in capsys.readouterr().err
        cfg = tmp_path / f"{cmd[0]}.toml"
        cfg.write_text('on-error = "skip"\noverwrite = true\n')
        assert main(cmd + ["-o", out, "-q", "--config", str(cfg)]) == 0  # the same flags from a file
        capsys.readouterr()
    assert pq.read_table(tmp_path / "substring" / "substring_docs.parquet").num_rows == 4


def test_config_tokens_turn_a_mapping_into_the_commands_tokens():
    p = subcommand_parser(build_parser(), "filter")
    assert config_tokens({"lang": ["en", "de"], "rules": "gopher", "no-filtered": True, "audit": 0}, p, "f") == \
        ["--lang", "en", "--lang", "de", "--rules", "gopher", "--no-filtered", "--audit", "0"]
    with pytest.raises(ConfigError, match="did you mean 'lang'"):
        config_tokens({"langs": ["en"]}, p, "f")
    with pytest.raises(ConfigError, match="takes one value"):
        config_tokens({"rules": ["gopher", "c4"]}, p, "f")


def test_load_mapping_names_the_file_for_what_it_cannot_read(tmp_path):
    """Not UTF-8 (a UnicodeDecodeError traceback before), a directory ("does not exist" before), a YAML key given
    twice (the last one won silently; TOML refuses it): one error naming the file; YAML's merge keys still work."""
    from gpu_dedup.cli.common import load_mapping

    bad = tmp_path / "b.yaml"
    bad.write_bytes(b"steps:\n  - dedup\n\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"recipe '.*b\.yaml' is not UTF-8 text \(line 3, byte 0xff\): save it"):
        load_mapping(str(bad), "recipe")
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(ConfigError, match=r"config file '.*d\.yaml' is a directory: pass the \.toml"):
        load_mapping(str(tmp_path / "d.yaml"))
    twice = tmp_path / "t.yaml"
    twice.write_text("steps:\n  - filter:\n      rules: gopher\n      rules: c4\n")
    with pytest.raises(ConfigError, match=r"gives the key 'rules' twice \(lines 3 and 4\): keep one"):
        load_mapping(str(twice), "recipe")
    merged = tmp_path / "m.yaml"
    merged.write_text("base: &b {rules: gopher, audit: 3}\nstep:\n  <<: *b\n  rules: c4\n")
    assert load_mapping(str(merged))["step"] == {"rules": "c4", "audit": 3}


def test_an_unknown_key_names_whose_flags_it_is_not(tmp_path, capsys):
    """A recipe's top-level key is a run setting (it said "no flag of this step"); a --config file's key is the
    command's flag."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("colour: red\nsteps:\n  - dedup\n")
    assert main(["pipeline", str(recipe), _bad_corpus(tmp_path), "-o", str(tmp_path / "o"), "-q"]) == 1
    assert "'colour' is no flag of a recipe's run settings (its keys beside steps)" in capsys.readouterr().err
    cfg = tmp_path / "c.yaml"
    cfg.write_text("steps: []\n")
    assert main(["filter", str(tmp_path / "in"), "-o", str(tmp_path / "o"), "--rules", "gopher", "--config", str(cfg),
                 "-q"]) == 1
    assert "'steps' is no flag of `gpu-dedup filter`" in capsys.readouterr().err
