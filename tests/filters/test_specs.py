"""The flag texts of filter's models (filters/specs.py): MODEL[:THRESHOLD] and its errors."""
import pytest

from gpu_dedup.errors import ConfigError
from gpu_dedup.filters.specs import split_threshold


def test_a_threshold_without_a_model_says_the_model_is_missing():
    # it said "'0.5' after the last ':' is not a threshold", of a good threshold
    with pytest.raises(ConfigError, match=r"--classifier ':0\.5': no model path before ':0\.5'; write MODEL:0\.5"):
        split_threshold("--classifier", ":0.5")
    with pytest.raises(ConfigError, match=r"'0\.5x' after the last ':' is not a threshold"):
        split_threshold("--classifier", "m.bin:0.5x")
    assert split_threshold("--classifier", "m.bin:max0.3") == ("m.bin", (0.3, "max"))
