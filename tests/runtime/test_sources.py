"""runtime/sources.py: what each source lost (issue 37 items 7-8), checked against a brute-force count; the guard on
run, filter and pipeline, on both engines (marin#6854: dedup silently removed over 95 % of 15 of 113 sources)."""
import hashlib
import json
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup import deduplicate
from gpu_dedup.cli import main
from gpu_dedup.runtime.sources import (BIN_WIDTH, BINS, BOUNDARY_WIDTH, NO_VALUE, PAIRS, SourceGuard,
                                       SourceRemovalError, Tally, check, share_line, source_labels)


# ------------------------------------------------------------------------------------------ the tally

def _rows(n=3000, seed=0):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        keep = rng.random() < 0.4
        reason = "unique" if keep else rng.choice(["near_duplicate", "exact_duplicate", "semantic_duplicate",
                                                   "filtered", "near_duplicate"])
        jac = cos = None
        if reason == "near_duplicate":
            jac = rng.choice([rng.uniform(0.8, 1.0), rng.uniform(0.8, 0.85), 1.0])
        elif reason == "exact_duplicate":
            jac = rng.choice([1.0, None])
        elif reason == "semantic_duplicate":
            cos = rng.uniform(0.88, 1.0)
        out.append({"id": f"d{i}", "source": rng.choice(["a", "b", "c", "d"]), "keep": keep, "reason": reason,
                    "jaccard": jac, "cosine": cos, "step": None if keep else rng.choice(["dedup", "semantic"]),
                    "matched": None if keep else f"d{rng.randrange(n)}"})
    return out


def _brute(rows, thresholds):
    """The tally by hand: per source, a plain loop over the rows (the boundary key is the id's BLAKE2b, as
    documented)."""
    want = {}
    for r in rows:
        s = want.setdefault(r["source"], {"input": 0, "kept": 0, "removed": {}, "similarity": {}, "unmeasured": {},
                                          "cands": []})
        s["input"] += 1
        if r["keep"]:
            s["kept"] += 1
            continue
        st = r["step"]
        s["removed"][st] = s["removed"].get(st, 0) + 1
        if r["reason"] == "semantic_duplicate" and r["cosine"] is not None:
            ms, v = "cosine", r["cosine"]
        elif r["jaccard"] is not None:
            ms, v = "jaccard", r["jaccard"]
        else:
            s["unmeasured"][st] = s["unmeasured"].get(st, 0) + 1
            continue
        b = min(int(v / BIN_WIDTH), BINS - 1)
        h = s["similarity"].setdefault(st, {}).setdefault(ms, [0] * BINS)
        h[b] += 1
        paired = {"near_duplicate": "jaccard", "semantic_duplicate": "cosine"}.get(r["reason"]) == ms
        if paired and ms in thresholds and thresholds[ms] <= v < thresholds[ms] + BOUNDARY_WIDTH:
            key = int.from_bytes(hashlib.blake2b(r["id"].encode(), digest_size=8, person=b"gpu_dedup.src").digest(),
                                 "little")
            s["cands"].append((key, r["id"], st, ms, v, r["matched"]))
    for s in want.values():
        s["boundary"] = [{"step": c[2], "measure": c[3], "value": c[4], "id": c[1], "matched_id": c[5]}
                         for c in sorted(s.pop("cands"))[:PAIRS]]
    return want


def _add(t, rows):
    t.add(pa.array([r["source"] for r in rows]), np.array([r["keep"] for r in rows]),
          step=pa.array([r["step"] for r in rows], pa.string()), reason=pa.array([r["reason"] for r in rows]),
          jaccard=pa.array([r["jaccard"] for r in rows], pa.float64()),
          cosine=pa.array([r["cosine"] for r in rows], pa.float64()), ids=pa.array([r["id"] for r in rows]),
          matched=pa.array([r["matched"] for r in rows], pa.string()))


@pytest.mark.parametrize("parts", [1, 7])
def test_tally_equals_a_brute_force_count_and_merges_to_the_same(parts):
    rows = _rows()
    thresholds = {"jaccard": 0.8, "cosine": 0.9}
    want = _brute(rows, thresholds)
    total = Tally(thresholds)
    cut = sorted(random.Random(1).sample(range(1, len(rows)), parts - 1))
    for lo, hi in zip([0] + cut, cut + [len(rows)]):
        part = Tally(thresholds)
        _add(part, rows[lo:hi])
        total.merge(Tally.from_dict(json.loads(json.dumps(part.to_dict()))))  # as a Ray task's result travels
    got = total.stats(SourceGuard(max_removal=0.5))["sources"]
    assert set(got) == set(want)
    for k, w in want.items():
        g = got[k]
        assert (g["input"], g["kept"], g["by_step"], g["unmeasured"]) == (w["input"], w["kept"], w["removed"],
                                                                          w["unmeasured"])
        assert g["removed"] == sum(w["removed"].values())
        assert g["removed_share"] == pytest.approx(g["removed"] / g["input"])
        assert g["similarity"] == w["similarity"]
        assert g["boundary_pairs"] == w["boundary"] and len(w["boundary"]) == PAIRS  # enough at the boundary


def test_stats_names_the_sources_over_the_limit_and_check_raises():
    t = Tally()
    t.add(pa.array(["a"] * 10 + ["b"] * 10 + ["c"] * 4), np.array([False] * 10 + [True] * 9 + [False] + [True] * 4),
          step="dedup")
    s = t.stats(SourceGuard("src", 0.5))
    assert s["over_limit"] == ["a"] and s["by"] == "field src" and s["count"] == 3
    assert s["sources"]["b"]["removed_share"] == pytest.approx(0.1)
    with pytest.raises(SourceRemovalError, match=r"max_source_removal=0.5: .* 1 source\(s\) \(by field src\): a "
                                                 r"100.0% \(10 of 10\).*deduplicated/ is not") as e:
        check(s)
    assert e.value.keep_outputs is True
    check(t.stats(SourceGuard("src", 1.0)))  # at most everything: never stops
    check(t.stats(SourceGuard("src")))  # no limit: a report only
    assert share_line(s).startswith("3 source(s) (by field src), largest removal shares: a 100.0% OVER LIMIT")


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.5", True])
def test_the_guard_refuses_a_limit_that_is_no_fraction(bad):
    with pytest.raises(ValueError, match="max_source_removal"):
        SourceGuard(max_removal=bad)
    with pytest.raises(ValueError, match="source_field"):
        SourceGuard("")


def test_source_labels_read_the_field_again_with_nulls_named(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in [{"id": "a", "text": "x y", "src": "web"},
                                                         {"id": "b", "text": "z", "src": None},
                                                         {"id": "c", "text": "w", "src": 7}]))
    from gpu_dedup.config import InputConfig

    assert source_labels(str(p), "src", InputConfig()).to_pylist() == ["web", NO_VALUE, "7"]
    files = pa.array(["f1", "f2"])
    assert source_labels(str(p), None, InputConfig(), files) is not None


# ------------------------------------------------------------------------------------------ the runs

def _corpus(tmp_path):
    """Two files: a.jsonl, near copies of one text (half of them from the "books" source), b.jsonl unique texts,
    half of them without any stop word."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(400)]
    base = [rng.choice(words) for _ in range(170)]
    d = tmp_path / "in"
    d.mkdir()
    with open(d / "a.jsonl", "w") as f:
        for i in range(24):
            t = list(base)
            t[i % 170] = "zz"
            t[(7 * i) % 170] = "yy"
            if i % 3 == 0:  # a third change: near the threshold
                t[(13 * i + 5) % 170] = "xx"
            f.write(json.dumps({"id": f"a{i}", "text": " ".join(t) + " the and", "src": "books" if i % 2 else "web"})
                    + "\n")
    with open(d / "b.jsonl", "w") as f:
        for i in range(24):
            stop = " the and" if i % 2 == 0 else ""  # Gopher's stop-word rule rejects the others
            f.write(json.dumps({"id": f"b{i}", "text": " ".join(rng.choice(words) for _ in range(80)) + stop,
                                "src": "web"}) + "\n")
    return str(d)


def _by_pandas(out, labels=None):
    """Removal shares from the decisions table alone (pyarrow group-by: independent of the tally); a Ray run's
    OUT/decisions/ dataset read as the one table it stands for."""
    one = os.path.join(out, "decisions.parquet")
    d = pq.read_table(one if os.path.exists(one) else os.path.join(out, "decisions"))
    if labels is not None:
        d = d.append_column("label", pa.array(labels))
    key = "label" if labels is not None else "source"
    g = d.group_by(key).aggregate([("keep", "count"), ("keep", "sum")]).to_pylist()
    return {r[key]: (r["keep_count"], r["keep_count"] - r["keep_sum"]) for r in g}


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_dedup_stops_before_its_kept_records_when_a_source_loses_too_much(tmp_path, engine):
    if engine == "ray":
        pytest.importorskip("ray")
    src = _corpus(tmp_path)
    ray = {"engine": "ray", "workers": 2} if engine == "ray" else {}
    out = tmp_path / "out"
    with pytest.raises(SourceRemovalError) as e:
        deduplicate(src, output_dir=str(out), save_index=str(tmp_path / "ix"),
                    sources=SourceGuard(max_removal=0.5), **ray)
    want = _by_pandas(str(out))
    n, removed = want["a.jsonl"]
    assert removed / n > 0.5 and want["b.jsonl"][1] / want["b.jsonl"][0] <= 0.5
    assert f"a.jsonl {removed / n:.1%} ({removed} of {n})" in str(e.value) and "b.jsonl" not in str(e.value)
    # the decisions are written for inspection: one file locally, the tasks' per-file parts on Ray
    table = ["decisions", "work"] if engine == "ray" else ["decisions.parquet"]
    assert sorted(os.listdir(out)) == sorted([*table, "run.json", "report.html", "report", "gpu-dedup.lock",
                                              ".gpu-dedup-outputs.json"])
    assert not os.path.exists(tmp_path / "ix" / "manifest.json")  # no index either
    assert json.load(open(out / ".gpu-dedup-outputs.json"))["state"] == "stopped"
    stats = json.load(open(out / "run.json"))
    assert stats["sources"]["over_limit"] == ["a.jsonl"] and "deduplicated" not in stats
    assert {k: (v["input"], v["removed"]) for k, v in stats["sources"]["sources"].items()} == want
    html = open(out / "report.html").read()
    assert "over the limit" in html and html.count('class="pair"') > 0  # the boundary pairs, side by side
    # within the limit the same run writes its kept records
    ok = deduplicate(src, output_dir=str(tmp_path / "ok"), sources=SourceGuard(max_removal=removed / n), **ray)
    assert ok.stats["sources"]["over_limit"] == [] and ok.stats["deduplicated"]["rows_written"] == ok.kept
    assert sorted(os.listdir(tmp_path / "ok" / "deduplicated")) == ["a.jsonl", "b.jsonl"]
    if engine == "ray":  # the tally is the local engine's, boundary pairs included
        local = deduplicate(src, sources=SourceGuard(max_removal=removed / n))
        assert local.stats["sources"]["sources"] == ok.stats["sources"]["sources"]


def test_a_source_field_names_the_sources_and_the_cli_exits_1(tmp_path, capsys):
    src = _corpus(tmp_path)
    out = tmp_path / "out"
    assert main(["run", src, "-o", str(out), "-q", "--source-field", "src", "--max-source-removal", "0.6"]) == 1
    err = capsys.readouterr().err
    stats = json.load(open(out / "run.json"))
    labels = [json.loads(line)["src"] for f in ("a.jsonl", "b.jsonl") for line in open(os.path.join(src, f))]
    want = _by_pandas(str(out), labels)
    assert {k: (v["input"], v["removed"]) for k, v in stats["sources"]["sources"].items()} == want
    (n, removed), (nw, rw) = want["books"], want["web"]
    assert removed / n > 0.6 >= rw / nw
    assert "--max-source-removal 0.6" in err and f"books {removed / n:.1%} ({removed} of {n})" in err
    assert "(by field src)" in err and "web" not in err.split("(by field src)")[1].split(".")[0]
    assert not (out / "deduplicated").exists()
    # rerun over it: --overwrite, as for any finished run
    assert main(["run", src, "-o", str(out), "-q", "--source-field", "src", "--overwrite"]) == 0
    assert (out / "deduplicated").is_dir()
    printed = capsys.readouterr().out
    assert f"2 source(s) (by field src), largest removal shares: books {removed / n:.1%}" in printed


def test_filter_stops_before_filtered(tmp_path, capsys):
    src = _corpus(tmp_path)
    out = tmp_path / "f"
    # c4's rules reject every document of this corpus (no terminal punctuation)
    assert main(["filter", src, "-o", str(out), "-q", "--rules", "c4", "--max-source-removal", "0.9"]) == 1
    assert "filtered/ is not" in capsys.readouterr().err
    assert (out / "scores.parquet").exists() and not (out / "filtered").exists()
    stats = json.load(open(out / "run.json"))
    assert stats["sources"]["sources"]["a.jsonl"]["by_step"] == {"filter": 24}
    assert "Sources" in open(out / "report.html").read()


def test_pipeline_tallies_the_composed_decisions_per_source_and_step(tmp_path, capsys):
    src = _corpus(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("source-field: src\nsteps:\n  - filter: {rules: gopher}\n  - dedup: {}\n")
    out = tmp_path / "p"
    assert main(["pipeline", str(recipe), src, "-o", str(out), "-q", "--max-source-removal", "0.5"]) == 1
    assert "(by field src): books" in capsys.readouterr().err
    stats = json.load(open(out / "run.json"))
    d = pq.read_table(out / "decisions.parquet")
    labels = [json.loads(line)["src"] for f in ("a.jsonl", "b.jsonl") for line in open(os.path.join(src, f))]
    by_step = {}
    for lab, keep, step in zip(labels, d["keep"].to_pylist(), d["step"].to_pylist()):
        if not keep:
            by_step.setdefault(lab, {}).setdefault(step, 0)
            by_step[lab][step] += 1
    assert {k: v["by_step"] for k, v in stats["sources"]["sources"].items() if v["removed"]} == by_step
    assert set(by_step["web"]) == {"filter", "dedup"}  # both steps removed documents of the source
    assert not (out / "deduplicated").exists() and (out / "steps" / "02-dedup" / "decisions.parquet").exists()
    assert "jaccard" in stats["sources"]["boundary"]["thresholds"]
