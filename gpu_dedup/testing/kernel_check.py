"""Every GPU kernel through the real CUDA compiler for the H200 (sm_90), on a machine without a GPU.

The CUDA simulator runs device code as Python, so it cannot see what only the compiler sees: a construct
NVVM cannot type (``cuda.local.array(2 * N, ...)``), a register spill, a stack frame or a shared tile too
large, an integer kernel that computes through float64 (a true division, a float constant, an int64/uint64
mix under numba's older typing: exact only below 2^53). This module
compiles every declared signature of every ``@kernel`` (``kernels/_launch.py``: ``sigs=``, kept equal to
the real launches by the simulator tests) of ``kernels/core_cuda.py`` and every ``kernels/*_cuda.py`` exactly as a
GPU run would (``numba.cuda.compile_ptx`` with numba-cuda + NVVM), then assembles the PTX with
``ptxas -arch=sm_90 -v`` and reads its resource report.

Stages (``check`` composes them):
  1. ``find_kernels``: every Kernel instance of the kernel modules, with its declared signatures
     (a kernel without any is a failure).
  2. ``compile_one``: one (kernel, signature) -> ``Compiled`` (PTX facts + ptxas's report, seconds), in a
     process pool (``jobs``), each result cached under a hash of the kernel's source files (its module and
     every module it imports, transitively), the signature and the toolchain's versions.
  3. ``problems``: the verdicts (``LIMITS``): compile error, spill, stack or shared memory over its limit,
     registers x threads per block over the SM's register file, ``cvt`` to/from f64 in an integer kernel
     (one whose arguments hold no float).

Command line (what tests/kernels/test_kernel_compile.py and the device script run):
``python -m gpu_dedup.testing.kernel_check [--jobs 2] [--json PATH] [--markdown] [--module FILE.py]``;
exit status 1 when any kernel has a problem. Needs numba-cuda, nvidia-nvvm, nvidia-cuda-nvrtc and
nvidia-cuda-nvcc (ptxas) (README, "The GPU path"), and must not run under NUMBA_ENABLE_CUDASIM.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import glob
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from ..errors import RunError

log = logging.getLogger(__name__)

CC = (9, 0)          # the H200
ARCH = "sm_90"
LIMITS = {
    "stack_bytes": 4096,     # per thread: the runtime reserves it for every resident thread (4 KiB x 2048 x 132
                             # SMs = 1.1 GB of device memory); a larger local array belongs in global scratch
    "smem_bytes": 48 * 1024,  # static shared memory of one block (more needs a dynamic opt-in)
    "block_registers": 65536,  # registers x threads per block: the SM's register file, else the launch fails
}
KERNEL_PACKAGE = "gpu_dedup.kernels"
CACHE_ENV = "GPU_DEDUP_KERNEL_CHECK_CACHE"
CVT = re.compile(r"^\s*cvt((?:\.\w+)+)\s", re.M)


@dataclasses.dataclass
class Job:
    module: str      # importable module name, or a file path (--module)
    kernel: str
    index: int       # into the kernel's sigs
    sig: str         # for reports
    integer: bool    # no float in any argument: a cvt to or from f64 is a promotion bug
    tpb: int
    key: str         # cache key


@dataclasses.dataclass
class Compiled:
    module: str
    kernel: str
    sig: str
    integer: bool
    tpb: int
    error: str = ""
    registers: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem_bytes: int = 0
    f64_cvts: int = 0
    compile_s: float = 0.0   # NVVM (PTX) seconds
    ptxas_s: float = 0.0
    cached: bool = False


def problems(c: Compiled) -> list[str]:
    """The verdicts on one compiled (kernel, signature): empty when it is fit for the GPU."""
    if c.error:
        return [c.error if c.error.startswith("declares") else f"does not compile: {c.error}"]
    out = []
    if c.spill_stores or c.spill_loads:
        out.append(f"register spill ({c.spill_stores} B stores, {c.spill_loads} B loads; {c.registers} registers)")
    if c.stack_bytes > LIMITS["stack_bytes"]:
        out.append(f"stack frame {c.stack_bytes} B > {LIMITS['stack_bytes']} B per thread")
    if c.smem_bytes > LIMITS["smem_bytes"]:
        out.append(f"shared memory {c.smem_bytes} B > {LIMITS['smem_bytes']} B per block")
    if c.registers * c.tpb > LIMITS["block_registers"]:
        out.append(f"{c.registers} registers x {c.tpb} threads > {LIMITS['block_registers']}: the launch fails")
    if c.integer and c.f64_cvts:
        out.append(f"{c.f64_cvts} cvt to/from f64 in an integer kernel (a true division or a float constant?)")
    return out


def parse_ptxas(text: str) -> dict:
    """registers, stack, spills and shared memory of the one entry function in ``ptxas -v``'s report."""
    def grab(pattern):
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0
    return {"registers": grab(r"Used (\d+) registers"), "stack_bytes": grab(r"(\d+) bytes stack frame"),
            "spill_stores": grab(r"(\d+) bytes spill stores"), "spill_loads": grab(r"(\d+) bytes spill loads"),
            "smem_bytes": grab(r"(\d+) bytes smem")}


def f64_conversions(ptx: str) -> int:
    """``cvt`` instructions with an f64 source or destination type in a PTX text."""
    return sum(1 for m in CVT.finditer(ptx) if ".f64" in m.group(1))


# -- sources and cache keys -------------------------------------------------------------------------------------
# imported by kernels/_launch.py only under NUMBA_ENABLE_CUDASIM (the simulator's block scheduler): no machine code
# depends on it, so it is not part of a kernel module's cache key
SIMULATOR_ONLY = frozenset({"gpu_dedup.testing.simulator"})

def source_files(path: str, package: str | None, seen: set[str] | None = None) -> set[str]:
    """``path`` and every gpu_dedup source it imports, transitively (relative imports and ``gpu_dedup.*``):
    what a kernel's machine code can depend on."""
    seen = set() if seen is None else seen
    real = os.path.realpath(path)
    if real in seen:
        return seen
    seen.add(real)
    tree = ast.parse(Path(path).read_text(), path)
    def spec_of(name):
        if not name.startswith("gpu_dedup") or name in SIMULATOR_ONLY:
            return None
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        return spec if spec is not None and spec.origin and spec.origin.endswith(".py") else None

    for node in ast.walk(tree):
        specs = []
        if isinstance(node, ast.ImportFrom):
            if node.level and package is None:
                continue
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else (node.module or "")
            # ``from .. import constants`` depends on constants.py, not on the package's __init__
            specs = [sp for a in node.names if (sp := spec_of(f"{base}.{a.name}")) is not None] or [spec_of(base)]
        elif isinstance(node, ast.Import):
            specs = [spec_of(a.name) for a in node.names]
        for spec in specs:
            if spec is not None:
                source_files(spec.origin, spec.name if spec.submodule_search_locations else spec.parent, seen)
    return seen


def toolchain() -> str:
    """Versions that change the machine code: numba, numba-cuda, NVVM, ptxas."""
    import numba
    from numba import cuda
    ver = [numba.__version__, getattr(cuda, "__version__", ""), ptxas_version()]
    try:
        ver.append(str(cuda.cudadrv.nvvm.NVVM().get_version()))
    except Exception as e:  # noqa: BLE001 - reported by the compile itself
        ver.append(f"nvvm?{type(e).__name__}")
    return "|".join(ver)


_PTXAS: list[str] = []


def ptxas_path() -> str:
    """The nvidia-cuda-nvcc wheel's ptxas (pinned with the other wheels), else ``$PTXAS``, else PATH's."""
    if _PTXAS:
        return _PTXAS[0]
    found = os.environ.get("PTXAS", "")
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else []) or []:
        for cand in sorted(glob.glob(os.path.join(root, "cu*", "bin", "ptxas")) +
                           glob.glob(os.path.join(root, "cuda_nvcc", "bin", "ptxas"))):
            found = found or cand
    found = found or shutil.which("ptxas") or ""
    if not found:
        raise RunError("ptxas not found: pip install 'nvidia-cuda-nvcc==13.*' (the test extra has it), "
                       "or set PTXAS=/path/to/ptxas")
    _PTXAS.append(found)
    return found


def ptxas_version() -> str:
    out = subprocess.run([ptxas_path(), "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else "?"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "gpu_dedup" / "kernel_check")


# -- stage 1: the kernels ---------------------------------------------------------------------------------------

def kernel_modules() -> list[str]:
    """Every kernels/*_cuda.py (core_cuda.py first), as importable module names."""
    spec = importlib.util.find_spec(KERNEL_PACKAGE)
    root = spec.submodule_search_locations[0]
    names = ["core_cuda"] + sorted(Path(p).stem for p in glob.glob(os.path.join(root, "*_cuda.py"))
                                   if Path(p).stem != "core_cuda")
    return [f"{KERNEL_PACKAGE}.{n}" for n in names]


def load_module(module: str):
    """An importable module name, or a .py file (``--module``, the test's deliberately broken kernels)."""
    if module.endswith(".py"):
        name = "_kernel_check_" + Path(module).stem
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, module)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        return sys.modules[name]
    return importlib.import_module(module)


def module_kernels(module: str) -> list:
    from gpu_dedup.kernels._launch import Kernel

    mod = load_module(module)
    return [v for k, v in vars(mod).items() if isinstance(v, Kernel) and getattr(v, "module", "") == mod.__name__]


def find_kernels(modules: list[str], versions: str) -> tuple[list[Job], list[Compiled]]:
    """The jobs (one per kernel and declared signature) and the kernels that declare none (failures)."""
    from numba import types

    jobs, undeclared = [], []
    for module in modules:
        mod = load_module(module)
        path = mod.__file__
        package = mod.__package__ or None
        digest = hashlib.sha256(versions.encode())
        for f in sorted(source_files(path, package)):
            digest.update(f.encode() + b"\0" + Path(f).read_bytes())
        for k in module_kernels(module):
            if not k.sigs:
                undeclared.append(Compiled(module, k.__name__, "", False, k.tpb,
                                           error="declares no argument types (sigs= of its @kernel)"))
            for i, sig in enumerate(k.sigs):
                floats = any(isinstance(getattr(t, "dtype", t), types.Float) for t in sig)
                text = "(" + ", ".join(map(str, sig)) + ")"
                key = hashlib.sha256(f"{digest.hexdigest()}|{k.__name__}|{text}|{k.tpb}".encode()).hexdigest()
                jobs.append(Job(module, k.__name__, i, text, not floats, k.tpb, key))
    return jobs, undeclared


# -- stage 2: compile -------------------------------------------------------------------------------------------

class _Device:
    """What numba-cuda asks of the current device while it compiles device functions: its compute
    capability. No driver is touched."""
    compute_capability = CC


def _worker_init() -> None:
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = lambda: _Device()


def compile_one(job: Job) -> Compiled:
    """NVVM then ptxas for one (kernel, signature)."""
    from numba import cuda

    _worker_init()
    out = Compiled(job.module, job.kernel, job.sig, job.integer, job.tpb)
    k = next(k for k in module_kernels(job.module) if k.__name__ == job.kernel)
    t = time.perf_counter()
    try:
        ptx, _ = cuda.compile_ptx(k.dispatcher.py_func, k.sigs[job.index], cc=CC)
    except Exception as e:  # noqa: BLE001 - every compile error is a verdict, reported with its message
        out.error = f"{type(e).__name__}: {' '.join(str(e).split())[:600]}"
        return out
    out.compile_s = time.perf_counter() - t
    out.f64_cvts = f64_conversions(ptx)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        Path(src).write_text(ptx)
        t = time.perf_counter()
        r = subprocess.run([ptxas_path(), f"-arch={ARCH}", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
                           capture_output=True, text=True)
        out.ptxas_s = time.perf_counter() - t
    if r.returncode != 0:
        out.error = "ptxas: " + " ".join((r.stderr or r.stdout).split())[:600]
        return out
    for name, value in parse_ptxas(r.stdout + r.stderr).items():
        setattr(out, name, value)
    return out


# -- composition ------------------------------------------------------------------------------------------------

def check(modules: list[str] | None = None, jobs: int = 2, use_cache: bool = True) -> list[Compiled]:
    """Compile every declared signature of every kernel of ``modules`` (default: all kernel modules)."""
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        raise RunError("the compile check needs the real compiler: unset NUMBA_ENABLE_CUDASIM")
    if getattr(cuda, "implementation", "") != "NVIDIA":
        raise RunError("numba-cuda is not installed (numba.cuda is numba's built-in target): "
                       "pip install 'numba-cuda==0.30.4' (the test extra has it)")
    modules = modules or kernel_modules()
    todo, results = find_kernels(modules, toolchain())
    store = cache_dir()
    pending = []
    for job in todo:
        hit = store / f"{job.key}.json"
        if use_cache and hit.exists():
            results.append(Compiled(**{**json.loads(hit.read_text()), "cached": True}))
        else:
            pending.append(job)
    if pending:
        log.info("compiling %d kernel signatures for %s with %d processes", len(pending), ARCH, jobs)
        if jobs > 1 and len(pending) > 1:
            with ProcessPoolExecutor(jobs, initializer=_worker_init) as pool:
                fresh = list(pool.map(compile_one, pending, chunksize=1))
        else:
            fresh = [compile_one(j) for j in pending]
        store.mkdir(parents=True, exist_ok=True)
        for job, c in zip(pending, fresh):
            if not c.error:  # a failure is recompiled next time (it is being fixed)
                (store / f"{job.key}.json").write_text(json.dumps(dataclasses.asdict(c)))
        results.extend(fresh)
    order = {(j.module, j.kernel, j.sig): i for i, j in enumerate(todo)}
    return sorted(results, key=lambda c: order.get((c.module, c.kernel, c.sig), -1))


def markdown(results: list[Compiled]) -> str:
    """The compile table of docs/performance.md: one row per kernel (the worst of its signatures)."""
    rows = ["| family | kernel | sigs | registers | stack B | spill B | smem B | NVVM s | ptxas s |",
            "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[Compiled]] = {}
    for c in results:
        groups.setdefault((c.module, c.kernel), []).append(c)
    for (module, name), cs in groups.items():
        family = module.rsplit(".", 1)[-1]
        if any(c.error for c in cs):
            rows.append(f"| {family} | {name} | {len(cs)} | error | | | | | |")
            continue
        rows.append(f"| {family} | {name} | {len(cs)} | {max(c.registers for c in cs)} | "
                    f"{max(c.stack_bytes for c in cs)} | {max(c.spill_stores + c.spill_loads for c in cs)} | "
                    f"{max(c.smem_bytes for c in cs)} | {sum(c.compile_s for c in cs):.1f} | "
                    f"{sum(c.ptxas_s for c in cs):.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_dedup.testing.kernel_check", description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="compiler processes (default 2)")
    ap.add_argument("--json", help="write every (kernel, signature) result here")
    ap.add_argument("--markdown", action="store_true", help="print the per-kernel table of docs/performance.md")
    ap.add_argument("--module", action="append", help="check this module name or .py file instead (repeatable)")
    ap.add_argument("--no-cache", action="store_true", help=f"recompile everything (cache: ${CACHE_ENV} or "
                    "~/.cache/gpu_dedup/kernel_check)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    t = time.perf_counter()
    results = check(args.module, args.jobs, not args.no_cache)
    bad = [(c, p) for c in results for p in problems(c)]
    if args.json:
        Path(args.json).write_text(json.dumps([{**dataclasses.asdict(c), "problems": problems(c)}
                                               for c in results], indent=1))
    if args.markdown:
        print(markdown(results))
    fresh = [c for c in results if not c.cached]
    print(f"{len(results)} kernel signatures for {ARCH} ({len(fresh)} compiled, {len(results) - len(fresh)} cached) "
          f"in {time.perf_counter() - t:.1f} s; {len(bad)} problems")
    for c, p in bad:
        print(f"FAIL {c.module}.{c.kernel}{c.sig}: {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
