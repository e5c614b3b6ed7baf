"""gpu_dedup.errors: one base under every error the tool raises on purpose, each class keeping the built-in
base its errors had before (existing ``except ValueError`` handlers still catch them), and the CLI printing
those as one line while a bug keeps its traceback."""
import pickle

import pytest

import gpu_dedup
from gpu_dedup import errors
from gpu_dedup.cli import main

BUILTIN_BASE = {
    errors.ConfigError: ValueError, errors.DataError: ValueError, errors.UsageError: TypeError,
    errors.DependencyError: ImportError, errors.MissingFileError: FileNotFoundError,
    errors.OutputExistsError: FileExistsError, errors.RunError: RuntimeError, errors.ClusterError: ConnectionError,
    errors.MissingColumnError: KeyError,
}


@pytest.mark.parametrize("cls", sorted(BUILTIN_BASE, key=lambda c: c.__name__))
def test_each_class_is_a_gpu_dedup_error_and_its_builtin(cls):
    err = cls("bad value 3; use 4")
    assert isinstance(err, errors.GpuDedupError) and isinstance(err, BUILTIN_BASE[cls])
    back = pickle.loads(pickle.dumps(err))  # Ray and process pools send errors between processes
    assert type(back) is cls and back.args == err.args
    if cls is not errors.MissingColumnError:  # KeyError quotes its message, as before
        assert str(err) == "bad value 3; use 4"


def test_the_package_exports_the_base_and_the_module_errors_derive_from_it():
    from gpu_dedup.filters.train import TrainDependencyError, TrainingError
    from gpu_dedup.io import InputError
    from gpu_dedup.runtime.outputs import LockedError, ManifestError, OutputPathError

    assert gpu_dedup.GpuDedupError is errors.GpuDedupError
    assert issubclass(InputError, errors.DataError) and issubclass(InputError, ValueError)
    assert issubclass(OutputPathError, OSError) and issubclass(LockedError, RuntimeError)
    assert issubclass(ManifestError, ValueError)
    assert issubclass(TrainDependencyError, ImportError) and issubclass(TrainingError, RuntimeError)
    for cls in (InputError, OutputPathError, LockedError, ManifestError, TrainDependencyError, TrainingError):
        assert issubclass(cls, errors.GpuDedupError), cls


def test_an_api_error_is_caught_by_the_base_and_by_its_old_builtin():
    from gpu_dedup.config import MinHashConfig

    with pytest.raises(errors.GpuDedupError, match="num_perm"):
        MinHashConfig(num_perm=0)
    with pytest.raises(ValueError, match="num_perm"):
        MinHashConfig(num_perm=0)


def test_the_cli_prints_a_tool_error_as_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1  # no finished run there
    err = capsys.readouterr().err
    assert err.startswith("gpu-dedup: error: ") and "Traceback" not in err and len(err.splitlines()) == 1


def test_the_cli_lets_a_bug_keep_its_traceback(tmp_path, monkeypatch):
    import gpu_dedup.cli.report as report_cli

    def bug(*args, **kwargs):
        raise KeyError("not an error the tool raises on purpose")

    monkeypatch.setattr(report_cli, "write_report", bug)
    with pytest.raises(KeyError, match="on purpose"):
        main(["report", str(tmp_path)])
