"""The device boundary (gpu_dedup/ops/): every kernel family has its front end, every CPU/GPU kernel twin pair takes
the same arguments, and stage code neither launches a kernel by a string name nor imports a kernel module."""
from __future__ import annotations

import ast
import glob
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["gpu_dedup/lexical", "gpu_dedup/filters", "gpu_dedup/paragraph", "gpu_dedup/screen/screening.py",
          "gpu_dedup/substring", "gpu_dedup/semantic"]

# twins whose argument lists differ, behind one front-end signature: bloom_insert (ops.bloom.bloom_insert): the CPU
# kernel splits the bit words into `parts` ranges, one per thread (no atomics); the GPU's a thread per item, atomic OR
TWINS_THAT_DIFFER = {("bloom", "bloom_insert")}

# string-named launch(device, "name", ...) calls allowed in stage modules (file, kernel name): none since the
# fastText and LM families got their front ends; a kernel a stage needs gets a function in gpu_dedup/ops/ instead
STRING_LAUNCHES: set[tuple[str, str]] = set()


def families() -> list[str]:
    """Every kernel family: kernels/<family>_cuda.py (each has its _cpu twin)."""
    return sorted(Path(p).stem[:-len("_cuda")] for p in glob.glob(str(ROOT / "kernels" / "*_cuda.py")))


def twin_kernels(family: str) -> tuple[dict, dict]:
    """(CPU kernels, GPU kernels) of a family, name -> the Python function (the njit dispatchers defined in
    kernels/<family>_cpu.py, the @kernel objects of kernels/<family>_cuda.py)."""
    from gpu_dedup.kernels._launch import Kernel

    cpu = importlib.import_module(f"gpu_dedup.kernels.{family}_cpu")
    gpu = importlib.import_module(f"gpu_dedup.kernels.{family}_cuda")
    ck = {n: v.py_func for n, v in vars(cpu).items()
          if hasattr(v, "py_func") and getattr(v, "__module__", "") == cpu.__name__ and not n.startswith("_")}
    gk = {n: v.dispatcher.py_func for n, v in vars(gpu).items() if isinstance(v, Kernel) and v.module == gpu.__name__}
    return ck, gk


def params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_the_families_are_the_core_and_the_five_filters_and_bloom():
    assert families() == ["bloom", "core", "domain", "fasttext", "features", "lm", "substring"]


@pytest.mark.parametrize("family", families())
def test_every_cpu_gpu_twin_pair_takes_the_same_arguments(family):
    ck, gk = twin_kernels(family)
    twins = sorted(set(ck) & set(gk))
    # domain and features: the GPU kernels cut documents into pieces (a thread per line-aligned piece / chunk of
    # words), so no GPU kernel has a CPU twin of its name; the front end's function is the pair
    assert twins or family in ("domain", "features"), family
    differ = {(family, n): (params(ck[n]), params(gk[n])) for n in twins if params(ck[n]) != params(gk[n])}
    unexpected = {k: v for k, v in differ.items() if k not in TWINS_THAT_DIFFER}
    assert not unexpected, f"CPU/GPU twins with different argument lists (cpu, gpu): {unexpected}"
    fixed = {k for k in TWINS_THAT_DIFFER if k[0] == family} - set(differ)
    assert not fixed, f"these twins now agree: remove them from TWINS_THAT_DIFFER: {fixed}"


def test_every_kernel_family_has_a_front_end():
    missing = [f for f in families() if not (ROOT / "gpu_dedup" / "ops" / f"{f}.py").is_file()]
    assert not missing, f"kernel families without a front end gpu_dedup/ops/<family>.py: {missing}"


def stage_kernel_imports(paths=STAGES, root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, module) of every import of a kernel module kernels/<family>_cpu.py or _cuda.py in the stage modules
    (the families' constants modules, kernels/<family>.py, may be imported)."""
    found = set()
    files = [p for s in paths for p in ((root / s).rglob("*.py") if (root / s).is_dir() else [root / s])]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module or ''}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for m in names:  # dotted, without a relative import's leading dots
                parts = m.split(".")
                if "kernels" in parts and any(p.endswith(("_cpu", "_cuda")) for p in parts[parts.index("kernels"):]):
                    found.add((str(path.relative_to(root)), m))
    return found


def test_stage_modules_import_no_kernel_module():
    found = stage_kernel_imports()
    assert not found, f"stage code imports kernel modules (call a front end of gpu_dedup/ops/): {sorted(found)}"


def test_the_import_scan_finds_a_kernel_import(tmp_path):
    (tmp_path / "m.py").write_text("from ..kernels import lm_cpu, lm\nfrom ..kernels.core_cuda import x\n"
                                   "import gpu_dedup.kernels.bloom_cpu\nfrom ..ops import lm as lm_ops\n")
    assert stage_kernel_imports(["m.py"], tmp_path) == {("m.py", "kernels.lm_cpu"), ("m.py", "kernels.core_cuda.x"),
                                                        ("m.py", "gpu_dedup.kernels.bloom_cpu")}


def test_the_representative_policy_twins_share_their_scratch_arrays():
    # the case the front end was made for: one argument list, scratch arrays made by ops.core
    ck, gk = twin_kernels("core")
    assert params(ck["representative_components"]) == params(gk["representative_components"])
    assert {"head", "tail", "nxt", "stamp"} <= set(params(ck["representative_components"]))


def string_launches(paths=STAGES, root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, kernel name) of every ``launch(device, "name", ...)`` / ``x.launch(device, "name", ...)`` call in
    the stage modules (paths relative to ``root``)."""
    found = set()
    files = [p for s in paths for p in ((root / s).rglob("*.py") if (root / s).is_dir() else [root / s])]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            first = node.args[0]  # device.launch(device, name, ...), not a compiled kernel's k.launch(items, ...)
            on_device = (isinstance(first, ast.Constant) and first.value in ("cpu", "cuda")
                         or isinstance(first, ast.Name) and first.id in ("device", "dev")
                         or isinstance(first, ast.Attribute) and first.attr == "device")
            if name == "launch" and on_device:
                kernel = node.args[1]
                # a name held in a variable is string-keyed too: recorded as "?"
                key = kernel.value if isinstance(kernel, ast.Constant) and isinstance(kernel.value, str) else "?"
                found.add((str(path.relative_to(root)), key))
    return found


def test_stage_modules_launch_no_kernel_by_name_beyond_the_shrinking_list():
    found = string_launches()
    new = found - STRING_LAUNCHES
    assert not new, f"string-named kernel launches in stage code (call a front end of gpu_dedup/ops/): {sorted(new)}"
    gone = STRING_LAUNCHES - found
    assert not gone, f"these launches are gone: delete them from STRING_LAUNCHES: {sorted(gone)}"


def test_the_lexical_stage_launches_no_kernel_by_name():
    assert not {f for f, _ in string_launches()} & {str(p.relative_to(ROOT))
                                                      for p in (ROOT / "gpu_dedup/lexical").glob("*.py")}


def test_the_launch_scan_finds_a_string_launch(tmp_path):
    (tmp_path / "m.py").write_text('from x import launch\nlaunch("cpu", "k", 3, a)\ndev.launch(device, "j", 1)\n'
                                   'launch("cuda", name, 3, a)\nk.launch(3, a)\n')
    assert string_launches(["m.py"], tmp_path) == {("m.py", "k"), ("m.py", "j"), ("m.py", "?")}
