"""MEMO's seed selection (Algorithm 2): fitness-sorted (model, operator) seeds, Metropolis–Hastings pick.

Seeds are (model, operator) pairs (MEMO, Li et al., ICSE 2023 / COMET, TOSEM 2023). The fitness of a seed
``s`` (the papers' Eq. 3) rewards seeds whose mutants added coverage and decays with use:

    fitness(s) = (1 + R(s)) / (1 + N(s))

where ``N(s)`` is the number of times ``s`` was selected and ``R(s)`` the number of those selections whose
mutant added coverage (layer types, pairs or parameter values not covered before). A seed never selected
has fitness 1, the highest possible, so new seeds are tried early. The paper's text is not in this
repository; the formula is the one of the authors' implementation (``maybeLee/COMET``,
``scripts/tools/seed_selection_logic.py``: ``score = reward_sum / (selected + 1)``, ``reward_sum`` starting
at 1 and growing by 1 per coverage-increasing mutant). Two deliberate differences from that code: its
reward also mixes in library code coverage (twinspect does not instrument the libraries), and its seeds
are operators with the model drawn uniformly, where the paper's Algorithm 2 (followed here) ranks
(model, operator) pairs.

The seeds are sorted by fitness (descending; ties in random order, as the authors' ``sort_seeds`` shuffles
before its sort — a tie-break by name would make the chain prefer, among equally fit seeds, the models and
operators whose names sort first) and a Metropolis–Hastings chain over ranks
proposes a uniformly random rank ``k2`` and accepts it with probability ``min(1, (1 − p)^(k2 − k1))``
(LEMON/MEMO), ``k1`` being the rank of the previously selected seed *in the current ordering* (the seed
is looked up again after every re-sort, as the authors' code does). ``p`` defaults to 0.05 (the paper's
value). The first selection is uniform. MEMO_r replaces all of this with uniform random selection.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

#: MEMO's Metropolis–Hastings geometric parameter.
DEFAULT_P = 0.05


def acceptance(k1: int, k2: int, p: float) -> float:
    """MH acceptance probability ``min(1, (1 - p)^(k2 - k1))`` for moving from rank ``k1`` to rank ``k2``.

    Args:
        k1, k2: 0-based ranks in the fitness-sorted seed list (0 = fittest).
        p: geometric parameter in (0, 1).
    """
    return min(1.0, (1.0 - p) ** (k2 - k1))


def check_p(p: float) -> float:
    """``p`` when it is a valid MH parameter (0 < p < 1).

    Raises:
        ValueError: ``p`` outside (0, 1).
    """
    if not 0.0 < float(p) < 1.0:
        raise ValueError(f"the Metropolis–Hastings parameter p must be in (0, 1), got {p!r}")
    return float(p)


@dataclass
class Stats:
    """Use counts of one seed: ``uses`` (times selected) and ``gains`` (selections whose mutant added coverage)."""

    uses: int = 0
    gains: int = 0


def seed_key(mid: str, op: str) -> str:
    """The ``"model|operator"`` key of a seed."""
    return f"{mid}|{op}"


@dataclass
class SeedSelector:
    """Algorithm-2 selector over (model id, operator) seeds.

    Args:
        operators: operator names in use.
        p: MH geometric parameter in (0, 1) (rank acceptance); default :data:`DEFAULT_P` (0.05).
        mode: ``"mh"`` (MEMO) or ``"random"`` (MEMO_r).
        models: model ids in the pool (values unused, kept for the JSON state).
        seeds: per-seed :class:`Stats`, keyed by :func:`seed_key`.
        last: key of the previously selected seed, or None before the first selection.
    """

    operators: tuple[str, ...]
    p: float = DEFAULT_P
    mode: str = "mh"
    models: dict[str, Stats] = field(default_factory=dict)
    seeds: dict[str, Stats] = field(default_factory=dict)
    last: str | None = None

    def __post_init__(self) -> None:
        check_p(self.p)

    def add_model(self, mid: str) -> None:
        """Add model ``mid`` (and its seeds, one per operator) to the pool."""
        self.models.setdefault(mid, Stats())

    def remove_model(self, mid: str) -> None:
        """Drop model ``mid`` and its seeds."""
        self.models.pop(mid, None)
        for op in self.operators:
            self.seeds.pop(seed_key(mid, op), None)

    def fitness(self, mid: str, op: str) -> float:
        """``(1 + R) / (1 + N)`` of seed (mid, op) (see the module docstring)."""
        st = self.seeds.get(seed_key(mid, op), Stats())
        return (1 + st.gains) / (1 + st.uses)

    def ranked(self, rng: random.Random | None = None) -> list[tuple[str, str]]:
        """Seeds sorted by descending fitness.

        Args:
            rng: ties are broken in a random order drawn from it (shuffle, then a stable sort: the authors'
                ``sort_seeds``); None breaks them by name (deterministic, for display and tests).
        """
        seeds = [(m, o) for m in sorted(self.models) for o in self.operators]
        if rng is None:
            return sorted(seeds, key=lambda s: (-self.fitness(*s), s))
        rng.shuffle(seeds)
        return sorted(seeds, key=lambda s: -self.fitness(*s))

    def pick(self, rng: random.Random) -> tuple[str, str]:
        """Choose the next (model id, operator) seed and count the selection (MH over :meth:`ranked` with
        ``rng``'s tie order; uniform in ``"random"`` mode)."""
        seeds = self.ranked(rng if self.mode == "mh" else None)
        if self.mode == "random":
            choice = rng.choice(seeds)
        else:
            keys = [seed_key(*s) for s in seeds]
            if self.last is None or self.last not in keys:  # first pick, or the last seed left the pool
                k2 = rng.randrange(len(seeds))
            else:
                k1 = keys.index(self.last)  # its rank in the current ordering
                while True:
                    k2 = rng.randrange(len(seeds))
                    if rng.random() < acceptance(k1, k2, self.p):
                        break
            choice = seeds[k2]
        key = seed_key(*choice)
        self.last = key
        self.seeds.setdefault(key, Stats()).uses += 1
        return choice

    def feedback(self, mid: str, op: str, gained: bool) -> None:
        """Record whether the mutant of the selected seed (mid, op) added coverage."""
        if gained:
            self.seeds.setdefault(seed_key(mid, op), Stats(uses=1)).gains += 1

    def to_json(self) -> dict:
        """JSON-able state (see :meth:`from_json`)."""
        return {"operators": list(self.operators), "p": self.p, "mode": self.mode, "last": self.last,
                "models": sorted(self.models), "seeds": {k: v.__dict__ for k, v in self.seeds.items()}}

    @classmethod
    def from_json(cls, d: dict) -> SeedSelector:
        """Selector from :meth:`to_json`'s dict (a campaign state written before Eq. 3 restarts its seed counts)."""
        models = d["models"]
        seeds = {k: Stats(**v) for k, v in d.get("seeds", {}).items()}
        last = d.get("last")
        return cls(tuple(d["operators"]), d["p"], d["mode"], {m: Stats() for m in models}, seeds,
                   last if isinstance(last, str) else None)
