"""Choice of the next mutation operator: Metropolis–Hastings (DFlare) or uniform (DFlare_R).

DFlare (Tian et al., TOSEM 2023, Section 3.2) models operator selection as a Markov chain and
samples it with the Metropolis–Hastings algorithm, as Classfuzz (Chen et al., PLDI 2016) did for
JVM test generation:

1. every operator keeps ``N_selected`` (times chosen) and ``N_improved`` (times its mutant raised
   the fitness, or triggered a deviation); its value is ``v(op) = N_improved / (N_selected + ε)``;
2. operators are ranked by value, best first (rank ``k = 1``; ties are broken at random);
3. given the previous operator ``op_old`` (rank ``k_old``), a candidate ``op_new`` (rank ``k_new``)
   is drawn uniformly and accepted with probability ``min(1, (1 − p)^(k_new − k_old))`` with
   ``p = 1/|operators|``; drawing repeats until a candidate is accepted. Better-ranked candidates
   than the previous operator are always accepted, worse ones with geometrically decreasing
   probability.

"Previous operator" is the operator whose mutant was last kept (raised the fitness), as in the
public DFlare code; before any mutant was kept, the choice is uniform. Note that the public code
(``myLib/probability_img_mutations.py``) looks the previous operator up by comparing operator
*names* to operator *objects*, which never matches, so its ``k_old`` is always −1 (0-based) and the
previous operator's rank is never used; :class:`MHSelector` implements the rule as the paper states
it, and ``make_selector("mh-reference")`` reproduces the public code (``k_old`` fixed at rank 0,
i.e. acceptance ``(1 − p)^k_new`` with 1-based ``k_new``) for ``--preset reference``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from twinspect.dl.deviate.mutations import MutationOperator
from twinspect.errors import InputError

EPSILON = 1e-7


def acceptance_probability(k_new: int, k_old: int, n_operators: int) -> float:
    """Metropolis–Hastings acceptance probability of moving from rank ``k_old`` to rank ``k_new``.

    Args:
        k_new: rank of the candidate (1 = best).
        k_old: rank of the previous operator (1 = best).
        n_operators: number of operators (p = 1/n_operators).

    Returns:
        ``min(1, (1 − p)^(k_new − k_old))``.
    """
    p = 1.0 / n_operators
    return float(min(1.0, (1.0 - p) ** (k_new - k_old)))


class OperatorStats:
    """Selection and improvement counts of one operator (its value ``v = N_improved/(N_selected+ε)``)."""

    __slots__ = ("operator", "selected", "improved")

    def __init__(self, operator: MutationOperator):
        self.operator = operator
        self.selected = 0
        self.improved = 0

    @property
    def value(self) -> float:
        return self.improved / (self.selected + EPSILON)


class _Selector:
    def __init__(self, operators: Sequence[MutationOperator], rng: np.random.Generator):
        if not operators:
            raise InputError("at least one mutation operator is needed")
        self.stats = [OperatorStats(op) for op in operators]
        self.rng = rng
        self.previous: int | None = None  # index into self.stats of the last kept operator

    @property
    def operators(self) -> list[MutationOperator]:
        return [s.operator for s in self.stats]

    def choose(self) -> int:
        """Pick the next operator; returns its index in :attr:`operators` and counts the selection."""
        i = self.sample()
        self.stats[i].selected += 1
        return i

    def sample(self) -> int:
        """Draw an operator index without counting it as selected (the statistics stay unchanged)."""
        return self._choose()

    def feedback(self, index: int, improved: bool) -> None:
        """Report whether the mutant of operator ``index`` raised the fitness (and was kept)."""
        if improved:
            self.stats[index].improved += 1
            self.previous = index

    def counts(self) -> dict[str, dict[str, int]]:
        """``{name: {"selected": n, "improved": m}}`` for reports."""
        return {s.operator.name: {"selected": s.selected, "improved": s.improved} for s in self.stats}

    def _choose(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


class UniformSelector(_Selector):
    """Uniform random operator choice (the DFlare_R ablation).

    Args:
        operators: the operators to choose from.
        rng: numpy Generator.
    """

    def _choose(self) -> int:
        return int(self.rng.integers(0, len(self.stats)))


class MHSelector(_Selector):
    """Metropolis–Hastings operator choice (DFlare), see the module docstring.

    Args:
        operators: the operators to choose from.
        rng: numpy Generator (all randomness, including tie-breaking of equal values).
        reference_lookup: reproduce the public DFlare code's failed look-up of the previous
            operator (its rank is taken as 0, one above the best), see the module docstring.
    """

    def __init__(self, operators: Sequence[MutationOperator], rng: np.random.Generator,
                 reference_lookup: bool = False):
        super().__init__(operators, rng)
        self.reference_lookup = bool(reference_lookup)

    def ranks(self) -> np.ndarray:
        """1-based rank of each operator (1 = highest value), ties broken at random."""
        values = np.array([s.value for s in self.stats])
        tiebreak = self.rng.random(len(values))
        order = np.lexsort((tiebreak, -values))  # by value desc, then random
        ranks = np.empty(len(values), dtype=np.int64)
        ranks[order] = np.arange(1, len(values) + 1)
        return ranks

    def _choose(self) -> int:
        n = len(self.stats)
        if self.previous is None:
            return int(self.rng.integers(0, n))
        ranks = self.ranks()
        k_old = 0 if self.reference_lookup else int(ranks[self.previous])
        while True:
            cand = int(self.rng.integers(0, n))
            if self.rng.random() < acceptance_probability(int(ranks[cand]), k_old, n):
                return cand


def make_selector(kind: str, operators: Sequence[MutationOperator], rng: np.random.Generator) -> _Selector:
    """Build a selector: ``"mh"`` (DFlare), ``"mh-reference"`` (the public code's) or ``"uniform"`` (DFlare_R).

    Raises:
        InputError: unknown kind.
    """
    if kind in ("mh", "mh-reference"):
        return MHSelector(operators, rng, reference_lookup=kind == "mh-reference")
    if kind == "uniform":
        return UniformSelector(operators, rng)
    raise InputError(f"unknown operator selection {kind!r}; choose one of {', '.join(SELECTIONS)}")


#: Selector kinds accepted by :func:`make_selector`.
SELECTIONS = ("mh", "mh-reference", "uniform")
