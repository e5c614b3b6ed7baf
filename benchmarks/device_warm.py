"""The device script's compile / warm-up stage: pays every first-run compilation before the timed stages.

On a fresh machine nothing is cached, and a stage that compiles inside its own timeout may not finish
(review P1-1). In this order, each step printing one ``WARM`` line the moment it ends:
  1. GPU kernels: every declared signature (``sigs=`` of each ``@kernel``) of kernels/core_cuda.py and
     kernels/*_cuda.py compiled by its own dispatcher, so into Numba's on-disk cache that the later stages
     load from (same signatures as their launches: the simulator tests check that). Kernels are spread over
     ``--jobs`` processes, all signatures of one kernel in one process (they share one cache index file).
     Without a GPU (``--sim``, the dry run): the same signatures through the real compiler instead
     (``gpu_dedup.testing.kernel_check``: NVVM + ptxas for sm_90), when numba-cuda is installed.
  2. Pipeline: one tiny ``deduplicate`` on cpu and on cuda (the CPU twins the GPU tests compare against,
     and CuPy's own NVRTC kernels of the orchestration), counting CuPy's kernel cache files before and after.

    python benchmarks/device_warm.py [--jobs 8] [--sim]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

# the shared device functions rely on uint64 wrap-around, which numpy scalars (simulator) warn about
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)


def _compile_kernels(group: list[tuple[str, str]]) -> tuple[int, int, list[str]]:
    """Compile every signature of the kernels (module, name) of one group: (compiled, loaded from the
    cache, errors)."""
    from gpu_dedup.testing.kernel_check import module_kernels

    done = hits = 0
    errors = []
    for module, name in group:
        k = next(k for k in module_kernels(module) if k.__name__ == name)
        for sig in k.sigs:
            try:
                k.dispatcher.compile(tuple(sig))
            except Exception as exc:  # noqa: BLE001 - reported, the other kernels still compile
                errors.append(f"{name}{tuple(map(str, sig))}: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            done += 1
        hits += sum(k.dispatcher._cache_hits.values())
    return done, hits, errors


def warm_kernels(jobs: int) -> bool:
    from gpu_dedup.testing.kernel_check import kernel_modules, module_kernels

    t = time.perf_counter()
    names = [(m, k.__name__) for m in kernel_modules() for k in module_kernels(m)]
    groups = [names[i::jobs] for i in range(min(jobs, len(names)))]
    # spawn, not fork: a child must not inherit a parent's CUDA state (none is made here, but be sure)
    with ProcessPoolExecutor(len(groups), mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_compile_kernels, groups))
    done = sum(r[0] for r in results)
    hits = sum(r[1] for r in results)
    errors = [e for r in results for e in r[2]]
    print(f"WARM kernels: {len(names)} GPU kernels, {done} signatures ready ({hits} from the cache) in "
          f"{time.perf_counter() - t:.1f} s with {len(groups)} processes; {len(errors)} errors", flush=True)
    for e in errors:
        print(f"WARM error {e}", flush=True)
    return not errors


def check_kernels_without_gpu(jobs: int) -> bool:
    """The dry run's stand-in for step 1: the real compiler, no GPU (the simulator cannot compile)."""
    import importlib.util

    if importlib.util.find_spec("numba_cuda") is None:
        print("WARM kernels: numba-cuda not installed, the real-compiler step is skipped", flush=True)
        return True
    t = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "GPU_DEDUP_STRICT_DEVICE")}
    r = subprocess.run([sys.executable, "-m", "gpu_dedup.testing.kernel_check", "--jobs", str(jobs)],
                       capture_output=True, text=True, env=env)
    last = (r.stdout.strip().splitlines() or ["(no output)"])
    print(f"WARM kernels (real compiler, sm_90, no GPU): {last[-1] if r.returncode == 0 else ' | '.join(last[-5:])} "
          f"[{time.perf_counter() - t:.1f} s]", flush=True)
    return r.returncode == 0


def cupy_cache_files() -> int:
    root = os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")
    return sum(len(files) for _, _, files in os.walk(root)) if os.path.isdir(root) else 0


def warm_pipeline(small: bool) -> bool:
    import gpu_dedup
    from gpu_dedup import RunConfig
    from gpu_dedup.testing.evalcorpus import make_corpus

    before = cupy_cache_files()
    table = make_corpus(40 if small else 400, seed=5, mean_words=30, template_families=1, family_size=4)
    table = table.select(["id", "text"])
    ok = True
    for device in ("cpu", "cuda"):
        t = time.perf_counter()
        cfg = RunConfig.preset("default", progress=False).replace(device=device)
        if small:  # the simulator runs every GPU thread in Python
            cfg = cfg.replace(minhash__num_perm=16, lsh__bands=4, lsh__rows=4)
        try:
            res = gpu_dedup.deduplicate(table, cfg)
            detail = f"{res.stats['counts']['removed']} of {table.num_rows} removed"
        except Exception as exc:  # noqa: BLE001 - the stage reports it; pytest shows the details
            ok, detail = False, f"{type(exc).__name__}: {str(exc)[:300]}"
        print(f"WARM pipeline {device}: {detail} in {time.perf_counter() - t:.1f} s", flush=True)
    print(f"WARM cupy kernel cache: {before} -> {cupy_cache_files()} files", flush=True)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="compiler processes")
    ap.add_argument("--sim", action="store_true", help="no GPU: the real compiler without a device, tiny sizes")
    args = ap.parse_args()
    from numba import config

    sim = args.sim or bool(config.ENABLE_CUDASIM)
    ok = check_kernels_without_gpu(args.jobs) if sim else warm_kernels(args.jobs)
    ok = warm_pipeline(sim) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
