"""distributed/cluster.py: the local cluster started in the background as the command begins (start_local) and
joined by the engine's first ray_cluster; its failure raised there as a start in the foreground raises it (one
line on the command line); a start no command joined is stopped; SIGTERM inside it is the command's Ctrl-C; the
probe's compile of a cold node's kernels, once per node. Stand-ins for Ray (``FakeRay``, ``ProbeRay``): these
tests start no cluster (tests/distributed/test_ray_cluster.py does)."""
import logging
import signal
import threading
import time

import pyarrow.parquet as pq
import pytest

from gpu_dedup.distributed import cluster
from gpu_dedup.errors import ClusterError
from gpu_dedup.testing.evalcorpus import make_corpus


class FakeRay:
    """ray.init (in whichever thread), is_initialized, cluster_resources and shutdown, recorded in ``calls``."""

    def __init__(self, fail: Exception | None = None, seconds: float = 0.2):
        self.calls, self.fail, self.seconds, self.up = [], fail, seconds, False

    def __call__(self):  # cluster.import_ray
        return self

    def is_initialized(self):
        return self.up

    def init(self, **kw):
        time.sleep(self.seconds)
        self.calls.append(("init", kw["address"], kw.get("num_cpus"), threading.current_thread().name))
        if self.fail is not None:
            raise self.fail
        self.up = True

    def cluster_resources(self):
        return {"CPU": 2.0}

    def shutdown(self):
        self.calls.append(("shutdown", threading.current_thread().name))
        self.up = False


@pytest.fixture
def fake(monkeypatch):
    ray = FakeRay()
    monkeypatch.setattr(cluster, "import_ray", ray)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return ray


def test_a_background_start_is_joined_once_and_stopped_after(fake, caplog):
    """The cluster starts in a thread as the block begins; the first ray_cluster joins it (a nested one uses it
    as it is), says how long it took and how much of it was waited for, and stops it on the way out, in the
    command's thread; the starting thread then ends (it holds the cluster's processes until then)."""
    with caplog.at_level(logging.INFO, logger="gpu_dedup.distributed"):
        with cluster.start_local(2):
            start = cluster._EARLY
            with cluster.ray_cluster(2, None) as ray:
                with cluster.ray_cluster(2, None) as inner:
                    assert inner is ray
                assert cluster._EARLY is None and start.thread.is_alive()
            assert not start.thread.is_alive()
    main = threading.current_thread().name
    assert fake.calls == [("init", "local", 2, "gpu_dedup-ray-start"), ("shutdown", main)]
    said = [r.getMessage() for r in caplog.records if r.name == "gpu_dedup.distributed.cluster"]
    assert said[0] == "starting a local Ray cluster of 2 worker processes, in the background ..."
    assert said[-1].startswith("Ray cluster ready: 2 CPUs (") and "s in the background, " in said[-1]


def test_a_start_that_no_command_joined_is_stopped(fake):
    """A command that fails before its first task: the start is waited for, then stopped, as the block ends."""
    with cluster.start_local(3):
        start = cluster._EARLY
    assert [c[0] for c in fake.calls] == ["init", "shutdown"] and fake.calls[0][2] == 3
    assert cluster._EARLY is None and not start.thread.is_alive()


def test_a_run_scope_leaves_the_background_start_to_its_first_task(fake):
    """A run of several steps (run_scope) does not wait for the background start as it begins: what its first
    step does before its first task passes while the cluster starts; that task's ray_cluster joins it (once:
    said once), a later step's uses it as it is, and start_local stops it as the command ends."""
    fake.seconds = 0.5
    with cluster.start_local(2):
        t = time.perf_counter()
        with cluster.run_scope(2, None):
            assert time.perf_counter() - t < 0.4 and fake.calls == []
            for _ in range(2):
                with cluster.ray_cluster(2, None) as ray:
                    assert ray.up and [c[0] for c in fake.calls] == ["init"]
        assert [c[0] for c in fake.calls] == ["init"]
    assert [c[0] for c in fake.calls] == ["init", "shutdown"] and cluster._EARLY is None and not cluster._SCOPED
    with cluster.run_scope(2, None):  # without a background start: the cluster of the whole block, as before
        assert [c[0] for c in fake.calls[2:]] == ["init"]
    assert [c[0] for c in fake.calls[2:]] == ["init", "shutdown"]


def test_the_command_handles_sigterm_around_the_cluster(fake, monkeypatch, tmp_path):
    """The block installs no SIGTERM handler of its own (ray.init runs in its thread): the command line's, which
    turns SIGTERM into Ctrl-C's KeyboardInterrupt, is the one inside it, and the handler before the command is
    back after it (the cluster stopped on the way out either way)."""
    import importlib

    cli_main = importlib.import_module("gpu_dedup.cli.main")
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def command(args):
        with cluster.start_local(2):
            seen.append(signal.getsignal(signal.SIGTERM))
            signal.raise_signal(signal.SIGTERM)
        return 0

    parser = cli_main.build_parser()
    args = parser.parse_args(["run", str(tmp_path), "-o", str(tmp_path / "o")])
    args.func = command
    monkeypatch.setattr(cli_main, "build_parser", lambda: _Fixed(parser, args))
    assert cli_main.main(["run", str(tmp_path), "-o", str(tmp_path / "o")]) == 143
    assert seen and seen[0] is not before and signal.getsignal(signal.SIGTERM) is before
    assert cluster._EARLY is None


def test_joining_a_running_cluster_keeps_the_commands_sigterm_handler(fake, monkeypatch):
    """ray.init(address=...) in the main thread installs Ray's SIGTERM handler (exit 15, past the command's
    cleanup: the outputs of a stopped run were left behind); the command's handler is back once it has joined."""
    def ray_handler(signum, frame):  # pragma: no cover - never called
        raise SystemExit(15)

    init = fake.init

    def init_like_ray(**kw):
        init(**kw)
        signal.signal(signal.SIGTERM, ray_handler)

    monkeypatch.setattr(fake, "init", init_like_ray)
    mine = signal.getsignal(signal.SIGTERM)
    try:
        def handler(signum, frame):  # pragma: no cover - never called
            pass

        signal.signal(signal.SIGTERM, handler)
        with cluster.ray_cluster(None, "auto"):
            assert signal.getsignal(signal.SIGTERM) is handler
        assert fake.calls[0][:2] == ("init", "auto")
    finally:
        signal.signal(signal.SIGTERM, mine)


class _Fixed:
    """build_parser's parser, whose parse_known_args gives ``args`` (a command that raises SIGTERM)."""

    def __init__(self, parser, args):
        self.parser, self.args = parser, args

    def parse_known_args(self, argv):
        return self.args, []

    def __getattr__(self, name):
        return getattr(self.parser, name)


def test_a_failed_background_start_is_the_foreground_error(monkeypatch, tmp_path, capsys):
    """Ray's ConnectionError in the starting thread is raised by the joining ray_cluster as the ClusterError a
    start in the foreground raises, word for word; on the command line that is the one error line."""
    fail = ConnectionError("Ray could not start its GCS")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(cluster, "import_ray", FakeRay(fail, 0.0))
    with pytest.raises(ClusterError) as fore:
        with cluster.ray_cluster(2, None):
            pass
    monkeypatch.setattr(cluster, "import_ray", FakeRay(fail))
    with cluster.start_local(2):
        with pytest.raises(ClusterError) as back:
            with cluster.ray_cluster(2, None):
                pass
    assert str(back.value) == str(fore.value) and "Ray could not start its GCS" in str(fore.value)
    assert back.value.__cause__ is fail

    from gpu_dedup.cli import main

    t = make_corpus(20, seed=1, mean_words=20, template_families=0).select(["id", "text"])
    pq.write_table(t, tmp_path / "a.parquet")
    fake = FakeRay(fail)
    monkeypatch.setattr(cluster, "import_ray", fake)
    rc = main(["run", str(tmp_path / "a.parquet"), "-o", str(tmp_path / "out"), "-q", "--engine", "ray",
               "--workers", "2"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and err.startswith("gpu-dedup: error: ") and str(fore.value) in err
    assert fake.calls[0][3] == "gpu_dedup-ray-start" and cluster._EARLY is None


N1, N2 = "01" * 28, "02" * 28  # node ids as Ray writes them (28 bytes in hex)


class _Remote:
    """A stand-in for a Ray remote function: run in this process, the node it was pinned to recorded."""

    def __init__(self, fn, calls, node=None):
        self.fn, self.calls, self.node = fn, calls, node

    def options(self, scheduling_strategy):
        return _Remote(self.fn, self.calls, scheduling_strategy.node_id)

    def remote(self, *args):
        self.calls.append((self.fn.__name__, self.node))
        return self.fn(*args)


class ProbeRay:
    """Two alive nodes (and a dead one) whose tasks run here."""

    def __init__(self):
        self.calls = []

    def nodes(self):
        return [{"NodeID": N1, "Alive": True}, {"NodeID": N2, "Alive": True}, {"NodeID": "ff" * 28, "Alive": False}]

    def remote(self, **_):
        return lambda fn: _Remote(fn, self.calls)

    def get(self, ref):
        return list(ref) if isinstance(ref, list) else ref


@pytest.mark.parametrize("uncached", [0, 3])
def test_the_probe_compiles_a_cold_node_kernels_once(monkeypatch, tmp_path, uncached):
    """A node whose Numba cache lacks dedup kernels compiles them once, in one task pinned to it, after the
    checks, before any worker needs them (its workers each compiled them at their first task); a warm node runs
    no compile task. The slowest node's seconds are run.json's ``compile``, as the local engine's."""
    pytest.importorskip("ray")
    from gpu_dedup import RunConfig
    from gpu_dedup.contract import contract, contract_fingerprint
    from gpu_dedup.runtime import compiling

    compiled = []

    def precompile(device):
        compiled.append(device)
        return 1.5

    monkeypatch.setattr(compiling, "uncached", lambda stages: uncached if stages == compiling.COMMANDS["run"] else 0)
    cfg = RunConfig(progress=False)
    ray, timings = ProbeRay(), {}
    nodes = cluster.probe(ray, str(tmp_path), cfg, contract_fingerprint(contract(cfg)), compile_device="cpu",
                          precompile=precompile, timings=timings)
    assert nodes == 2
    pinned = [node for name, node in ray.calls if name == "precompile"]
    if uncached:
        assert pinned == [N1, N2] and compiled == ["cpu", "cpu"] and timings == {"compile": 1.5}
        assert ray.calls.index(("precompile", N1)) > ray.calls.index(("_contract_on_worker", N2))
    else:
        assert pinned == [] and compiled == [] and timings == {}
    ray.calls.clear()  # a GPU run (or a program without dedup kernels) asks nothing of the CPU cache
    cluster.probe(ray, str(tmp_path), cfg, contract_fingerprint(contract(cfg)), compile_device="cuda",
                  precompile=precompile, timings=timings)
    assert [name for name, _ in ray.calls] == ["_probe", "_contract_on_worker"] * 2
