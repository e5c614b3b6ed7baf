"""gpu_dedup/filters/ahead.py: a first filter run's model-free kernels compiled ahead in a second process."""
from gpu_dedup.runtime import compiling
from gpu_dedup.filters import ahead


def test_the_compile_ahead_helper_compiles_only_its_stages_kernels_and_a_real_run_loads_them(tmp_path):
    """The helper of filter_ahead, in an empty cache, compiles the rules' and the domain rules' kernels
    and no other cached kernel (Numba's cache has no lock: a function both processes compiled could pair one's
    index with the other's code). A rules-only filter run in that cache then compiles none of them: the helper
    compiled them for a real run's argument types."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", ahead._AHEAD_CODE, json.dumps({"rules": "gopher,chars", "domain": True})],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    made = {os.path.basename(p).split("-")[0] for p in (tmp_path / "cache").rglob("*.nbi")}
    mine = {f"{fam}_cpu.{name}" for st in ("rules", "domain") for fam, names in compiling.KERNELS[st] for name in names}
    assert {"features_cpu.rule_stats", "features_cpu.char_counts", "domain_cpu.domain_stats"} <= made <= mine, made
    src = tmp_path / "in.jsonl"
    compiling.write_sample(str(src), 20)
    code = ("import sys; from numba.core import event; seen = []\n"
            "class L(event.Listener):\n"
            "    def on_start(self, ev): seen.append(ev.data['dispatcher'].py_func.__name__)\n"
            "    def on_end(self, ev): pass\n"
            "event.register('numba:compile', L())\n"
            "from gpu_dedup.filters.config import FilterConfig\n"
            "from gpu_dedup.filters.stage import filter_corpus\n"
            "filter_corpus(sys.argv[1], FilterConfig(rules='gopher,chars', device='cpu'), None)\n"
            "print(' '.join(seen))\n")
    r = subprocess.run([sys.executable, "-c", code, str(src)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    compiled = set(r.stdout.split())
    assert not compiled & {"rule_stats", "char_counts", "_rule_stats_doc"}, compiled


def test_filter_ahead_takes_the_model_free_stages_that_compile(monkeypatch, tmp_path):
    """ahead.filter_ahead: the rules (only the rule sets with kernels) and the domain rules go to the helper
    when a model family is on too; nothing without one, or without a rule set that compiles."""
    from gpu_dedup.filters.config import DomainConfig, FilterConfig

    calls = []
    monkeypatch.setattr(compiling, "start_ahead", lambda stages, others, code, args: calls.append(
        (stages, others, args)) or "started")
    fake = str(tmp_path / "q.bin")  # the config checks the file exists; nothing loads it here
    open(fake, "wb").close()
    assert ahead.filter_ahead(FilterConfig(rules="gopher,c4")) is None  # no model family: nothing to overlap
    assert ahead.filter_ahead(FilterConfig(rules="c4,url", perplexity=fake)) is None  # c4, url: no kernels
    assert ahead.filter_ahead(FilterConfig(rules="c4,gopher", perplexity=fake)) == "started"
    assert ahead.filter_ahead(FilterConfig(lid=fake, domain=DomainConfig(script_prefilter=True))) == "started"
    assert calls == [(("rules",), ("lm-score",), {"rules": "gopher", "domain": False}),
                     (("domain",), ("fasttext",), {"rules": None, "domain": True})]
