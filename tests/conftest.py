import os

# Without a real GPU, run the CUDA kernels under Numba's simulator so CI checks them against the CPU
# kernels (must be set before numba.cuda is imported). GPU_DEDUP_REAL_GPU=1 keeps the real driver.
if os.environ.get("GPU_DEDUP_REAL_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    # ... and the CuPy orchestration under the strict array backend (gpu_dedup/testing/strict.py): host arrays
    # reaching device code raise here as they would with CuPy on a GPU.
    os.environ.setdefault("GPU_DEDUP_STRICT_DEVICE", "1")

import pytest  # noqa: E402

# (cached kernels older than an edited device function are dropped by gpu_dedup/kernels/_build.py itself)


def pytest_collection_modifyitems(config, items):
    from gpu_dedup.runtime.device import gpu_status

    usable, reason = gpu_status()
    if usable:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
