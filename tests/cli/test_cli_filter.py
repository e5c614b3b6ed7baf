"""The filter command's flags (cli/filter.py): --perplexity's forms and their errors."""
import pytest

from gpu_dedup.cli import build_parser
from gpu_dedup.cli.filter import _perplexity
from gpu_dedup.errors import ConfigError


def _args(value):
    return build_parser().parse_args(["filter", "in.jsonl", "-o", "out", "--perplexity", value])


def test_per_language_models_take_one_threshold_after_the_last(tmp_path):
    en, de = tmp_path / "en.arpa", tmp_path / "de.arpa"
    en.write_text("")
    de.write_text("")
    got = _perplexity(_args(f"en={en},de={de}:1000"))
    assert got["perplexity_lang"] == (("en", str(en)), ("de", str(de))) and got["max_perplexity"] == 1000
    # a threshold after a model that is not the last: said, not "model file 'en.arpa:500' does not exist"
    with pytest.raises(ConfigError, match=r"'en=.*en\.arpa:500' gives 'en' a threshold of its own; one threshold "
                                          r"applies to every language, after the last model"):
        _perplexity(_args(f"en={en}:500,de={de}:1000"))
    with pytest.raises(ConfigError, match="keep=0.5 follows a model that is not the last.*a threshold of its own"):
        _perplexity(_args(f"en={en}:keep=0.5,de={de}"))
