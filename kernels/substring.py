"""Device code of exact-substring dedup: the LCP array of a suffix array by Kasai's algorithm, run on ranges
of text positions. One source compiled for both targets (``substring_cpu.py``, ``substring_cuda.py``) by
``_build.build``.

Why ranges: Kasai's h (the LCP carried from position i - 1, less one) is only a lower bound that saves
comparisons, so a scan may start anywhere with h = 0 and still be exact. Each range is one CPU iteration or one
GPU thread; its work is its length plus at most the longest LCP it meets (bounded by tokens, not documents:
with a unique separator after every document no LCP crosses a document).

Notation: n text positions (tokens and separators), int32 symbols; sa, rank int64 (n,): the suffix array and
its inverse; lcp int32 (n,): lcp[r] = LCP(suffix sa[r], suffix sa[r + 1]), lcp[n - 1] = 0 (pydivsufsort.kasai's
convention).
"""

DEVICE_FUNCTIONS = ("kasai_range",)


def kasai_range(text, sa, rank, lo, hi, lcp):
    """lcp[rank[i]] for text positions lo <= i < hi (text int32 (n,), sa / rank int64 (n,), lcp int32 (n,))."""
    n = text.shape[0]
    h = 0
    for i in range(lo, hi):
        r = rank[i]
        if r == n - 1:
            lcp[r] = 0
            h = 0
            continue
        j = sa[r + 1]
        while i + h < n and j + h < n and text[i + h] == text[j + h]:
            h += 1
        lcp[r] = h
        if h > 0:
            h -= 1
