import glob
import os

# Without a real GPU, run the CUDA kernels under Numba's simulator so CI checks them against the CPU
# kernels (must be set before numba.cuda is imported). GPU_DEDUP_REAL_GPU=1 keeps the real driver.
if os.environ.get("GPU_DEDUP_REAL_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    # ... and the CuPy orchestration under the strict array backend (gpu_dedup/strict.py): host arrays
    # reaching device code raise here as they would with CuPy on a GPU.
    os.environ.setdefault("GPU_DEDUP_STRICT_DEVICE", "1")

import pytest  # noqa: E402

KERNELS = os.path.join(os.path.dirname(__file__), os.pardir, "kernels")


def _drop_stale_kernel_cache() -> None:
    """Numba validates a cached kernel against its own file's mtime only, but the CPU kernels inline
    device functions from the modules of device functions (hashing.py, normalize.py, bloom.py, lm.py, ...:
    every kernels/*.py but the *_cpu.py / *_cuda.py entry modules): drop the cache when one of those is newer
    (development only; an install rewrites every file)."""
    deps = [p for p in glob.glob(os.path.join(KERNELS, "*.py")) if not p.endswith(("_cpu.py", "_cuda.py"))]
    newest = max(os.path.getmtime(p) for p in deps if os.path.exists(p))
    for f in glob.glob(os.path.join(KERNELS, "__pycache__", "*.nb[ic]")):
        if os.path.getmtime(f) < newest:
            os.remove(f)


_drop_stale_kernel_cache()


def pytest_collection_modifyitems(config, items):
    from gpu_dedup.device import gpu_status

    usable, reason = gpu_status()
    if usable:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
