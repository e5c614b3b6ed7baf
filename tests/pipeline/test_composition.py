"""The one engine (gpu_dedup/pipeline/engine.py) and its composition rule, held for every ordered pair of dedup steps
(exact, MinHash, paragraph, substring, semantic) and keep orders on random corpora with planted copies: every input
document once in the decisions; every removed row names a kept representative (or, removed by a test, none); no
duplicate group loses every copy; a later step sees exactly the documents the earlier ones kept; every span cut keeps
a copy in a document kept at the end. Then resume by step, the span steps' second run over the survivors, a filter
after dedup, an in-memory source and the errors."""
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.config import RunConfig
from gpu_dedup.errors import ConfigError
from gpu_dedup.filters.config import FilterConfig
from gpu_dedup.filters.program import Filter
from gpu_dedup.lexical.program import Dedup
from gpu_dedup.paragraph.dedup import ParagraphConfig
from gpu_dedup.paragraph.program import Paragraph
from gpu_dedup.pipeline import Pipeline
from gpu_dedup.pipeline.engine import plan
from gpu_dedup.substring.config import SubstringConfig
from gpu_dedup.substring.program import Substring

WORDS = ("the quick brown fox jumps over lazy dog river stone market bread city night music winter garden engine "
         "paper light water field house table chair window summer autumn spring road train plane").split()


def corpus(seed: int, n: int = 36) -> list[dict]:
    """Documents of 3-5 paragraphs from a small vocabulary, with exact copies, near copies (a word changed), shared
    boilerplate paragraphs and shared long spans planted, in shuffled order."""
    rng = np.random.default_rng(seed)

    def para(k: int) -> str:
        return " ".join(rng.choice(WORDS, size=k))

    shared = [para(14) for _ in range(3)]  # boilerplate paragraphs some documents carry
    docs: list[str] = []
    for i in range(n):
        r = rng.random()
        if docs and r < 0.15:
            docs.append(docs[int(rng.integers(0, len(docs)))])  # an exact copy
        elif docs and r < 0.35:
            words = docs[int(rng.integers(0, len(docs)))].split(" ")
            words[int(rng.integers(0, len(words)))] = str(rng.choice(WORDS))
            docs.append(" ".join(words))  # a near copy
        else:
            parts = [para(int(rng.integers(10, 20))) for _ in range(int(rng.integers(3, 6)))]
            if rng.random() < 0.5:
                parts.insert(int(rng.integers(0, len(parts))), shared[int(rng.integers(0, 3))])
            docs.append("\n".join(parts))
    return [{"id": f"d{i:03d}", "text": t} for i, t in enumerate(docs)]


def write_jsonl(path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    for mod in ("torch", "sentence_transformers", "transformers", "tokenizers"):
        pytest.importorskip(mod)
    from gpu_dedup.testing.models import build_random_model

    return build_random_model(tmp_path_factory.mktemp("tiny") / "model", words=WORDS, max_seq_length=64)


def make_step(kind: str, keep: str, model: str | None):
    if kind == "exact":
        return Dedup(RunConfig(progress=False).replace(cluster__near=False, cluster__keep=keep))
    if kind == "minhash":
        return Dedup(RunConfig(progress=False).replace(cluster__threshold=0.7, cluster__keep=keep))
    if kind == "paragraph":
        return Paragraph(ParagraphConfig(min_paragraph_bytes=8))
    if kind == "substring":
        return Substring(SubstringConfig(min_tokens=8, keep=keep))
    if kind == "semantic":
        from gpu_dedup.semantic import SemanticConfig
        from gpu_dedup.semantic.program import Semantic

        return Semantic(SemanticConfig(model=model, eps=0.02, n_clusters=2, keep="hard" if keep == "first" else "easy"))
    raise AssertionError(kind)


def final_texts(out, sub: str = "deduplicated") -> dict[str, str]:
    texts = {}
    for root, _, files in os.walk(os.path.join(out, sub)):
        for f in files:
            for line in open(os.path.join(root, f), encoding="utf-8"):
                r = json.loads(line)
                texts[r["id"]] = r["text"]
    return texts


def check_invariants(res, rows: list[dict]) -> None:
    """The composition rule's invariants on a finished pipeline run (module docstring)."""
    out = res.output_dir
    d = pq.read_table(os.path.join(out, "decisions.parquet")).to_pylist()
    assert [r["id"] for r in d] == [r["id"] for r in rows], "every input document once, in input order"
    kept = {r["id"] for r in d if r["keep"]}
    for r in d:
        if not r["keep"]:
            assert r["step"] is not None, r
            if r["representative_id"] is not None:
                assert r["representative_id"] in kept, f"{r['id']} names {r['representative_id']}, which is not kept"
            else:  # only a test's verdict removes without a representative
                assert r["step"] in ("filter", "screen"), r
    groups: dict[int, list[dict]] = {}
    for r in d:
        groups.setdefault(r["cluster_id"], []).append(r)
    for g in groups.values():  # a group keeps a copy, unless a test's verdict removed all of it
        assert any(r["keep"] for r in g) or all(r["representative_id"] is None for r in g), g
    # a later step saw exactly the documents the earlier ones kept
    main = [s for s in res.steps if s.phase != "final"]
    for a, b in zip(main, main[1:]):
        assert b.seen == a.seen - a.removed
    texts = final_texts(out)
    assert set(texts) == kept, "deduplicated/ holds exactly the kept documents"
    # every span cut keeps a copy in a document kept at the end (in the step's own output: a later span step may cut
    # that copy too, for a copy of its own)
    for s in res.steps:
        if s.kind != "span" or s.phase == "view":
            continue
        d_dir = os.path.join(out, s.directory)
        if s.name == "paragraph":
            spans = pq.read_table(os.path.join(d_dir, "removed_spans.parquet")).to_pylist()
            after = {i: t for i, t in final_texts(d_dir, "paragraph_deduplicated").items() if i in kept}
            for sp in spans:
                assert sp["id"] in kept
                unit = sp["cut_text"].strip()
                assert any(unit in t for t in after.values()), sp
        else:
            spans = pq.read_table(os.path.join(d_dir, "substring_spans.parquet")).to_pylist()
            for sp in spans:
                assert sp["id"] in kept and sp["kept_id"] in kept, sp


KINDS = ("exact", "minhash", "paragraph", "substring", "semantic")
PAIRS = [(a, b) for a in KINDS for b in KINDS if a != b]


@pytest.mark.parametrize("first, second", PAIRS)
def test_every_ordered_pair_of_dedup_steps_holds_the_composition_rule(first, second, tmp_path, request):
    model = request.getfixturevalue("tiny_model") if "semantic" in (first, second) else None
    for seed, keep in ((PAIRS.index((first, second)), "first"), (100 + PAIRS.index((first, second)), "longest")):
        rows = corpus(seed)
        src = write_jsonl(tmp_path / f"in{seed}" / "c.jsonl", rows)
        steps = [make_step(first, keep, model), make_step(second, keep, model)]
        res = Pipeline(steps, device="cpu").run(src, tmp_path / f"out{seed}")
        check_invariants(res, rows)


def _orphan_corpus() -> list[dict]:
    """C; A: C with one word changed (another paragraph), then P; B: another paragraph, then P."""
    words = list(np.random.default_rng(5).choice(WORDS, 200))
    changed = words[:100] + ["xylophone"] + words[101:]
    p = "a boilerplate paragraph that is long enough to be cut from later documents"
    return [{"id": "c", "text": " ".join(words)}, {"id": "a", "text": " ".join(changed) + "\n" + p},
            {"id": "b", "text": "something else entirely here and there\n" + p}]


def test_the_span_steps_run_again_over_the_survivors_so_no_cut_loses_its_copy(tmp_path):
    """C, then A (a near copy of C, then P: the first P), then B holding P. Paragraph dedup first cuts P from B
    (its copy is in A); the lexical stage then removes A for C. Without the second run P would be gone from every kept
    document; with it, P stays in B."""
    rows = _orphan_corpus()
    p = rows[1]["text"].split("\n")[1]
    src = write_jsonl(tmp_path / "in" / "c.jsonl", rows)
    steps = [Paragraph(ParagraphConfig(min_paragraph_bytes=8)),
             Dedup(RunConfig(progress=False).replace(cluster__threshold=0.7))]
    res = Pipeline(steps, device="cpu").run(src, tmp_path / "out")
    d = {r["id"]: r for r in res.decisions.to_pylist()}
    assert not d["a"]["keep"] and d["a"]["representative_id"] == "c"
    assert [(s.name, s.phase) for s in res.steps] == [("paragraph", "view"), ("dedup", "main"), ("paragraph", "final")]
    assert p in final_texts(res.output_dir)["b"]
    check_invariants(res, rows)
    assert plan(steps) == (1, [0])


def test_run_paragraph_before_keeps_every_cut_copy_and_writes_the_survivors_records(tmp_path):
    """The same corpus through `gpu-dedup run --paragraph-order before` (the flat layout): the second paragraph run
    writes OUT's paragraph outputs over the survivors, and deduplicated/ holds the survivors' own records."""
    from gpu_dedup.cli import main

    rows = _orphan_corpus()
    p = rows[1]["text"].split("\n")[1]
    src = write_jsonl(tmp_path / "in" / "c.jsonl", rows)
    out = tmp_path / "out"
    assert main(["run", src, "-o", str(out), "-q", "--paragraph-dedup", "--paragraph-order", "before",
                 "--min-paragraph-bytes", "8", "--threshold", "0.7"]) == 0
    cut = {json.loads(x)["id"]: json.loads(x)["text"] for x in (out / "paragraph_deduplicated" / "c.jsonl").open()}
    assert set(cut) == {"c", "b"} and p in cut["b"]
    verbatim = [json.loads(x) for x in (out / "deduplicated" / "c.jsonl").open()]
    assert verbatim == [rows[0], rows[2]]


def test_resume_reuses_every_finished_step_whose_settings_are_unchanged(tmp_path):
    rows = corpus(7)
    src = write_jsonl(tmp_path / "in" / "c.jsonl", rows)
    steps = [Dedup(RunConfig(progress=False)), Paragraph(ParagraphConfig(min_paragraph_bytes=8))]
    first = Pipeline(steps, device="cpu").run(src, tmp_path / "out")
    again = Pipeline(steps, device="cpu").run(src, tmp_path / "out", resume=True)
    assert [s.reused for s in again.steps] == [True, True]
    assert again.decisions.equals(first.decisions)
    changed = [steps[0], Paragraph(ParagraphConfig(min_paragraph_bytes=9))]
    third = Pipeline(changed, device="cpu").run(src, tmp_path / "out", resume=True)
    assert [s.reused for s in third.steps] == [True, False]
    # without --resume, a finished OUT is replaced (overwrite) or refused
    with pytest.raises(FileExistsError):
        Pipeline(steps, device="cpu").run(src, tmp_path / "out", overwrite=False)


def test_a_filter_after_dedup_takes_the_group_of_a_representative_it_removes(tmp_path):
    """The lexical stage keeps the first of two copies; a rule then removes that one: its copy shares the verdict
    (no kept representative to name), and no removed row names a removed document."""
    long_doc = " ".join(WORDS * 4)
    rows = [{"id": "x", "text": long_doc}, {"id": "y", "text": long_doc}, {"id": "z", "text": "short words here"}]
    src = write_jsonl(tmp_path / "in" / "c.jsonl", rows)
    rules = FilterConfig(rules="gopher", rule_thresholds=("gopher_word_count=1:60",))
    res = Pipeline([Dedup(RunConfig(progress=False)), Filter(rules)], device="cpu").run(src, tmp_path / "out")
    d = {r["id"]: r for r in res.decisions.to_pylist()}
    assert not d["x"]["keep"] and d["x"]["step"] == "filter" and d["x"]["representative_id"] is None
    assert not d["y"]["keep"] and d["y"]["reason"] == d["x"]["reason"] and d["y"]["matched_id"] == "x"
    assert d["y"]["representative_id"] is None
    check_invariants(res, rows)


def test_an_in_memory_table_and_the_outputs(tmp_path):
    rows = corpus(3)
    res = Pipeline([Dedup(RunConfig(progress=False))], device="cpu").run(pa.Table.from_pylist(rows), tmp_path / "o")
    out = tmp_path / "o"
    for f in ("decisions.parquet", "run.json", "report.html", "deduplicated", "steps/01-dedup/decisions.parquet"):
        assert (out / f).exists(), f
    stats = json.loads((out / "run.json").read_text())
    assert stats["program"] == "pipeline" and stats["counts"]["input"] == len(rows)
    assert stats["counts"]["kept"] + stats["counts"]["removed"] == len(rows)
    assert "Steps" in (out / "report.html").read_text()
    assert res.kept == stats["counts"]["kept"] and len(res.filter(pa.Table.from_pylist(rows))) == res.kept


def test_bad_steps_and_engines_are_refused():
    with pytest.raises(ConfigError, match="at least one step"):
        Pipeline([])
    with pytest.raises(ConfigError, match="no pipeline step"):
        Pipeline([RunConfig()])
    with pytest.raises(ConfigError, match="engine"):
        Pipeline([Dedup()]).run("x", "y", engine="spark")
    with pytest.raises(ConfigError, match="RunConfig"):
        Dedup(ParagraphConfig())


@pytest.mark.parametrize("order", [("minhash", "paragraph", "substring"), ("paragraph", "minhash", "substring"),
                                   ("paragraph", "substring", "minhash")])
def test_a_flat_run_with_one_removing_step_builds_no_verdicts(order, tmp_path, monkeypatch):
    """`gpu-dedup run --paragraph-dedup --substring-dedup` (dedup and the span steps, before or after it, in one
    flat OUT) has nothing to compose: no step's per-document verdicts are built while it runs (a Ray run's driver
    never holds them; the span steps before dedup run again over the survivors chosen by dedup's keep flags), and
    the result's decisions, composed when asked, equal the steps layout's composed decisions."""
    import gpu_dedup.lexical.program as lexical_program
    import gpu_dedup.paragraph.program as paragraph_program
    import gpu_dedup.substring.program as substring_program
    from gpu_dedup.pipeline.engine import run_pipeline
    from gpu_dedup.runtime.program import Env

    rows = corpus(7)
    src = write_jsonl(tmp_path / "in" / "c.jsonl", rows)
    steps = [make_step(kind, "first", None) for kind in order]
    composed = Pipeline(steps, device="cpu").run(src, tmp_path / "steps")
    built: list[str] = []
    for mod, name in ((lexical_program, "decision_verdicts"), (paragraph_program, "span_verdicts"),
                      (substring_program, "span_verdicts")):
        monkeypatch.setattr(mod, name, lambda *a, _real=getattr(mod, name), _mod=mod.__name__:
                            built.append(_mod) or _real(*a))
    flat = run_pipeline(steps, src, tmp_path / "flat", env=Env(device="cpu", progress=False), layout="flat",
                        command="run")
    assert built == []
    assert [(s.name, s.phase, s.seen, s.removed) for s in flat.steps] == \
        [(s.name, s.phase, s.seen, s.removed) for s in composed.steps]
    assert composed.stats["counts"]["removed"] > 0 and {k: flat.stats["counts"][k] for k in
                                                        ("input", "kept", "removed", "by_step")} == \
        {k: composed.stats["counts"][k] for k in ("input", "kept", "removed", "by_step")}
    assert flat.decisions.equals(composed.decisions)
    assert built == ["gpu_dedup.lexical.program"]  # the dedup step's, when asked for
    assert [s.phase for s in flat.steps].count("view") == order.index("minhash")  # a cut for the dedup step
    finals = {s.name: s.directory for s in composed.steps if s.phase == "final"}
    for f, name in (("removed_spans.parquet", "paragraph"), ("substring_spans.parquet", "substring")):
        # the span steps' last outputs (over the survivors), in OUT itself
        assert pq.read_table(tmp_path / "flat" / f).equals(
            pq.read_table(os.path.join(composed.output_dir, finals[name], f))), f
    kept = set(flat.decisions.filter(flat.decisions["keep"])["id"].to_pylist())
    assert final_texts(tmp_path / "flat") == {r["id"]: r["text"] for r in rows if r["id"] in kept}  # their own


def test_a_dedup_step_against_an_index_names_every_removals_representative(tmp_path):
    """A recipe's dedup step run --against an index: removals of the index's duplicates name its document, and
    every other removal a document the run kept, in that document's cluster (was: the index's ids and clusters,
    passed to the fold for its own duplicates, blanked the representative and cluster of every other removal)."""
    from gpu_dedup.lexical.dedup import deduplicate

    rows = corpus(11, 60)
    old = write_jsonl(tmp_path / "old" / "a.jsonl", rows[:20])
    deduplicate(old, RunConfig(progress=False), str(tmp_path / "idxrun"), save_index=str(tmp_path / "index"))
    new = write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": "n" + r["id"], "text": r["text"]} for r in rows])
    d = Pipeline([Dedup(RunConfig(progress=False), against=str(tmp_path / "index"))], device="cpu").run(
        new, tmp_path / "out").decisions.to_pylist()
    kept = {r["id"]: r["cluster_id"] for r in d if r["keep"]}
    gone = [r for r in d if not r["keep"]]
    index = [r for r in gone if r["representative_id"] not in kept]
    own = [r for r in gone if r["representative_id"] in kept]
    assert index and own and len(index) + len(own) == len(gone)
    assert all(r["representative_id"] in {x["id"] for x in rows[:20]} for r in index)
    assert all(r["cluster_id"] == kept[r["representative_id"]] for r in own)


def test_a_recipes_run_json_lists_what_its_first_step_skipped(tmp_path):
    """A recipe's decisions are the documents its first step read: run.json's ``read`` lists the records that read
    skipped (it said only the row count; the list was left in the first step's own directory)."""
    import json

    from gpu_dedup import Pipeline, RunConfig
    from gpu_dedup.lexical.program import Dedup
    from gpu_dedup.paragraph.dedup import ParagraphConfig
    from gpu_dedup.paragraph.program import Paragraph
    from gpu_dedup.runtime.program import Reading

    src = tmp_path / "in.jsonl"
    rows = [json.dumps({"id": f"d{i}", "text": f"document number {i} " + "word " * 30}) for i in range(4)]
    src.write_text("\n".join(rows[:1] + ["{not json"] + rows[1:]) + "\n")
    res = Pipeline([Paragraph(ParagraphConfig(min_paragraph_bytes=20)), Dedup(RunConfig(progress=False))],
                   device="cpu", progress=False, reading=Reading(on_error="skip")).run(str(src), tmp_path / "out")
    read = json.loads((tmp_path / "out" / "run.json").read_text())["read"]
    assert read["rows"] == 4 and [(s["file"], s["line"]) for s in read["skipped"]] == [("in.jsonl", 2)]
    assert res.stats["read"] == read
