"""What README promises works with the install command README gives (pyproject's core dependencies)."""
import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _core_dependencies() -> set[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!;\[ ]", d, maxsplit=1)[0].lower() for d in deps}


def test_readme_promises_need_only_core_dependencies():
    readme = (ROOT / "README.md").read_text()
    demo = re.search(r"```bash\n(.*gpu-dedup demo.*)\n```", readme).group(1)
    assert demo.startswith("python -m pip install . ")  # no extra: the core dependencies must cover README
    deps = _core_dependencies()
    if "to_pandas()" in readme or ".filter(df)" in readme:
        assert "pandas" in deps
    if ".yaml" in readme or "YAML" in readme:
        assert "pyyaml" in deps
    assert {"filelock", "pyarrow", "numba", "numpy"} <= deps


def test_demo_next_step_runs_with_the_core_dependencies():
    """The command the demo suggests afterwards (cli.py) imports only what `pip install .` installs."""
    from gpu_dedup import cli

    src = Path(cli.__file__).read_text()
    step = re.search(r'python -c \\"(.*?)\\"', src, re.S).group(1)
    needed = set(re.findall(r"import (\w+)", step)) | ({"pandas"} if "to_pandas" in step else set())
    assert needed and needed <= _core_dependencies(), needed
