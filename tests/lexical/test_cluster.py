"""Keep order, exact groups and the two removal policies on hand-made inputs."""
import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.decisions import keep_rank
from gpu_dedup.lexical.policy import components_policy, representative_policy
from gpu_dedup.lexical.exact import exact_groups
from gpu_dedup.lexical.lsh import group_buckets
from gpu_dedup.lexical.verify import ShingleSets, jaccard, shingle_sets


def _sets(items: list[set[int]]) -> ShingleSets:
    arrs = [np.array(sorted(s), np.uint64) for s in items]
    sizes = np.array([a.shape[0] for a in arrs], np.int64)
    offsets = np.zeros(len(arrs), np.int64)
    offsets[1:] = np.cumsum(sizes)[:-1]
    return ShingleSets(np.concatenate(arrs) if arrs else np.zeros(0, np.uint64), offsets, sizes)


def test_keep_rank_policies():
    assert keep_rank("first", n=3).tolist() == [0, 1, 2]
    assert keep_rank("longest", n=4, text_bytes=np.array([5, 9, 9, 1])).tolist() == [2, 0, 1, 3]
    ids = pa.array(["b", "a", "c"], pa.string())
    assert keep_rank("min-id", n=3, ids=ids).tolist() == [1, 0, 2]
    vals = np.array([0.5, np.nan, 0.9, 0.5])
    assert keep_rank("max:q", n=4, values=vals).tolist() == [1, 3, 0, 2]


def test_exact_groups_leader_is_first_in_keep_order():
    h = np.array([[1, 1], [2, 2], [1, 1], [1, 2], [2, 2]], np.uint64)
    assert exact_groups(h, np.arange(5)).tolist() == [0, 1, 0, 3, 1]
    rank = np.array([4, 3, 2, 1, 0])  # reverse order: the later copies lead
    assert exact_groups(h, rank).tolist() == [2, 4, 2, 3, 4]


def test_jaccard_matches_python_sets():
    rng = np.random.default_rng(0)
    items = [set(rng.integers(0, 60, rng.integers(1, 40)).tolist()) for _ in range(30)]
    s = _sets(items)
    left, right = np.repeat(np.arange(30), 30), np.tile(np.arange(30), 30)
    got = jaccard(s, left, right)
    want = [len(items[i] & items[j]) / len(items[i] | items[j]) for i, j in zip(left, right)]
    assert np.allclose(got, want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("device", ["cpu", "cuda"])  # cuda: the kernel under the simulator + strict backend
def test_empty_sets_have_undefined_jaccard_and_never_remove(device):
    """One convention for empty sets (seed 000 §1: "empty-set similarity requires a separate policy"): the
    Jaccard of two empty sets is undefined (NaN, a null in the decisions), as ``testing.reference`` says
    ("empty sets match nothing"); an empty match removes nothing."""
    from gpu_dedup.runtime.device import to_device, to_host
    from gpu_dedup.testing.reference import exact_pairs

    host = _sets([set(), set(), {1, 2}])
    sets = ShingleSets(*(to_device(a, device) for a in (host.hashes, host.offsets, host.sizes)))
    got = to_host(jaccard(sets, np.array([0, 0, 2]), np.array([1, 2, 2]), device))
    assert np.isnan(got[0]) and got[1] == 0.0 and got[2] == 1.0
    assert exact_pairs([set(), set(), {1, 2}], 1.0) == {}  # the reference: two empty sets are no pair
    bk = group_buckets(np.zeros((2, 1), np.uint64))  # two empty sets in one bucket
    rep = representative_policy(bk, _sets([set(), set()]), np.arange(2), 0.0, cap=100)
    assert rep.rep.tolist() == [-1, -1]  # even at threshold 0 an undefined Jaccard removes nothing


def test_representative_does_not_chain_while_components_do():
    """A ~ B ~ C at J >= 0.8 but J(A, C) < 0.8, all in one bucket. Representative: A kept, B removed
    (for A), C kept (its only near neighbour B was removed). Components: B and C both removed."""
    A = set(range(0, 100))
    B = set(range(10, 110))   # J(A,B) = 90/110 = 0.818
    C = set(range(20, 120))   # J(B,C) = 0.818, J(A,C) = 80/120 = 0.667
    sets = _sets([A, B, C])
    bk = group_buckets(np.zeros((3, 1), np.uint64))
    rep = representative_policy(bk, sets, np.arange(3), 0.8, cap=100)
    assert rep.rep.tolist() == [-1, 0, -1]
    assert rep.jaccard[1] == pytest.approx(90 / 110)
    comp = components_policy(bk, np.arange(3), 0.8, sets)
    assert comp.rep.tolist() == [-1, 0, 0]
    assert comp.jaccard[2] == pytest.approx(80 / 120)  # recorded: C was removed for a doc below theta
    unverified = components_policy(bk, np.arange(3), 0.8, None)
    assert unverified.rep.tolist() == [-1, 0, 0] and np.isnan(unverified.jaccard).all()


def test_representative_respects_keep_order_and_threshold():
    A = set(range(100))
    B = set(range(5, 105))   # J = 95/105
    D = set(range(500, 600))  # same bucket, unrelated: never removed
    sets = _sets([A, B, D])
    bk = group_buckets(np.zeros((3, 2), np.uint64))
    res = representative_policy(bk, sets, np.array([1, 0, 2]), 0.8, cap=100)  # B first in keep order
    assert res.rep.tolist() == [1, -1, -1]
    # A vs B (removed), D vs B (kept); the second band repeats both pairs but each is compared once
    assert res.stats["verified_pairs"] == 2
    res = representative_policy(bk, sets, np.arange(3), 0.99, cap=100)
    assert res.rep.tolist() == [-1, -1, -1]


def test_representative_cap_bounds_work_and_is_reported():
    # 50 mutually dissimilar kept documents in one bucket, then a copy of the last one
    items = [set(range(i * 100, i * 100 + 50)) for i in range(50)] + [set(range(4900, 4950))]
    sets = _sets(items)
    bk = group_buckets(np.zeros((51, 1), np.uint64))
    res = representative_policy(bk, sets, np.arange(51), 0.8, cap=10)
    assert res.stats["capped_buckets"] == 1
    assert res.rep[50] == -1  # its twin is the 50th kept document, past the cap: kept, and the cap is logged
    res = representative_policy(bk, sets, np.arange(51), 0.8, cap=1000)
    assert res.rep[50] == 49


# ------------------------------------------------------------------ cugraph backend (stand-in modules)

class _Series:
    def __init__(self, values):
        self.values = values if hasattr(values, "get") else np.asarray(values)


class _FakeGraph:
    """The part of cugraph.Graph the backend uses; components by BFS, labelled arbitrarily (shuffled)
    the way cugraph's labels are arbitrary, and only for vertices that appear in an edge."""

    def __init__(self, directed):
        assert directed is False

    def from_cudf_edgelist(self, df, source, destination, renumber):
        self.edges = list(zip(df[source].tolist(), df[destination].tolist()))


def _fake_wcc(g):
    adj = {}
    for a, b in g.edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    comp, next_label = {}, 0
    for start in sorted(adj, reverse=True):  # reverse order: labels do not follow the minima
        if start in comp:
            continue
        stack = [start]
        comp[start] = next_label
        while stack:
            x = stack.pop()
            for y in adj[x]:
                if y not in comp:
                    comp[y] = next_label
                    stack.append(y)
        next_label += 7
    verts = np.array(sorted(comp), np.int32)
    np.random.default_rng(1).shuffle(verts)
    return {"vertex": _Series(verts), "labels": _Series([comp[int(x)] for x in verts])}


@pytest.mark.parametrize("backend", ["numpy", "strict"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cugraph_backend_labels_equal_union_find(monkeypatch, seed, backend):
    import sys
    import types

    from gpu_dedup.lexical.policy import cugraph_components
    from gpu_dedup.runtime.device import to_host
    from gpu_dedup.kernels import core_cpu as cpu
    from gpu_dedup.testing.strict import xp as strict_xp

    xp = np if backend == "numpy" else strict_xp  # strict: device arrays in and out, as with cudf + CuPy

    def wcc(g):
        return {k: _Series(xp.asarray(s.values)) for k, s in _fake_wcc(g).items()}

    monkeypatch.setitem(sys.modules, "cudf", types.SimpleNamespace(DataFrame=dict))
    monkeypatch.setitem(sys.modules, "cugraph", types.SimpleNamespace(Graph=_FakeGraph,
                                                                      weakly_connected_components=wcc))
    rng = np.random.default_rng(seed)
    m = 300
    u = rng.integers(0, m, 150).astype(np.int64)
    v = np.where(rng.random(150) < 0.1, u, rng.integers(0, m, 150)).astype(np.int64)  # some self loops
    u, v = np.concatenate([u, v[:20]]), np.concatenate([v, u[:20]])  # and repeated edges
    got = to_host(cugraph_components(m, xp.asarray(u), xp.asarray(v), xp))
    want = cpu.union_find(m, u, v)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert (got == np.arange(m)).sum() > 50  # isolated nodes keep their own index


def test_the_seeds_tokyo_paraphrase_shares_no_shingle_and_is_never_a_lexical_duplicate():
    """Seed 000 §1: the corrected Tokyo example. Under our normalization and word 5-grams the paraphrase has
    J = 0 (no shared shingle), so no lexical setting at any threshold removes it: it is the semantic
    stage's case (README, Semantic dedup)."""
    import gpu_dedup
    from gpu_dedup.config import NormalizeConfig, ShingleConfig
    from gpu_dedup.text.normalize import normalize_text

    a = "The president visited Tokyo on Tuesday to discuss trade."
    b = "On Tuesday, the president visited Tokyo to discuss trade issues."
    norm = normalize_text(pa.array([a, b], pa.large_string()), NormalizeConfig())
    sets = shingle_sets(norm, np.arange(2), ShingleConfig())
    assert sets.sizes.tolist() == [5, 6]  # 9 and 10 words: both have shingles, neither takes the short path
    assert jaccard(sets, np.array([0]), np.array([1]))[0] == 0.0
    # the seed's own reference: lowercased, whitespace-split 5-grams
    grams = [{tuple(t.lower().split()[i:i + 5]) for i in range(len(t.split()) - 4)} for t in (a, b)]
    assert not grams[0] & grams[1]
    res = gpu_dedup.deduplicate(pa.table({"id": ["a", "b"], "text": [a, b]}), cluster__threshold=0.01)
    assert res.decisions["keep"].to_pylist() == [True, True]
