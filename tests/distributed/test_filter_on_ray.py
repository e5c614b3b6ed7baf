"""filter --engine ray: per-file tasks whose outputs equal the local engine's byte for byte (scores.parquet,
filtered/, the cut logs, the audit's files) and whose run.json counts are the local run's, with every global
selection (perplexity keep=F per run and per language, CCNet's buckets, DSIR's top-k, stochastic retention's draws,
the retention table's percentiles, the audit's picks) found from per-file summaries; on inputs with ties across
files, a null text, an empty file and a repeated id (the local engine's error); killed workers and --resume; GPU
actors under the simulator."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import main

pytest.importorskip("ray")
fasttext = pytest.importorskip("fasttext")

WORDS = ("theorem proof lemma analysis measure integral function space operator bounded click buy cheap free "
         "offer deal discount now best price").split()


_V = np.random.default_rng(0)
VOCAB = ["".join(_V.choice(list("abcdefghij"), size=k)) for k in _V.integers(2, 7, 300)]


STOP = ("the", "and", "of", "to", "that", "with", "have", "be")


def _zipf(rng, n, lo=2, hi=24):
    p = 1.0 / np.arange(1, len(VOCAB) + 1)
    return [" ".join(rng.choice(VOCAB, size=rng.integers(lo, hi), p=p / p.sum())) for _ in range(n)]


def _long(rng, n):
    """Texts the Gopher rules mostly keep: 40 to 110 words, a few stop words, sentences ending in a period."""
    out = []
    for t in _zipf(rng, n, 40, 110):
        words = t.split()
        for i in range(0, len(words), 9):
            words[i] = STOP[i % len(STOP)]
        out.append(" ".join(w + ("." if i % 12 == 11 else "") for i, w in enumerate(words)) + ".")
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Models (an LM, a quality classifier), a DSIR target and a corpus of 4 files: Parquet with a null text,
    JSON Lines, an empty Parquet file and another JSON Lines; duplicated texts tie across files."""
    d = tmp_path_factory.mktemp("filter")
    rng = np.random.default_rng(3)
    (d / "ref.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in _zipf(rng, 300)))
    assert main(["train-lm", str(d / "ref.jsonl"), "-o", str(d / "m.arpa"), "--order", "2", "--device", "cpu",
                 "-q"]) == 0
    lines = []
    for i in range(600):
        good = i % 2 == 0
        words = rng.choice(WORDS[:10] if good else WORDS[10:], size=rng.integers(6, 14)).tolist()
        lines.append(f"__label__{'hq' if good else 'lq'} {' '.join(words)}\n")
    (d / "q.txt").write_text("".join(lines))
    fasttext.train_supervised(str(d / "q.txt"), epoch=3, dim=8, minn=2, maxn=3, bucket=3000, thread=1, seed=1,
                              verbose=0).save_model(str(d / "q.bin"))
    (d / "target.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in _zipf(rng, 60)))
    texts = _long(rng, 100) + _zipf(rng, 50)
    texts = [texts[i] for i in rng.permutation(150)]
    for i in range(0, 150, 7):
        texts[i] = texts[(i * 31) % 150]  # ties: the same text, the same scores, in other files
    for i in range(1, 150, 3):  # a second paragraph and some classifier words: paragraphs to cut, scores
        texts[i] = texts[i] + "\n\n" + " ".join(rng.choice(WORDS, size=8)) + "\n" + texts[(i * 7) % 150]
    texts[5] = ""
    src = d / "in"
    src.mkdir()
    ids = [f"d{i}" for i in range(150)]
    pq.write_table(pa.table({"id": ids[:60], "text": pa.array(texts[:59] + [None]),
                             "site": [f"s{i % 3}" for i in range(60)]}), src / "a.parquet")
    (src / "b.jsonl").write_text("".join(json.dumps({"id": i, "text": t, "site": f"s{k % 2}"}) + "\n"
                                         for k, (i, t) in enumerate(zip(ids[60:110], texts[60:110]))))
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string()),
                             "site": pa.array([], pa.string())}), src / "c.parquet")
    (src / "d.jsonl").write_text("".join(json.dumps({"id": i, "text": t, "site": "s9"}) + "\n"
                                         for i, t in zip(ids[110:], texts[110:])))
    return d


def _files(root, sub):
    return sorted(p.relative_to(root / sub) for p in (root / sub).rglob("*") if p.is_file())


RUN_KEYS = ("counts", "retention", "selections", "retained_tokens", "perplexity_rank", "perplexity_by_language",
            "sources", "audit", "paragraphs", "c4_lines", "filtered", "models", "order", "read", "inputs")


def _same(a, b):
    """Every output of a local run (a) and a Ray run (b) the same: the tables byte for byte, run.json's counts."""
    if not (b / "scores.parquet").exists():  # the Ray engine's default: scores/ of one part per file with rows
        sa, sb = pq.read_table(a / "scores.parquet"), pq.read_table(b / "scores")
        assert sb.equals(sa) and sb.schema.metadata == sa.schema.metadata
    for name in ("scores.parquet", "paragraphs.parquet", "removed_paragraphs.parquet", "removed_lines.parquet",
                 "audit.parquet", "audit_percentiles.parquet"):
        if name == "scores.parquet" and not (b / name).exists():
            continue
        assert (a / name).exists() == (b / name).exists(), name
        if (a / name).exists():
            assert pq.read_table(b / name).equals(pq.read_table(a / name)), name
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "filtered").exists() == (b / "filtered").exists()
    if (a / "filtered").exists():
        assert _files(a, "filtered") == _files(b, "filtered")
        for rel in _files(a, "filtered"):
            assert (a / "filtered" / rel).read_bytes() == (b / "filtered" / rel).read_bytes(), rel
    ra, rb = (json.loads((p / "run.json").read_text()) for p in (a, b))
    for k in RUN_KEYS:
        assert ra.get(k) == rb.get(k), k
    if "dsir" in ra:
        assert {k: v for k, v in ra["dsir"].items() if k != "target_screen"} == \
            {k: v for k, v in rb["dsir"].items() if k != "target_screen"}
    for col, sr in (ra.get("stochastic_retention") or {}).items():  # a float sum: the same up to its rounding
        got = rb["stochastic_retention"][col]
        want = sr["expected_retention"]  # (None: no document)
        assert got["expected_retention"] == (want if want is None else pytest.approx(want, rel=1e-12))
        assert {k: v for k, v in got.items() if k != "expected_retention"} == \
            {k: v for k, v in sr.items() if k != "expected_retention"}
    assert rb["engine"]["name"] == "ray" and ra["engine"] == {"name": "local"}
    return ra, rb


def _run(args, out, *more):
    if "--engine" not in more and "--table-layout" in args:  # the local engine's only layout: one file
        i = args.index("--table-layout")
        args = args[:i] + args[i + 2:]
    assert main(["filter", *args, "-o", str(out), "-q", "--on-error", "skip", *more]) == 0


@pytest.fixture
def no_report(monkeypatch):
    # report.html (slow: matplotlib; tested in tests/filters) is made from these same outputs
    monkeypatch.setattr("gpu_dedup.filters.report.write_filter_report", lambda out: None)


@pytest.mark.parametrize("flags", [
    # every rank selection at once: perplexity keep=F (ties across files), buckets, a classifier's stochastic
    # retention (draws by the run's row), rules, DSIR's fraction of the pool, the audit's sample and percentiles
    ["--rules", "gopher", "--perplexity", "{lm}:keep=0.4", "--perplexity-buckets", "0.3,0.7",
     "--min-perplexity-tokens", "3", "--classifier", "quality={q}:pareto=3", "--classifier-label", "quality=hq",
     "--dsir-target", "{target}", "--select", "0.5", "--audit", "5", "--seed", "7", "--table-layout", "file"],
    # paragraph removal: the paragraphs ranked (keep=F over paragraphs), cut, logged; DSIR asked for a count
    ["--perplexity", "{lm}:keep=0.5", "--unit", "paragraph", "--paragraph-action", "remove",
     "--min-paragraph-tokens", "3", "--dsir-target", "{target}", "--select", "40", "--audit", "3"],
    # C4's line removal, a domain field, a source field
    ["--rules", "c4", "--c4-remove-lines", "--domain-field", "site", "--source-field", "site", "--audit", "4"],
])
def test_filter_on_ray_equals_local(cluster, data, tmp_path, no_report, flags):
    args = [str(data / "in")] + [f.format(lm=data / "m.arpa", q=data / "q.bin", target=data / "target.jsonl")
                                 for f in flags]
    _run(args, tmp_path / "local")
    _run(args, tmp_path / "ray", "--engine", "ray")
    ra, rb = _same(tmp_path / "local", tmp_path / "ray")
    assert 0 < ra["counts"]["kept"] < ra["counts"]["input"] == 149  # the null text skipped
    assert rb["engine"]["tasks"] == 4 and rb["engine"]["rank_rounds"] >= 2
    if "--perplexity-buckets" in flags:
        assert ra["perplexity_rank"]["kept"] > 0 and ra["dsir"]["selected"] > 0
        assert {"perplexity", "quality_score", "dsir_weight"} <= set(ra["counts"]["by_reason"])
    if "--paragraph-action" in flags:
        assert ra["paragraphs"]["removed_from_kept_documents"] > 0 and ra["perplexity_rank"]["ranked"] > 0
    if "--c4-remove-lines" in flags:
        assert ra["c4_lines"]["removed"] > 0 and len(ra["sources"]["sources"]) == 4


@pytest.mark.parametrize("flags", [
    ["--rules", "gopher", "--perplexity", "{lm}:keep=0.5", "--perplexity-buckets", "0.3,0.7", "--classifier",
     "quality={q}:pareto=3", "--classifier-label", "quality=hq", "--dsir-target", "{target}", "--select", "3",
     "--domain-field", "site", "--audit", "3"],
    ["--perplexity", "{lm}:keep=0.5", "--unit", "paragraph", "--paragraph-action", "remove", "--audit", "2"],
])
def test_filter_of_no_document(cluster, data, tmp_path, no_report, flags):
    """An input without a single document (an empty JSON Lines file, a Parquet file of no rows, a file whose only
    row is a null text, skipped): both engines decide nothing and write every table with no rows, in the run's
    schema (the Ray engine's scores/ one part), equal; the scorers' columns exist with no rows (no KeyError)."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text("")
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string()),
                             "site": pa.array([], pa.string())}), src / "b.parquet")
    (src / "c.jsonl").write_text(json.dumps({"id": "x", "text": None, "site": "s"}) + "\n")
    args = [str(src)] + [f.format(lm=data / "m.arpa", q=data / "q.bin", target=data / "target.jsonl") for f in flags]
    _run(args, tmp_path / "local")
    _run(args, tmp_path / "ray", "--engine", "ray")
    ra, _ = _same(tmp_path / "local", tmp_path / "ray")
    assert ra["counts"]["input"] == 0 and ra["read"]["skipped"][0]["file"] == "c.jsonl"
    assert len(pq.read_schema(tmp_path / "local" / "scores.parquet").names) > 5  # the scorers' columns too
    assert [p.name for p in (tmp_path / "ray" / "scores").iterdir()] == ["part-000000.parquet"]


def test_perplexity_per_language_on_ray(cluster, tmp_path, no_report):
    """One perplexity model per language (routed by the LID label): the rank and the buckets per language."""
    rng = np.random.default_rng(5)
    vocab = {lang: ["".join(rng.choice(list(letters), size=rng.integers(3, 7))) for _ in range(200)]
             for lang, letters in (("en", "abcdefg"), ("de", "hijklmn"), ("fr", "opqrstu"))}
    zipf = 1.0 / np.arange(1, 201)

    def text(lang, n):
        return " ".join(rng.choice(vocab[lang], size=n, p=zipf / zipf.sum()))

    (tmp_path / "lid.txt").write_text("".join(f"__label__{lang} {text(lang, 8)}\n" for _ in range(200)
                                              for lang in vocab))
    fasttext.train_supervised(str(tmp_path / "lid.txt"), epoch=5, dim=8, minn=2, maxn=3, bucket=3000, thread=1,
                              seed=1, verbose=0).save_model(str(tmp_path / "lid.bin"))
    arpa = {}
    for lang in ("en", "de"):
        (tmp_path / f"{lang}.jsonl").write_text("".join(json.dumps({"text": text(lang, 10)}) + "\n"
                                                        for _ in range(300)))
        arpa[lang] = tmp_path / f"{lang}.arpa"
        assert main(["train-lm", str(tmp_path / f"{lang}.jsonl"), "-o", str(arpa[lang]), "--order", "2",
                     "--device", "cpu", "-q"]) == 0
    src = tmp_path / "in"
    src.mkdir()
    langs = ["en", "de", "fr"] * 20
    texts = [text(lang, int(rng.integers(3, 10))) for lang in langs]
    for k in range(3):
        (src / f"p{k}.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": texts[i]}) + "\n"
                                                 for i in range(k * 20, k * 20 + 20)))
    args = [str(src), "--lid", str(tmp_path / "lid.bin"), "--perplexity",
            f"en={arpa['en']},de={arpa['de']}:keep=0.5", "--perplexity-buckets", "0.33,0.67",
            "--min-perplexity-tokens", "0", "--audit", "2"]
    _run(args, tmp_path / "local")
    _run(args, tmp_path / "ray", "--engine", "ray")
    ra, _ = _same(tmp_path / "local", tmp_path / "ray")
    assert ra["perplexity_by_language"] == {"en": 20, "de": 20, "(no model)": 20}
    assert ra["perplexity_rank"]["by_language"]["en"]["kept"] == 10


def test_filter_on_ray_survives_killed_workers_and_resumes(cluster, data, tmp_path, no_report):
    """A worker killed in pass 1 and one in the final pass (after writing, before the marker): their tasks run
    again; a resumed run reuses every scoring task; the outputs are the local run's."""
    args = [str(data / "in"), "--rules", "gopher", "--perplexity", f"{data / 'm.arpa'}:keep=0.5",
            "--min-perplexity-tokens", "3", "--audit", "3"]
    _run(args, tmp_path / "local")
    for stage in ("fscore", "ffinal"):
        (cluster / f"ray-{stage}").touch()
    _run(args, tmp_path / "ray", "--engine", "ray")
    assert (cluster / "ray-fscore.fired").exists() and (cluster / "ray-ffinal.fired").exists()
    _same(tmp_path / "local", tmp_path / "ray")
    _run(args, tmp_path / "ray", "--engine", "ray", "--resume", "--overwrite")
    _, rb = _same(tmp_path / "local", tmp_path / "ray")
    assert rb["engine"]["tasks_reused"] == 4


def test_filter_on_ray_gpu_actors_equal_cpu(cluster, data, tmp_path, no_report):
    """--device cuda: pass 1 and DSIR's weights on the GPU actors (the simulator, one declared GPU): the CPU run's
    scores and decisions."""
    args = [str(data / "in"), "--rules", "gopher", "--dsir-target", str(data / "target.jsonl"), "--select", "0.5",
            "--audit", "0"]
    _run(args, tmp_path / "cpu", "--engine", "ray", "--device", "cpu")
    _run(args, tmp_path / "gpu", "--engine", "ray", "--device", "cuda")
    assert pq.read_table(tmp_path / "gpu" / "scores").equals(pq.read_table(tmp_path / "cpu" / "scores"))
    run = json.loads((tmp_path / "gpu" / "run.json").read_text())
    assert run["device"] == "cuda" and run["engine"]["device_workers"] == 1
    assert run["engine"]["device_array_backends"] == ["strict"]  # the actors ran the device code, not NumPy


def test_filter_on_ray_errors_are_the_local_engines(cluster, tmp_path, capsys):
    """A repeated id across files: the local engine's message, word for word; a source over the limit: the
    same verdict and no filtered/."""
    src = tmp_path / "dup"
    src.mkdir()
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["one two three four", "five six seven"]}), src / "1.parquet")
    pq.write_table(pa.table({"id": ["c", "a"], "text": ["eight nine ten", "eleven twelve"]}), src / "2.parquet")
    for engine, out in (("local", "l"), ("ray", "r")):
        assert main(["filter", str(src), "-o", str(tmp_path / out), "--rules", "gopher", "--engine", engine,
                     "-q"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert "'a' (2 times" in err[0] and err[0] == err[1]


def test_run_filter_flags_with_stochastic_retention_on_ray_equal_local(cluster, data, tmp_path):
    """`gpu-dedup run --classifier NAME=MODEL:pareto=A --engine ray` (was refused): a count task per file first, so
    that each sign task draws the retention by the run's row as the local engine does; the decisions, scores and
    kept records equal the local run's. A worker killed in the count and in the sign stage: their tasks run again;
    resumed, every count and sign task is reused."""
    args = [str(data / "in"), "--classifier", f"quality={data / 'q.bin'}:pareto=3", "--classifier-label",
            "quality=hq", "--on-error", "skip", "-q"]
    assert main(["run", *args, "-o", str(tmp_path / "local")]) == 0
    ray_args = [*args, "-o", str(tmp_path / "ray"), "--engine", "ray", "--table-layout", "file", "--resume"]

    def same():
        for name in ("decisions.parquet", "scores.parquet"):
            assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
        assert _files(tmp_path / "local", "deduplicated") == _files(tmp_path / "ray", "deduplicated")
        for rel in _files(tmp_path / "local", "deduplicated"):
            assert (tmp_path / "ray" / "deduplicated" / rel).read_bytes() == \
                (tmp_path / "local" / "deduplicated" / rel).read_bytes(), rel
        ra, rb = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("local", "ray"))
        assert rb["counts"] == ra["counts"] and rb["prefilter"] == ra["prefilter"]
        by = ra["counts"]["by_reason"]
        assert 0 < by["filtered"] < ra["counts"]["input"] and by["representative"] > 0
        return rb

    for stage in ("count", "sign"):
        (cluster / f"ray-{stage}").touch()
    assert main(["run", *ray_args]) == 0
    for stage in ("count", "sign"):
        (cluster / f"ray-{stage}.fired").unlink()  # (missing: the worker was not killed)
    same()
    assert main(["run", *ray_args]) == 0  # resumed
    assert same()["engine"]["sign_tasks_reused"] == 4


def test_a_ray_filters_columns_are_read_alone(tmp_path):
    """A Ray filter's result reads its scores only when asked for (``FilterParts``): a pipeline's verdicts ask for
    three columns, which are read alone (from OUT's file or dataset), equal to the whole table's."""
    from gpu_dedup.distributed.filter import FilterParts

    t = pa.table({"id": ["a", "b", "c"], "row": [0, 1, 2], "keep": [True, False, True],
                  "reason": [None, "gopher", None], "perplexity": [1.0, 2.0, 3.0]})
    (tmp_path / "scores").mkdir()
    pq.write_table(t.slice(0, 1), tmp_path / "scores" / "part-00000.parquet")
    pq.write_table(t.slice(1), tmp_path / "scores" / "part-00001.parquet")
    pq.write_table(t, tmp_path / "scores.parquet")
    for path in ("scores.parquet", "scores"):
        res = FilterParts({"scores": {"path": path}}, str(tmp_path), None, [0, 3])
        got = res.columns(["id", "keep", "reason"])
        assert got.column_names == ["id", "keep", "reason"] and res._table is None  # the rest was not read
        assert got.equals(t.select(["id", "keep", "reason"])) and res.scores.equals(t)
        assert res.columns(["keep"]).equals(t.select(["keep"]))
