"""gpu_dedup/pipeline/compose.py: the Python API composes the span stages with the document stages in the stated order
(what ``gpu-dedup run --paragraph-dedup --paragraph-order ...`` does), over one owned OUT."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from gpu_dedup import RunConfig
from gpu_dedup.runtime.outputs import MANIFEST
from gpu_dedup.pipeline.compose import RunStages, check_composition, run_dedup
from gpu_dedup.paragraph.dedup import ParagraphConfig
from gpu_dedup.substring.config import SubstringConfig

CFG = RunConfig(device="cpu", progress=False)
BOILER = "Subscribe to our newsletter for weekly updates on everything."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    docs = [{"id": f"d{i}", "text": f"Title number {i} is here and long enough\n"
             + " ".join(f"w{i}_{k}" for k in range(40)) + f"\n{BOILER}"} for i in range(6)]
    docs.append({"id": "dup", "text": docs[0]["text"]})  # an exact copy of d0
    src = tmp_path_factory.mktemp("compose") / "in"
    src.mkdir()
    (src / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return src


def test_paragraph_dedup_after_document_dedup_from_python_equals_the_cli(corpus, tmp_path, capsys):
    from gpu_dedup.cli import main

    res = run_dedup(str(corpus), CFG, tmp_path / "api", paragraph=ParagraphConfig(), paragraph_order="after")
    assert isinstance(res, RunStages) and res.order == ("dedup", "paragraph") and res.substring is None
    assert res.dedup.kept == 6 and res.paragraph.stats["counts"]["documents"] == 6  # it read OUT/deduplicated/
    cut = [json.loads(x) for x in (tmp_path / "api" / "paragraph_deduplicated" / "a.jsonl").read_text().splitlines()]
    assert len(cut) == 6 and sum(BOILER in r["text"] for r in cut) == 1
    assert json.loads((tmp_path / "api" / MANIFEST).read_text())["command"] == "run"  # as `gpu-dedup run`
    assert "paragraph_fp_audit" not in json.loads((tmp_path / "api" / "run.json").read_text())  # not asked for
    assert main(["run", str(corpus), "-o", str(tmp_path / "cli"), "-q", "--device", "cpu", "--paragraph-dedup"]) == 0
    for f in ("removed_spans.parquet", "paragraph_docs.parquet", "decisions.parquet"):
        assert pq.read_table(tmp_path / "api" / f).equals(pq.read_table(tmp_path / "cli" / f)), f
    assert (tmp_path / "api" / "paragraph_deduplicated" / "a.jsonl").read_bytes() == \
        (tmp_path / "cli" / "paragraph_deduplicated" / "a.jsonl").read_bytes()


@pytest.mark.parametrize("porder, sorder, ran", [("before", "after", ("paragraph", "dedup", "substring")),
                                                 ("after", "beside", ("substring", "dedup", "paragraph"))])
def test_stages_run_in_the_stated_order(corpus, tmp_path, porder, sorder, ran):
    res = run_dedup(str(corpus), CFG, tmp_path / "o", paragraph=ParagraphConfig(), paragraph_order=porder,
                    substring=SubstringConfig(min_tokens=5), substring_order=sorder)
    assert res.order == ran
    docs = res.substring.stats["counts"]["documents"]
    # after: the documents the dedup kept (all 7 after paragraph dedup emptied the copy first); beside: the input
    assert res.dedup.kept == (7 if porder == "before" else 6) and docs == (res.dedup.kept if sorder == "after" else 7)


def test_the_stages_read_as_the_run_reads():
    from gpu_dedup.pipeline.compose import stage_configs

    cfg = CFG.replace(text_field="body", id_field="url", on_error="skip", cluster__keep="longest",
                      normalize__fold_digits=True)
    p, s = stage_configs(cfg, ParagraphConfig(split="paragraph"), SubstringConfig(min_tokens=9))
    assert (p.split, p.text_field, p.id_field, p.on_error, p.normalize) == ("paragraph", "body", "url", "skip",
                                                                           cfg.normalize)
    assert (s.min_tokens, s.keep, s.text_field, s.normalize) == (9, "longest", "body", cfg.normalize)


@pytest.mark.parametrize("kw, match", [
    (dict(paragraph=ParagraphConfig(), cfg=CFG.replace(write_deduplicated=False)),
     "paragraph_order='after' cuts paragraphs from OUT/deduplicated/, which write_deduplicated=False"),
    (dict(substring=SubstringConfig(), cfg=CFG.replace(write_deduplicated=False)), "substring_order='after'"),
    (dict(lexical=False), "lexical=False skips MinHash/LSH"),
    (dict(paragraph_order="first"), "paragraph_order must be one of"),
    (dict(paragraph=ParagraphConfig(), output_dir=None), "write into output_dir"),
])
def test_check_composition_names_the_arguments(kw, match):
    args = dict(cfg=CFG, paragraph=None, paragraph_order="after", substring=None, substring_order="after",
                engine="local", lexical=True, semantic=None, output_dir="out")
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        check_composition(args.pop("cfg"), **args)


def test_a_refused_composition_writes_nothing(corpus, tmp_path):
    with pytest.raises(ValueError, match="write_deduplicated=False"):
        run_dedup(str(corpus), CFG.replace(write_deduplicated=False), tmp_path / "o", paragraph=ParagraphConfig())
    assert not (tmp_path / "o").exists()


def test_measured_bloom_false_positives_reach_run_json_and_the_report(corpus, tmp_path):
    """fp_sample: the paragraph stage's measurement (paragraph_dedup.json fp_audit) is copied into run.json next to
    its target and the report, drawn again after the stage, shows it."""
    out = tmp_path / "out"
    res = run_dedup(str(corpus), CFG, out, paragraph=ParagraphConfig(fp_sample=1.0, action="remove-all"))
    run = json.loads((out / "run.json").read_text())
    para = json.loads((out / "paragraph_dedup.json").read_text())
    assert run["paragraph_fp_audit"] == {"file": "paragraph_dedup.json", **para["fp_audit"]}
    a = para["fp_audit"]
    assert a["sampled_units"] == res.paragraph.stats["counts"]["units_eligible"] > 0 and a["false_removals"] == 0
    assert a["target_fp_rate"] > 0 and a["missed_removals"] == 0
    html = (out / "report.html").read_text()
    assert "Measured false positives" in html and "consistent with the target" in html


@pytest.mark.parametrize("order", ["paragraph", "substring"])
def test_records_a_span_step_before_the_dedup_skipped_are_in_run_json_and_the_report(corpus, tmp_path, order):
    """--on-error skip with a span stage "before" the dedup: the span step read the input (and skipped a bad line),
    the dedup its survivors; the span step's first record is replaced when it runs again over the survivors, and
    run.json listed no skipped record anywhere. Now run.json's ``input_read`` names it, the report counts it, and
    every input line is a decision or a skipped record."""
    src = tmp_path / "in"
    src.mkdir()
    lines = (corpus / "a.jsonl").read_text().splitlines()
    (src / "a.jsonl").write_text("\n".join(lines[:2] + ["this is not json"] + lines[2:]) + "\n")
    out = tmp_path / "out"
    kw = dict(paragraph=ParagraphConfig(), paragraph_order="before") if order == "paragraph" else \
        dict(substring=SubstringConfig(min_tokens=5), substring_order="before")
    run_dedup(str(src), CFG.replace(on_error="skip"), out, **kw)
    run = json.loads((out / "run.json").read_text())
    assert [(s["file"], s["line"]) for s in run["input_read"]["skipped"]] == [("a.jsonl", 3)]
    assert run["input_read"]["step"] == order and run["read"]["skipped"] == []  # the dedup read the survivors
    assert pq.read_table(out / "decisions.parquet").num_rows + 1 == len(lines) + 1
    assert "skipped records</th><td class=\"l\">1</td>" in (out / "report.html").read_text()
    # the dedup first (it reads the input itself): its own read report, no second record
    run_dedup(str(src), CFG.replace(on_error="skip"), tmp_path / "after", paragraph=ParagraphConfig())
    after = json.loads((tmp_path / "after" / "run.json").read_text())
    assert "input_read" not in after and [s["line"] for s in after["read"]["skipped"]] == [3]
