"""Fitness functions of the deviated-behaviour search.

DFlare (Tian et al., TOSEM 2023, Section 3) scores a *non-triggering* input ``x`` (both models give
the same top-1 label) by

    H(x) = D(x) / δ + O(x)

* ``D(x) = |p_f(x)[c] − p_g(x)[c]|``: the difference between the original model f's and the
  compressed model g's probabilities of the top-1 label ``c`` of f (the labels agree, so ``c`` is
  also g's top-1 label);
* ``O(x) = 1`` when the *state* ``s(x) = (f(x), g(x))`` — the two probability vectors
  concatenated, a 2K vector — is farther than a threshold from every state observed so far in the
  search of this seed, else 0 (:class:`StateTracker`);
* ``δ = 1e-3``: a change of D by more than δ outweighs novelty; within δ, reaching a new state
  decides.

*Keeping a mutant.* The public DFlare code (``myLib/fitnessValue.py``, ``StateFitnessValue``) keeps
a mutant ``x'`` as the new current input ``x`` when ``|D(x') − D(x)| > δ`` (D moved by more than δ,
in either direction) or ``O(x') = 1`` — in terms of H: when the D/δ part of H changed by more
than 1 or the O part is 1. That is rule ``"reference"`` of :func:`keeps_mutant` (the default; it
reproduces the published query counts: on a small sample of LeNet-5 seeds it needed about 120
queries on average, the paper reports 117). Rule ``"increase"`` is the literal reading "keep when
H(x') > H(x)" (H of the current input as computed when it was kept); it explores far less and
needed about 7× more queries on the same seeds.

The public DFlare code implements the novelty check after TensorFuzz's corpus: squared Euclidean
distance to the nearest stored state (FLANN k-d tree) compared with a threshold of 0.5, storing
only novel states. :class:`StateTracker` does the same search exactly (brute force: a seed search
stores at most a few thousand states of 2K ≤ 2000 numbers).

DiffChaser (Xie et al., "DiffChaser: Detecting Disagreements for Deep Neural Networks", IJCAI
2019) scores an input by its *k-uncertainty*: the gap between the largest and the k-th largest
class probability of a model (:func:`k_uncertainty`); a small gap means the input is close to the
decision boundary between those two classes, where a small change flips the model's label.
"""

from __future__ import annotations

import numpy as np

from twinspect.errors import InputError

#: δ of DFlare's fitness function.
DEFAULT_DELTA = 1e-3
#: Novelty threshold on the squared Euclidean distance between states (public DFlare code).
DEFAULT_STATE_THRESHOLD = 0.5


def prob_difference(p_orig: np.ndarray, p_comp: np.ndarray, label: int | None = None) -> float:
    """D(x): absolute probability difference on the original model's top-1 label.

    Args:
        p_orig: (K,) probabilities of the original model f.
        p_comp: (K,) probabilities of the compressed model g.
        label: class to compare; default f's top-1 label ``argmax(p_orig)``.

    Returns:
        ``|p_orig[label] − p_comp[label]|`` as a float in [0, 1].
    """
    p_orig = np.asarray(p_orig, dtype=np.float64).reshape(-1)
    p_comp = np.asarray(p_comp, dtype=np.float64).reshape(-1)
    c = int(np.argmax(p_orig)) if label is None else int(label)
    return float(abs(p_orig[c] - p_comp[c]))


class StateTracker:
    """The states (pairs of probability vectors) observed during one seed's search.

    A state is ``concat(p_f, p_g)`` (2K,). A state is *new* when its squared Euclidean distance to
    every stored state exceeds ``threshold``; only new states are stored (as in TensorFuzz and the
    public DFlare code), so the store is a ``threshold``-cover of everything observed.

    Args:
        threshold: novelty threshold on the squared Euclidean distance (0.5 in DFlare's code).
    """

    def __init__(self, threshold: float = DEFAULT_STATE_THRESHOLD):
        if not threshold >= 0:
            raise InputError(f"state threshold must be >= 0, got {threshold}")
        self.threshold = float(threshold)
        self._states: np.ndarray | None = None
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def nearest_distance(self, state: np.ndarray) -> float:
        """Squared Euclidean distance from ``state`` to the nearest stored state (inf when empty)."""
        if self._n == 0 or self._states is None:
            return float("inf")
        diff = self._states[: self._n] - np.asarray(state, dtype=np.float64).reshape(1, -1)
        return float(np.min(np.einsum("ij,ij->i", diff, diff)))

    def observe(self, p_orig: np.ndarray, p_comp: np.ndarray) -> bool:
        """Check a state for novelty and store it if new.

        Args:
            p_orig: (K,) probabilities of the original model.
            p_comp: (K,) probabilities of the compressed model.

        Returns:
            True (O(x) = 1) when the state is farther than the threshold from every stored state
            (the first state is always new), else False.
        """
        state = np.concatenate([np.ravel(p_orig), np.ravel(p_comp)]).astype(np.float64)
        if self._n and self.nearest_distance(state) <= self.threshold:
            return False
        if self._states is None:
            self._states = np.empty((64, state.size), dtype=np.float64)
        elif self._n == len(self._states):
            self._states = np.concatenate([self._states, np.empty_like(self._states)])
        self._states[self._n] = state
        self._n += 1
        return True


def dflare_fitness(d: float, novel: bool, delta: float = DEFAULT_DELTA) -> float:
    """H(x) = D(x)/δ + O(x).

    Args:
        d: D(x), see :func:`prob_difference`.
        novel: O(x) as a bool.
        delta: δ (> 0).

    Returns:
        The fitness value (float).
    """
    if not delta > 0:
        raise InputError(f"delta must be > 0, got {delta}")
    return float(d) / float(delta) + (1.0 if novel else 0.0)


#: Rules for keeping a mutant (see the module docstring).
ACCEPTANCE_RULES = ("reference", "increase")


def keeps_mutant(
    d_new: float, novel: bool, d_cur: float, novel_cur: bool, delta: float = DEFAULT_DELTA, rule: str = "reference"
) -> bool:
    """Whether DFlare keeps a non-triggering mutant as the new current input.

    Args:
        d_new: D of the mutant.
        novel: O of the mutant (its state is new).
        d_cur: D of the current input.
        novel_cur: O of the current input when it was kept (False for the seed).
        delta: δ.
        rule: ``"reference"`` (public DFlare code: ``|d_new − d_cur| > δ`` or ``novel``) or
            ``"increase"`` (``H(mutant) > H(current)`` with H = D/δ + O).

    Returns:
        True to keep the mutant.

    Raises:
        InputError: unknown rule.
    """
    if rule == "reference":
        return abs(d_new - d_cur) > delta or bool(novel)
    if rule == "increase":
        return dflare_fitness(d_new, novel, delta) > dflare_fitness(d_cur, novel_cur, delta)
    raise InputError(f"unknown acceptance rule {rule!r}; choose one of {', '.join(ACCEPTANCE_RULES)}")


def k_uncertainty(probs: np.ndarray, k: int = 2) -> np.ndarray | float:
    """DiffChaser's k-uncertainty: largest minus k-th largest class probability, per row.

    Args:
        probs: (N, K) or (K,) probability vectors.
        k: rank of the competing class, 2 ≤ k ≤ K.

    Returns:
        (N,) float64 array (a float for a single vector) in [0, 1]; 0 means the top-1 and the k-th
        class are tied (on the decision boundary).

    Raises:
        InputError: ``k`` outside 2..K.
    """
    p = np.asarray(probs, dtype=np.float64)
    single = p.ndim == 1
    p = np.atleast_2d(p)
    if not 2 <= k <= p.shape[1]:
        raise InputError(f"k-uncertainty needs 2 <= k <= {p.shape[1]} (number of classes), got k={k}")
    part = -np.partition(-p, k - 1, axis=1)  # part[:, :k] are the k largest, the (k-1)-th is the k-th largest
    top1 = np.max(p, axis=1)
    out = top1 - part[:, k - 1]
    return float(out[0]) if single else out
