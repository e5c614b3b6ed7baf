"""The Ray cluster a run uses: a local one of N worker processes, or a running one joined by address; and
the probe every node runs before pass 1 (same gpu-dedup version and contract, the work dir visible: a
shared path or an fsspec URL, through shuffle.Layout as every task's files)."""
from __future__ import annotations

import contextlib
import logging
import os
import uuid
from ..errors import ClusterError, ConfigError, DependencyError, RunError

logger = logging.getLogger(__name__)


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise DependencyError("engine='ray' needs Ray: pip install 'gpu-dedup[ray]'") from exc
    return ray


@contextlib.contextmanager
def ray_cluster(workers: int | None, address: str | None):
    """Yields the ray module, connected: to ``address`` (auto | HOST:PORT) or to a local cluster of
    ``workers`` CPUs started here (and shut down afterwards). An already connected driver (a notebook, a
    test's cluster) is used as it is. The workers' log lines (an input that changed, a giant bucket) reach
    this terminal, prefixed by Ray with the worker's process id."""
    ray = import_ray()
    if address is not None and address != "auto":
        _reachable(address)
    if ray.is_initialized():
        yield ray
        return
    try:
        if address is not None:
            ray.init(address=address, include_dashboard=False)
        else:
            ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False)
    except ConnectionError as exc:
        raise ClusterError(f"--address {address}: no Ray cluster reachable there ({exc}); start one with "
                           "`ray start --head` or drop --address to start a local one") from exc
    try:
        yield ray
    finally:
        ray.shutdown()


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast, naming the address, when nothing listens at HOST:PORT (Ray itself retries for minutes)."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address {address!r}: expected auto or HOST:PORT (the head's `ray start --head --port`)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"--address {address}: no Ray cluster reachable there ({exc}); start one with "
                           "`ray start --head --port PORT` on that host, or drop --address to start a local "
                           "one") from exc


def _probe(work: str, name: str, token: str) -> dict:
    """On a node: its gpu-dedup version and whether it sees the driver's token in the work dir (a path or
    an fsspec URL: read through the same layer as every task's files)."""
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
    return {"version": __version__, "sees_work_dir": seen, "why": why, "node": platform.node()}


def _contract_on_worker(cfg) -> str:
    from ..contract import contract, contract_fingerprint

    return contract_fingerprint(contract(cfg))


def probe(ray, work: str, cfg, fingerprint: str) -> int:
    """One probe task per alive node (pinned to it): refuse another gpu-dedup version or contract, and a
    work dir the node cannot see, naming the path. Returns the node count."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .._version import __version__

    from .shuffle import Layout

    token = uuid.uuid4().hex
    lay, name = Layout(work), f"probe-{token}.txt"
    lay.write_text(name, token)
    try:
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        rp, rc = ray.remote(num_cpus=0)(_probe), ray.remote(num_cpus=0)(_contract_on_worker)
        refs = [(rp.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(work, name, token),
                 rc.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(cfg))
                for n in nodes]
        for p_ref, c_ref in refs:
            got, fp = ray.get(p_ref), ray.get(c_ref)
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
    finally:
        lay.remove(name)
    return len(nodes)
