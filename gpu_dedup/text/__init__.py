"""Text utilities every program shares (dedup, filters, paragraph, screen, substring, semantic).

    unicode_tables   the per-codepoint normalization tables (policy names, Unicode version, shipped data)
    normalize        the normalizer: ``normalize_text``, ``normalize_arrays``, ``normalize_strings``,
                     ``Normalized``, ``unit_starts``, ``device_tables``

It sits beside ``io`` (Arrow buffers and UTF-8 checks: ``gpu_dedup.io.text``), below every program: no module
here imports a program. Import from the modules (``from gpu_dedup.text.normalize import normalize_text``).
"""
