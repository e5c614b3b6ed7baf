"""The simulator's event-driven block scheduler (gpu_dedup/testing/simulator.py) keeps the simulator's barrier
semantics: a block-wide scan with barriers between steps, threads that leave early, syncthreads_count, and an
exception in one thread, each against a plain NumPy reference."""
import numpy as np
import pytest
from numba import cuda

from gpu_dedup.runtime.device import simulator

pytestmark = pytest.mark.skipif(not simulator(), reason="the scheduler replaces the CUDA simulator's (conftest's default)")

N = 16


@cuda.jit
def _scan(x, out, counts):
    """Hillis-Steele inclusive prefix sum of one block's ``x`` (a barrier before and after every step)."""
    tile = cuda.shared.array(N, np.int64)
    t = cuda.threadIdx.x
    tile[t] = x[t]
    counts[t] = cuda.syncthreads_count(x[t] > 2)
    step = 1
    while step < N:
        v = tile[t - step] if t >= step else 0
        cuda.syncthreads()
        tile[t] += v
        cuda.syncthreads()
        step *= 2
    out[t] = tile[t]


@cuda.jit
def _early_exit(live, out):
    """Threads ``t >= live`` leave before the barriers; the barriers then wait for the live ones only."""
    tile = cuda.shared.array(N, np.int64)
    t = cuda.threadIdx.x
    if t >= live:
        return
    tile[t] = t + 1
    cuda.syncthreads()
    out[t] = tile[live - 1 - t]
    cuda.syncthreads()


@cuda.jit
def _fails(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 3:
        raise ValueError("thread three")
    out[t] = t


def test_installed_under_the_simulator():
    from numba.cuda.simulator import kernel as sim

    import gpu_dedup.kernels._launch  # noqa: F401  (installs it)
    assert getattr(sim.BlockManager.run, "_gpu_dedup", False)


def test_barriers_and_counts_equal_numpy():
    import gpu_dedup.kernels._launch  # noqa: F401

    x = np.random.default_rng(1).integers(0, 6, N).astype(np.int64)
    out, counts = np.zeros(N, np.int64), np.zeros(N, np.int64)
    for _ in range(3):  # the same result every time (no lost wake-up)
        _scan[2, N](x, out, counts)
        assert np.array_equal(out, np.cumsum(x)) and (counts == (x > 2).sum()).all()


def test_threads_that_leave_early_do_not_hold_a_barrier():
    import gpu_dedup.kernels._launch  # noqa: F401

    out = np.zeros(N, np.int64)
    _early_exit[1, N](5, out)
    assert out.tolist() == [5, 4, 3, 2, 1] + [0] * (N - 5)


def test_an_exception_in_one_thread_is_raised():
    import gpu_dedup.kernels._launch  # noqa: F401

    with pytest.raises(ValueError, match="thread three"):
        _fails[1, 8](np.zeros(8, np.int64))
