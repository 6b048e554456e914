"""Candidate generation: range search and SourcererCC's token-overlap index against brute force."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from twinspect.code.candidates import overlap_pairs, range_pairs, token_items
from twinspect.code.fragments import Fragment
from twinspect.errors import InputError


def _frag(i: int, path: str | None = None, start: int = 1, end: int = 5) -> Fragment:
    return Fragment(path=path or f"f{i}.py", start_line=start, end_line=end, name=f"f{i}", language="python",
                    text="", code="")


def _brute_overlap(toks, theta):
    out = {}
    for i in range(len(toks)):
        for j in range(i + 1, len(toks)):
            inter = sum((Counter(toks[i]) & Counter(toks[j])).values())
            sim = inter / max(len(toks[i]), len(toks[j]), 1)
            if sim >= theta - 1e-9 and toks[i] and toks[j]:
                out[(i, j)] = sim
    return out


# 7: the 60 bags are built and prefixed in 9 chunks of rows; 90 tokens: chunks of 1 to ~30 rows (rows
# ascend in size, so the chunks of the largest rows hold fewest)
# prefix chunk 5: the prefix product is taken 5 rows at a time, so the blocks of the largest rows drop
# the entries under their smallest extended-prefix `need` (up to 32 shared items) before filtering
@pytest.mark.parametrize("bag_chunk,bag_tokens,prefix_chunk", [(None, None, None), (7, None, None), (None, 90, None),
                                                               (None, None, 5)])
@pytest.mark.parametrize("theta", [0.3, 0.55, 0.8, 1.0])
def test_overlap_pairs_equal_brute_force(theta, bag_chunk, bag_tokens, prefix_chunk, monkeypatch):
    from twinspect.code import candidates

    if prefix_chunk is not None:
        monkeypatch.setattr(candidates, "_PREFIX_CHUNK", prefix_chunk)
    if bag_chunk is not None:
        monkeypatch.setattr(candidates, "_BAG_CHUNK", bag_chunk)
    if bag_tokens is not None:
        monkeypatch.setattr(candidates, "_BAG_TOKENS", bag_tokens)
    rng = random.Random(7)
    vocab = [f"t{k}" for k in range(30)] + ["(", ")", "=", "self", "."] * 6
    base = [[rng.choice(vocab) for _ in range(rng.randint(3, 60))] for _ in range(12)]
    toks = []
    for b in base:  # families of edited copies, so every overlap level occurs
        toks.append(b)
        for _ in range(4):
            c = list(b)
            for _ in range(rng.randint(0, len(c) // 2)):
                op = rng.random()
                k = rng.randrange(len(c) + 1)
                if op < 0.4 and c:
                    c.pop(min(k, len(c) - 1))
                elif op < 0.8:
                    c.insert(k, rng.choice(vocab))
                else:
                    rng.shuffle(c)
            toks.append(c)
    frags = [_frag(i) for i in range(len(toks))]
    got = overlap_pairs(toks, list(range(len(toks))), frags, theta=theta, cap=10_000)
    want = _brute_overlap(toks, theta)
    assert set(got.pairs) == set(want)
    for k, v in want.items():
        assert got.pairs[k] == pytest.approx(v)
    assert got.capped == 0


@pytest.mark.parametrize("group_chunk", [None, 5])  # 5: the cap ranks a few representatives at a time
@pytest.mark.parametrize("cap", [1, 3])
def test_overlap_pairs_cap_keeps_each_sides_best_partners(cap, group_chunk, monkeypatch):
    """A pair stays when it is among the ``cap`` most overlapping partners (ties by id) of either side."""
    from twinspect.code import candidates

    if group_chunk is not None:
        monkeypatch.setattr(candidates, "_GROUP_CHUNK", group_chunk)
    rng = random.Random(cap)
    base = [[f"t{rng.randrange(12)}" for _ in range(rng.randint(8, 20))] for _ in range(6)]
    toks = [b if k == 0 else [t if rng.random() < 0.8 else "x" for t in b] for b in base for k in range(5)]
    frags = [_frag(i) for i in range(len(toks))]
    every = _brute_overlap(toks, 0.5)
    partners: dict[int, list[tuple[float, int]]] = {}
    for (i, j), s in every.items():
        partners.setdefault(i, []).append((-s, j))
        partners.setdefault(j, []).append((-s, i))
    best = {i: {j for _, j in sorted(p)[:cap]} for i, p in partners.items()}
    want = {k for k in every if k[1] in best[k[0]] or k[0] in best[k[1]]}
    got = overlap_pairs(toks, list(range(len(toks))), frags, theta=0.5, cap=cap)
    assert set(got.pairs) == want and len(want) < len(every)
    assert got.capped == sum(len(p) > cap for p in partners.values())


def test_overlap_pairs_skip_overlapping_fragments_and_cap():
    toks = [["a", "b", "c", "d"]] * 5
    frags = [_frag(0, "x.py", 1, 10), _frag(1, "x.py", 3, 6)] + [_frag(i) for i in range(2, 5)]
    got = overlap_pairs(toks, list(range(5)), frags, theta=0.9, cap=10)
    assert (0, 1) not in got.pairs and len(got.pairs) == 9
    capped = overlap_pairs(toks, list(range(5)), frags, theta=0.9, cap=1)
    assert capped.capped > 0 and len(capped.pairs) < 9
    with pytest.raises(InputError):
        overlap_pairs(toks, [0, 1], frags, theta=0.0, cap=1)


def test_token_items_number_repeats():
    vocab: dict[str, int] = {}
    assert len(set(token_items(["(", "(", "x", "("], vocab))) == 4
    assert token_items(["("], vocab) == [vocab["(\x000"]]


def test_range_pairs_keep_every_neighbour_above_threshold():
    rng = np.random.default_rng(0)
    centre = rng.normal(size=16)
    vecs = np.stack([centre + 0.05 * rng.normal(size=16) for _ in range(30)] + [rng.normal(size=16) for _ in range(10)])
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    frags = [_frag(i) for i in range(40)]
    got = range_pairs(vecs, list(range(40)), frags, threshold=0.9, cap=100)
    sims = vecs @ vecs.T
    want = {(i, j) for i in range(40) for j in range(i + 1, 40) if sims[i, j] >= 0.9}
    assert set(got.pairs) == want and len(want) >= 29 * 30 // 2  # more than any top-10 list holds
    assert got.capped == 0
    small = range_pairs(vecs, list(range(40)), frags, threshold=0.9, cap=5)
    assert small.capped >= 29 and set(small.pairs) < want


def _loop_keep(query_rows, neighbours, sims, frags, threshold, cap):
    """The per-query loop range_pairs ran before it was vectorised (the reference)."""
    out, capped = {}, 0
    for u, vs, ss in zip(query_rows, neighbours, sims):
        kept = 0
        for v, s in zip(vs, ss):
            if v < 0 or v == u:
                continue
            if s < threshold:
                break
            f, g = frags[u], frags[v]
            if f.path == g.path and f.start_line <= g.end_line and g.start_line <= f.end_line:
                continue
            if kept >= cap:
                capped += 1
                break
            kept += 1
            key = (min(u, v), max(u, v))
            out[key] = max(out.get(key, -2.0), s)
    return out, capped


@pytest.mark.parametrize("span_chunk", [1 << 22, 7])  # one chunk / the span checks in chunks of 7 entries
@pytest.mark.parametrize("cap", [1, 3, 50])
def test_keep_neighbours_equals_the_per_query_loop(cap, span_chunk, monkeypatch):
    from twinspect.code import candidates
    from twinspect.code.candidates import FragmentSpans, _best_per_pair, _keep_neighbours

    monkeypatch.setattr(candidates, "_SPAN_CHUNK", span_chunk)

    rng = np.random.default_rng(cap)
    n, k = 60, 12
    frags = [_frag(i, f"f{i % 7}.py", 1 + (i % 5) * 3, 4 + (i % 5) * 3) for i in range(n)]  # some nest
    ids = rng.integers(-1, n, size=(n, k))
    sims = -np.sort(-rng.choice([0.2, 0.5, 0.6, 0.7, 0.9], size=(n, k)), axis=1)  # descending, with ties
    want, want_capped = _loop_keep(range(n), ids.tolist(), sims.tolist(), frags, 0.5, cap)
    a, b, c, capped = _keep_neighbours(np.repeat(np.arange(n), k), ids.ravel(), sims.ravel(),
                                       np.arange(0, n * k + 1, k), FragmentSpans(frags), 0.5, cap)
    a, b, c = _best_per_pair(a, b, c)
    assert dict(zip(zip(a.tolist(), b.tolist()), c.tolist())) == want
    assert capped == want_capped


@pytest.mark.parametrize("index,hnsw_min", [("exact", None), ("auto", 0)])  # auto from 0 reps: the reduced HNSW path
def test_candidate_sources_hold_the_shared_tail_lock_while_they_rank(index, hnsw_min, monkeypatch):
    """The range search holds its ``hold`` context from building its index to the end, and the token-overlap
    index ranks and de-duplicates what it found inside its ``tail`` (the pipeline shares one lock between
    them so the overlap's largest temporaries never coincide with the range search's index); both give the
    same candidates with it as without it."""
    import threading

    from twinspect.code import candidates

    if hnsw_min is not None:
        monkeypatch.setattr(candidates, "AUTO_HNSW_MIN", hnsw_min)
    rng = np.random.default_rng(2)
    centre = rng.normal(size=32)
    vecs = np.stack([centre + 0.3 * rng.normal(size=32) for _ in range(60)] + [rng.normal(size=32) for _ in range(20)])
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    words = [f"t{k}" for k in range(12)]
    toks = [[words[int(i)] for i in rng.integers(0, 12, size=int(rng.integers(8, 40)))] for _ in range(80)]
    frags = [_frag(i) for i in range(80)]
    reps = list(range(80))

    class Recorder:
        """A lock that counts how often it is entered."""

        def __init__(self):
            self.lock, self.entries = threading.Lock(), 0

        def __enter__(self):
            self.lock.acquire()
            self.entries += 1

        def __exit__(self, *exc):
            self.lock.release()

    plain_range = range_pairs(vecs, reps, frags, threshold=0.3, cap=5, index=index, index_params={"seed": 0})
    plain_overlap = overlap_pairs(toks, reps, frags, theta=0.5, cap=5)
    tail = Recorder()
    held = {}
    real = candidates._best_per_pair

    def spy(*args):  # every source's last step, de-duplication, runs with the tail held
        held.setdefault("calls", []).append(tail.lock.locked())
        return real(*args)

    monkeypatch.setattr(candidates, "_best_per_pair", spy)
    real_recall = candidates.measure_recall

    def recall_spy(*args, **kwargs):  # the HNSW path's recall measurement: inside the tail too
        held.setdefault("recall", []).append(tail.lock.locked())
        return real_recall(*args, **kwargs)

    monkeypatch.setattr(candidates, "measure_recall", recall_spy)
    from twinspect.code import index as index_mod

    real_make = index_mod.make_index

    def make_spy(*args, **kwargs):  # the range search's index is built with the lock held
        held.setdefault("index", []).append(tail.lock.locked())
        return real_make(*args, **kwargs)

    monkeypatch.setattr(index_mod, "make_index", make_spy)
    got_range = range_pairs(vecs, reps, frags, threshold=0.3, cap=5, index=index, index_params={"seed": 0}, hold=tail)
    got_overlap = overlap_pairs(toks, reps, frags, theta=0.5, cap=5, tail=tail)
    assert tail.entries == 2 and held["calls"] == [True, True]
    assert held.get("recall") == ([True] if index == "auto" else None)
    assert held["index"] == [True]
    assert got_range.pairs == plain_range.pairs and got_range.capped == plain_range.capped
    assert got_overlap.pairs == plain_overlap.pairs and got_overlap.capped == plain_overlap.capped
    assert len(plain_range) > 0 and len(plain_overlap) > 0
