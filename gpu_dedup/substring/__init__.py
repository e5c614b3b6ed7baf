"""Exact-substring dedup (Lee et al. 2022) with suffix arrays over tokens: ``substring_dedup`` (dedup.py)."""
from .config import SubstringConfig
from .dedup import SubstringResult, substring_dedup

__all__ = ["SubstringConfig", "SubstringResult", "substring_dedup"]
