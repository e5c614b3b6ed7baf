"""Tests for the evaluation corpus generator, the exact pair finder, the greedy reference and scoring."""
from __future__ import annotations

import collections
import itertools
import re
import unicodedata

import numpy as np
import pytest

from gpu_dedup.testing import evalcorpus as ec

from gpu_dedup.testing import reference

SMALL = dict(mean_words=60, exact_dup_frac=0.1, near_dup_frac=0.2, template_families=2, family_size=10,
             short_frac=0.05)


@pytest.fixture(scope="module")
def small() -> "object":
    return ec.make_corpus(200, 7, **SMALL)


def test_same_seed_same_table_other_seed_other_table(small):
    assert ec.make_corpus(200, 7, **SMALL).equals(small)
    assert ec.make_corpus(200, 8, **SMALL).column("text") != small.column("text")


def test_kinds_in_requested_proportions(small):
    counts = collections.Counter(small.column("kind").to_pylist())
    # round(0.1 * 200), round(0.2 * 200), 2 * 10, round(0.05 * 200), rest.
    assert counts == {"exact": 20, "near": 40, "template": 20, "short": 10, "unique": 110}
    assert small.column("id").to_pylist() == [f"d{i:06d}" for i in range(200)]
    kinds = small.column("kind").to_pylist()
    assert kinds != sorted(kinds, key=ec.KINDS.index)          # shuffled, not in generation order


def test_labels_are_consistent(small):
    d = small.to_pydict()
    pos = {x: i for i, x in enumerate(d["id"])}
    norm = [ec.normalize_text(t) for t in d["text"]]
    rates = collections.Counter()
    for i, k in enumerate(d["kind"]):
        if k == "exact":
            o = pos[d["origin"][i]]
            assert d["kind"][o] == "unique" and norm[i] == norm[o] and d["edit_rate"][i] == 0.0
        elif k == "near":
            o = pos[d["origin"][i]]
            assert d["kind"][o] == "unique" and norm[i] != norm[o]
            rates[d["edit_rate"][i]] += 1
        elif k == "short":
            assert 1 <= len(d["text"][i].split()) < 5
            if d["origin"][i] is not None:
                assert pos[d["origin"][i]] < i and norm[pos[d["origin"][i]]] == norm[i]
        elif k == "template":
            assert re.fullmatch(r"f\d{4}", d["origin"][i]) and d["member"][i] is not None
    assert rates == {0.02: 8, 0.05: 8, 0.1: 8, 0.2: 8, 0.35: 8}       # 40 near copies, rates in turn


def _pipeline_words(text: str) -> list[str]:
    """The pipeline's normalization written out: NFKC, lowercase, format chars deleted, whitespace
    and control characters -> space, runs collapsed, trimmed; words split on the space."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = "".join(c for c in t if unicodedata.category(c) != "Cf")
    t = "".join(" " if c.isspace() or unicodedata.category(c) == "Cc" else c for c in t)
    return [w for w in t.split(" ") if w]


def test_tokenization_property(small):
    for text in small.column("text").to_pylist():
        ec.check_text(text)
        assert _pipeline_words(text) == text.lower().split()
        assert re.fullmatch(r"[a-z0-9éüñ.,;:!?'\- \n]*", text.lower())
        assert all(re.search(r"[a-z0-9éüñ]", w) for w in text.lower().split())
    assert any("é" in t or "ñ" in t or "ü" in t for t in ec.VOCABULARY)


def test_check_text_rejects_what_would_break_the_tokenization():
    for bad in ("tab\there", "nbsp\u00a0here", "combining e\u0301", "lone , comma", "zero\u200bwidth"):
        with pytest.raises(ValueError):
            ec.check_text(bad)
    ec.check_text("Fine, well-known text.\n\nCafé señor über.")


def test_shingle_sets():
    s = reference.shingle_sets(["a b c d e f", "A  b\nc d E f", "a b c d", "x"])
    assert len(s[0]) == 2 and s[0] == s[1]
    assert s[2] == set() and s[3] == set()
    assert reference.shingle_sets(["one two"], n=2)[0] == reference.shingle_sets(["ONE   two"], n=2)[0]
    assert len(reference.shingle_sets(["a a a a a a a"])[0]) == 1       # set semantics


def _brute_force(sets, min_j):
    out = {}
    for i, j in itertools.combinations(range(len(sets)), 2):
        u = len(sets[i] | sets[j])
        if u and len(sets[i] & sets[j]) / u >= min_j:
            out[(i, j)] = len(sets[i] & sets[j]) / u
    return out


@pytest.mark.parametrize("min_j", [0.02, 0.5, 0.8, 1.0])
def test_exact_pairs_equals_brute_force(small, min_j):
    sets = reference.shingle_sets(small.column("text").to_pylist())
    got = reference.exact_pairs(sets, min_j)
    want = _brute_force(sets, min_j)
    assert got == want and got.min_j == min_j
    assert len(want) >= 20           # the corpus really has duplicate pairs at this level


def test_exact_pairs_generic_elements_and_bad_min_j():
    sets = [{"a", "b", "c"}, {"a", "b", "d"}, {-1, "a"}, set()]
    assert reference.exact_pairs(sets, 0.2) == {(0, 1): 0.5, (0, 2): 0.25, (1, 2): 0.25}
    with pytest.raises(ValueError, match="min_j"):
        reference.exact_pairs(sets, 0.0)


def test_template_family_chains():
    t = ec.make_corpus(30, 3, mean_words=300, exact_dup_frac=0.0, near_dup_frac=0.0, template_families=1,
                       family_size=20, short_frac=0.0).to_pydict()
    members = sorted((m, i) for i, m in enumerate(t["member"]) if m is not None)
    assert [m for m, _ in members] == list(range(20))
    sets = reference.shingle_sets([t["text"][i] for _, i in members])

    def jac(a, b):
        return len(sets[a] & sets[b]) / len(sets[a] | sets[b])

    assert min(jac(k, k + 1) for k in range(19)) >= 0.8
    assert jac(0, 19) < 0.5
    # Transitively one component, yet the exact greedy keeps several members.
    keep = reference.greedy_reference(sets, 0.8)
    assert 2 <= keep.sum() < 20


def _hand_sets():
    # A = {0..9}, B = {1..10}: J(A,B) = 9/11; C = {2..11}: J(B,C) = 9/11, J(A,C) = 8/12.
    return [set(range(0, 10)), set(range(1, 11)), set(range(2, 12)), set(), set()]


def test_greedy_reference_hand_made():
    sets = _hand_sets()
    texts = ["a", "b", "c", "Hello world", "hello   WORLD"]    # only the empty-set docs' texts matter
    # B goes (9/11 with kept A); C stays (its only >= 0.8 neighbour B was removed); E = D exactly.
    assert reference.greedy_reference(sets, 0.8, texts=texts).tolist() == [True, False, True, True, False]
    # Visiting B first: B kept, A and C both removed against it; E before D: D removed.
    assert reference.greedy_reference(sets, 0.8, order=[1, 0, 2, 4, 3], texts=texts).tolist() == \
        [False, True, False, False, True]
    # theta above 9/11: nothing near-duplicate; without texts short documents are kept.
    assert reference.greedy_reference(sets, 0.85).tolist() == [True] * 5
    with pytest.raises(ValueError, match="permutation"):
        reference.greedy_reference(sets, 0.8, order=[0, 0, 1, 2, 3])


def test_evaluate_hand_made():
    # 0 A kept; 1 B removed (9/11 with kept A: covered); 2 C = {3..12} removed: J(A,C) = 7/13 = 0.54,
    # J(B,C) = 8/12 but B is removed -> lost at 0.8, not at 0.5; 3 and 4 identical, both kept ->
    # residual 1; 5 short kept, 6 its normalized copy removed -> not lost.
    sets = [set(range(0, 10)), set(range(1, 11)), set(range(3, 13)), set(range(20, 30)), set(range(20, 30)),
            set(), set()]
    texts = ["x"] * 5 + ["Read more", "read  MORE"]
    keep = np.array([True, False, False, True, True, True, False])
    pairs = reference.exact_pairs(sets, 0.5)
    r = reference.evaluate(keep, sets, pairs, 0.8, texts=texts)
    assert r == {"docs": 7, "kept": 4, "removed": 3, "lost@theta": 1, "lost@0.5": 0, "residual@theta": 1,
                 "theta": 0.8}
    # Without texts the removed short copy cannot be matched: counted as lost.
    assert reference.evaluate(keep, sets, pairs, 0.8)["lost@theta"] == 2
    # Both short copies kept: one more residual pair.
    keep2 = keep.copy()
    keep2[6] = True
    assert reference.evaluate(keep2, sets, pairs, 0.8, texts=texts)["residual@theta"] == 2
    with pytest.raises(ValueError, match="min_j=0.8"):
        reference.evaluate(keep, sets, reference.exact_pairs(sets, 0.8), 0.8)
    with pytest.raises(ValueError, match="bool"):
        reference.evaluate(keep.astype(int), sets, pairs, 0.8)


def test_reference_scores_clean_on_generated_corpus(small):
    texts = small.column("text").to_pylist()
    sets = reference.shingle_sets(texts)
    pairs = reference.exact_pairs(sets, 0.5)
    keep = reference.greedy_reference(sets, 0.8, texts=texts, pairs=pairs)
    assert np.array_equal(keep, reference.greedy_reference(sets, 0.8, texts=texts))
    r = reference.evaluate(keep, sets, pairs, 0.8, texts=texts)
    assert r["lost@theta"] == 0 and r["residual@theta"] == 0
    # Every exact copy goes (its source or an earlier copy is kept); keep-all leaves residual pairs.
    kinds = np.array(small.column("kind").to_pylist())
    assert r["removed"] >= (kinds == "exact").sum()
    r_all = reference.evaluate(np.ones(len(sets), bool), sets, pairs, 0.8, texts=texts)
    assert r_all["removed"] == 0 and r_all["residual@theta"] > 0


def test_make_corpus_rejects_bad_arguments():
    with pytest.raises(ValueError, match="too small"):
        ec.make_corpus(50, 0, template_families=5, family_size=20)
    with pytest.raises(ValueError, match="near_dup_frac"):
        ec.make_corpus(50, 0, near_dup_frac=1.5)
    with pytest.raises(ValueError, match="edit_rates"):
        ec.make_corpus(50, 0, template_families=0, edit_rates=(0.0,))
