"""MEMO's seed selection (Algorithm 2): fitness-sorted (model, operator) seeds, Metropolis–Hastings pick.

Seeds are (model, operator) pairs. ``fitness = (score(m) + score(op)) / (times selected + 1)`` where a
score is the fraction of that model's / operator's uses that added coverage. The seeds are sorted by
fitness (descending) and a Metropolis–Hastings chain over ranks proposes a uniformly random rank ``k2``
from the current ``k1`` and accepts it with probability ``min(1, (1 − p)^(k2 − k1))`` (LEMON/MEMO).
MEMO_r replaces this with uniform random selection.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


def acceptance(k1: int, k2: int, p: float) -> float:
    """MH acceptance probability ``min(1, (1 - p)^(k2 - k1))`` for moving from rank ``k1`` to rank ``k2``.

    Args:
        k1, k2: 0-based ranks in the fitness-sorted seed list (0 = fittest).
        p: geometric parameter in (0, 1).
    """
    return min(1.0, (1.0 - p) ** (k2 - k1))


@dataclass
class Stats:
    """Use counts of one model or operator: ``uses`` and ``gains`` (uses that added coverage)."""

    uses: int = 0
    gains: int = 0

    def score(self) -> float:
        return self.gains / self.uses if self.uses else 1.0


@dataclass
class SeedSelector:
    """Algorithm-2 selector over (model id, operator) seeds.

    Args:
        operators: operator names in use.
        p: MH geometric parameter (rank acceptance); default 0.08.
        mode: ``"mh"`` (MEMO) or ``"random"`` (MEMO_r).
    """

    operators: tuple[str, ...]
    p: float = 0.08
    mode: str = "mh"
    models: dict[str, Stats] = field(default_factory=dict)
    ops: dict[str, Stats] = field(default_factory=dict)
    selected: dict[str, int] = field(default_factory=dict)
    last: int = 0

    def add_model(self, mid: str) -> None:
        self.models.setdefault(mid, Stats())

    def remove_model(self, mid: str) -> None:
        self.models.pop(mid, None)
        for op in self.operators:
            self.selected.pop(f"{mid}|{op}", None)

    def fitness(self, mid: str, op: str) -> float:
        st = self.ops.setdefault(op, Stats())
        return (self.models[mid].score() + st.score()) / (self.selected.get(f"{mid}|{op}", 0) + 1)

    def ranked(self) -> list[tuple[str, str]]:
        """Seeds sorted by descending fitness (ties by name, deterministic)."""
        seeds = [(m, o) for m in sorted(self.models) for o in self.operators]
        return sorted(seeds, key=lambda s: (-self.fitness(*s), s))

    def pick(self, rng: random.Random) -> tuple[str, str]:
        """Choose the next (model id, operator) seed and count the selection."""
        seeds = self.ranked()
        if self.mode == "random":
            choice = rng.choice(seeds)
        else:
            k1 = min(self.last, len(seeds) - 1)
            while True:
                k2 = rng.randrange(len(seeds))
                if rng.random() < acceptance(k1, k2, self.p):
                    break
            self.last = k2
            choice = seeds[k2]
        key = f"{choice[0]}|{choice[1]}"
        self.selected[key] = self.selected.get(key, 0) + 1
        return choice

    def feedback(self, mid: str, op: str, gained: bool) -> None:
        """Record whether the mutant of seed (mid, op) added coverage."""
        for st in (self.models.setdefault(mid, Stats()), self.ops.setdefault(op, Stats())):
            st.uses += 1
            st.gains += int(gained)

    def to_json(self) -> dict:
        return {"operators": list(self.operators), "p": self.p, "mode": self.mode, "last": self.last,
                "models": {k: v.__dict__ for k, v in self.models.items()},
                "ops": {k: v.__dict__ for k, v in self.ops.items()}, "selected": self.selected}

    @classmethod
    def from_json(cls, d: dict) -> SeedSelector:
        return cls(tuple(d["operators"]), d["p"], d["mode"], {k: Stats(**v) for k, v in d["models"].items()},
                   {k: Stats(**v) for k, v in d["ops"].items()}, dict(d["selected"]), d["last"])
