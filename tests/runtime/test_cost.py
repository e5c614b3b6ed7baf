"""runtime/cost.py: what a run cost (issue 37 item 9): CPU-seconds against the process's own clock, bytes written
against the files on disk, the amount against the closed form, per step and for the Ray engine's tasks."""
import json
import os
import time

import pytest

from gpu_dedup import deduplicate
from gpu_dedup.cli import main
from gpu_dedup.runtime.cost import Meter, Price, amount, metered, total
from gpu_dedup.runtime.run import timing_line


def test_price_parses_and_refuses():
    assert Price.parse("cpu-hour=0.04,gpu-hour=2.5") == Price(0.04, 2.5)
    assert Price.parse(" gpu-hour=3 ") == Price(None, 3.0)
    for bad, msg in [("cpu=1", "write cpu-hour=PRICE"), ("cpu-hour=x", "'x' is no number"), ("", "give cpu-hour"),
                     ("cpu-hour=-1", "a price must be a number >= 0")]:
        with pytest.raises(ValueError, match=msg):
            Price.parse(bad)


def test_amount_is_the_closed_form():
    u = {"cpu_s": 7200.0, "gpu_s": 1800.0}
    assert amount(u, Price(0.05, 2.0)) == pytest.approx(2 * 0.05 + 0.5 * 2.0)
    assert amount(u, Price(None, 2.0)) == pytest.approx(1.0)
    assert amount(u, None) is None
    t = total([{"cpu_s": 1.5, "gpu_s": 0.0, "bytes_read": 10, "tasks": 2, "peak_rss_bytes": 5},
               {"cpu_s": 2.5, "gpu_s": 3600.0, "bytes_read": 5, "tasks": 1, "peak_rss_bytes": 9}], Price(3600.0, 1.0), 9.0)
    assert (t["cpu_s"], t["gpu_s"], t["bytes_read"], t["tasks"], t["peak_rss_bytes"]) == (4.0, 3600.0, 15, 3, 9)
    assert t["amount"] == pytest.approx(4.0 + 1.0)


def test_the_meter_counts_this_process_cpu_time():
    with metered(Price(cpu_hour=3600.0)) as m:  # a price of 1 per CPU-second
        c0 = time.process_time()
        x = 0
        while time.process_time() - c0 < 0.3:  # busy: CPU time, not waiting
            x += 1
        own = time.process_time() - c0
        u = m.usage()
    # getrusage (user + system) against the process clock over the same block: within 50 ms
    assert u["cpu_s"] == pytest.approx(own, abs=0.05)
    assert u["amount"] == pytest.approx(u["cpu_s"])
    assert u["gpu_s"] == 0.0 and u["wall_s"] >= own - 0.05


def test_the_meter_counts_ray_tasks_but_not_reused_ones():
    m = Meter()
    m.add_tasks([{"cpu_seconds": 1.5, "seconds": 2.0, "peak_rss_bytes": 10},
                 {"cpu_seconds": 9.0, "seconds": 9.0, "reused": True},
                 {"cpu_seconds": 0.5, "seconds": 1.0, "peak_rss_bytes": 30}], on_gpu=True)
    m.add_gpu_held(10.0, 2)
    u = m.usage(stats={"device": "cuda", "engine": {"name": "ray"}})
    assert (u["tasks"], u["cpu_s_tasks"], u["gpu_busy_s_tasks"], u["peak_rss_bytes_tasks"]) == (2, 2.0, 3.0, 30)
    assert u["gpu_s"] == pytest.approx(20.0)  # the actors' lifetime, not the driver's wall time
    local = Meter().usage(stats={"device": "cuda", "engine": {"name": "local"}})
    assert local["gpu_s"] == pytest.approx(local["wall_s"])  # a local GPU run holds its GPU for its wall time


def _corpus(tmp_path, n=60):
    d = tmp_path / "in"
    d.mkdir()
    with open(d / "x.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"d{i}", "text": f"some words of document {i % 20} here and there"}) + "\n")
    return str(d)


def _recorded_bytes(out, but=("run.json",)):
    """The sizes of the files the run's manifest lists (independent of the meter)."""
    m = json.load(open(os.path.join(out, ".gpu-dedup-outputs.json")))
    return sum(os.path.getsize(os.path.join(out, f)) for f in m["files"] if f not in but)


def test_run_json_cost_of_a_dedup_run(tmp_path, capsys):
    src = _corpus(tmp_path)
    out = tmp_path / "o"
    assert main(["run", src, "-o", str(out), "-q", "--price", "cpu-hour=2,gpu-hour=5"]) == 0
    stats = json.load(open(out / "run.json"))
    c = stats["cost"]
    assert c["bytes_read"] == sum(stats["bytes_read"].values())
    assert c["bytes_written"] == _recorded_bytes(str(out))
    assert c["gpu_s"] == 0.0 and 0 < c["cpu_s"] and c["price"] == {"cpu_hour": 2.0, "gpu_hour": 5.0}
    assert c["amount"] == pytest.approx(c["cpu_s"] / 3600 * 2)
    assert c["peak_rss_bytes"] > 0
    printed = capsys.readouterr().out
    assert "cost: " in printed and "at the given price" in printed and "time: " in printed
    assert "Cost" in open(out / "report.html").read()


def test_a_pipeline_costs_its_steps_and_the_whole(tmp_path):
    src = _corpus(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("price: cpu-hour=1\nsteps:\n  - dedup: {}\n  - dedup: {threshold: 0.5}\n")
    out = tmp_path / "p"
    assert main(["pipeline", str(recipe), src, "-o", str(out), "-q"]) == 0
    stats = json.load(open(out / "run.json"))
    steps = [s["cost"] for s in stats["steps"]]
    assert all(s is not None for s in steps)
    # the whole run holds every step's time: its CPU-seconds at least their sum
    assert stats["cost"]["cpu_s"] >= sum(s["cpu_s"] for s in steps) - 0.01
    assert stats["cost"]["amount"] == pytest.approx(stats["cost"]["cpu_s"] / 3600)
    for i, s in enumerate(stats["steps"]):  # each step's own statistics file says its own cost
        own = json.load(open(out / s["dir"] / "run.json"))["cost"]
        assert own["cpu_s"] <= s["cost"]["cpu_s"] + 0.01
        assert own["bytes_written"] <= _recorded_bytes(str(out), ()) and own["bytes_written"] > 0
    assert stats["bytes_read"] == {f"{s['index']:02d}-{s['name']}": s["cost"]["bytes_read"] for s in stats["steps"]}


def test_a_ray_run_counts_its_tasks(tmp_path):
    pytest.importorskip("ray")
    src = _corpus(tmp_path)
    res = deduplicate(src, output_dir=str(tmp_path / "r"), engine="ray", workers=2)
    c = res.stats["cost"]
    # every task that ran is counted once: the tasks' markers in the work dir, independent of the meter
    markers = [f for _, _, fs in os.walk(tmp_path / "r" / "work" / "ray" / "done") for f in fs if f.endswith(".json")]
    assert c["tasks"] == len(markers) > 0
    assert c["cpu_s_tasks"] > 0 and c["cpu_s"] == pytest.approx(c["cpu_s_here"] + c["cpu_s_tasks"], abs=2e-3)  # each rounded to ms
    assert c["peak_rss_bytes_tasks"] == res.stats["engine"]["worker_peak_rss_bytes"]


def test_timing_line_names_the_longest_steps_with_their_share():
    t = {"read": 6.0, "verify": 3.0, "write": 1.0, "tiny": 0.001, "total": 10.0}
    assert timing_line(t) == "time: read 6.00 s (60%), verify 3.00 s (30%), write 1.00 s (10%) of 10.00 s"
    assert timing_line(t, top=1) == "time: read 6.00 s (60%), 2 more 4.00 s of 10.00 s"
