"""The human-readable summary of a classifier card: ``format_summary`` of the card ``train-classifier`` writes
(``train``), ``format_calibration`` of the one ``calibrate`` writes (``calibrate``)."""
from __future__ import annotations

from typing import Any


def _num(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def format_summary(card: dict[str, Any]) -> str:
    """A short human-readable table of a classifier card.

    Args:
        card: the card, as ``train_classifier`` returns it or ``read_card`` reads it.

    Returns:
        The text: split sizes, threshold and its P/R/F1/retention, retention table, per-label metrics and
        confusion matrix.
    """
    sp, m = card["split"], card["metrics"]
    labels = card["labels"]
    w = max(8, *(len(x) for x in labels))
    lines = [f"model {card['model']['path']} ({card['model']['bytes']:,} bytes"
             f"{', quantized' if card['model']['quantized'] else ''}); labels: {', '.join(labels)}",
             f"split (seed {sp['seed']}; {sp['groups_from']}): train {sp['train']['documents']} documents in "
             f"{sp['train']['groups']} groups, validation {sp['validation']['documents']} documents in "
             f"{sp['validation']['groups']} groups",
             f"  {'label':<{w}} {'train':>8} {'valid':>8}"]
    for lab in labels:
        lines.append(f"  {lab:<{w}} {sp['train']['per_label'].get(lab, 0):>8} "
                     f"{sp['validation']['per_label'].get(lab, 0):>8}")
    lines.append(f"validation accuracy {_num(m['accuracy'])}, macro F1 {_num(m['macro_f1'])}")
    lines.append(f"  {'label':<{w}} {'precision':>9} {'recall':>7} {'F1':>6} {'support':>8}")
    for lab, x in m["per_label"].items():
        lines.append(f"  {lab:<{w}} {_num(x['precision']):>9} {_num(x['recall']):>7} {_num(x['f1']):>6} "
                     f"{x['support']:>8}")
    lines.append("confusion matrix (rows: true label, columns: predicted)")
    lines.append("  " + " " * w + "".join(f" {lab:>{w}}" for lab in labels))
    for lab, row in zip(labels, card["confusion_matrix"]["matrix"]):
        lines.append(f"  {lab:<{w}}" + "".join(f" {v:>{w}}" for v in row))
    rule = card["threshold_rule"]
    if card["threshold"] is None:
        lines.append("no threshold (more than two labels and no positive_label)")
        return "\n".join(lines)
    at = m["at_threshold"]
    target = "" if rule["target"] is None else f" target {rule['target']}" + ("" if rule["target_met"] else " NOT MET")
    lines.append(f"threshold {card['threshold']:.6g} for {card['positive_label']!r} (rule {rule['rule']}{target}): "
                 f"precision {_num(at['precision'])}, recall {_num(at['recall'])}, F1 {_num(at['f1'])}, "
                 f"retention {_num(at['retention'])}")
    lines.append(f"  {'threshold':>9} {'kept':>7} {'retention':>9} {'precision':>9} {'recall':>7} {'F1':>6}")
    for r in card["retention_table"]:
        mark = " <" if r["threshold"] == card["threshold"] else ""
        lines.append(f"  {r['threshold']:>9.4g} {r['kept']:>7} {_num(r['retention']):>9} {_num(r['precision']):>9} "
                     f"{_num(r['recall']):>7} {_num(r['f1']):>6}{mark}")
    lines += _extras(card)
    return "\n".join(lines)


def _extras(card: dict[str, Any], side: str = "validation") -> list[str]:
    """Calibration, the per-group audit (measured on ``side``), the test side and the screening (cards of format
    version 2)."""
    lines = []
    cal = card.get("calibration")
    if cal:
        lines.append(f"calibration ({side}): ECE {_num(cal['ece'], 4)}, Brier {_num(cal['brier'], 4)}")
        lines.append(f"  {'bin':>11} {'docs':>6} {'mean score':>10} {'positive':>8}")
        for b in cal["bins"]:
            lines.append(f"  [{b['lower']:.1f}, {b['upper']:.1f}) {b['documents']:>6} {_num(b['mean_score']):>10} "
                         f"{_num(b['fraction_positive']):>8}")
    for col, a in (card.get("audit") or {}).items():
        lines.append(f"per {col!r} ({side}): retention and false rejection at the threshold")
        for v, m in a["values"].items():
            mark = "  <- ALARM: rejected more than the others" if v in a["flagged"] else ""
            lines.append(f"  {v:<16} {m['documents']:>6} docs, retention {_num(m['retention'])}, false rejection "
                         f"{_num(m['false_rejection'])} (x{_num(m['rate_ratio'], 2)}){mark}")
    test = card.get("test")
    if test:
        at = test["metrics"].get("at_threshold") or {}
        cal = test.get("calibration") or {}
        lines.append(f"test (held out, scored once): {test['documents']} documents, accuracy "
                     f"{_num(test['metrics']['accuracy'])}, macro F1 {_num(test['metrics']['macro_f1'])}"
                     + (f"; at the threshold precision {_num(at.get('precision'))}, recall {_num(at.get('recall'))}, "
                        f"retention {_num(at.get('retention'))}; ECE {_num(cal.get('ece'), 4)}, Brier "
                        f"{_num(cal.get('brier'), 4)}" if at else ""))
    scr = card.get("screen")
    if scr:
        lines.append(f"screened against {len(scr['benchmarks'])} benchmark file(s): {scr['documents_flagged']} of "
                     f"{scr['documents_screened']} documents flagged, {scr['documents_dropped']} dropped")
    groups = card.get("groups") or {}
    if groups.get("without_groups"):
        lines.append("WARNING: " + groups["without_groups"])
    return lines


def format_calibration(card: dict[str, Any]) -> str:
    """A short human-readable table of a calibration card (``calibrate.calibrate``).

    Args:
        card: the card.

    Returns:
        The text: the sample, the threshold and its precision/recall, precision/recall per threshold, the
        reliability table, the per-group audit with its alarms, the thresholds per domain.
    """
    sm, rule, at = card["sample"], card["threshold_rule"], card["metrics"]["at_threshold"]
    target = "" if rule["target"] is None else f" target {rule['target']}" + ("" if rule["target_met"] else " NOT MET")
    lines = [f"model {card['model']['path']}: score P(__label__{card['positive_label']}), positive = label "
             f"{card['positive_value']!r}",
             f"sample: {sm['documents']} documents ({sm['positives']} positive, {sm['negatives']} negative"
             + (f", {sm['unscored']} without a feature the model knows, left out" if sm["unscored"] else "") + ")",
             f"threshold {card['threshold']:.6g} (rule {rule['rule']}{target}; keep {rule['keep']}): precision "
             f"{_num(at['precision'])}, recall {_num(at['recall'])}, F1 {_num(at['f1'])}, retention "
             f"{_num(at['retention'])}",
             f"  {'threshold':>9} {'kept':>7} {'retention':>9} {'precision':>9} {'recall':>7} {'F1':>6}"]
    for r in card["retention_table"]:
        mark = " <" if r["threshold"] == card["threshold"] else ""
        lines.append(f"  {r['threshold']:>9.4g} {r['kept']:>7} {_num(r['retention']):>9} {_num(r['precision']):>9} "
                     f"{_num(r['recall']):>7} {_num(r['f1']):>6}{mark}")
    lines += _extras(card, "sample")
    for a in card.get("alarms") or []:
        lines.append(f"ALARM {a['column']}={a['value']!r}: false rejection {_num(a['false_rejection'])} vs "
                     f"{_num(a['baseline'])} overall (x{_num(a['rate_ratio'], 2)})")
    for col, per in (card.get("thresholds_by") or {}).items():
        lines.append(f"threshold per {col!r} (filter --domain-field {col} applies them): "
                     + ", ".join(f"{v} {'-' if t is None else f'{t:.4g}'}" for v, t in per.items()))
    return "\n".join(lines)
