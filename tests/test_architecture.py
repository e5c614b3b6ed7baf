"""The tree states the architecture: no import cycle between the package's modules (imports inside functions
included), no module over the size that hides its structure, and kernels/ holds device code only."""
from __future__ import annotations

import ast
import importlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "gpu_dedup"
KERNELS = ROOT / "kernels"
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of gpu_dedup (kernels/ as gpu_dedup.kernels)."""
    mods = {}
    for base, prefix in ((PKG, "gpu_dedup"), (KERNELS, "gpu_dedup.kernels")):
        for path in base.rglob("*.py"):
            if "kernels" in path.relative_to(base).parts and base == PKG:
                continue  # the source checkout's link to kernels/
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([prefix, *parts])] = path
    return mods


def import_target(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from X import ...`` in module ``mod`` (a package's __init__ when ``is_pkg``) names."""
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    """Module -> the package modules its import statements name, wherever they are (top level, functions, and
    ``if TYPE_CHECKING:`` blocks: they never run, but a reader follows them as any other import; without
    ``type_checking`` those are left out)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        skip = set()
        for node in ast.walk(tree):
            if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for n in ast.walk(node))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                target = import_target(mod, is_pkg, node)
                names = [target + "." + a.name for a in node.names]
                found = [n for n in names if n in mods]
                graph[mod].update(found)
                if target in mods and len(found) < len(names):
                    graph[mod].add(target)
            elif isinstance(node, ast.Import):
                graph[mod].update(a.name for a in node.names if a.name in mods)
        graph[mod].discard(mod)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_no_import_cycle_even_through_function_level_imports():
    cycle = _cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_detector_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_constants_import_nothing_from_the_package():
    assert import_graph()["gpu_dedup.constants"] == set()


def test_no_module_hides_its_structure():
    long = {m: n for m, p in _modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_kernels_do_not_import_the_stages():
    graph = import_graph()
    # testing.simulator: the simulator's block scheduler, installed by _launch under NUMBA_ENABLE_CUDASIM only;
    # it imports nothing of the package
    allowed = ("gpu_dedup.kernels", "gpu_dedup.constants", "gpu_dedup.testing.simulator")
    assert import_graph()["gpu_dedup.testing.simulator"] == set()
    bad = {m: sorted(t for t in targets if not t.startswith(allowed))
           for m, targets in graph.items() if m.startswith("gpu_dedup.kernels")}
    assert not any(bad.values()), bad


def test_one_copy_of_every_module_in_a_source_checkout():
    import gpu_dedup

    assert list(gpu_dedup.__path__) == [os.fspath(PKG)]


# ------------------------------------------------------------------------------------------------ errors

# raises of a built-in exception that are right as they are: Python's protocols, and the strict CuPy stand-in,
# which raises what CuPy raises
BUILTIN_RAISE_OK = {
    ("__getattr__", "AttributeError"),  # the module / attribute protocol: getattr(x, name, default) relies on it
    ("__getitem__", "IndexError"),
    ("__next__", "StopIteration"),
}
BUILTIN_RAISE_ANYWHERE = {"NotImplementedError", "StopIteration", "KeyboardInterrupt", "SystemExit"}
BUILTIN_RAISE_MODULES = {"gpu_dedup.testing.strict"}  # impersonates CuPy: its errors are CuPy's built-in ones
# an exception object handed to a context manager's __exit__, never raised to a caller
BUILTIN_CALL_OK = {("gpu_dedup.lexical.index", "RuntimeError")}


def _builtin_exception(name: str) -> bool:
    import builtins

    obj = getattr(builtins, name, None)
    return isinstance(obj, type) and issubclass(obj, BaseException)


def builtin_raises() -> list[str]:
    """Every place in gpu_dedup/ (kernels/ aside: they import nothing of the package) that raises, or builds
    for raising, a built-in exception class, as "module:line function Name"."""
    found = []
    for mod, path in _modules().items():
        if mod.startswith("gpu_dedup.kernels") or mod in BUILTIN_RAISE_MODULES:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id  # raise X(...), or X(...) built to be raised later
            elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Name):
                name = node.exc.id  # raise X (a class; `raise exc` of a caught one is a re-raise)
            if not name or not _builtin_exception(name) or name in BUILTIN_RAISE_ANYWHERE:
                continue
            func = _enclosing(tree, node)
            if (func, name) in BUILTIN_RAISE_OK or (mod, name) in BUILTIN_CALL_OK:
                continue
            found.append(f"{mod}:{node.lineno} {func} {name}")
    return found


def _enclosing(tree: ast.AST, target: ast.AST) -> str:
    """The name of the innermost function around ``target`` ("" at module level)."""
    best = ""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(n is target for n in ast.walk(node)):
            if not best or node.lineno >= best[1]:
                best = (node.name, node.lineno)
    return best[0] if best else ""


def test_every_error_raised_on_purpose_is_a_gpu_dedup_error():
    """A caller catches everything the tool refused with one ``except GpuDedupError`` (the CLI does)."""
    bad = builtin_raises()
    assert not bad, ("raise a gpu_dedup.errors class (it keeps the built-in base) instead of a built-in "
                     f"exception: {bad}")


def test_the_raise_check_finds_a_builtin_raise(tmp_path, monkeypatch):
    import gpu_dedup.errors as errors

    assert issubclass(errors.ConfigError, ValueError) and issubclass(errors.ConfigError, errors.GpuDedupError)
    src = tmp_path / "m.py"
    src.write_text("def f(x):\n    if x:\n        raise ValueError('x')\n    raise ConfigError('y')\n"
                   "def __getattr__(name):\n    raise AttributeError(name)\n")
    monkeypatch.setattr(sys.modules[__name__], "_modules", lambda: {"gpu_dedup.m": src})
    assert builtin_raises() == ["gpu_dedup.m:3 f ValueError"]


def test_every_error_class_of_the_package_derives_from_gpu_dedup_error():
    from gpu_dedup.errors import GpuDedupError

    bad = []
    for mod, path in _modules().items():
        if mod.startswith("gpu_dedup.kernels"):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                obj = getattr(importlib.import_module(mod), node.name)
                if isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, GpuDedupError):
                    bad.append(f"{mod}.{node.name}")
    assert not bad, bad


# ----------------------------------------------------------------------------------------- private names

# io/'s readers share private classes across its modules: text27 (issue #27, item 2) makes them public or keeps
# them inside; the others are in modules other parts of #27 rewrite (kernel front ends, scoring path, run
# skeleton, the Arrow/UTF-8 helpers' move out of lexical/normalize.py). Each merge empties its lines.
PRIVATE_IMPORTS_PENDING: dict[str, set[str]] = {}


def private_imports() -> dict[str, set[str]]:
    """Module -> the underscore names (not dunders) it imports from another module of the package."""
    mods = _modules()
    found: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = import_target(mod, is_pkg, node)
            if not target.startswith("gpu_dedup") or target == mod:
                continue
            names = {a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")}
            if names:
                found.setdefault(mod, set()).update(names)
    return found


def test_no_underscore_name_is_imported_across_modules():
    """A name another module needs is public (no underscore); a private one stays in its module."""
    extra = {m: sorted(n - PRIVATE_IMPORTS_PENDING.get(m, set())) for m, n in private_imports().items()}
    extra = {m: n for m, n in extra.items() if n}
    assert not extra, f"private names imported from another module (make them public): {extra}"


# ----------------------------------------------------------------------------------------------- docstrings

PUBLIC_PACKAGES = ("gpu_dedup", "gpu_dedup.filters", "gpu_dedup.io", "gpu_dedup.report", "gpu_dedup.semantic",
                   "gpu_dedup.substring")
DOCSTRINGS_PENDING: set[str] = set()


def _own_nodes(fn) -> list[ast.AST]:
    """The AST nodes of ``fn``'s body, without those of the functions defined inside it."""
    import inspect
    import textwrap

    body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    inner = {id(n) for d in ast.walk(body) if d is not body and isinstance(d, (ast.FunctionDef, ast.Lambda,
                                                                                   ast.AsyncFunctionDef))
             for n in ast.walk(d)}
    return [n for n in ast.walk(body) if id(n) not in inner]


def _returns_value(nodes: list[ast.AST]) -> bool:
    return any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) and n.value is not None
               and not (isinstance(n.value, ast.Constant) and n.value.value is None) for n in nodes)


def _raises(nodes: list[ast.AST]) -> bool:
    """A raise of its own that is not inside an except handler (a re-raise or a translation of a caught one
    is documented where the error starts)."""
    handled = {id(n) for h in nodes if isinstance(h, ast.ExceptHandler) for n in ast.walk(h)}
    return any(isinstance(n, ast.Raise) and n.exc is not None and id(n) not in handled for n in nodes)


def docstring_gaps() -> list[str]:
    """Every public function exported by the packages above whose docstring lacks the Google-style section
    it needs: ``Args:`` when it takes arguments, ``Returns:`` (``Yields:``) when it returns a value, ``Raises:``
    when it raises; and every exported class without a docstring."""
    import inspect

    gaps = []
    for pkg in PUBLIC_PACKAGES:
        if pkg in DOCSTRINGS_PENDING:
            continue
        module = importlib.import_module(pkg)
        for name in module.__all__:
            obj = getattr(module, name)
            doc = inspect.getdoc(obj) or ""
            if inspect.isclass(obj):
                if not doc:
                    gaps.append(f"{pkg}.{name}: no docstring")
                continue
            if not inspect.isfunction(obj):
                continue
            if not doc:
                gaps.append(f"{pkg}.{name}: no docstring")
                continue
            params = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
            if params and "Args:" not in doc:
                gaps.append(f"{pkg}.{name}: no Args:")
            nodes = _own_nodes(obj)
            if _returns_value(nodes) and "Returns:" not in doc and "Yields:" not in doc:
                gaps.append(f"{pkg}.{name}: no Returns:")
            if _raises(nodes) and "Raises:" not in doc:
                gaps.append(f"{pkg}.{name}: no Raises:")
    return gaps


def test_every_public_entry_point_documents_its_arguments_and_result():
    gaps = docstring_gaps()
    assert not gaps, gaps
PROGRAMS = ("lexical", "filters", "paragraph", "semantic", "screen", "substring")
STAGES = PROGRAMS + ("pipeline", "distributed", "cli")  # what the floors below the programs must never import


def _imports_of(graph: dict[str, set[str]], package: str, targets: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules of ``package`` (gpu_dedup.<package> and below) -> the modules of ``targets`` they import."""
    names = tuple(f"gpu_dedup.{t}" for t in targets)
    own = f"gpu_dedup.{package}"
    bad = {m: sorted(t for t in deps if any(t == n or t.startswith(n + ".") for n in names))
           for m, deps in graph.items() if m == own or m.startswith(own + ".")}
    return {m: deps for m, deps in bad.items() if deps}


def test_io_imports_no_stage():
    """io reads and writes; what a program does with the text is not its business (Arrow buffers and the
    UTF-8 check live in io/text.py, so that io needs no program)."""
    assert _imports_of(import_graph(), "io", STAGES) == {}


def test_the_shared_text_utilities_import_no_stage():
    """text/ (the normalizer, the paragraph splitter) sits below every program that shares it."""
    assert _imports_of(import_graph(), "text", STAGES) == {}


def test_filters_do_not_import_lexical():
    """The filter half reaches the dedup half only through shared modules (io, text), never its stage."""
    assert _imports_of(import_graph(), "filters", ("lexical",)) == {}


def test_paragraph_screen_and_substring_do_not_import_lexical():
    """Like the filters, the other programs share text/, io/ and decisions.keep_rank, not the lexical stage
    (semantic/comparison.py does import it: it reports the lexical Jaccard of semantic pairs)."""
    graph = import_graph()
    assert {p: _imports_of(graph, p, ("lexical",)) for p in ("paragraph", "screen", "substring")} == \
        {"paragraph": {}, "screen": {}, "substring": {}}


def test_the_layer_rule_sees_a_violation():
    graph = {"gpu_dedup.io": {"gpu_dedup.config"}, "gpu_dedup.io.read": {"gpu_dedup.lexical.minhash"},
             "gpu_dedup.iox": {"gpu_dedup.lexical"}, "gpu_dedup.io.write": {"gpu_dedup.lexicalx", "gpu_dedup.pipeline"}}
    assert _imports_of(graph, "io", STAGES) == {"gpu_dedup.io.read": ["gpu_dedup.lexical.minhash"],
                                                "gpu_dedup.io.write": ["gpu_dedup.pipeline"]}


# ------------------------------------------------------------------------------------------ tests mirror the tree

def test_the_tests_mirror_the_package_tree():
    """tests/<dir>/ holds the tests of gpu_dedup/<dir>/ (tests/kernels/ those of kernels/); the top level those of
    the package's top-level modules and of the whole program. Basenames stay unique (pytest imports a test module
    by its name)."""
    packages = {p.parent.name for p in (ROOT / "gpu_dedup").glob("*/__init__.py")} | {"kernels"}
    dirs = {p.parent.name for p in (ROOT / "tests").rglob("test_*.py") if p.parent != ROOT / "tests"}
    assert dirs <= packages, f"test directories without a package of that name: {sorted(dirs - packages)}"
    assert all(p.parent.parent == ROOT / "tests" for p in (ROOT / "tests").rglob("test_*.py")
               if p.parent != ROOT / "tests"), "one level of test directories, as the package has"
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


# ------------------------------------------------------------------------------- programs, floors, one shape

# The one allowed crossing between programs, each for a reason: a fused step reads the input once (dedup's pass 1
# scores with the filter; dedup hands its survivors to SemDeDup in memory); a program's research comparison
# reports another's measure; a model's training data is screened against benchmarks as screen/ screens a corpus.
PROGRAM_CROSSINGS = {
    "gpu_dedup.lexical.dedup": {"gpu_dedup.filters.prefilter", "gpu_dedup.semantic", "gpu_dedup.semantic.config"},
    "gpu_dedup.semantic.comparison": {"gpu_dedup.lexical.verify"},
    "gpu_dedup.filters.dsir_step": {"gpu_dedup.screen.training"},
    "gpu_dedup.filters.kneser_ney": {"gpu_dedup.screen.training"},
    "gpu_dedup.filters.train": {"gpu_dedup.screen.training"},
}


def program_crossings(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module of a program -> the modules of other programs it imports."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        parts = mod.split(".")
        if len(parts) < 2 or parts[1] not in PROGRAMS:
            continue
        other = {d for d in deps if len(d.split(".")) > 1 and d.split(".")[1] in PROGRAMS
                 and d.split(".")[1] != parts[1]}
        if other:
            out[mod] = other
    return out


def test_no_program_imports_another():
    """Programs stand side by side on the shared floors (io, text, ops, runtime); the pipeline above composes them.
    The crossings allowed are listed, each with its reason (``PROGRAM_CROSSINGS``)."""
    extra = {m: sorted(d - PROGRAM_CROSSINGS.get(m, set())) for m, d in program_crossings(import_graph()).items()}
    assert not {m: d for m, d in extra.items() if d}, extra


def test_the_program_rule_sees_a_violation():
    graph = {"gpu_dedup.substring.dedup": {"gpu_dedup.paragraph.dedup", "gpu_dedup.text.spans"},
             "gpu_dedup.lexical.dedup": {"gpu_dedup.semantic"}, "gpu_dedup.pipeline.engine": {"gpu_dedup.lexical"}}
    assert program_crossings(graph) == {"gpu_dedup.substring.dedup": {"gpu_dedup.paragraph.dedup"},
                                        "gpu_dedup.lexical.dedup": {"gpu_dedup.semantic"}}


def test_the_floors_import_nothing_above_them():
    """runtime/ (the run skeleton, devices, outputs) and ops/ (the device boundary) sit beneath every program,
    TYPE_CHECKING imports included: the types ops takes live in ops/ (ops/types.py)."""
    graph = import_graph()
    for floor in ("runtime", "ops", "io", "text"):
        assert _imports_of(graph, floor, STAGES) == {}, floor


def external_imports(name: str, tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that import the top-level package ``name`` or one of its modules, wherever they are
    (top level, functions, ``if TYPE_CHECKING:`` blocks), and by ``importlib.import_module`` / ``__import__``
    with a constant name."""
    def named(target: str | None) -> bool:
        return bool(target) and (target == name or target.startswith(name + "."))

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(named(a.name) for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and not node.level and named(node.module):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str) and named(node.args[0].value) and \
                (getattr(node.func, "attr", None) == "import_module" or getattr(node.func, "id", None) in
                 ("import_module", "__import__")):
            lines.append(node.lineno)
    return lines


ENGINE = "gpu_dedup.distributed"


def test_ray_is_imported_by_the_engine_package_only():
    """Ray is one package's business (gpu_dedup/distributed/: the cluster, the tasks, the actors); every other
    module reaches a cluster through that package, function-level imports included."""
    bad = {m: lines for m, p in _modules().items() if not (m == ENGINE or m.startswith(ENGINE + "."))
           and (lines := external_imports("ray", ast.parse(p.read_text())))}
    assert not bad, f"modules importing ray outside {ENGINE}: {bad}"


def test_programs_reach_the_engine_through_its_package_only():
    """A program runs on Ray by the engine package's public entry points (``gpu_dedup.distributed``), never by one
    of its modules: what runs where stays the engine's to change."""
    graph = import_graph()
    bad = {m: sorted(d for d in deps if d.startswith(ENGINE + "."))
           for m, deps in graph.items() if not m.startswith(ENGINE)}
    assert not {m: d for m, d in bad.items() if d}, bad


def test_the_ray_rule_sees_a_violation():
    tree = ast.parse("import os\nimport ray.util\ndef f():\n    from ray import remote\n"
                     "    importlib.import_module('ray')\n    import rayon\n    from .ray import x\n")
    assert external_imports("ray", tree) == [2, 4, 5]


def test_no_program_imports_the_pipeline_or_the_command_line():
    graph = import_graph()
    assert {p: _imports_of(graph, p, ("pipeline", "cli")) for p in PROGRAMS} == {p: {} for p in PROGRAMS}


def test_every_program_implements_the_one_program_shape():
    """Filter, dedup, paragraph, substring, semantic and screen are each a step of runtime.program.Step: a frozen
    dataclass with its name, kind, declared outputs and run; the pipeline's table of steps names them all."""
    import dataclasses
    import inspect

    from gpu_dedup.pipeline import steps_table
    from gpu_dedup.runtime.program import KINDS, Outputs

    table = steps_table()
    assert set(table) == {"filter", "dedup", "paragraph", "substring", "semantic", "screen"}
    for name, cls in table.items():
        assert cls.name == name and cls.kind in KINDS and isinstance(cls.outputs, Outputs)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name
        assert list(inspect.signature(cls.run).parameters) == ["self", "view", "out", "env"], name
        assert cls.__module__ == f"gpu_dedup.{cls.__module__.split('.')[1]}.program"


# A concept has one name: names several modules define for one purpose each, listed (a kernel family's front end
# in ops/ and the stage step of the same name over it; each program's own report section; the API faces in
# gpu_dedup/__init__.py); anything else defined twice is a second name for one concept, or one name for two.
NAMES_DEFINED_TWICE = {
    "band_keys", "exact_hashes", "shingle_sets", "domain_counts", "feature_ids", "ngram_hashes", "predict",
    "span_hashes", "split_units", "word_spans", "vocab_table_host", "read_section", "section", "deduplicate",
    "run_dedup", "substring_dedup", "cut_batch", "decisions_table", "describe", "split_lines",
}


def test_one_name_per_concept():
    from collections import defaultdict

    defs: dict[str, list[str]] = defaultdict(list)
    for mod, path in _modules().items():
        if mod.startswith(("gpu_dedup.kernels", "gpu_dedup.testing", "gpu_dedup.cli")):
            continue  # kernels: a name per twin by design; cli: a module per command, each with add_command
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defs[node.name].append(mod)
    twice = {n: m for n, m in defs.items() if len(m) > 1 and n not in NAMES_DEFINED_TWICE}
    assert not twice, twice
    for concept in ("RunResult", "write_report", "decide"):  # the three the aesthetics review found doubled
        assert len(defs[concept]) == 1, (concept, defs[concept])


def test_no_task_or_stage_is_found_by_a_string():
    """The engines read declared tables of their steps (pipeline.steps_table, distributed.driver.PLAN): no
    ``globals()[name]``, no ``getattr(module, name)`` with a computed name in the engines."""
    bad = []
    for mod, path in _modules().items():
        if not mod.startswith(("gpu_dedup.distributed", "gpu_dedup.pipeline")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) and \
                    getattr(node.value.func, "id", None) == "globals":
                bad.append(f"{mod}: globals()[...]")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) >= 2 \
                    and not isinstance(node.args[1], ast.Constant) and isinstance(node.args[0], ast.Name) and \
                    node.args[0].id in ("stages", "options", "steps", "module", "mod"):
                bad.append(f"{mod}: getattr({node.args[0].id}, <name>)")
    assert not bad, bad


def test_every_cuda_kernel_is_launched():
    """No dead twin: every kernel of kernels/*_cuda.py is launched by a front end (ops/) or a stage, by name."""
    import re

    from gpu_dedup.testing import kernel_check

    source = "\n".join(p.read_text() for m, p in _modules().items() if not m.startswith("gpu_dedup.kernels"))
    dead = []
    for path in sorted(KERNELS.glob("*_cuda.py")):
        fam = path.stem
        for k in kernel_check.module_kernels(f"gpu_dedup.kernels.{fam}"):
            if not re.search(rf"[.\"']{k.__name__}\b", source):
                dead.append(f"{fam}.{k.__name__}")
    assert not dead, dead

