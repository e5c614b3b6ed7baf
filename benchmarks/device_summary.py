"""The last step of benchmarks/device_run.sh: one summary built from the files the stages left in OUT,
whatever exists (a stage that timed out or crashed shows as such, with the stages before it intact).

Prints, and writes to OUT/summary.txt: the machine, each stage's outcome and time, pytest's pass/fail
counts, the gpu_bench table (per stage docs/s, GB/s, fraction of the H200 ceilings, CPU docs/s in the
same run and GPU/CPU), the GPU == CPU checks (decisions on real-looking text from gpu_check.py) and the
targets. Standard library only: it runs even when the wheel install failed.

    python benchmarks/device_summary.py $OUT
"""
from __future__ import annotations

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_report import format_rows  # noqa: E402

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def _load(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def stages(out: str) -> tuple[list[str], list[dict]]:
    """(ENV lines, STAGE records) of stages.txt."""
    env, recs = [], []
    for line in _read(os.path.join(out, "stages.txt")).splitlines():
        if line.startswith("ENV "):
            env.append(line[4:])
        elif line.startswith("STAGE "):
            name, *fields = line[6:].split()
            recs.append({"name": name, **dict(f.split("=", 1) for f in fields if "=" in f)})
    return env, recs


def pytest_counts(log: str) -> tuple[dict, bool, list[str]]:
    """(counts, finished, failed test ids) from a `pytest -v -rfE` log; a log cut by a timeout has no
    summary line, so the per-test lines are counted instead (the last of them, with no outcome, is
    the test that was running)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    final = None
    for line in log.splitlines():
        m = re.match(r"^=+ (.*\b(?:passed|failed|error|errors|skipped|deselected|no tests ran)\b.*) in [\d.]+s", line)
        if m:
            final = m.group(1)
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+::\S+)", log, re.M)))
    if final is not None:
        for num, what in re.findall(r"(\d+) (\w+)", final):
            what = {"errors": "error", "warnings": "warnings"}.get(what, what)
            if what in counts:
                counts[what] = int(num)
        return counts, True, failed
    for outcome in re.findall(r"^\S+::\S+.*? (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", log, re.M):
        key = {"XFAIL": "xfailed", "XPASS": "xpassed"}.get(outcome, outcome.lower())
        counts[key] += 1
    failed = failed or sorted(set(re.findall(r"^(\S+::\S+).*? (?:FAILED|ERROR)\b", log, re.M)))
    return counts, False, failed


def summarize(out: str) -> str:
    env, recs = stages(out)
    lines = ["=" * 40 + " device run summary " + "=" * 40]
    lines += [f"machine: {e}" for e in env]
    by_name = {r["name"]: r for r in recs}
    lines.append("stages:  " + " | ".join(
        f"{r['name']} {r.get('status', '?')}" + (f" {r.get('seconds', '?')}/{r.get('limit', '?')} s"
                                                 if r.get("status") != "skipped" else "")
        for r in recs) if recs else "stages:  none recorded (stages.txt missing)")
    lines.append("stage timeouts: " + ", ".join(f"{r['name']} {r.get('limit', '?')} s" for r in recs)
                 + f"; total {sum(int(r.get('limit', 0) or 0) for r in recs)} s")

    # pytest
    log = _read(os.path.join(out, "pytest.log"))
    if log:
        counts, finished, failed = pytest_counts(log)
        shown = ", ".join(f"{v} {k}" for k, v in counts.items() if v or k in ("passed", "failed"))
        state = ""
        if not finished:
            state = f" (no summary line: stage {by_name.get('pytest', {}).get('status', '?')}; counted per test"
            tests = re.findall(r"^(\S+::\S+)", log, re.M)
            last = tests[-1] if tests else None
            if last and not re.search(re.escape(last) + r".*? (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", log):
                state += f"; running then: {last}"
            state += ")"
        lines.append(f"pytest (GPU tests): {shown}{state}")
        for t in failed[:12]:
            lines.append(f"    failed: {t}")
    else:
        lines.append("pytest (GPU tests): no log")

    # gpu_check
    chk = _load(os.path.join(out, "gpu_check.json"))
    if chk:
        bad = [c for c in chk["checks"] if not c["ok"]]
        tail = "" if chk.get("done") else f"; STOPPED during '{chk.get('running')}' after {chk.get('elapsed_s')} s"
        lines.append(f"gpu_check: {len(chk['checks']) - len(bad)}/{len(chk['checks'])} checks pass, seed {chk['seed']}"
                     + tail)
        for c in bad[:8]:
            lines.append(f"    FAIL {c['name']}: {c.get('detail', '')[:300]}")
    else:
        lines.append("gpu_check: no results (gpu_check.json missing)")

    # gpu_bench table
    bench = _load(os.path.join(out, "gpu_bench.json"))
    lines.append("")
    if bench:
        dev = bench.get("device", {})
        where = dev.get("gpu") or ("CUDA simulator (dry run: numbers mean nothing)" if dev.get("simulator") else "?")
        a = bench.get("args", {})
        lines.append(f"gpu_bench on {where}: {a.get('docs', 0):,} docs x ~{a.get('words')} words; CPU path on "
                     f"{dev.get('cpu_cores')} cores in the same run; {bench.get('elapsed_s')} s"
                     + ("" if bench.get("done") else f"; STOPPED during '{bench.get('running')}'"))
        lines.append(format_rows(bench["rows"]))
    else:
        lines.append("gpu_bench: no results (gpu_bench.json missing)")

    # the equality checks, the decisions one first
    lines.append("")
    if chk and chk.get("decisions"):
        d = chk["decisions"]
        corpus = chk.get("decisions_corpus", {})
        verdict = "YES" if all(v["equal"] for v in d.values()) and len(d) == 3 else "NO"
        if verdict == "NO" and all(v["equal"] for v in d.values()):
            verdict = "PARTLY CHECKED"
        lines.append(f"GPU decisions == CPU decisions on real-looking text ({corpus.get('generator', 'make_corpus')}, "
                     f"{corpus.get('docs', 0):,} docs, {corpus.get('text_MB', '?')} MB): {verdict}  ("
                     + ", ".join(f"{p} {'equal' if v['equal'] else 'DIFFERENT'}" for p, v in d.items()) + ")")
    else:
        lines.append("GPU decisions == CPU decisions on real-looking text: NOT CHECKED (gpu_check did not get there)")
    for c in (bench or {}).get("checks", []):
        lines.append(f"{'YES' if c['ok'] else 'NO '}  {c['name']}")
    for e in (bench or {}).get("errors", []):
        lines.append(f"gpu_bench error in {e['stage']}: {e['error'][:300]}")
    if bench:
        met = [f"{r['stage'].split()[0]} {r.get('target') or ''} {r['docs_per_s'] / 1e6:.2f} M docs/s "
               f"{'met' if r['meets_target'] else 'MISSED'} (>= {r['target_docs_per_s'] / 1e6:g} M)"
               for r in bench["rows"] if r.get("target_docs_per_s") and r.get("docs_per_s")]
        if met:
            lines.append("targets: " + "; ".join(met))
    return "\n".join(lines)


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
    text = summarize(out)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
