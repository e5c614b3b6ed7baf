"""The Ray cluster a run uses: a local one of N worker processes, or a running one joined by address; and
the probe every node runs before pass 1 (same gpu-dedup version and contract, the work dir visible: a
shared path or an fsspec URL, through shuffle.Layout as every task's files); the GPU actors of --device cuda
(``DeviceWorker``, one per GPU: ``gpu_actors``).

A local cluster costs seconds to start (Ray's GCS, raylet, agents and worker processes) and to stop. The
command line starts it in the background as it begins (``start_local``: a thread calls ray.init while the
command reads its flags, its inputs and plans), and the engine joins that start at its first use
(``ray_cluster``); it is stopped without Ray's one-second wait on its autoscaler monitor (``stop_local``).
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterator

from ..errors import ClusterError, ConfigError, DependencyError, GpuDedupError, RunError
from ..runtime.cost import current as current_meter
from ..runtime.heartbeat import phase, ticking

logger = logging.getLogger(__name__)


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise DependencyError("engine='ray' needs Ray: pip install 'gpu-dedup[ray]'") from exc
    return ray


# Ray's own INFO lines (the local instance started, connecting) and its warning that token authentication
# is on (on by default for a local instance: nothing to act on) are not the tool's lines; everything else
# Ray logs at WARNING or above still reaches the terminal
_QUIET = {"ray._private.authentication.authentication_token_setup": "Token authentication is enabled",
          # a start in the background (start_local): the command line handles SIGTERM itself (cli/main.py)
          "ray._private.worker": "SIGTERM handler is not set"}


class _Drop(logging.Filter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


def _quiet_ray() -> dict:
    """ray.init's logging arguments: Ray's INFO lines only with -v; the noise of ``_QUIET`` dropped."""
    for name, prefix in _QUIET.items():
        log = logging.getLogger(name)
        if not any(isinstance(f, _Drop) for f in log.filters):
            log.addFilter(_Drop(prefix))
    verbose = logging.getLogger("gpu_dedup").isEnabledFor(logging.DEBUG)
    return {"logging_level": logging.INFO if verbose else logging.WARNING, "include_dashboard": False}


def check_cluster_args(workers: int | None, address: str | None) -> None:
    if address is not None and workers is not None:
        raise ConfigError(f"--workers {workers} starts a local Ray cluster and --address {address} joins a "
                          "running one: pass one of them")


@contextlib.contextmanager
def ray_cluster(workers: int | None, address: str | None):
    """Yields the ray module, connected: to ``address`` (auto | HOST:PORT) or to a local cluster of
    ``workers`` CPUs started here, or by ``start_local`` in the background (and stopped afterwards: stop_local).
    An already connected driver (a notebook, a test's cluster) is used as it is.

    Without ``address`` the run starts its own local instance (``address="local"``), whatever else runs on
    the machine: a cluster of ``ray start --head`` (or RAY_ADDRESS) is joined only with ``--address auto``,
    never by accident (Ray would refuse ``num_cpus`` for it, or pick "the latest" of several). The workers'
    log lines at WARNING and above (an input that changed, a giant bucket) reach this terminal, prefixed by
    Ray with the worker's process id; their progress bars are off (the driver's Job)."""
    ray = import_ray()
    check_cluster_args(workers, address)
    if address is not None and address != "auto":
        _reachable(address)
    scoped = _scoped() if address is None else None
    if scoped is not None:  # a run_scope's start: joined by its first ray_cluster, stopped by start_local
        if not scoped.joined:
            t = time.perf_counter()
            try:
                scoped.join()
            except ConnectionError as exc:
                raise ClusterError(_join_failed(None, exc)) from exc
            scoped.joined = True
            logger.info("Ray cluster ready: %d CPUs (%s)", int(ray.cluster_resources().get("CPU", 0)),
                        scoped.said(time.perf_counter() - t))
        yield ray
        return
    early = _adopt() if address is None else None
    if early is None and ray.is_initialized():
        yield ray
        return
    t = time.perf_counter()
    try:  # a local start takes seconds (14 s on a busy 2-core machine): said, and said again while it lasts
        if early is not None:
            early.join()
        elif address is not None:
            with ticking(logger, f"joining the Ray cluster at {address}"), _own_sigterm():
                ray.init(address=address, **_quiet_ray())
        else:
            n = workers or os.cpu_count() or 1
            with ticking(logger, _starting(n)):
                _init_local(ray, n)
    except ConnectionError as exc:
        raise ClusterError(_join_failed(address, exc)) from exc
    try:
        logger.info("Ray cluster ready: %d CPUs (%s)", int(ray.cluster_resources().get("CPU", 0)),
                    early.said(time.perf_counter() - t) if early is not None else f"{time.perf_counter() - t:.1f} s")
        yield ray
    finally:
        if address is None:
            stop_local(ray)
        else:
            ray.shutdown()
        if early is not None:
            early.release()


@contextlib.contextmanager
def _own_sigterm() -> Iterator[None]:
    """Keep this process's SIGTERM handler across ray.init in the main thread, which installs Ray's own (it exits
    with status 15, past the command's cleanup): the command line's handler turns SIGTERM into Ctrl-C
    (cli/main.py), so a stopped run removes what it wrote, joined to a running cluster or not."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and before is not None:
            signal.signal(signal.SIGTERM, before)


def _starting(n: int) -> str:
    env = os.environ.get("RAY_ADDRESS")
    return (f"starting a local Ray cluster of {n} worker processes"
            + (f" (not the one of RAY_ADDRESS={env}: join that with --address auto)" if env else ""))


def _init_local(ray, n: int) -> None:
    """ray.init of a local cluster of ``n`` CPUs whose workers run at this process's own priority: Ray's default
    lowers theirs by 15 (``worker_niceness``, so that its raylet stays responsive), which on a machine shared
    with other work hands the command's tasks only what the other processes leave (docs/scale.md)."""
    ray.init(address="local", num_cpus=n, _system_config={"worker_niceness": 0}, **_quiet_ray())


def stop_local(ray) -> None:
    """ray.shutdown() of the local cluster this process started, its autoscaler monitor killed first. Ray stops
    the GCS before the monitor, whose SIGTERM handler then reports to the stopped GCS until Ray kills it after a
    second: 1.0 s of a 1.3 s shutdown on the 2-core VM (docs/scale.md). The monitor of a cluster that
    lives as long as one command keeps nothing; every process is still waited for (none is left behind)."""
    try:
        from ray._private import ray_constants
        from ray._private import worker as ray_worker

        node = ray_worker._global_node
        for info in node.all_processes.get(ray_constants.PROCESS_TYPE_MONITOR, []) if node is not None else []:
            if info.process.poll() is None:
                info.process.kill()
                info.process.wait(timeout=10)
    except Exception as exc:  # noqa: BLE001 - another Ray's internals: its own shutdown alone, as before
        logger.debug("the Ray monitor was not stopped first: %s", exc)
    ray.shutdown()


class _Start:
    """A local cluster started by a thread (start_local). The thread stays until ``release``: Ray starts the
    cluster's processes with PR_SET_PDEATHSIG, so they die with the thread that started them."""

    def __init__(self, workers: int | None):
        self.n = workers or os.cpu_count() or 1
        self.error: BaseException | None = None
        self.ready, self._released = threading.Event(), threading.Event()
        self.joined = False  # (by a ray_cluster inside a run_scope)
        self.t0, self.seconds = time.perf_counter(), 0.0
        self.thread = threading.Thread(target=self._start, name="gpu_dedup-ray-start", daemon=True)

    def _start(self) -> None:
        try:
            _init_local(import_ray(), self.n)
        except BaseException as exc:  # noqa: BLE001 - raised in the command's thread by join()
            self.error = exc
        self.seconds = time.perf_counter() - self.t0
        self.ready.set()
        if self.error is None:
            self._released.wait()

    def join(self) -> None:
        """Wait for the start (said, and said again while it lasts); raise its error as ray.init raised it."""
        if not self.ready.is_set():
            with ticking(logger, f"waiting for the local Ray cluster of {self.n} worker processes to start"):
                self.ready.wait()
        if self.error is not None:
            raise self.error

    def said(self, waited: float) -> str:
        return f"{self.seconds:.1f} s in the background, {waited:.1f} s of it waited for"

    def release(self) -> None:
        self._released.set()
        self.thread.join()


_EARLY: _Start | None = None  # a start of start_local that no ray_cluster has joined yet
_EARLY_LOCK = threading.Lock()
_SCOPED: list[_Start] = []  # the start a run_scope leaves to its first ray_cluster to join (and start_local to stop)


def _adopt() -> _Start | None:
    """The pending background start, now owned by the caller (ray_cluster stops its cluster)."""
    global _EARLY
    with _EARLY_LOCK:
        early, _EARLY = _EARLY, None
    return early


def _scoped() -> _Start | None:
    with _EARLY_LOCK:
        return _SCOPED[-1] if _SCOPED else None


@contextlib.contextmanager
def run_scope(workers: int | None, address: str | None) -> Iterator[None]:
    """The cluster of a run of several steps (the pipeline engine's): ``ray_cluster`` for the whole block, or,
    while start_local's background start is pending, that start, joined by the block's first ray_cluster (its
    first task) instead of here: what a step does before its first task (its inputs read, its plan) passes
    while the cluster starts, not after it. start_local stops that cluster as its block ends."""
    with _EARLY_LOCK:
        early = _EARLY if address is None and not _SCOPED else None
        if early is not None:
            _SCOPED.append(early)
    if early is None:
        with ray_cluster(workers, address):
            yield
        return
    try:
        yield
    finally:
        with _EARLY_LOCK:
            _SCOPED.remove(early)


@contextlib.contextmanager
def start_local(workers: int | None) -> Iterator[None]:
    """Start the local cluster of ``workers`` CPUs (None: every CPU) now, in a background thread, for the first
    ``ray_cluster(workers, None)`` inside this block to join: the seconds of Ray's start pass while the command
    does its own work. Its failure is raised there, as a start in the foreground raises it. A start no
    ray_cluster joined is waited for and stopped on the way out. A connected driver (a notebook's) starts none."""
    global _EARLY
    ray = sys.modules.get("ray")  # (not imported here: the thread imports it)
    if ray is not None and ray.is_initialized():
        yield
        return
    start = _Start(workers)
    # (ray.init in the main thread installs a SIGTERM handler that exits; in this thread it installs none: the
    # command line handles SIGTERM as Ctrl-C itself, cli/main.py, so the block's cleanup runs either way)
    _quiet_ray()
    phase(logger, "%s, in the background", _starting(start.n))
    with _EARLY_LOCK:
        _EARLY = start
    start.thread.start()
    try:
        yield
    finally:
        early = _adopt()
        if early is not None:  # started for nothing (the command failed before its first task)
            early.ready.wait()
            if early.error is None:
                stop_local(import_ray())
            early.release()


def _join_failed(address: str | None, exc: Exception) -> str:
    """The error of a cluster that did not let this driver join (Ray gave up after its retries)."""
    why = f"--address {address}: Ray could not join the cluster there ({exc})"
    if address == "auto":
        return (f"{why}: start one on this machine with `ray start --head`, pass its HOST:PORT, or drop --address "
                "to start a local one")
    if os.environ.get("RAY_AUTH_MODE") is None:
        # Ray enables token authentication for a cluster it finds itself (auto), never for an address given
        why += ("; if Ray's lines above say 'Unauthenticated', the cluster uses token authentication: set "
                "RAY_AUTH_MODE=token, with the token in RAY_AUTH_TOKEN or ~/.ray/auth_token, as for any Ray driver")
    return why


def ray_get(ray, refs: list, describe=None, done=None) -> list:
    """The results of ``refs`` in order. A task that raised one of the tool's errors (a GpuDedupError: a bad
    record, a missing extra) or a file system's (OSError) raises it here as the local engine would, its
    message alone: Ray's wrapper carries the worker's traceback, logged at DEBUG (-v). ``describe(i, exc)``:
    the error of a task whose worker died or ran out of memory (None: Ray's own). The tasks still running
    are cancelled on the way out (a joined cluster outlives the run). ``done(i, result)``: called as each
    result arrives, in order (a progress bar)."""
    out = []
    try:
        for i, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
                if done is not None:
                    done(i, out[-1])
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, (GpuDedupError, OSError)):
                    logger.debug("a Ray task failed: %s", exc)
                    raise cause.with_traceback(None) from None
                raise
            except (ray.exceptions.OutOfMemoryError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.RayActorError) as exc:
                if describe is None:
                    raise
                raise RunError(describe(i, exc)) from exc
    except BaseException:
        for ref in refs[len(out) + 1:]:
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - a finished or actor task: nothing to cancel
                pass
        raise
    return out


# the client's connection preface and an empty SETTINGS frame (RFC 9113 §3.4): a gRPC server (Ray's GCS is
# one) answers with its own SETTINGS frame at once
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast, naming the address, when nothing listens at HOST:PORT, or something that is no Ray head
    (Ray itself retries for minutes, or for ever): the head's GCS speaks gRPC, so it answers an HTTP/2
    preface with a SETTINGS frame within ``timeout`` seconds. Skipped under RAY_USE_TLS (a TLS handshake
    comes first)."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address {address!r}: expected auto or HOST:PORT (the head's `ray start --head --port`)")
    fix = ("start one with `ray start --head --port PORT` on that host and pass that port (the GCS port, 6379 by "
           "default), or drop --address to start a local one")
    try:
        conn = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as exc:
        raise ClusterError(f"--address {address}: no Ray cluster reachable there ({exc}); {fix}") from exc
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        conn.close()
        return
    got = b""
    try:
        with conn:
            conn.settimeout(timeout)
            conn.sendall(_H2_PREFACE)
            while len(got) < 9:
                chunk = conn.recv(9 - len(got))
                if not chunk:
                    break
                got += chunk
    except OSError:  # a timeout or a reset: no answer
        pass
    if len(got) < 9 or got[3] != _H2_SETTINGS:
        answer = f"it answered {got[:16]!r}" if got else f"no answer within {timeout:g} s"
        raise ClusterError(f"--address {address}: something listens there but it is not a Ray cluster's head "
                           f"({answer}, where Ray's GCS answers gRPC); {fix}")


def _probe(work: str, name: str, token: str, kernels: bool = False) -> dict:
    """On a node: its gpu-dedup version and whether it sees the driver's token in the work dir (a path or
    an fsspec URL: read through the same layer as every task's files); with ``kernels``, how many dedup CPU
    kernels Numba has not cached there (runtime/compiling.py)."""
    import platform

    from .._version import __version__
    from .shuffle import Layout

    why = None
    try:
        seen = Layout(work).read_text(name) == token
        if not seen:
            why = "the token file holds another value"
    except Exception as exc:  # any failure to read it (missing, no permission, a missing fsspec package) is "not seen"
        seen, why = False, f"{type(exc).__name__}: {exc}"
    uncached = 0
    if kernels:
        from ..runtime.compiling import COMMANDS, uncached as count

        uncached = count(COMMANDS["run"])
    return {"version": __version__, "sees_work_dir": seen, "why": why, "node": platform.node(), "uncached": uncached}


def _contract_on_worker(cfg) -> str:
    from ..contract import contract, contract_fingerprint

    return contract_fingerprint(contract(cfg))


def probe(ray, work: str, cfg=None, fingerprint: str | None = None, compile_device: str | None = None,
          precompile: Callable[[str], float] | None = None, timings: dict[str, float] | None = None) -> int:
    """One probe task per alive node (pinned to it): refuse another gpu-dedup version or contract (``cfg``'s,
    whose fingerprint the driver computed; None: a program without one, the filter and the screen), and a
    work dir the node cannot see, naming the path; then, with ``compile_device`` "cpu" (the dedup plan's), the
    dedup kernels a node has not cached compiled there once, by one ``precompile(device) -> seconds`` task pinned
    to it (lexical.dedup's tiny run of the bundled sample), so that every worker of the node loads them from the
    cache (kernels/_build.py: cache=True, one cache per node) instead of compiling its own copy at its first task,
    all at once; the slowest node's seconds go to ``timings["compile"]``, as the local engine's. Returns the node
    count."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .._version import __version__
    from .shuffle import Layout

    token = uuid.uuid4().hex
    lay, name = Layout(work), f"probe-{token}.txt"
    phase(logger, "checking every Ray node: gpu-dedup's version, the contract and the work directory (the "
                  "worker processes start and import gpu-dedup)")
    lay.write_text(name, token)
    try:
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        rp, rc = ray.remote(num_cpus=0)(_probe), ray.remote(num_cpus=0)(_contract_on_worker)
        kernels = compile_device == "cpu" and precompile is not None
        refs = [(rp.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(work, name, token,
                                                                                                      kernels),
                 rc.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(cfg)
                 if cfg is not None else None)
                for n in nodes]
        cold = []
        for node, (p_ref, c_ref) in zip(nodes, refs):
            got, fp = ray.get(p_ref), ray.get(c_ref) if c_ref is not None else fingerprint
            if got["version"] != __version__:
                raise RunError(f"Ray node {got['node']} runs gpu-dedup {got['version']}, the driver "
                               f"{__version__}: install the same version on every node")
            if fp != fingerprint:
                raise RunError(f"Ray node {got['node']} computes contract {fp}, the driver {fingerprint}: "
                               "the same gpu-dedup and library versions are needed on every node")
            if not got["sees_work_dir"]:
                raise RunError(f"Ray node {got['node']} cannot see the work dir {work!r} ({got['why']}): pass "
                               "--work-dir on a file system every node mounts at the same path, or an fsspec URL "
                               "every node can reach (s3://bucket/work, with the same extras installed)")
            if got.get("uncached"):
                cold.append(node)
    finally:
        lay.remove(name)
    if cold:
        phase(logger, "compiling the dedup kernels once on %d of %d node(s) (first run there)", len(cold), len(nodes))
        rk = ray.remote(num_cpus=1)(precompile)
        spent = max(ray.get([rk.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False))
                             .remote(compile_device) for n in cold]))
        if timings is not None:
            timings["compile"] = timings.get("compile", 0.0) + spent
    return len(nodes)


class DeviceWorker:
    """A Ray actor holding one GPU (``num_gpus=1``): it runs the tasks of the plan's ``device`` stages one after
    another in one process, so Numba's compiled kernels and CuPy's memory pool are kept between tasks (a task
    is a plain stage function: the same markers, retries and outputs as a CPU task)."""

    def __init__(self):
        self.tasks = 0

    def run(self, task: Callable[..., dict[str, Any]], job, key: int, *args) -> dict[str, Any]:
        """``task(job, key, *args)`` (a stage function: pickled by reference) on this GPU."""
        self.tasks += 1
        from ..runtime.device import array_backend

        return {**task(job, key, *args), "worker_pid": os.getpid(), "worker_task": self.tasks,
                "array_backend": array_backend(job.device)}


def device_workers(ray) -> list:
    """One DeviceWorker actor per GPU of the cluster (``num_gpus=1`` each; restarted and its task retried
    when its process dies). Refuses a cluster without GPUs, naming the fix."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus < 1:
        raise RunError("--device cuda with --engine ray needs GPUs in the Ray cluster, and it has none: "
                       "start the nodes with `ray start --num-gpus N` (or run with --device cpu)")
    cls = ray.remote(num_gpus=1, num_cpus=1, max_restarts=3, max_task_retries=3)(DeviceWorker)
    return [cls.remote() for _ in range(gpus)]


@contextlib.contextmanager
def gpu_actors(ray, device: str) -> Iterator[list]:
    """``device_workers`` with device="cuda" (none otherwise), killed on the way out: a joined cluster (or a
    notebook's) outlives the run, so its GPUs are freed; the seconds they were held go to run.json's cost."""
    actors = device_workers(ray) if device == "cuda" else []
    held = time.perf_counter()
    try:
        yield actors
    finally:
        for a in actors:
            ray.kill(a)
        meter = current_meter()
        if meter is not None and actors:
            meter.add_gpu_held(time.perf_counter() - held, len(actors))
