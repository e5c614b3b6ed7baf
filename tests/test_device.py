"""device.py: the one launch helper and the geometry each kernel declares (kernels/_launch.py)."""
import numpy as np
import pytest

from gpu_dedup.device import kernels, launch, simulator
from gpu_dedup.kernels import _launch


def test_kernels_picks_the_module_of_a_device_and_family():
    assert kernels("cpu").__name__ == "gpu_dedup.kernels.cpu"
    assert kernels("cuda").__name__ == "gpu_dedup.kernels.cuda"
    assert kernels("cpu", "bloom").__name__ == "gpu_dedup.kernels.bloom_cpu"
    assert kernels("cuda", "bloom").__name__ == "gpu_dedup.kernels.bloom_cuda"


def test_every_gpu_kernel_declares_a_usable_geometry():
    for family in (None, "bloom"):
        gpu = kernels("cuda", family)
        ks = {n: k for n, k in vars(gpu).items() if isinstance(k, _launch.Kernel)}
        assert ks, family
        for name, k in ks.items():
            blocks, threads = k.grid(1000)
            assert blocks >= 1 and 1 <= threads <= k.tpb, name


def test_plain_block_and_grid_stride_geometries():
    def body(x):  # never launched: only the geometry is read
        pass

    plain = _launch.Kernel(body)
    assert plain.grid(1) == (1, _launch.TPB) and plain.grid(0) == (1, _launch.TPB)
    assert plain.grid(_launch.TPB + 1) == (2, _launch.TPB)
    per_block = _launch.Kernel(body, per_block=True, tpb=64)
    assert per_block.grid(7) == (7, 64)
    stride = _launch.Kernel(body, per_block=True, stride=True)
    cap = _launch.SIM_GRID if simulator() else _launch.MAX_GRID
    assert stride.grid(10 ** 9)[0] == cap


@pytest.mark.skipif(not simulator(), reason="compares the CUDA kernel under the simulator")
def test_launch_runs_the_same_kernel_on_both_targets():
    rng = np.random.default_rng(3)
    sig = rng.integers(0, 2**32, size=(37, 20), dtype=np.uint64).astype(np.uint32)
    sig_bytes = sig.view(np.uint8).reshape(37, -1)
    cpu, gpu = np.empty((37, 4), np.uint64), np.empty((37, 4), np.uint64)
    launch("cpu", "band_keys", 37 * 4, sig_bytes, 4, 5 * 4, cpu)
    from gpu_dedup.device import to_device, to_host

    out = to_device(gpu, "cuda")
    launch("cuda", "band_keys", 37 * 4, to_device(sig_bytes, "cuda"), 4, 5 * 4, out)
    assert np.array_equal(to_host(out), cpu)
