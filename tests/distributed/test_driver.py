"""The Ray engine's driver without a cluster: its plan is a declared table of the task functions (no task
found by a string), and the key ranges it asks for are checked and capped by the input's size."""
import glob
import logging
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig, io
from gpu_dedup.distributed import driver, graph, options, outputs, semfold, shuffle, stages, summary


def test_plan_declares_every_task_once():
    """PLAN holds every task function of stages.py, graph.py, options.py, outputs.py, semfold.py and summary.py once, by
    reference (go to definition follows it), and the driver's own semantic step (its tasks are semantic.py's); the
    GPU stages are the map and reduce tasks; the driver finds no task by a name."""
    tasks = {f for m in (stages, graph, options, outputs, semfold, summary) for f in vars(m).values()
             if callable(f) and hasattr(f, "stage")}
    own = [s for s in driver.PLAN if s.fn.__module__ == driver.__name__]
    assert own == [driver.SEMANTIC] and driver.SEMANTIC.drive is not None
    assert len(tasks) == 27 and {s.fn for s in driver.PLAN if s not in own} == tasks
    assert len(driver.PLAN) == len(tasks) + len(own)
    names = [s.name for s in driver.PLAN]
    assert len(set(names)) == len(names) and names[:2] == ["count", "sign"] and \
        names[-13:] == ["write", "semantic", "semfold_touched", "semfold_clusters", "semfold_components",
                        "semfold_gather", "semfold_fold", "semfold_merge", "recount", "kept", "index_rows", "publish",
                        "shown"]
    assert [s.name for s in driver.PLAN if s.device] == ["sign", "exact", "buckets", "members", "policy"]
    assert all(s.fn.__name__ == s.name and s.fn.__module__.startswith("gpu_dedup.distributed.") for s in driver.PLAN
               if s not in own)
    here = os.path.dirname(driver.__file__)
    for path in glob.glob(os.path.join(here, "*.py")):
        with open(path) as fh:
            src = fh.read()
        for pattern in ("globals()[", "getattr(stages", "getattr(options"):
            assert pattern not in src, (path, pattern)


def _fake(ran, removed=0):
    """A driver whose stages record their calls (and their arguments) and return what the hooks read; every
    write task's file lost ``removed`` of its 2 documents."""
    from gpu_dedup.runtime.sources import Tally

    class Fake(driver.Driver):
        def stage(self, stage, *args):
            ran.append((stage.name, args))
            if stage is driver.SIGN:
                return [{"rows": 2, "stamp": {}}]
            if stage is driver.EXACT:
                return [{"duplicate_ids": False}]
            if stage is driver.BUCKETS:
                return [{"edges": 10}]
            if stage is driver.STAR:
                return [{"fingerprint": [0, 0, 0]}]
            if stage is driver.WRITE:
                t = Tally()
                t.add(pa.array(["f", "f"]), [i >= removed for i in range(2)], step="dedup")
                return [{"sources": t.to_dict(), "summary": {"largest": [[3, 0]]}}]
            return [{}]

    return Fake


@pytest.mark.parametrize("one_task, parts", [(10, 1), (9, 1), (10, stages.BANDS_FROM_PIECES + 1)])
def test_walk_runs_the_stages_that_apply_in_order(one_task, parts, monkeypatch):
    """walk: the stages whose ``when`` holds, in PLAN order, each with its driver hooks and arguments; the
    components in one task when the buckets' edges are at most COMPONENTS_IN_ONE_TASK, else the star rounds;
    the bands stage with more than BANDS_FROM_PIECES key ranges only (else the buckets tasks read the pieces)."""
    monkeypatch.setattr(graph, "COMPONENTS_IN_ONE_TASK", one_task)
    ran = []
    job = stages.Job(RunConfig(progress=False), "cpu", ["f"], "w", parts)
    d = _fake(ran)(None, job, [], "/out", None, None, "fp", {}, {})
    driver.walk(d)
    star = ["components"] if one_task >= 10 else ["star", "star", "star"]
    bands = ["bands"] if parts > stages.BANDS_FROM_PIECES else []
    assert [n for n, _ in ran] == ["sign", "exact", *bands, "buckets", *star, "labels", "members", "policy",
                                   "resolve", "sizes", "write", "shown"]
    assert job.offsets == [0, 2] and job.run_key  # the sign hook
    labels = ("labels", ("c", ["c"])) if one_task >= 10 else ("labels", (2, ["g000000"]))
    assert ran[-2] == ("write", ("/out", None, {}, "decisions")) and ran[3 + len(bands) + len(star)] == labels
    assert ran[-1] == ("shown", ([[3, 0]],))  # report.html's largest clusters, from the write tasks' candidates
    assert list(d.results) == [s for s in driver.PLAN if s.name in {n for n, _ in ran}]
    assert d.source_stats["sources"]["f"]["input"] == 2  # the write hook merged the tallies


@pytest.mark.parametrize("removed, stopped", [(1, False), (2, True)])
def test_a_source_limit_holds_the_kept_records_and_the_index_back(removed, stopped):
    """With --max-source-removal the write tasks write no kept records; the kept stage writes them, and the
    index_rows stage runs, only when every source is within the limit."""
    from gpu_dedup.runtime.sources import SourceGuard

    ran = []
    job = stages.Job(RunConfig(progress=False), "cpu", ["f"], "w", 1)
    d = _fake(ran, removed)(None, job, [], "/out", "/ix", None, "fp", {}, {}, guard=SourceGuard(max_removal=0.5))
    driver.walk(d)
    names = [n for n, _ in ran]
    assert ("write", (None, None, {}, "decisions")) in ran  # no OUT for the write tasks: no kept records yet
    assert d.stopped is stopped
    assert names[-3:] == (["sizes", "write", "shown"] if stopped else ["kept", "index_rows", "shown"])
    if not stopped:
        assert ran[-3] == ("kept", ("/out",))


@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "4"])
def test_partitions_must_be_a_whole_number(bad, tmp_path):
    t = pa.table({"id": ["a"], "text": ["x y z"]})
    with pytest.raises(ValueError, match=r"partitions=.* is no number of key ranges: pass a whole number >= 1"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), work_dir=tmp_path / "w", engine="ray", partitions=bad)
    assert not (tmp_path / "w").exists()


def test_workers_and_address_exclude_each_other(tmp_path):
    t = pa.table({"id": ["a"], "text": ["x y z"]})
    with pytest.raises(ValueError, match="--workers 2 starts a local Ray cluster and --address auto joins a running "
                                         "one: pass one of them"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), tmp_path / "o", engine="ray", workers=2, address="auto")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_cli_partitions_must_be_a_whole_number(bad, tmp_path, capsys):
    from gpu_dedup.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", str(tmp_path), "-o", str(tmp_path / "o"), "--engine", "ray", "--partitions", bad])
    assert e.value.code == 2 and f"--partitions: expected a whole number >= 1, got '{bad}'" in capsys.readouterr().err


def test_partitions_cap_follows_the_input_size(tmp_path, monkeypatch, caplog):
    """Asked for: kept up to the cap, max(DEFAULT_PARTITIONS, input bytes / PARTITION_BYTES), else cut to it
    with a warning; not asked for: the cluster's CPUs, at most DEFAULT_PARTITIONS."""
    pq.write_table(pa.table({"id": [str(i) for i in range(2000)], "text": ["word " * 20] * 2000}), tmp_path / "a.parquet")
    files = io.source_files(str(tmp_path / "a.parquet"))
    size = os.path.getsize(tmp_path / "a.parquet")
    top = shuffle.DEFAULT_PARTITIONS
    assert shuffle.key_ranges(None, 2, files) == 2 and shuffle.key_ranges(None, 1000, files) == top
    assert shuffle.key_ranges(top, 2, files) == top and shuffle.key_ranges(3, 2, files) == 3
    with caplog.at_level(logging.WARNING, logger="gpu_dedup.distributed"):
        assert shuffle.key_ranges(100_000, 2, files) == top
    assert "--partitions 100000: more key ranges than" in caplog.text
    monkeypatch.setattr(shuffle, "PARTITION_BYTES", 16)  # a big input, in small units
    cap = -(-size // 16)
    assert cap > top and shuffle.key_ranges(cap, 2, files) == cap and shuffle.key_ranges(cap + 1, 2, files) == cap


def test_starting_the_cluster_says_so_while_it_lasts(monkeypatch, caplog):
    """Issue 36 item 11: 14 s passed between the start and the first task line. Ray's start says it starts,
    that it is still going every HEARTBEAT_S (0.02 s here, a stand-in for Ray taking 0.15 s), and that the
    cluster is ready with its CPUs; the cluster is shut down after the block."""
    import time

    from gpu_dedup.distributed import cluster
    from gpu_dedup.runtime import heartbeat

    class FakeRay:
        calls = []

        def is_initialized(self):
            return False

        def init(self, **kw):
            self.calls.append(("init", kw["address"], kw.get("num_cpus")))
            time.sleep(0.15)

        def cluster_resources(self):
            return {"CPU": 2.0}

        def shutdown(self):
            self.calls.append(("shutdown",))

    monkeypatch.setattr(cluster, "import_ray", FakeRay)
    monkeypatch.setattr(heartbeat, "HEARTBEAT_S", 0.02)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with caplog.at_level(logging.INFO, logger="gpu_dedup.distributed"):
        with cluster.ray_cluster(2, None) as ray:
            assert ray.calls == [("init", "local", 2)]
    said = [r.getMessage() for r in caplog.records if r.name == "gpu_dedup.distributed.cluster"]
    assert said[0] == "starting a local Ray cluster of 2 worker processes ..."
    going = [m for m in said if m.startswith("starting a local Ray cluster of 2 worker processes: still going after")]
    assert going and said[len(going) + 1].startswith("Ray cluster ready: 2 CPUs (") and FakeRay.calls[-1] == ("shutdown",)


def _labels(job, step, sources) -> dict[int, int]:
    """The labels stage's (row, label) of every file, as a dict."""
    got = {}
    for g in range(job.nfiles):
        graph.labels(job, g, step, sources)
        t = job.layout.read_one("labels", f"f{g:06d}")
        got.update(zip(t["row"].to_pylist(), t["label"].to_pylist()))
    return got


@pytest.mark.parametrize("seed", [0, 1])
def test_components_task_labels_as_the_star_rounds(tmp_path, seed):
    """graph.components (one task) and the large-star / small-star rounds label every candidate row with
    the smallest row of its component, checked against a union-find over the same edges; the edges include a
    long path in shuffled row order (many rounds for label propagation), pairs, and repeated edges."""
    from types import SimpleNamespace

    import numpy as np

    rng = np.random.default_rng(seed)
    offsets = [0, 40, 40, 130, 200]  # an empty file too
    path = rng.permutation(200)[:60]
    a = np.concatenate([path[:-1], rng.integers(0, 200, 50), path[:5]])
    b = np.concatenate([path[1:], rng.integers(0, 200, 50), path[1:6]])
    a, b = a[a != b], b[a != b]
    parent = list(range(200))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x
    for x, y in zip(a.tolist(), b.tolist()):
        parent[max(find(x), find(y))] = min(find(x), find(y))
    want = {int(x): find(int(x)) for x in np.concatenate([a, b])}

    got = []
    for how in ("star", "components"):
        job = stages.Job(RunConfig(progress=False), "cpu", ["f"] * 4, str(tmp_path / how), 2, offsets=offsets,
                         run_key="k")
        half = a.shape[0] // 2  # two buckets tasks' edges
        graph.write_edges(job, a[:half], b[:half], "edges_0", "p0000")
        graph.write_edges(job, a[half:], b[half:], "edges_0", "p0001")
        if how == "star":
            d = SimpleNamespace(job=job, stage=lambda s, *args: [s.fn(job, g, *args) for g in range(job.nfiles)])
            driver._star_rounds(d, driver.STAR)
            assert d.step > 2
        else:
            res = graph.components(job, 0)
            assert res["nodes"] == len(want) and res["rounds"] >= 2
            d = SimpleNamespace()
            driver._one_star(d, [res])
        got.append(_labels(job, d.step, d.sources))
    assert got[0] == got[1] == want


@pytest.mark.parametrize("flags, error", [
    (["--perplexity", "{target}:keep=0.5"], "rank the whole corpus, which dedup's pass 1 reads batch by batch"),
    (["--rules", "gopher", "--semantic"], "a prefilter and the semantic stage cannot share a run yet"),
])
def test_run_refuses_before_a_cluster_starts_or_a_step_runs(tmp_path, monkeypatch, capsys, flags, error):
    """`gpu-dedup run --engine ray` with what no pass 1 runs, or the filter flags with --semantic: refused before the
    Ray cluster starts and before a span step "before" the document stages runs (was: after both), OUT not made."""
    from gpu_dedup import distributed
    from gpu_dedup.cli import main

    pq.write_table(pa.table({"id": ["a", "b"], "text": ["one two three four", "five six seven"]}),
                   tmp_path / "a.parquet")
    (tmp_path / "t.jsonl").write_text('{"text": "one two"}\n')
    monkeypatch.setattr(distributed, "ray_cluster", lambda *a: pytest.fail("a Ray cluster started"))
    out = tmp_path / "o"
    args = [f.format(target=tmp_path / "t.jsonl") for f in flags]
    assert main(["run", str(tmp_path / "a.parquet"), "-o", str(out), "--engine", "ray", "--paragraph-dedup",
                 "--paragraph-order", "before", "-q", *args]) == 1
    assert error in capsys.readouterr().err and not out.exists()


def test_the_semantic_fold_says_what_it_removed_as_the_local_engine(caplog):
    """The fold runs in a task, whose INFO lines stay in its worker: the driver says the local engine's line
    (semantic.merge_decisions) from the task's count."""
    from types import SimpleNamespace

    with caplog.at_level(logging.INFO, logger="gpu_dedup.distributed.driver"):
        driver._folded(SimpleNamespace(sem_part=("work", 7)), [{"removed": 3}])
    assert caplog.messages == ["semantic: 3 of the 7 documents the lexical stages kept are semantic duplicates, "
                               "removed for a kept representative"]
