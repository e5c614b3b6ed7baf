"""Recipes (gpu_dedup/cli/recipe.py) and `gpu-dedup pipeline`: every recipe the repository ships loads; a step's keys
are its command's flags (the same config as the command line gives); errors name the recipe, the step and the key;
the recipe's settings yield to --config and to the command line; a four-step recipe runs end to end."""
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import build_parser, main
from gpu_dedup.cli.recipe import load_recipe, recipe_steps
from gpu_dedup.cli.run import config_from_args
from gpu_dedup.errors import ConfigError, GpuDedupError, MissingFileError

ROOT = Path(__file__).resolve().parents[2]


def _recipe(tmp_path, text: str) -> str:
    p = tmp_path / "r.yaml"
    p.write_text(text)
    return str(p)


def test_every_shipped_recipe_loads(monkeypatch, tmp_path):
    for name in ("LID_MODEL", "LM_MODEL", "QUALITY_MODEL"):  # the seeds recipe's models: existence is checked later
        monkeypatch.setenv(name, str(tmp_path / f"{name}.bin"))
    recipes = sorted((ROOT / "recipes").glob("*.yaml")) + [ROOT / "gpu_dedup" / "data" / "demo.yaml"]
    assert {p.name for p in recipes} >= {"sample.yaml", "seeds.yaml", "demo.yaml"}
    for path in recipes:
        try:
            p = load_recipe(path)
        except GpuDedupError as exc:  # only the placeholder model files may be missing
            assert path.name == "seeds.yaml" and "LID_MODEL.bin' does not exist" in str(exc), exc
            continue
        assert p.steps, path
    sample = load_recipe(ROOT / "recipes" / "sample.yaml")
    assert [s.name for s in sample.steps] == ["filter", "dedup", "substring", "semantic"]
    seeds = (ROOT / "recipes" / "seeds.yaml").read_text()
    assert seeds.index("lid:") < seeds.index("rules:") < seeds.index("perplexity:") < seeds.index("classifier:") \
        < seeds.index("dedup:") < seeds.index("substring:")  # the seeds' order


def test_a_steps_keys_are_its_commands_flags(tmp_path):
    path = _recipe(tmp_path, "steps:\n  - dedup: {preset: fineweb, threshold: 0.85, keep: longest, exact-verify: true}\n"
                             "  - paragraph: {split: sentence, paragraph_action: remove-all}\n")
    dedup, paragraph = recipe_steps(__import__("yaml").safe_load(open(path)), path)
    flags = config_from_args(build_parser().parse_args(["run", "x", "-o", "o", "--preset", "fineweb", "--threshold",
                                                        "0.85", "--keep", "longest", "--exact-verify"]))
    assert dedup.config == flags.replace(progress=False)
    assert (paragraph.config.split, paragraph.config.action) == ("sentence", "remove-all")


@pytest.mark.parametrize("text, expect", [
    ("steps: []\n", "needs a list `steps`"),
    ("steps: [dedupe]\n", "'dedupe', no step"),
    ("steps:\n  - dedup: {treshold: 0.8}\n", "step 1 (dedup): 'treshold' is no flag of this step (did you mean 'threshold'"),
    ("steps:\n  - dedup: {threshold: high}\n", "step 1 (dedup): argument --threshold"),
    ("steps:\n  - dedup: {exact-verify: 3}\n", "is a switch"),
    ("steps:\n  - filter: {lid: '${NO_SUCH_VARIABLE_SET}'}\n", "NO_SUCH_VARIABLE_SET"),
    ("steps:\n  - dedup: {threshold: 0.8}\n    paragraph: {}\n", "one step name with its flags"),
    ("devise: cpu\nsteps: [dedup]\n", "did you mean 'device'"),
    ("steps:\n  - screen: {}\n", "needs benchmark"),
])
def test_recipe_errors_name_the_recipe_the_step_and_the_key(tmp_path, text, expect):
    with pytest.raises(ConfigError, match=None) as exc:
        load_recipe(_recipe(tmp_path, text))
    assert expect in str(exc.value) and "r.yaml" in str(exc.value), str(exc.value)


def test_a_missing_recipe_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(MissingFileError):
        load_recipe(tmp_path / "none.yaml")
    assert main(["pipeline", str(tmp_path / "none.yaml"), str(tmp_path), "-o", str(tmp_path / "o")]) == 1
    assert "recipe" in capsys.readouterr().err


def _corpus(tmp_path) -> str:
    """Six documents that pass Gopher's rules, two exact copies."""
    import numpy as np

    rng = np.random.default_rng(0)
    words = ("the of and to in that with for have be river market bread city night music winter garden engine paper "
             "light water field house table chair window summer autumn spring road train plane stone").split()
    rows = [{"id": f"d{i}", "text": " ".join(rng.choice(words, 120)) + "."} for i in range(6)]
    rows += [dict(rows[0], id="copy0"), dict(rows[2], id="copy2")]
    src = tmp_path / "in" / "c.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(src)


def test_pipeline_command_runs_a_recipe_and_its_settings_yield_to_the_flags(tmp_path, capsys):
    src = _corpus(tmp_path)
    recipe = _recipe(tmp_path, "device: cpu\non-error: skip\nsteps:\n  - dedup\n  - paragraph: {min-paragraph-bytes: 8}\n")
    out = tmp_path / "out"
    assert main(["pipeline", recipe, src, "-o", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "8 documents: 6 kept, 2 removed" in text and "2. paragraph" in text
    d = pq.read_table(out / "decisions.parquet")
    assert d["step"].to_pylist().count("dedup") == 2
    stats = json.loads((out / "run.json").read_text())
    assert stats["config"]["reading"]["on_error"] == "skip"  # from the recipe
    assert main(["pipeline", recipe, src, "-o", str(out), "-q", "--on-error", "raise", "--overwrite"]) == 0
    assert json.loads((out / "run.json").read_text())["config"]["reading"]["on_error"] == "raise"  # the flag wins
    assert main(["pipeline", recipe, src, "-o", str(out), "-q"]) == 1  # a finished run: --overwrite or --resume
    assert "--overwrite" in capsys.readouterr().err
    assert main(["pipeline", recipe, src, "-o", str(out), "-q", "--resume", "--on-error", "raise"]) == 0
    assert capsys.readouterr().out.count("(reused)") == 2  # the same settings as the finished run: nothing to do
    assert main(["pipeline", recipe, src, "-o", str(out), "-q", "--resume"]) == 0  # on-error changed: both again
    assert "(reused)" not in capsys.readouterr().out


def test_a_flag_given_with_its_default_value_still_wins_over_the_recipe(tmp_path):
    """`pipeline R --engine local` with a recipe saying `engine: ray` ran on Ray: --engine was the one common flag
    with a default ("local"), so given as "local" it looked not given and the recipe's value replaced it."""
    from gpu_dedup.cli.common import env_from_args
    from gpu_dedup.cli.pipeline import _with_recipe_settings
    from gpu_dedup.cli.common import load_mapping

    recipe = _recipe(tmp_path, "engine: ray\ndevice: cuda\nsteps:\n  - dedup\n")
    for argv, engine, device in ((["--engine", "local", "--device", "auto"], "local", "auto"), ([], "ray", "cuda"),
                                 (["--engine", "ray"], "ray", "cuda")):
        args = build_parser().parse_args(["pipeline", recipe, "in.jsonl", "-o", "out", *argv])
        env = env_from_args(_with_recipe_settings(args, load_mapping(recipe, "recipe"), recipe))
        assert (env.engine, env.device) == (engine, device), argv
    args = build_parser().parse_args(["pipeline", recipe, "in.jsonl", "-o", "out"])
    assert env_from_args(args).engine == "local"  # neither the flag nor a recipe: the local engine


def test_the_sample_recipe_runs_four_steps_on_any_input(tmp_path):
    """The issue's done-when: filter -> dedup -> substring -> semantic, from recipes/sample.yaml (the semantic step's
    model swapped for a tiny random one: nothing is downloaded)."""
    for mod in ("torch", "sentence_transformers", "pydivsufsort"):
        pytest.importorskip(mod)
    import yaml

    from gpu_dedup.testing.models import build_random_model

    recipe = yaml.safe_load((ROOT / "recipes" / "sample.yaml").read_text())
    recipe["steps"][3]["semantic"]["model"] = build_random_model(tmp_path / "model")
    recipe["steps"][2]["substring"]["min-tokens"] = 10
    recipe["device"] = "cpu"
    path = tmp_path / "sample.yaml"
    path.write_text(yaml.safe_dump(recipe))
    src = _corpus(tmp_path)
    out = tmp_path / "out"
    assert main(["pipeline", str(path), src, "-o", str(out), "-q"]) == 0
    stats = json.loads((out / "run.json").read_text())
    assert [s["name"] for s in stats["steps"]] == ["filter", "dedup", "substring", "semantic"] or \
        [s["name"] for s in stats["steps"]][:2] == ["filter", "dedup"]
    assert os.path.isdir(out / "deduplicated") and stats["counts"]["input"] == 8


def test_ctrl_c_in_a_later_step_keeps_the_finished_ones_for_resume(tmp_path, capsys, monkeypatch):
    """Issue 36 item 14: Ctrl-C during a recipe's second step says that the finished steps are kept and that
    --resume reuses them; it does."""
    from gpu_dedup.paragraph.program import Paragraph

    src = _corpus(tmp_path)
    recipe = _recipe(tmp_path, "device: cpu\nsteps:\n  - dedup\n  - paragraph: {min-paragraph-bytes: 8}\n")
    out = tmp_path / "out"

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(Paragraph, "run", interrupted)
        assert main(["pipeline", recipe, src, "-o", str(out), "-q"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"except the steps that finished ({out / 'steps'}): the same command with --resume reuses "
                        f"them and runs the rest"), err
    assert main(["pipeline", recipe, src, "-o", str(out), "-q", "--resume"]) == 0
    assert capsys.readouterr().out.count("(reused)") == 1  # dedup, finished before Ctrl-C


def test_a_recipes_table_layout_from_the_flag_or_the_recipe(tmp_path, capsys):
    """`pipeline --table-layout` (as `run`, `filter` and `substring` take it), or `table-layout` in a recipe,
    reaches every step; a dataset asked of the local engine is refused before any step runs (nothing written)."""
    from gpu_dedup.cli.common import env_from_args, load_mapping
    from gpu_dedup.cli.pipeline import _with_recipe_settings

    recipe = _recipe(tmp_path, "engine: ray\ntable-layout: file\nsteps:\n  - dedup\n")
    for argv, layout in (([], "file"), (["--table-layout", "dataset"], "dataset")):
        args = build_parser().parse_args(["pipeline", recipe, "in.jsonl", "-o", "out", *argv])
        assert env_from_args(_with_recipe_settings(args, load_mapping(recipe, "recipe"), recipe)).table_layout == \
            layout, argv
    src = _corpus(tmp_path)
    local = _recipe(tmp_path, "device: cpu\nsteps:\n  - dedup\n")
    out = tmp_path / "out"
    assert main(["pipeline", local, src, "-o", str(out), "-q", "--table-layout", "dataset"]) == 1
    assert "--table-layout dataset is the Ray engine's" in capsys.readouterr().err and not out.exists()
    assert main(["pipeline", local, src, "-o", str(out), "-q", "--table-layout", "file"]) == 0
    assert (out / "steps" / "01-dedup" / "decisions.parquet").is_file()


@pytest.mark.parametrize("recipe_text, config_text, argv, said", [
    ("workers: 2\nsteps:\n  - dedup\n", None, [],
     "recipe '{recipe}' sets workers: 2, which needs the Ray engine: add engine: ray to it or pass --engine ray"),
    ("steps:\n  - dedup\n", "workers: 3\naddress: auto\n", [],
     "config file '{config}' sets workers: 3, address: auto, which need the Ray engine"),
    ("workers: 2\nengine: local\nsteps:\n  - dedup\n", None, [], "recipe '{recipe}' sets workers: 2"),
    ("steps:\n  - dedup\n", None, ["--workers", "2"], "--workers 2 needs --engine 'ray'"),
])
def test_a_ray_setting_without_the_ray_engine_names_where_it_was_set(tmp_path, capsys, recipe_text, config_text,
                                                                      argv, said):
    """A Ray setting in a recipe or a --config file without the Ray engine is refused naming that file (it named
    a --workers flag nobody passed); one on the command line as before. Nothing is written."""
    recipe = _recipe(tmp_path, recipe_text)
    config = tmp_path / "c.yaml"
    if config_text is not None:
        config.write_text(config_text)
        argv = [*argv, "--config", str(config)]
    out = tmp_path / "out"
    assert main(["pipeline", recipe, _corpus(tmp_path), "-o", str(out), "-q", *argv]) == 1
    assert said.format(recipe=recipe, config=config) in capsys.readouterr().err
    assert not out.exists()


def test_a_ray_setting_with_the_ray_engine_from_either_place_passes_the_check(tmp_path):
    from gpu_dedup.cli.common import load_mapping
    from gpu_dedup.cli.pipeline import _with_recipe_settings

    for text, argv in (("workers: 2\nengine: ray\nsteps:\n  - dedup\n", []),
                       ("workers: 2\nsteps:\n  - dedup\n", ["--engine", "ray"])):
        recipe = _recipe(tmp_path, text)
        args = build_parser().parse_args(["pipeline", recipe, "in.jsonl", "-o", "out", *argv])
        merged = _with_recipe_settings(args, load_mapping(recipe, "recipe"), recipe)
        assert (merged.engine, merged.workers) == ("ray", 2)


def test_pipeline_takes_no_id_field_which_its_duplicate_id_error_names(tmp_path, capsys):
    """`pipeline` over records sharing an id: the error says to pass --no-id-field, which pipeline lacked; now the
    flag (or `no-id-field: true` in the recipe) gives generated '<file>:<row>' ids."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": "same", "text": f"text number {i} " * 10}) + "\n" for i in range(3)))
    recipe = _recipe(tmp_path, "steps:\n  - dedup\n")
    assert main(["pipeline", recipe, str(src), "-o", str(tmp_path / "a"), "-q"]) == 1
    assert "(--no-id-field;" in capsys.readouterr().err
    assert main(["pipeline", recipe, str(src), "-o", str(tmp_path / "a"), "-q", "--no-id-field"]) == 0
    ids = pq.read_table(tmp_path / "a" / "decisions.parquet")["id"].to_pylist()
    assert ids == ["in.jsonl:0", "in.jsonl:1", "in.jsonl:2"]
    setting = tmp_path / "s"
    setting.mkdir()
    recipe = _recipe(setting, "no-id-field: true\nsteps:\n  - dedup\n")
    assert main(["pipeline", recipe, str(src), "-o", str(tmp_path / "b"), "-q"]) == 0
