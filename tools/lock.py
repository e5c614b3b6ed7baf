"""Write constraints.txt: every distribution README's test command installs, pinned (``name==version``), for each
Python the project supports on Linux x86_64. README's two set-up commands and ``.ci/run`` install with
``-c constraints.txt``, so a fresh clone installs what CI tested, whatever PyPI published since (issue 36 item 4).

How: for each Python (default python3.10, python3.11 and python3.12 on PATH), a throw-away venv with the newest
pip resolves README's test command (its ``pip install`` parts, the constraints option left out) with
``pip install --dry-run --ignore-installed --report``: pip's own resolver, nothing installed, newest versions.
The project itself is left out. A version the Pythons agree on is one line; one that differs (or a package only
some Pythons need) gets ``; python_version == "3.X"`` markers. Local version labels are dropped
(``torch 2.13.0+cpu`` is pinned as ``torch==2.13.0``, which pip matches to the CPU build README asks for).

Usage:
    python tools/lock.py                      # rewrite constraints.txt (network: PyPI)
    python tools/lock.py --python python3.11  # only some Pythons (the header says which)
    python tools/lock.py --check              # this Python's installed versions against the pins; exit 1 if
                                              # any differ (what CI tested vs what is here)

tools/drift.py installs the newest versions without the pins and runs the tests, to see drift before users do.
The functions here (README's commands, reading the pins) are that script's too.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
LOCK = os.path.join(ROOT, "constraints.txt")
PYTHONS = ("python3.10", "python3.11", "python3.12")
PROJECT = "gpu-dedup"
CONSTRAINT_OPTIONS = ("-c", "--constraint")


# ---------------------------------------------------------------------------------------------- README

def readme_commands(readme: str | None = None) -> dict[str, str]:
    """README's two set-up commands: {"demo": ..., "test": ...} (the test command is the line after the
    ``<!-- test-command -->`` marker, as .ci/run reads it; the demo command is the bash block ending in
    ``gpu-dedup demo``)."""
    if readme is None:
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
    text = readme
    test = re.search(r"<!-- test-command -->\n```bash\n(.*)\n```", text)
    demo = re.search(r"```bash\n(.*gpu-dedup demo)\n```", text)
    if not test or not demo:
        raise SystemExit("README.md lost a set-up command (the demo block, or the line after <!-- test-command -->)")
    return {"demo": demo.group(1), "test": test.group(1)}


def pip_installs(command: str) -> list[list[str]]:
    """The arguments of each ``python -m pip install`` in ``command`` (parts joined by ``&&``), with the
    constraints option (``-c FILE``) left out: the requirements and options the command resolves."""
    parts = []
    for part in command.split("&&"):
        words = shlex.split(part)
        if words[:4] != ["python", "-m", "pip", "install"]:
            continue
        args, i = [], 4
        while i < len(words):
            if words[i] in CONSTRAINT_OPTIONS:
                i += 2
                continue
            args.append(words[i])
            i += 1
        parts.append(args)
    return parts


# ---------------------------------------------------------------------------------------------- the pins

def normalize(name: str) -> str:
    """PEP 503's normalized distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def public(version: str) -> str:
    """The version without its local label (2.13.0+cpu -> 2.13.0)."""
    return version.split("+", 1)[0]


def read_lock(path: str = LOCK, python: str | None = None) -> dict[str, str]:
    """{normalized name: version} of the pins that apply to ``python`` ("3.11"; default: this one). Reads only
    the forms ``write_lock`` writes (``name==version`` and ``python_version == "X"`` markers joined by ``or``)."""
    python = python or "%d.%d" % sys.version_info[:2]
    pins = {}
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req, _, marker = line.partition(";")
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", req.strip())
        versions = re.findall(r'python_version == "([0-9.]+)"', marker)
        if not m or (marker.strip() and len(versions) != len(marker.split(" or "))):
            raise SystemExit(f"{path}:{n}: not a line tools/lock.py writes: {line!r}")
        if not versions or python in versions:
            pins[normalize(m.group(1))] = m.group(2)
    return pins


def write_lock(path: str, by_python: dict[str, dict[str, tuple[str, str]]], pip_version: str) -> None:
    """constraints.txt from {python: {normalized name: (name, version)}}."""
    pythons = sorted(by_python, key=lambda v: tuple(map(int, v.split("."))))
    names = sorted({n for pins in by_python.values() for n in pins})
    lines = [
        f"# Every distribution README's test command installs, pinned: Python {', '.join(pythons)} on Linux x86_64.",
        (f"# Written by `python tools/lock.py` on {datetime.date.today()} (pip {pip_version}'s resolver, the newest "
         "versions then); do not edit."),
        "# README's set-up commands and .ci/run install with `-c constraints.txt`; `python tools/drift.py` tests the",
        "# newest versions against these (docs/install.md).",
    ]
    for name in names:
        seen = {py: by_python[py][name] for py in pythons if name in by_python[py]}
        versions = sorted({v for _, v in seen.values()})
        label = next(iter(seen.values()))[0]
        if len(seen) == len(pythons) and len(versions) == 1:
            lines.append(f"{label}=={versions[0]}")
            continue
        for v in versions:
            marker = " or ".join(f'python_version == "{py}"' for py, (_, pv) in seen.items() if pv == v)
            lines.append(f"{label}=={v} ; {marker}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------- resolving

def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, **kw)


def make_venv(python: str, where: str) -> str:
    """A fresh venv of ``python`` in ``where`` with the newest pip; its python's path."""
    run([python, "-m", "venv", where])
    py = os.path.join(where, "bin", "python")
    run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    return py


def resolve(python: str, installs: list[list[str]], work: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """(its Python's "X.Y", {normalized name: (name, public version)}): what ``installs`` resolve to on
    ``python``, newest versions, nothing installed. The parts resolve independently (as they would into an
    empty venv) and must agree."""
    py = make_venv(python, os.path.join(work, "venv"))
    version = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=True,
                             capture_output=True, text=True).stdout.strip()
    pins: dict[str, tuple[str, str]] = {}
    for i, args in enumerate(installs):
        report = os.path.join(work, f"report{i}.json")
        run([py, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--report", report, *args], cwd=ROOT)
        with open(report, encoding="utf-8") as f:
            items = json.load(f)["install"]
        for item in items:
            name, v = item["metadata"]["name"], public(item["metadata"]["version"])
            key = normalize(name)
            if key == PROJECT:
                continue
            if key in pins and pins[key][1] != v:
                raise SystemExit(f"Python {version}: README's install parts resolve {name} to {pins[key][1]} and "
                                 f"{v}; pin it in the command")
            pins[key] = (name, v)
    return version, pins


def pip_version(python: str) -> str:
    return subprocess.run([python, "-m", "pip", "--version"], check=True, capture_output=True,
                          text=True).stdout.split()[1]


def lock(pythons: list[str], out: str) -> None:
    installs = pip_installs(readme_commands()["test"])
    by_python, pips = {}, set()
    for python in pythons:
        if shutil.which(python) is None or subprocess.run([python, "-c", ""], capture_output=True).returncode:
            raise SystemExit(f"{python} does not run here (with pyenv: PYENV_VERSION=3.10.13:3.11.7:3.12.1, or "
                             "--python PATH): install it, or choose the Pythons with --python")
        with tempfile.TemporaryDirectory(prefix="gpu-dedup-lock-") as work:
            version, pins = resolve(python, installs, work)
            pips.add(pip_version(os.path.join(work, "venv", "bin", "python")))
        by_python[version] = pins
        print(f"Python {version}: {len(pins)} distributions", file=sys.stderr)
    if len(pips) != 1:
        raise SystemExit(f"the venvs got different pips ({sorted(pips)}): run again")
    pip = pips.pop()
    for pins in by_python.values():  # CI's venv upgrades pip to this one (.ci/run)
        pins["pip"] = ("pip", pip)
    write_lock(out, by_python, pip)
    print(f"wrote {out}", file=sys.stderr)


def installed() -> dict[str, str]:
    """{normalized name: public version} of the distributions installed in this Python's site-packages (the
    project left out)."""
    import sysconfig
    from importlib import metadata

    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})  # not what sys.path gained
    found = {normalize(d.metadata["Name"]): public(d.version) for d in metadata.distributions(path=site)}
    found.pop(PROJECT, None)
    return found


def differences(pins: dict[str, str], have: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, pinned, installed) for every pinned distribution installed at another version or missing
    ("-"), and every installed one without a pin. pip itself, setuptools and wheel (a venv's own) aside
    when unpinned."""
    own = {"pip", "setuptools", "wheel"}
    rows = [(n, v, have.get(n, "-")) for n, v in sorted(pins.items()) if have.get(n) != v and n not in own]
    rows += [(n, "-", v) for n, v in sorted(have.items()) if n not in pins and n not in own]
    return rows


def print_table(rows: list[tuple[str, str, str]], right: str) -> None:
    width = max([len(r[0]) for r in rows] + [12])
    print(f"{'distribution':<{width}}  {'pinned':<14}  {right}")
    for name, pinned, have in rows:
        print(f"{name:<{width}}  {pinned:<14}  {have}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", action="append", metavar="PY", help=f"a Python to lock for (repeatable; default "
                   f"{', '.join(PYTHONS)})")
    p.add_argument("--out", default=LOCK, help="the file to write (default constraints.txt at the root)")
    p.add_argument("--check", action="store_true", help="compare this Python's installed distributions with "
                   "the pins instead; exit 1 when any differ")
    args = p.parse_args(argv)
    if args.check:
        rows = differences(read_lock(args.out), installed())
        if rows:
            print_table(rows, "installed")
        print(f"{len(rows)} distributions differ from {os.path.relpath(args.out)}")
        return 1 if rows else 0
    lock(args.python or list(PYTHONS), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
