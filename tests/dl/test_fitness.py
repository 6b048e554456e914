"""DFlare's fitness H = D/δ + O (hand-computed values, novelty around the threshold) and k-uncertainty."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.dl.deviate.fitness import (
    DEFAULT_DELTA,
    StateTracker,
    dflare_fitness,
    k_uncertainty,
    prob_difference,
)
from twinspect.errors import InputError


def test_prob_difference_on_top1_label_of_original():
    pf = np.array([0.1, 0.7, 0.2])
    pg = np.array([0.05, 0.55, 0.4])
    assert prob_difference(pf, pg) == pytest.approx(0.15)  # label 1: |0.7 - 0.55|
    assert prob_difference(pg, pf) == pytest.approx(0.15)  # symmetric when the top-1 labels agree
    assert prob_difference(pf, pg, label=2) == pytest.approx(0.2)
    assert prob_difference(pf, pf) == 0.0


def test_dflare_fitness_hand_computed():
    assert DEFAULT_DELTA == 1e-3
    assert dflare_fitness(0.15, False) == pytest.approx(150.0)
    assert dflare_fitness(0.15, True) == pytest.approx(151.0)
    assert dflare_fitness(0.0, True) == pytest.approx(1.0)
    assert dflare_fitness(0.02, False, delta=0.01) == pytest.approx(2.0)
    # a difference gain larger than delta beats novelty; a smaller gain does not
    assert dflare_fitness(0.1 + 2e-3, False) > dflare_fitness(0.1, True)
    assert dflare_fitness(0.1 + 5e-4, False) < dflare_fitness(0.1, True)
    with pytest.raises(InputError):
        dflare_fitness(0.1, True, delta=0)


def test_state_novelty_around_the_threshold():
    # squared Euclidean distance between states concat(pf, pg), threshold 0.5
    tr = StateTracker(threshold=0.5)
    a_f, a_g = np.array([1.0, 0.0]), np.array([1.0, 0.0])
    assert tr.observe(a_f, a_g) is True  # the first state is always new
    assert len(tr) == 1
    assert tr.observe(a_f, a_g) is False  # the same state again
    # distance^2 = 0.3^2 * 4 = 0.36 <= 0.5: not new, not stored
    b_f, b_g = np.array([0.7, 0.3]), np.array([0.7, 0.3])
    assert tr.nearest_distance(np.concatenate([b_f, b_g])) == pytest.approx(0.36)
    assert tr.observe(b_f, b_g) is False
    assert len(tr) == 1
    # distance^2 = 0.4^2 * 4 = 0.64 > 0.5: new and stored
    c_f, c_g = np.array([0.6, 0.4]), np.array([0.6, 0.4])
    assert tr.observe(c_f, c_g) is True
    assert len(tr) == 2
    # now b is within 0.04 of c: still not new
    assert tr.observe(b_f, b_g) is False
    # exactly at the threshold is not new (strictly farther is required)
    tr2 = StateTracker(threshold=0.5)
    tr2.observe(np.array([0.0, 0.0]), np.array([0.0, 0.0]))
    assert tr2.observe(np.array([0.5, 0.5]), np.array([0.0, 0.0])) is False  # 0.25 + 0.25 = 0.5
    assert tr2.observe(np.array([0.5, 0.51]), np.array([0.0, 0.0])) is True


def test_state_tracker_grows_past_its_initial_buffer():
    tr = StateTracker(threshold=0.0)
    for i in range(200):
        assert tr.observe(np.array([i, 0.0]), np.array([0.0, 0.0])) is True
    assert len(tr) == 200
    assert tr.nearest_distance(np.array([10.2, 0.0, 0.0, 0.0])) == pytest.approx(0.04)
    with pytest.raises(InputError):
        StateTracker(threshold=-1)


def test_k_uncertainty():
    p = np.array([[0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.2, 0.1, 0.7]])
    np.testing.assert_allclose(k_uncertainty(p, 2), [0.2, 0.0, 0.5])
    np.testing.assert_allclose(k_uncertainty(p, 3), [0.3, 0.2, 0.6])
    assert k_uncertainty(p[0], 2) == pytest.approx(0.2)
    with pytest.raises(InputError):
        k_uncertainty(p, 4)
    with pytest.raises(InputError):
        k_uncertainty(p, 1)


def test_keeps_mutant_rules():
    from twinspect.dl.deviate.fitness import keeps_mutant

    # reference rule (public DFlare code): D moved by more than delta either way, or a new state
    assert keeps_mutant(0.1025, False, 0.1, False) is True
    assert keeps_mutant(0.0975, False, 0.1, False) is True  # a drop by 2.5e-3 also moves on
    assert keeps_mutant(0.1005, False, 0.1, False) is False
    assert keeps_mutant(0.1, True, 0.1, False) is True
    # literal rule: H = D/delta + O must increase (H of the current input as kept)
    assert keeps_mutant(0.1005, True, 0.1, False, rule="increase") is True  # 101.5 > 100
    assert keeps_mutant(0.1005, False, 0.1, True, rule="increase") is False  # 100.5 < 101
    assert keeps_mutant(0.1025, False, 0.1, True, rule="increase") is True  # 102.5 > 101
    assert keeps_mutant(0.0975, False, 0.1, False, rule="increase") is False
    with pytest.raises(InputError):
        keeps_mutant(0.1, True, 0.1, False, rule="sometimes")
