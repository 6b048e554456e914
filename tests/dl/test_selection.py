"""Metropolis–Hastings operator selection: acceptance probabilities, ranks, empirical frequencies."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.dl.deviate.mutations import get_operators
from twinspect.dl.deviate.selection import (
    MHSelector,
    UniformSelector,
    acceptance_probability,
    make_selector,
)
from twinspect.errors import InputError


def test_acceptance_probability_for_better_and_worse_ranks():
    # p = 1/4: moving to a worse rank by d is accepted with (3/4)^d, to a better or equal rank always
    assert acceptance_probability(3, 1, 4) == pytest.approx(0.75**2)
    assert acceptance_probability(4, 3, 4) == pytest.approx(0.75)
    assert acceptance_probability(2, 2, 4) == 1.0
    assert acceptance_probability(1, 4, 4) == 1.0
    assert acceptance_probability(6, 1, 6) == pytest.approx((5 / 6) ** 5)


def _selector_with_values(rng, improved=(9, 1, 5, 3), selected=(10, 10, 10, 10)):
    ops = get_operators(["pixel_change", "gaussian_noise", "average_blur", "median_blur"])
    sel = MHSelector(ops, rng)
    for s, imp, n in zip(sel.stats, improved, selected):
        s.improved, s.selected = imp, n
    return sel


def test_ranks_follow_values_and_ties_are_broken_at_random():
    sel = _selector_with_values(np.random.default_rng(0))
    # values 0.9, 0.1, 0.5, 0.3 -> ranks 1, 4, 2, 3
    np.testing.assert_array_equal(sel.ranks(), [1, 4, 2, 3])
    tied = _selector_with_values(np.random.default_rng(0), improved=(1, 1, 1, 1))
    firsts = {int(np.argmin(tied.ranks())) for _ in range(50)}
    assert len(firsts) > 1


def test_empirical_choice_frequencies_match_the_acceptance_rule():
    rng = np.random.default_rng(42)
    sel = _selector_with_values(rng)
    sel.previous = 2  # the operator of rank 2 produced the last kept mutant
    ranks = sel.ranks()
    n = len(ranks)
    # uniform proposals accepted with prob a(k_new): the chosen operator is distributed as a / sum(a)
    a = np.array([acceptance_probability(int(k), 2, n) for k in ranks])
    expected = a / a.sum()
    draws = np.array([sel.sample() for _ in range(20000)])
    freq = np.bincount(draws, minlength=n) / len(draws)
    np.testing.assert_allclose(freq, expected, atol=0.015)
    # the best operators are chosen more often than the worst
    assert freq[0] > freq[1]
    # sample() does not touch the statistics
    assert [s.selected for s in sel.stats] == [10, 10, 10, 10]


def test_first_choice_is_uniform_and_feedback_updates_counts():
    sel = MHSelector(get_operators(), np.random.default_rng(1))
    draws = np.array([sel.sample() for _ in range(6000)])
    freq = np.bincount(draws, minlength=6) / len(draws)
    np.testing.assert_allclose(freq, 1 / 6, atol=0.02)
    i = sel.choose()
    sel.feedback(i, improved=True)
    assert sel.previous == i
    j = sel.choose()
    sel.feedback(j, improved=False)
    assert sel.previous == i
    counts = sel.counts()
    assert sum(c["selected"] for c in counts.values()) == 2
    assert sum(c["improved"] for c in counts.values()) == 1


def test_uniform_selector_ignores_statistics():
    rng = np.random.default_rng(3)
    sel = UniformSelector(get_operators(["pixel_change", "median_blur", "average_blur"]), rng)
    sel.stats[0].improved, sel.stats[0].selected = 100, 100
    sel.previous = 0
    draws = np.array([sel.sample() for _ in range(6000)])
    np.testing.assert_allclose(np.bincount(draws) / len(draws), 1 / 3, atol=0.02)


def test_same_seed_same_choices_and_unknown_kind():
    def run(seed):
        sel = make_selector("mh", get_operators(), np.random.default_rng(seed))
        out = []
        for t in range(200):
            i = sel.choose()
            sel.feedback(i, improved=(t % 3 == 0))
            out.append(i)
        return out

    assert run(5) == run(5)
    assert run(5) != run(6)
    with pytest.raises(InputError):
        make_selector("greedy", get_operators(), np.random.default_rng(0))


def test_reference_lookup_never_uses_the_previous_operators_rank():
    """The public DFlare code's k_old is always -1 (0-based): the best-ranked operator is accepted
    with probability (1 - p)^1, never with certainty, wherever the previous operator ranks."""
    from twinspect.dl.deviate.mutations import get_operators
    from twinspect.dl.deviate.selection import make_selector

    ops = get_operators(None)
    counts_ref = np.zeros(len(ops))
    counts_paper = np.zeros(len(ops))
    for kind, counts in (("mh-reference", counts_ref), ("mh", counts_paper)):
        sel = make_selector(kind, ops, np.random.default_rng(0))
        for s in sel.stats:  # operator 0 is clearly best, the previous (kept) operator ranks last
            s.selected = 10
        sel.stats[0].improved = 9
        sel.stats[5].improved = 0
        sel.previous = 5
        for _ in range(3000):
            counts[sel.sample()] += 1
    # paper rule from the last rank: every candidate is accepted (ranks are <= k_old); reference: geometric
    assert counts_paper.std() / counts_paper.mean() < 0.1
    assert counts_ref[0] > counts_ref[5] * 1.5
