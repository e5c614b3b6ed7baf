"""End-to-end invariants of the lexical pipeline (CPU)."""
import gzip
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.decisions import DECISIONS_SCHEMA

WORDS = ("data model train token corpus web page text near copy policy keep remove index shard batch kernel "
         "device memory sort hash band bucket row column value file line error report cluster graph edge").split()


def make_corpus(n: int, seed: int = 0) -> pa.Table:
    """Originals, exact copies (case/space changes), light edits (J >= 0.8), heavy edits, short texts."""
    rng = np.random.default_rng(seed)
    ids, texts = [], []
    for i in range(n):
        kind = rng.integers(0, 5) if texts else 0
        if kind == 0 or not texts:
            t = " ".join(rng.choice(WORDS, rng.integers(30, 80)))
        elif kind == 1:
            t = texts[rng.integers(0, len(texts))].upper().replace(" ", "  ")
        elif kind == 2:
            w = texts[rng.integers(0, len(texts))].split()
            t = " ".join(w + ["extra"])
        elif kind == 3:
            w = texts[rng.integers(0, len(texts))].split()
            t = " ".join(rng.permutation(w))
        else:
            t = " ".join(rng.choice(WORDS, rng.integers(0, 4)))
        ids.append(f"doc{i:04d}")
        texts.append(t)
    return pa.table({"id": ids, "text": texts, "score": rng.random(n)})


def _check_invariants(table: pa.Table, d: pa.Table) -> None:
    assert d.schema == DECISIONS_SCHEMA
    assert d["id"].to_pylist() == table["id"].to_pylist()  # one row per input, input order
    keep = np.asarray(d["keep"])
    rep = d["representative_id"].to_pylist()
    ids = d["id"].to_pylist()
    kept = {i for i, k in zip(ids, keep) if k}
    assert all(r in kept for r in rep)  # every representative is kept
    assert all((r == i) == k for i, r, k in zip(ids, rep, keep))
    sizes = np.bincount(np.asarray(d["cluster_id"]), minlength=len(ids))
    assert (np.asarray(d["cluster_size"]) == sizes[np.asarray(d["cluster_id"])]).all()
    assert keep.sum() + (~keep).sum() == table.num_rows


@pytest.mark.parametrize("preset", ["default", "fineweb", "nemo"])
def test_invariants_and_batch_size_independence(preset):
    table = make_corpus(300)
    cfg = RunConfig.preset(preset, progress=False)
    base = gpu_dedup.deduplicate(table, cfg).decisions
    _check_invariants(table, base)
    assert not np.asarray(base["keep"]).all()
    small = gpu_dedup.deduplicate(table, cfg.replace(batch_bytes=2048)).decisions
    assert small.equals(base)


def test_representative_policy_removes_only_for_verified_kept_documents():
    table = make_corpus(400, seed=1)
    d = gpu_dedup.deduplicate(table, RunConfig(progress=False)).decisions.to_pylist()
    texts = dict(zip(table["id"].to_pylist(), table["text"].to_pylist()))

    def shingles(t):
        w = t.lower().split()
        return {tuple(w[i:i + 5]) for i in range(len(w) - 4)}

    near = [r for r in d if r["reason"] == "near_duplicate"]
    assert near
    for r in near:
        a, b = shingles(texts[r["id"]]), shingles(texts[r["representative_id"]])
        assert len(a & b) / len(a | b) == pytest.approx(r["jaccard"]) and r["jaccard"] >= 0.8
    for r in d:
        if r["reason"] == "short_exact_duplicate":
            assert " ".join(texts[r["id"]].lower().split()) == " ".join(texts[r["matched_id"]].lower().split())


def test_keep_policies_change_the_survivor():
    t = pa.table({"id": ["x", "y"], "text": ["same words in this text here ok", "SAME  words in this text here ok"],
                  "score": [0.1, 0.9]})
    first = gpu_dedup.deduplicate(t, RunConfig(progress=False)).decisions
    assert first["keep"].to_pylist() == [True, False]
    best = gpu_dedup.deduplicate(t, RunConfig.preset("default", progress=False, cluster__keep="max:score"))
    assert best.decisions["keep"].to_pylist() == [False, True]
    assert best.decisions["reason"].to_pylist() == ["exact_duplicate", "representative"]


def test_files_outputs_and_run_json(tmp_path):
    table = make_corpus(120, seed=2)
    rows = table.to_pylist()
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    with open(src / "a.jsonl", "w") as f:
        for r in rows[:60]:
            f.write(json.dumps(r) + "\n")
    with gzip.open(src / "sub" / "b.jsonl.gz", "wt") as f:
        for r in rows[60:]:
            f.write(json.dumps(r) + "\n")
    out = tmp_path / "out"
    res = gpu_dedup.deduplicate(str(src), RunConfig(progress=False), output_dir=out)
    d = pq.read_table(out / "decisions.parquet")
    assert d.equals(res.decisions)
    assert set(d["source"].to_pylist()) == {"a.jsonl", "sub/b.jsonl.gz"}
    run = json.loads((out / "run.json").read_text())
    assert run["counts"]["input"] == 120 and run["counts"]["kept"] + run["counts"]["removed"] == 120
    assert run["contract"]["minhash"]["num_perm"] == 100 and run["contract_fingerprint"]
    kept_ids = {r["id"] for r in d.to_pylist() if r["keep"]}
    written = [json.loads(line) for line in open(out / "deduplicated" / "a.jsonl")]
    written += [json.loads(line) for line in gzip.open(out / "deduplicated" / "sub" / "b.jsonl.gz", "rt")]
    assert {r["id"] for r in written} == kept_ids
    assert all(set(r) == {"id", "text", "score"} for r in written)  # all original columns


def test_duplicate_ids_fail_before_any_output(tmp_path):
    t = pa.table({"id": ["a", "b", "a"], "text": ["x y", "y z", "z w"]})
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="'a'"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), output_dir=out)
    assert not out.exists() or not os.listdir(out)


def test_zero_documents(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    res = gpu_dedup.deduplicate(str(tmp_path / "empty.jsonl"), RunConfig(progress=False), output_dir=tmp_path / "o")
    assert res.decisions.num_rows == 0 and res.stats["counts"]["input"] == 0
    assert (tmp_path / "o" / "decisions.parquet").exists()


def test_single_50mb_document_and_its_copy():
    big = ("lorem ipsum dolor sit amet " * 2_000_000)[:50_000_000]
    t = pa.table({"id": ["big", "copy", "other"], "text": [big, big.upper(), "something else entirely here"]})
    d = gpu_dedup.deduplicate(t, RunConfig(progress=False)).decisions
    assert d["keep"].to_pylist() == [True, False, True]
    assert d["reason"].to_pylist()[1] == "exact_duplicate"


def test_cuda_without_gpu_is_an_error_not_a_fallback(tmp_path):
    """Outside the simulator, --device cuda on a machine without a GPU exits with a clear error."""
    import subprocess
    import sys

    (tmp_path / "a.jsonl").write_text('{"id": "a", "text": "x y z"}\n')
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    probe = subprocess.run([sys.executable, "-c", "from gpu_dedup.runtime.device import gpu_status; print(gpu_status()[0])"],
                           capture_output=True, text=True, env=env)
    if probe.stdout.strip() == "True":
        pytest.skip("a GPU is present")
    r = subprocess.run([sys.executable, "-m", "gpu_dedup.cli", "run", str(tmp_path / "a.jsonl"), "-o",
                        str(tmp_path / "o"), "--device", "cuda", "-q"], capture_output=True, text=True, env=env)
    assert r.returncode == 1
    assert "no usable GPU" in r.stderr and "--device 'cpu'" in r.stderr  # the CLI names the flag (flags.py)
    assert not (tmp_path / "o" / "decisions.parquet").exists()


def test_pandas_input():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"id": ["a", "b"], "text": ["one two three four five six", "one two three four five six"]})
    d = gpu_dedup.deduplicate(df, progress=False).decisions
    assert d["keep"].to_pylist() == [True, False]


def test_exact_only_mode_and_byte_verification(monkeypatch):
    table = make_corpus(200, seed=5)
    full = gpu_dedup.deduplicate(table, RunConfig(progress=False)).decisions
    exact = gpu_dedup.deduplicate(table, RunConfig.preset("default", progress=False, cluster__near=False)).decisions
    reasons = set(exact["reason"].to_pylist())
    assert "near_duplicate" not in reasons and "exact_duplicate" in reasons
    assert np.asarray(exact["keep"]).sum() >= np.asarray(full["keep"]).sum()
    # byte verification agrees with the hash when there is no collision ...
    verified = gpu_dedup.deduplicate(table, RunConfig.preset("default", progress=False, cluster__exact_verify=True))
    assert verified.decisions.equals(full) and verified.stats["stages"]["exact"]["hash_collisions"] == 0
    # ... and splits a forced collision apart
    import gpu_dedup.lexical.signatures as ex  # pass 1 computes the exact hashes

    def colliding(norm, device="cpu"):
        return np.zeros((len(norm), 2), np.uint64)

    monkeypatch.setattr(ex, "exact_hashes", colliding)
    t = pa.table({"id": ["a", "b", "c"], "text": ["alpha beta", "gamma delta", "ALPHA  beta"]})
    res = gpu_dedup.deduplicate(t, RunConfig.preset("default", progress=False, cluster__exact_verify=True))
    assert res.decisions["keep"].to_pylist() == [True, True, False]
    assert res.stats["stages"]["exact"]["hash_collisions"] == 1


def test_verification_uses_pass_1_text_when_it_fits(tmp_path, monkeypatch):
    """Pass 1's normalized text, kept within cache_bytes, serves verification: the input is not read a second
    time, and the decisions equal a run that re-reads it (cache_bytes=0) and one whose cache overflows."""
    from gpu_dedup import io

    t = make_corpus(400, seed=3)
    for k in range(2):
        pq.write_table(t.slice(k * 200, 200), tmp_path / f"p{k}.parquet")
    src = [str(tmp_path / "p0.parquet"), str(tmp_path / "p1.parquet")]
    cfg = RunConfig(progress=False, batch_bytes=4096)
    real_iter_rows = io.iter_rows
    reads = []
    def counting_iter_rows(*args, **kwargs):
        reads.append(1)
        yield from real_iter_rows(*args, **kwargs)

    monkeypatch.setattr(io, "iter_rows", counting_iter_rows)
    kept = gpu_dedup.deduplicate(src, cfg)
    st = kept.stats["stages"]
    assert st["verify"]["text"] == "kept from pass 1" and not reads
    assert st["text_cache"]["used_for_verification"] and st["text_cache"]["rows"] == 400
    assert 0 < st["text_cache"]["kept_bytes"] <= st["text_cache"]["budget_bytes"]
    assert kept.stats["bytes_read"]["verification_text"] == 0
    assert kept.stats["bytes_read"]["pass1_text"] == kept.stats["read"]["bytes_text"] > 0
    reread = gpu_dedup.deduplicate(src, cfg.replace(cache_bytes=0), tmp_path / "out")
    assert reads and reread.stats["stages"]["verify"]["text"] == "re-read from the input"
    # the second read scans every batch again (the candidates are spread over all of them)
    assert reread.stats["bytes_read"]["verification_text"] == reread.stats["read"]["bytes_text"]
    assert reread.stats["bytes_read"]["deduplicated_input_files"] == sum(os.path.getsize(p) for p in src)
    assert reread.stats["stages"]["text_cache"]["not_used_because"] == "cache_bytes=0"
    small = gpu_dedup.deduplicate(src, cfg.replace(cache_bytes=5000))
    assert small.stats["stages"]["text_cache"]["rows"] > 0  # a prefix held and used: why it is partial
    assert "text exceeds cache_bytes=5,000 (from the Parquet metadata)" in \
        small.stats["stages"]["text_cache"]["partial_because"]
    # JSON Lines: no size known before reading; the cache fills to its budget and keeps that prefix
    t.select(["id", "text"]).to_pandas().to_json(tmp_path / "c.jsonl", orient="records", lines=True)
    spill = gpu_dedup.deduplicate(str(tmp_path / "c.jsonl"), cfg.replace(cache_bytes=5000))
    assert spill.stats["stages"]["text_cache"]["partial_because"] == "the normalized text exceeds cache_bytes=5,000"
    assert spill.decisions.drop_columns(["source"]).equals(kept.decisions.drop_columns(["source"]))
    assert kept.decisions.equals(reread.decisions) and kept.decisions.equals(small.decisions)
    assert kept.removed > 0
    with pytest.raises(ValueError, match="cache_bytes must be"):
        RunConfig(cache_bytes=True)
    with pytest.raises(ValueError, match="cache_bytes must be"):
        RunConfig(cache_bytes=-1)


def test_verification_takes_the_prefix_the_cache_holds_and_rereads_the_files_after_it(tmp_path, monkeypatch):
    """A cache too small for the run keeps its first batches: verification takes their candidates from it and
    re-reads only the files after the ones it holds whole; decisions equal a run that re-reads everything."""
    from gpu_dedup import io

    t = make_corpus(800, seed=5)
    src = []
    for k in range(4):
        pq.write_table(t.slice(k * 200, 200), tmp_path / f"p{k}.parquet")
        src.append(str(tmp_path / f"p{k}.parquet"))
    cfg = RunConfig(progress=False, batch_bytes=4096)
    real_iter_rows = io.iter_rows
    reread_files = []

    def recording_iter_rows(files, rows, **kwargs):
        reread_files.append([f.relpath for f in files])
        assert len(rows) and rows.min() >= 0
        yield from real_iter_rows(files, rows, **kwargs)

    monkeypatch.setattr(io, "iter_rows", recording_iter_rows)
    whole = gpu_dedup.deduplicate(src, cfg.replace(cache_bytes=0))
    assert reread_files == [[os.path.basename(p) for p in src]]
    full = whole.stats["bytes_read"]["verification_text"]
    reread_files.clear()
    budget = whole.stats["read"]["bytes_text"] // 2
    part = gpu_dedup.deduplicate(src, cfg.replace(cache_bytes=budget))
    st = part.stats["stages"]
    assert 0 < st["text_cache"]["rows"] < 800 and st["text_cache"]["used_for_verification"]
    # the prefix was used: run.json says why it is partial, not that it was unused
    assert "from the Parquet metadata" in st["text_cache"]["partial_because"]
    assert "not_used_because" not in st["text_cache"]
    assert st["verify"]["text"].startswith(f"rows < {st['text_cache']['rows']} kept from pass 1")
    skipped = st["text_cache"]["rows"] // 200  # the files the cache holds whole are not read again
    assert skipped >= 1 and reread_files == [[os.path.basename(p) for p in src[skipped:]]]
    assert 0 < part.stats["bytes_read"]["verification_text"] < full
    # near duplicates on both sides of the prefix's end: both ways of getting the sets were used
    lsh_rows = np.flatnonzero(~np.isnan(np.asarray(part.decisions["jaccard"].to_pylist(), float)))
    assert (lsh_rows < st["text_cache"]["rows"]).any() and (lsh_rows >= st["text_cache"]["rows"]).any()
    assert part.decisions.equals(whole.decisions) and part.removed > 0


def test_result_gives_the_kept_rows_of_the_callers_table():
    import pandas as pd

    seven = "one two three four five six seven"
    rows = {"id": ["a", "b", "c", "d"], "text": [seven, seven, "other words entirely here now and then", "x"],
            "extra": [1, 2, 3, 4]}
    table = pa.table(rows)
    res = gpu_dedup.deduplicate(table)
    assert res.keep_mask.tolist() == [True, False, True, True]
    assert res.kept_ids().to_pylist() == ["a", "c", "d"]
    assert res.filter(table).column("extra").to_pylist() == [1, 3, 4]
    df = pd.DataFrame(rows)
    assert res.filter(df)["extra"].tolist() == [1, 3, 4]
    with pytest.raises(ValueError, match="3 rows but this run decided 4"):
        res.filter(table.slice(0, 3))
    with pytest.raises(TypeError, match="pyarrow Table or a pandas DataFrame"):
        res.filter([1, 2, 3, 4])


def test_jaccard_is_with_the_kept_representative_also_for_copies_of_a_removed_document():
    """A kept; B a near copy of A (removed for A); C an exact copy of B; D an exact copy of A. The jaccard column
    is J with representative_id: C carries J(B, A) < 1 (it has B's shingles), D carries 1.0."""
    from gpu_dedup.testing.reference import shingle_sets

    words = [f"w{i}" for i in range(60)]
    a = " ".join(words)
    b = " ".join(words[:57] + ["zz", "yy", "xx"])
    table = pa.table({"id": ["A", "B", "C", "D"], "text": [a, b, b, a]})
    d = gpu_dedup.deduplicate(table, cluster__threshold=0.8).decisions.to_pylist()
    sa, sb = shingle_sets([a, b], n=5)
    j_ab = len(sa & sb) / len(sa | sb)
    assert 0.8 <= j_ab < 1
    by = {r["id"]: r for r in d}
    assert by["B"]["reason"] == "near_duplicate" and by["B"]["jaccard"] == pytest.approx(j_ab)
    assert by["C"]["reason"] == "exact_duplicate" and by["C"]["matched_id"] == "B"
    assert by["C"]["representative_id"] == "A" and by["C"]["jaccard"] == pytest.approx(j_ab)
    assert by["D"]["reason"] == "exact_duplicate" and by["D"]["jaccard"] == 1.0


def _cluster_reference(base: list[dict], larger_than, copies: int) -> list[bool]:
    """Brute force over the default run's clusters (input order = keep order): which rows stay."""
    members: dict[int, list[int]] = {}
    for i, r in enumerate(base):
        members.setdefault(r["cluster_id"], []).append(i)
    keep = [r["keep"] for r in base]
    for rows in members.values():
        if larger_than is not None and len(rows) <= larger_than:
            for i in rows:
                keep[i] = True
        for i in sorted(rows)[:copies]:
            keep[i] = True
    return keep


@pytest.mark.parametrize("larger_than,copies", [(None, 1), (2, 1), (3, 1), (None, 2), (None, 3), (2, 2)])
def test_cluster_size_aware_removal_against_a_brute_force_reference(larger_than, copies):
    table = make_corpus(400, seed=5)
    base = gpu_dedup.deduplicate(table, RunConfig(progress=False)).decisions.to_pylist()
    sizes = {}
    for r in base:
        sizes[r["cluster_id"]] = sizes.get(r["cluster_id"], 0) + 1
    assert {2, 3} <= set(sizes.values()) and max(sizes.values()) > 3  # the corpus has small and large clusters
    got = gpu_dedup.deduplicate(table, RunConfig(progress=False), cluster__remove_clusters_larger_than=larger_than,
                                cluster__keep_copies=copies).decisions.to_pylist()
    assert [r["keep"] for r in got] == _cluster_reference(base, larger_than, copies)
    for b, g in zip(base, got):
        # cluster columns are the default run's: every choice is reversible from the decisions alone
        assert (g["cluster_id"], g["cluster_size"], g["representative_id"], g["matched_id"]) == \
               (b["cluster_id"], b["cluster_size"], b["representative_id"], b["matched_id"])
        if g["keep"] and not b["keep"]:
            small = larger_than is not None and b["cluster_size"] <= larger_than
            assert g["reason"] == ("kept_small_cluster" if small else "kept_copy")
        else:
            assert g["reason"] == b["reason"]


def test_cluster_size_options_from_the_command_line(tmp_path, capsys):
    from gpu_dedup.cli import main

    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in make_corpus(200, seed=5).to_pylist()))
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--keep-copies", "2",
                 "--remove-clusters-larger-than", "3"]) == 0
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["config"]["cluster"]["keep_copies"] == 2
    assert run["config"]["cluster"]["remove_clusters_larger_than"] == 3
    page = (tmp_path / "o" / "report.html").read_text()
    assert "clusters of ≤ 3 documents (keep every member" in page and "up to 2" in page
    by = run["counts"]["by_reason"]
    assert by.get("kept_copy", 0) + by.get("kept_small_cluster", 0) > 0
    assert run["counts"]["kept"] == sum(pq.read_table(tmp_path / "o" / "decisions.parquet")["keep"].to_pylist())
    capsys.readouterr()
    assert main(["run", str(src), "-o", str(tmp_path / "o2"), "-q", "--keep-copies", "0"]) != 0
    err = capsys.readouterr().err
    assert "error: --keep-copies must be an int >= 1" in err and "--keep-copies: --keep-copies" not in err


def test_no_exact_with_exact_only_is_refused_not_a_run_that_removes_nothing(tmp_path, capsys):
    """--no-exact --exact-only ran no duplicate stage: 20 copies of one text were all kept, rc 0."""
    from gpu_dedup.cli import main

    src = tmp_path / "a.jsonl"
    text = "the same sentence of more than five words is copied into every document here"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": text}) + "\n" for i in range(20)))
    with pytest.raises(gpu_dedup.errors.ConfigError, match="ClusterConfig.exact=False with ClusterConfig.near=False"):
        gpu_dedup.deduplicate(str(src), RunConfig(progress=False).replace(cluster__exact=False, cluster__near=False))
    capsys.readouterr()
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--no-exact", "--exact-only"]) == 1
    err = capsys.readouterr().err
    assert "error: --no-exact with --exact-only leaves no duplicate stage to run" in err, err
    assert not (tmp_path / "o" / "decisions.parquet").exists()
    # each alone still runs; so does the pair with the semantic stage, which is then the duplicate stage
    assert main(["run", str(src), "-o", str(tmp_path / "o1"), "-q", "--exact-only"]) == 0
    assert main(["run", str(src), "-o", str(tmp_path / "o2"), "-q", "--no-exact"]) == 0
    gpu_dedup.lexical.dedup.check_arguments(RunConfig().replace(cluster__exact=False, cluster__near=False),
                                            semantic=True)


DATES = ["2023-06-01", "2024-05-01T12:30:00Z", "2024-05-01T14:00:00+02:00", "2021-01-01 00:00:00.5", None]


def _epoch(v):
    """The independent reference: Python's datetime (a value without a zone is UTC)."""
    import datetime as dt

    if v is None:
        return None
    t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    return (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).timestamp()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet-string", "parquet-timestamp", "table"])
def test_keep_max_an_iso_date_column_keeps_the_newest(tmp_path, fmt):
    """FineWeb processed crawls from new to old (seed 001): --keep max:<date column> keeps the newest copy."""
    text = "the same page crawled again and again across the snapshots of the web"
    rows = [{"id": f"d{i}", "text": text, "crawl_date": d} for i, d in enumerate(DATES)]
    want = max(range(len(DATES)), key=lambda i: -1e300 if _epoch(DATES[i]) is None else _epoch(DATES[i]))
    assert DATES[want] == "2024-05-01T12:30:00Z"  # 14:00+02:00 is 12:00 UTC: earlier, despite the larger clock
    if fmt == "jsonl":
        src = tmp_path / "a.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "table":
        src = pa.Table.from_pylist(rows)
    else:
        t = pa.Table.from_pylist(rows)
        if fmt == "parquet-timestamp":
            ts = pa.array([None if d is None else _epoch(d) * 1e6 for d in DATES], pa.float64())
            t = t.set_column(2, "crawl_date", ts.cast(pa.int64()).cast(pa.timestamp("us", tz="UTC")))
        src = tmp_path / "a.parquet"
        pq.write_table(t, src)
    res = gpu_dedup.deduplicate(src, RunConfig(progress=False), cluster__keep="max:crawl_date").decisions
    assert res["keep"].to_pylist() == [i == want for i in range(len(DATES))]


def test_a_keep_value_that_is_no_date_names_file_and_line(tmp_path):
    text = "the same page crawled again and again across the snapshots of the web"
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": text, "crawl_date": d}) + "\n"
                           for i, d in enumerate(["2024-01-01", "yesterday"])))
    with pytest.raises(gpu_dedup.io.InputError, match="a.jsonl:2: keep column 'crawl_date': value 'yesterday' is "
                                                      "neither a number nor an ISO 8601 date"):
        gpu_dedup.deduplicate(src, RunConfig(progress=False), cluster__keep="max:crawl_date")
    pq.write_table(pa.table({"id": ["0", "1"], "text": [text, text], "crawl_date": ["2024-01-01", "2024-13-01"]}),
                   tmp_path / "b.parquet")
    with pytest.raises(gpu_dedup.io.InputError, match="b.parquet row 1: keep column 'crawl_date': value '2024-13-01'"):
        gpu_dedup.deduplicate(tmp_path / "b.parquet", RunConfig(progress=False), cluster__keep="max:crawl_date")


def test_case_sensitive_keys_keep_identifiers_that_differ_by_case_apart():
    """Seed 000 §5: "lowercasing code can merge distinct identifiers". normalize.lowercase=False (the CLI's
    --case-sensitive) keeps them apart, in the exact and the near-duplicate stages, on CPU and GPU, under a
    contract of its own; the exact family's contract is the one earlier runs (and their indexes) recorded."""
    from gpu_dedup.contract import contract, contract_fingerprint

    body = " ".join(f"x{i} = compute(x{i - 1}) + offset{i}" for i in range(1, 40))
    docs = [f"int getValue() {{ {body} }}", f"int GetValue() {{ {body} }}", f"int getValue() {{ {body} }}",
            f"INT GETVALUE() {{ {body.upper()} }}"]
    t = pa.table({"id": ["a", "b", "c", "d"], "text": docs})
    base = RunConfig(progress=False)
    folded = gpu_dedup.deduplicate(t, base).decisions
    assert folded["reason"].to_pylist() == ["representative"] + ["exact_duplicate"] * 3
    for device in ("cpu", "cuda"):  # cuda: the kernels under the simulator + strict backend
        cased = gpu_dedup.deduplicate(t, base, normalize__lowercase=False, device=device).decisions
        # b differs from a in one identifier's case: no longer an exact copy, still a near duplicate (J >= 0.8);
        # d, all upper case, shares no shingle with a and stays
        assert cased["reason"].to_pylist() == ["representative", "near_duplicate", "exact_duplicate", "unique"], \
            device
        assert 0.8 <= cased["jaccard"][1].as_py() < 1.0
    assert contract(base.replace(normalize__lowercase=False))["normalize"]["policy"] == "nfkc-cp-v1"
    # the exact family's contract is the one earlier runs recorded: unchanged by the lowercase and family fields
    assert contract_fingerprint(contract(base.replace(minhash__family="exact"))) == "429ff73788aa6e2a"


def test_run_json_timings_account_for_the_run_and_compilation_is_its_own_entry(tmp_path, monkeypatch):
    """Issue 23 item 5 / issue 28 item 8: run.json's timings add up to >= 95% of the run's wall time (the
    report included), and a first run's compilation is an entry of its own, outside docs/s (simulated here:
    the kernels are cached, so the compile step is the tiny warm-up run alone)."""
    import time

    from gpu_dedup.runtime import compiling

    rows = [{"id": f"d{i}", "text": f"document {i % 7} with some words in it " * (1 + i % 3)} for i in range(40)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = RunConfig(device="cpu")
    gpu_dedup.deduplicate(src, cfg, tmp_path / "warm")  # imports and caches done: the timed call is a run's own
    t = time.perf_counter()
    res = gpu_dedup.deduplicate(src, cfg, tmp_path / "o")
    wall = time.perf_counter() - t
    tm = json.loads((tmp_path / "o" / "run.json").read_text())["timings_s"]
    assert "report" in tm and "compile" not in tm
    parts = sum(v for k, v in tm.items() if k != "total")
    # this run takes ~40 ms: a few ms between the stages and, outside the clock, run.json's last write and the
    # outputs' manifest (fsyncs: ~20 ms on a VM) are shares that a real run does not see
    assert parts >= 0.95 * tm["total"] - 0.01 and tm["total"] >= 0.95 * wall - 0.05, (parts, tm, wall)
    assert res.stats["timings_s"] == tm
    monkeypatch.setattr(compiling, "uncached", lambda stages: 1)  # "a kernel is not cached yet"
    res = gpu_dedup.deduplicate(src, RunConfig(device="cpu"), tmp_path / "o2")
    tm = json.loads((tmp_path / "o2" / "run.json").read_text())["timings_s"]
    # the same few fixed milliseconds between the stages as above (the run is ~50 ms)
    assert tm["compile"] > 0 and sum(v for k, v in tm.items() if k != "total") >= 0.95 * tm["total"] - 0.01
    busy = tm["total"] - tm["report"] - tm["compile"]
    assert res.stats["throughput_docs_per_s"] == pytest.approx(len(rows) / busy, rel=1e-6)


def test_a_ray_runs_keep_mask_reads_the_keep_column_alone(tmp_path):
    """A Ray run's result reads its decisions only when asked for (``_FileDecisions``); its ``keep_mask`` (what a
    pipeline's span steps before dedup ask for) reads the keep column alone, equal to the table's, in either
    layout (one file, or the dataset's parts)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_dedup.lexical.dedup import _FileDecisions

    keep = np.array([True, False, True, True, False])
    t = pa.table({"id": [f"d{i}" for i in range(5)], "keep": keep, "reason": ["unique"] * 5})
    pq.write_table(t, tmp_path / "decisions.parquet")
    (tmp_path / "decisions").mkdir()
    pq.write_table(t.slice(0, 2), tmp_path / "decisions" / "part-00000.parquet")
    pq.write_table(t.slice(2), tmp_path / "decisions" / "part-00001.parquet")
    for path in (tmp_path / "decisions.parquet", tmp_path / "decisions"):
        res = _FileDecisions(str(path), {}, str(tmp_path))
        assert res.keep_mask.tolist() == keep.tolist() and res._table is None  # the table was not read
        assert res.decisions.equals(t) and res.keep_mask.tolist() == keep.tolist()
