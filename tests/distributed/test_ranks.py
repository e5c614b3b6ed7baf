"""Exact order statistics from per-file summaries (distributed/ranks.py) against a sort of the whole column: every
rank of populations with ties, -0.0, infinities and empty files, with the fetch limit lowered so that every round
kind runs (narrowing, fetch, a tie too large to fetch); NumPy's percentile rebuilt from its order statistics bit
for bit."""
import numpy as np
import pytest

from gpu_dedup.distributed import ranks


def _select(files, rank_of, fetch=None, monkeypatch=None):
    """Run a Selection over ``files`` (lists of (values, positions) per population) as the driver runs it."""
    if fetch is not None:
        monkeypatch.setattr(ranks, "FETCH", fetch)
    pops = [{p: (ranks.sortable(v), pos) for p, (v, pos) in f.items()} for f in files]
    sel = ranks.Selection(rank_of)
    while not sel.done:
        reqs = sel.requests()
        sel.merge(ranks.summarize(p, reqs, i) for i, p in enumerate(pops))
        assert sel.rounds < 12
    return sel


def _split(values, cuts):
    pos = np.arange(len(values), dtype=np.int64)
    bounds = [0, *cuts, len(values)]
    return [(values[a:b], pos[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


@pytest.mark.parametrize("fetch", [None, 3, 1])
def test_every_rank_equals_a_stable_sort(fetch, monkeypatch):
    rng = np.random.default_rng(5)
    v = np.concatenate([rng.normal(size=300), np.full(40, 2.5), [0.0, -0.0, np.inf, -np.inf, 1e-300, -1e-300],
                        rng.integers(0, 4, 100).astype(float) * 1e6])
    v = v[rng.permutation(len(v))]
    files = [{"a": part} for part in _split(v, [0, 50, 50, 200, 400])]  # empty files among them
    sel = _select(files, {"a": lambda m: range(m)}, fetch, monkeypatch)
    order = np.argsort(v, kind="stable")  # NumPy's order: -0.0 == 0.0, ties by position
    assert sel.sizes == {"a": len(v)}
    for r in range(len(v)):
        value, position = sel.found[("a", r)]
        assert position == order[r] and value == v[order[r]], r


def test_populations_and_ranks_from_their_sizes(monkeypatch):
    """Two populations at once; the ranks asked for follow each one's size (the rank cut's round(f * m))."""
    rng = np.random.default_rng(2)
    a, b = rng.random(1000), np.round(rng.random(500), 2)
    files = [{"a": pa, "b": pb} for pa, pb in zip(_split(a, [100, 700]), _split(b, [0, 400]))]
    sel = _select(files, {"a": lambda m: [m // 2, m - 1], "b": lambda m: [0, 249]}, 8, monkeypatch)
    for name, v, rs in (("a", a, [500, 999]), ("b", b, [0, 249])):
        order = np.argsort(v, kind="stable")
        assert [sel.found[(name, r)][1] for r in rs] == order[rs].tolist()


def test_a_tie_too_large_to_fetch_is_found_by_its_index(monkeypatch):
    v = np.concatenate([np.full(30, 7.0), [1.0, 9.0], np.full(30, 7.0)])
    sel = _select([{"t": p} for p in _split(v, [20, 40])], {"t": lambda m: range(m)}, 4, monkeypatch)
    order = np.argsort(v, kind="stable")
    assert [sel.found[("t", r)][1] for r in range(len(v))] == order.tolist()
    assert sel.rounds >= 4  # the bins narrowed to one key, then counted, then the element fetched by its index


def test_keys_sort_as_the_floats():
    v = np.array([-np.inf, -1e308, -1.0, -1e-320, -0.0, 0.0, 1e-320, 1.0, 3.5, np.inf])
    k = ranks.sortable(v)
    assert np.all(k[1:] >= k[:-1]) and k[4] == k[5]
    assert np.array_equal(ranks.float_of(k)[[0, 1, 2, 3, 6, 7, 8, 9]], v[[0, 1, 2, 3, 6, 7, 8, 9]])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1001])
def test_percentiles_from_order_statistics_equal_numpys(n):
    rng = np.random.default_rng(n)
    q = np.linspace(0, 100, 21)
    for v in (rng.normal(size=n) * 1e3, np.round(rng.random(n), 1), -np.abs(rng.random(n)) * 0.0):
        s = np.sort(v)
        lo, hi, t = ranks.percentile_points(n, q)
        got = ranks.lerp(s[lo], s[hi], t)
        assert np.array_equal(got.view(np.uint64), np.percentile(v, q).view(np.uint64))
