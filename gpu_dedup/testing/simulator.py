"""A faster block scheduler for Numba's CUDA simulator (tests only; the simulated semantics are unchanged).

The simulator runs every CUDA thread of a block as a Python thread, and its ``BlockManager.run`` finds the
threads blocked in ``cuda.syncthreads()`` by polling them in a loop that never sleeps. That loop holds the GIL
against the very threads it waits for: a cProfile of one simulated ``filter --device cuda`` run spent 207 of its
379 s in ``Thread.is_alive`` calls from that loop (22.7 M of them), almost all in ``unit_starts``, a kernel with
three barriers per chunk. ``install()`` replaces the loop with one that waits on an event which a thread sets
when it reaches a barrier or ends. The rule the loop applies is the simulator's own: when every live thread
of the block is blocked at a barrier, all are released; a thread's exception aborts the block and is raised.

kernels/_launch.py installs it whenever the simulator is on (in every process: pytest, CLI children, Ray
workers). ``GPU_DEDUP_SIM_SCHEDULER=numba`` keeps the simulator's own loop (to compare the two).
"""
from __future__ import annotations

import logging
import os
import threading

import numpy as np

logger = logging.getLogger(__name__)

POLL_S = 0.01  # a safety net only: every state change sets the event


def install() -> bool:
    """Swap the event-driven scheduler into the loaded simulator (``NUMBA_ENABLE_CUDASIM=1``).

    Returns:
        True when installed (or already installed); False when ``GPU_DEDUP_SIM_SCHEDULER=numba`` asks for the
        simulator's own loop, or its classes do not have the shape this replaces (a warning is logged).
    """
    if os.environ.get("GPU_DEDUP_SIM_SCHEDULER") == "numba":
        return False
    from numba.cuda.simulator import kernel as sim

    manager, thread = getattr(sim, "BlockManager", None), getattr(sim, "BlockThread", None)
    if manager is None or thread is None or not all(hasattr(thread, a) for a in ("syncthreads", "run")):
        logger.warning("numba's CUDA simulator has no BlockManager/BlockThread of the expected shape; its own "
                       "polling scheduler stays (tests are slower, results the same)")
        return False
    if getattr(manager.run, "_gpu_dedup", False):
        return True
    base_sync, base_run = thread.syncthreads, thread.run

    def syncthreads(self):
        self.syncthreads_blocked = True  # state first, then the event: the manager never misses a change
        self._manager._changed.set()
        base_sync(self)

    def thread_run(self):
        try:
            base_run(self)
        finally:
            self._finished = True
            self._manager._changed.set()

    def block_run(self, grid_point, *args):
        self._changed = changed = threading.Event()
        threads = []
        for block_point in np.ndindex(*self._block_dim):
            t = thread(lambda: self._f(*args), self, grid_point, block_point, self._debug)
            t._finished = False
            threads.append(t)
        for t in threads:
            t.start()
        live = list(threads)
        while live:
            changed.wait(POLL_S)
            changed.clear()  # before the scan: a change after it sets the event again
            for t in live:
                if t.exception:
                    for other in threads:
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    raise t.exception[0].with_traceback(t.exception[1])
            live = [t for t in live if not t._finished]
            if live and all(t.syncthreads_blocked for t in live):
                for t in live:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
        for t in threads:
            t.join()
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])

    block_run._gpu_dedup = True
    thread.syncthreads, thread.run, manager.run = syncthreads, thread_run, block_run
    _guard_module_swap(sim)
    return True


def _guard_module_swap(sim) -> None:
    """numba's own simulator (before numba-cuda) swaps the fake ``cuda`` module into a device function's
    globals on every call and swaps the real one back on return, unguarded: with threads of a block inside the
    same device function, one thread's return hands the others the real module. numba-cuda's counts the
    entries under a lock; give the older one the same guard (what the test extra installs is numba-cuda)."""
    import contextlib
    from collections import defaultdict

    from numba.cuda.simulator import kernelapi

    if hasattr(kernelapi, "_swap_refcount") or getattr(sim.swapped_cuda_module, "_gpu_dedup", False):
        return
    lock, depth, saved = threading.RLock(), defaultdict(int), {}

    @contextlib.contextmanager
    def swapped(fn, fake):
        from numba import cuda

        globs = fn.__globals__
        with lock:
            if depth[id(globs)] == 0:
                saved[id(globs)] = {k: v for k, v in globs.items() if v is cuda}
                globs.update({k: fake for k in saved[id(globs)]})
            depth[id(globs)] += 1
        try:
            yield
        finally:
            with lock:
                depth[id(globs)] -= 1
                if depth[id(globs)] == 0:
                    globs.update(saved.pop(id(globs)))

    swapped._gpu_dedup = True
    sim.swapped_cuda_module = kernelapi.swapped_cuda_module = swapped
