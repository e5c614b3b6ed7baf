"""The strict array backend (gpu_dedup/testing/strict.py) and the kernel launch guard (kernels/_launch.py): every
rule CuPy enforces about host and device must raise here too, and the explicit transfers must work."""
import numpy as np
import pytest

from gpu_dedup.testing import strict
from gpu_dedup.runtime.device import array_backend, array_module, module_of, simulator, to_device, to_host
from gpu_dedup.testing.strict import StrictArray, xp

pytestmark = pytest.mark.skipif(not simulator(), reason="the strict backend runs under the CUDA simulator")


def d(a):
    return xp.asarray(np.asarray(a))


def test_listed_names_exist_in_numpy():
    # the buffer's library must have every name the shim hands out (a typo would only show at call time)
    assert not sorted(n for n in strict._FUNCTIONS | strict._PASSTHROUGH if not hasattr(np, n))
    assert not sorted(n for n in strict._METHODS if not hasattr(np.ndarray, n))


def test_explicit_transfers_round_trip_and_copy():
    h = np.arange(6, dtype=np.int64)
    a = xp.asarray(h)
    assert isinstance(a, StrictArray) and a.shape == (6,) and a.dtype == np.int64
    h[0] = 99  # a transfer copies: the device array does not alias host memory
    assert a.get()[0] == 0 and isinstance(a.get(), np.ndarray)
    assert xp.asarray(a) is a and to_host(a).tolist() == [0, 1, 2, 3, 4, 5]
    b = xp.empty(6, xp.int64)
    b.set(np.full(6, 3, np.int64))
    assert to_host(b).tolist() == [3] * 6
    assert int(a[2]) == 2 and float(a[3]) == 3.0 and bool(a[1]) and a[4].item() == 4
    with pytest.raises(ValueError, match="Unsupported dtype"):
        xp.asarray(["a", "b"])


def test_implicit_conversions_raise():
    a = d([1, 2, 3])
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError, match="numpy.concatenate was applied to a device array"):
        np.concatenate([a, a])
    with pytest.raises(TypeError):
        np.add(a, 1)
    with pytest.raises(TypeError, match="numpy.sum"):
        np.sum(a)
    with pytest.raises(TypeError):
        range(10)[a[0]]  # no __index__: a device scalar is not a Python index
    with pytest.raises(TypeError, match="pickled"):
        import pickle

        pickle.dumps(a)


@pytest.mark.parametrize("host", [np.array([1, 2, 3]), np.array(2)])
def test_host_arrays_in_device_operations_raise(host):
    a = d([1, 2, 3])
    for op in (lambda: a + host, lambda: host + a, lambda: a == host, lambda: host * a):
        with pytest.raises(TypeError, match="host numpy.ndarray"):
            op()
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        xp.concatenate([a, host.reshape(-1)])
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        xp.where(a > 1, a, host)
    with pytest.raises(TypeError, match="index"):
        a[np.array([0, 1])]
    with pytest.raises(TypeError, match="assigned value"):
        a[:1] = np.array([5])
    with pytest.raises(TypeError, match="list"):
        a[[0, 1]]
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        a += host


def test_scalars_mix_freely():
    a = d([1, 2, 3])
    assert to_host(a + 1).tolist() == [2, 3, 4] and to_host(np.int64(2) * a).tolist() == [2, 4, 6]
    assert to_host(a >= np.uint64(2)).tolist() == [False, True, True]
    a[0] = np.int64(7)
    assert int(a.sum()) == 12 and isinstance(a.sum(), StrictArray)  # reductions stay on the device (0-d)


def test_cupy_signature_rules():
    a = d([3, 1, 2])
    with pytest.raises(TypeError, match="ascontiguousarray takes a device array"):
        xp.ascontiguousarray(np.array([1, 2]), dtype=xp.int64)
    assert to_host(xp.ascontiguousarray(a, dtype=xp.int32)).dtype == np.int32
    with pytest.raises(TypeError, match="lexsort"):
        xp.lexsort((a, a))
    assert to_host(xp.lexsort(xp.stack([a, a]))).tolist() == [1, 2, 0]
    with pytest.raises(TypeError, match="kind"):
        xp.argsort(a, kind="quicksort")
    with pytest.raises(AttributeError, match="outside the CuPy subset"):
        xp.piecewise  # noqa: B018 - a NumPy function the shim does not model
    with pytest.raises(AttributeError, match="not in the CuPy ndarray subset"):
        a.tofile  # noqa: B018


def test_sorts_are_stable_like_cupy():
    keys = np.array([2, 1, 2, 1, 0, 2] * 50, np.int64)
    assert np.array_equal(to_host(xp.argsort(d(keys))), np.argsort(keys, kind="stable"))
    assert np.array_equal(to_host(d(keys).argsort()), np.argsort(keys, kind="stable"))


def test_scatter_with_repeated_positions_raises_unless_values_agree():
    a = xp.zeros(5, xp.int64)
    a[d([0, 2, 2])] = d([1, 7, 7])  # same value written twice: defined
    assert to_host(a).tolist() == [1, 0, 7, 0, 0]
    a[d([1, 1])] = 4  # a scalar: every write is the same
    with pytest.raises(ValueError, match="position 3 more than once"):
        a[d([3, 0, 3])] = d([1, 2, 3])
    m = xp.zeros((3, 2), xp.int64)
    with pytest.raises(ValueError, match="more than once"):
        m[d([1, 1])] = d([[1, 2], [1, 3]])


def test_module_selection_and_backend_name(monkeypatch):
    monkeypatch.setenv("GPU_DEDUP_STRICT_DEVICE", "1")
    assert array_module("cuda") is xp and array_backend("cuda") == "strict"
    assert array_module("cpu") is np and array_backend("cpu") == "numpy"
    assert isinstance(to_device(np.arange(3), "cuda"), StrictArray)
    assert module_of(d([1])) is xp and module_of(np.zeros(1)) is np
    monkeypatch.setenv("GPU_DEDUP_STRICT_DEVICE", "0")
    assert array_module("cuda") is np and array_backend("cuda") == "numpy"
    assert isinstance(to_device(np.arange(3), "cuda"), np.ndarray)


def test_kernels_take_device_arrays_only(monkeypatch):
    from gpu_dedup.kernels import core_cuda as kc

    monkeypatch.setenv("GPU_DEDUP_STRICT_DEVICE", "1")
    label = d(np.array([0, 1, 2, 3], np.int64))
    label[3] = 2
    kc.pointer_jump[1, 4](label)  # the simulator writes into the strict array's buffer
    assert to_host(label).tolist() == [0, 1, 2, 2]
    with pytest.raises(TypeError, match="kernel pointer_jump: argument 0 is a host numpy.ndarray"):
        kc.pointer_jump[1, 4](np.arange(4))
    monkeypatch.setenv("GPU_DEDUP_STRICT_DEVICE", "0")
    host = np.array([1, 1, 0], np.int64)
    kc.pointer_jump[1, 4](host)  # plain simulator mode: NumPy arrays are the device arrays
    assert host.tolist() == [1, 1, 1]


def test_kernels_are_compiled_with_the_cache():
    # every GPU kernel goes through kernels._launch.kernel (cache=True + the argument guard)
    import importlib

    from gpu_dedup.kernels._launch import Kernel
    from gpu_dedup.testing import kernel_check

    from numba.cuda.simulator.kernel import FakeCUDAKernel

    mods = [importlib.import_module(m) for m in kernel_check.kernel_modules()]
    bare = [n for m in mods for n, v in vars(m).items() if isinstance(v, FakeCUDAKernel) and not v._device]
    assert not bare, f"kernels bypassing kernels._launch.kernel: {bare}"
    assert all(any(isinstance(v, Kernel) for v in vars(m).values()) for m in mods)
    assert sum(isinstance(v, Kernel) for m in mods for v in vars(m).values()) >= 40  # 41 on 2026-12-02


def test_large_copies_go_through_the_staging_pool(monkeypatch):
    """The pinned-staging path (a GPU run's batch copies) under the strict backend: round trips, reuses a
    buffer without corrupting an earlier copy, and keeps at most two buffers."""
    from gpu_dedup.runtime import device

    monkeypatch.setenv("GPU_DEDUP_STRICT_DEVICE", "1")
    monkeypatch.setattr(device, "_staging", [])
    x = np.random.default_rng(0).integers(0, 255, 3 << 20, dtype=np.uint8)
    a = to_device(x, "cuda")
    assert isinstance(a, StrictArray) and np.array_equal(to_host(a), x)
    y = np.arange(1 << 19, dtype=np.int64)[::-1].copy()  # 4 MiB of int64, reshaped through the same buffer
    b = to_device(y.reshape(512, -1), "cuda")
    assert b.shape == (512, 1024) and np.array_equal(to_host(b).ravel(), y) and np.array_equal(to_host(a), x)
    assert len(device._staging) == 1 and device._staging[0].nbytes >= 64 << 20
