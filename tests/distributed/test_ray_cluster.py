"""The Ray cluster a run uses, as a user meets it from the command line (real subprocesses): a cluster
already running on the machine is joined only by --address, never in the way of --workers; an address
where something else listens fails fast; Ray's own console noise stays out of the tool's lines."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pyarrow.parquet as pq
import pytest

from gpu_dedup.testing.evalcorpus import make_corpus

ray = pytest.importorskip("ray")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli(args, env=None, timeout=300):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    env.pop("GPU_DEDUP_RAY_FAULTS", None)
    return subprocess.run([sys.executable, "-m", "gpu_dedup.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    t = make_corpus(60, seed=4, mean_words=30, template_families=1).select(["id", "text"])
    pq.write_table(t.slice(0, 30), d / "a.parquet")
    pq.write_table(t.slice(30), d / "b.parquet")
    return d


class _Listener:
    """Something that is not Ray on 127.0.0.1: it accepts, reads, and answers ``reply`` (or nothing)."""

    def __init__(self, reply: bytes | None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply, self.conns = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.reply is not None:
                c.recv(1024)
                c.sendall(self.reply)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("reply", [None, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"])
def test_address_of_something_else_fails_fast(src, tmp_path, reply):
    """--address HOST:PORT where a server that is not Ray listens: one line naming the address, within
    seconds (Ray itself retries past 120 s)."""
    server = _Listener(reply)
    try:
        t = time.monotonic()
        r = _cli(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--engine", "ray", "--address",
                  f"127.0.0.1:{server.port}"], timeout=90)
        took = time.monotonic() - t
    finally:
        server.close()
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert f"--address 127.0.0.1:{server.port}: something listens there but it is not a Ray cluster's head" in r.stderr
    assert took < 60 and not (tmp_path / "o" / "decisions.parquet").exists() and not (tmp_path / "o" / "decisions").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head():
    """A Ray head started as README's `ray start --head` (on its own port and temp dir, token
    authentication off), stopped by its own process id afterwards."""
    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    exe = os.path.join(os.path.dirname(sys.executable), "ray")
    proc = subprocess.Popen([exe, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                             f"--temp-dir={tmp}", "--block"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        from gpu_dedup.distributed.cluster import _reachable

        deadline = time.monotonic() + 180
        while True:
            try:
                _reachable(f"127.0.0.1:{port}", timeout=2)
                break
            except ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the test's Ray head did not start")
                time.sleep(1)
        time.sleep(3)  # the raylet registers after the GCS answers
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()  # `ray start --block` stops the processes it started
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def test_workers_beside_a_running_cluster(src, tmp_path, head):
    """With a cluster already running (RAY_ADDRESS names it), --workers 2 starts a local cluster of its own
    (Ray refused num_cpus for the running one: a 30-line traceback), and the console holds the tool's lines,
    not Ray's (token warning, start-up lines, the workers' progress-bar fragments: the driver draws the bars, one
    per stage); --address joins that cluster (its one CPU: one key range)."""
    r = _cli(["run", str(src), "-o", str(tmp_path / "own"), "--engine", "ray", "--workers", "2"],
             env={"RAY_ADDRESS": head})
    assert r.returncode == 0, r.stderr[-3000:]
    run = json.loads((tmp_path / "own" / "run.json").read_text())
    assert run["engine"]["partitions"] == 2 and run["engine"]["workers"] == 2
    assert f"starting a local Ray cluster of 2 worker processes (not the one of RAY_ADDRESS={head}" in r.stderr
    for noise in ("Token authentication", "Started a local Ray instance", "(task pid=", "Traceback"):
        assert noise not in r.stderr, noise
    assert "ray sign: " in r.stderr and "ray write: " in r.stderr  # the driver's bars (issue 37 item 10)
    r = _cli(["run", str(src), "-o", str(tmp_path / "joined"), "-q", "--engine", "ray", "--address", head])
    assert r.returncode == 0, r.stderr[-3000:]
    run = json.loads((tmp_path / "joined" / "run.json").read_text())
    assert run["engine"]["partitions"] == 1 and run["engine"]["address"] == head and run["engine"]["nodes"] == 1
    assert [p.read_bytes() for p in sorted((tmp_path / "joined" / "decisions").iterdir())] == \
        [p.read_bytes() for p in sorted((tmp_path / "own" / "decisions").iterdir())]  # the per-file parts


def _marked(mark: str) -> list[int]:
    """Process ids whose environment holds ``mark`` (what they inherited from the command that started them)."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if mark.encode() in fh.read():
                    found.append(int(pid))
        except OSError:  # gone, or not ours to read
            pass
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_no_ray_process_outlives_the_command(src, tmp_path):
    """The local cluster is started in the background and stopped without Ray's wait on its monitor
    (cluster.start_local, stop_local): once `gpu-dedup run --engine ray` has exited, none of the processes it
    started (GCS, raylet, monitor, dashboard, agents, workers; all inherit its environment) is left, not even
    a zombie."""
    mark = f"GPU_DEDUP_TEST_MARK=rayexit{os.getpid()}x{time.monotonic_ns()}"
    r = _cli(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--engine", "ray", "--workers", "1"],
             env=dict([mark.split("=", 1)]))
    assert r.returncode == 0, r.stderr[-3000:]
    deadline = time.monotonic() + 10  # a worker notices its raylet is gone within a moment
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _marked(mark) == []


_PRIORITY = """
import json, os, sys
import ray
from gpu_dedup.distributed import cluster
seen = {}
shutdown = ray.shutdown
def watched(*a, **k):
    node = ray._private.worker._global_node
    seen["monitor_running"] = [i.process.poll() is None for i in node.all_processes.get("monitor", [])]
    return shutdown(*a, **k)
ray.shutdown = watched
os.nice(3)
with cluster.ray_cluster(1, None) as r:
    seen["worker"] = r.get(r.remote(lambda: os.nice(0)).remote())
seen["driver"] = os.nice(0)
print(json.dumps(seen))
"""


def test_the_local_cluster_works_at_the_command_priority_and_stops_without_waiting():
    """The workers of the local cluster run at the command's own priority (Ray lowered it by 15: a shared
    machine's other processes then took the cores from the command's tasks), and the autoscaler monitor is
    stopped before Ray's shutdown, which otherwise waits one second for it (Ray stops the GCS it reports to
    first)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", _PRIORITY], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["worker"] == seen["driver"] >= 3
    assert seen["monitor_running"] == [False]
