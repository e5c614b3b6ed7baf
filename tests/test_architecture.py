"""The tree states the architecture: no import cycle between the package's modules (imports inside functions
included), no module over the size that hides its structure, and kernels/ holds device code only."""
from __future__ import annotations

import ast
import os
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


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules its import statements name, wherever they are (top level, functions,
    TYPE_CHECKING blocks excluded: they never run)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for n in ast.walk(node))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
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
    allowed = ("gpu_dedup.kernels", "gpu_dedup.constants")
    bad = {m: sorted(t for t in targets if not t.startswith(allowed))
           for m, targets in graph.items() if m.startswith("gpu_dedup.kernels")}
    assert not any(bad.values()), bad


def test_one_copy_of_every_module_in_a_source_checkout():
    import gpu_dedup

    assert list(gpu_dedup.__path__) == [os.fspath(PKG)]


STAGES = ("lexical", "filters", "paragraph", "semantic", "screen", "substring", "pipeline")


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
