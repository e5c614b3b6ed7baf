"""The prefilter inside dedup's pass 1 (filters/prefilter.py): a keep column it computes is never read
from the input by a later read of the text (verification re-reading the candidates)."""
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.errors import ConfigError
from gpu_dedup.filters.config import FilterConfig
from gpu_dedup.filters.prefilter import check_in_pass1
from gpu_dedup.testing.evalcorpus import make_corpus


def test_keep_by_a_prefilter_score_when_verification_rereads(tmp_path):
    """keep=max:<a rule's score> with cache_bytes=0 (verification reads the candidates' text again, which
    has no such column): the same decisions as when pass 1's text is kept."""
    pq.write_table(make_corpus(160, seed=3, mean_words=50, template_families=2).select(["id", "text"]),
                   tmp_path / "a.parquet")
    pre = FilterConfig(rules="gopher", device="cpu", audit=0, write_filtered=False)
    cfg = RunConfig(progress=False).replace(cluster__keep="max:gopher_word_count")
    kept = gpu_dedup.deduplicate(str(tmp_path / "a.parquet"), cfg, prefilter=pre)
    reread = gpu_dedup.deduplicate(str(tmp_path / "a.parquet"), cfg.replace(cache_bytes=0), prefilter=pre)
    assert reread.stats["stages"]["verify"]["text"] == "re-read from the input"
    assert reread.decisions.equals(kept.decisions) and kept.removed > 0


def test_check_in_pass1_refuses_corpus_wide_settings(tmp_path):
    target = tmp_path / "t.jsonl"
    target.write_text('{"text": "a b c"}\n')
    with pytest.raises(ConfigError, match="DSIR cannot run inside dedup's pass 1"):
        check_in_pass1(FilterConfig(dsir_target=(str(target),), select=0.5, audit=0))
    check_in_pass1(FilterConfig(rules="gopher", audit=0))
    # issue 37: a domain field is read in a pass of its own, which pass 1 does not make: refused, not ignored
    with pytest.raises(ConfigError, match="domain_field is read in a pass of its own"):
        check_in_pass1(FilterConfig(rules="gopher", domain_field="topic", audit=0))
