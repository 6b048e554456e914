"""Greedy String Tiling (JPlag's comparison) and the file-granularity detection built on it."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest

from twinspect.code import tiling
from twinspect.code.clones import DetectConfig, scan
from twinspect.code.fragments import Fragment
from twinspect.code.tiling import Tile, candidate_pairs, greedy_string_tiling, program_tokens, similarity


def wise_reference(a, b, min_match, marked_a=None, marked_b=None):
    """Wise's algorithm as published (quadratic scan per iteration), the reference for the fast one."""
    ma = list(marked_a) if marked_a is not None else [False] * len(a)
    mb = list(marked_b) if marked_b is not None else [False] * len(b)
    tiles = []
    while True:
        maxmatch, matches = min_match, []
        for p in range(len(a)):
            if ma[p]:
                continue
            for q in range(len(b)):
                if mb[q]:
                    continue
                j = 0
                while p + j < len(a) and q + j < len(b) and a[p + j] == b[q + j] and not ma[p + j] and not mb[q + j]:
                    j += 1
                if j == maxmatch:
                    matches.append((p, q, j))
                elif j > maxmatch:
                    matches, maxmatch = [(p, q, j)], j
        for p, q, j in matches:
            if not any(ma[p:p + j]) and not any(mb[q:q + j]):
                for k in range(j):
                    ma[p + k] = mb[q + k] = True
                tiles.append(Tile(p, q, j))
        if maxmatch == min_match:
            return tiles


def _random_pair(rng: random.Random):
    vocab = rng.choice([2, 3, 5, 40, 300])
    a = [rng.randrange(vocab) for _ in range(rng.randint(0, 45))]
    if a and rng.random() < 0.6:  # an edited copy: shuffled blocks, substitutions
        blocks = [a[i:i + 7] for i in range(0, len(a), 7)]
        rng.shuffle(blocks)
        b = [t for blk in blocks for t in blk]
        for _ in range(rng.randint(0, 4)):
            b[rng.randrange(len(b))] = rng.randrange(vocab)
    else:
        b = [rng.randrange(vocab) for _ in range(rng.randint(0, 45))]
    return a, b


@pytest.mark.parametrize("seed", range(4))
def test_gst_matches_wise_reference_on_random_sequences(seed):
    rng = random.Random(seed)
    for _ in range(400):
        a, b = _random_pair(rng)
        mm = rng.randint(1, 7)
        assert greedy_string_tiling(a, b, mm) == wise_reference(a, b, mm), (a, b, mm)


def test_gst_with_marks_matches_reference_and_never_tiles_marked_tokens():
    rng = random.Random(7)
    for _ in range(300):
        a, b = _random_pair(rng)
        ma = np.array([rng.random() < 0.15 for _ in a], dtype=bool)
        mb = np.array([rng.random() < 0.15 for _ in b], dtype=bool)
        mm = rng.randint(1, 5)
        tiles = greedy_string_tiling(a, b, mm, marked_a=ma, marked_b=mb)
        assert tiles == wise_reference(a, b, mm, ma, mb)
        for t in tiles:
            assert not ma[t.i:t.i + t.length].any() and not mb[t.j:t.j + t.length].any()


def test_tiles_are_common_non_overlapping_longest_first():
    rng = random.Random(3)
    for _ in range(200):
        a, b = _random_pair(rng)
        tiles = greedy_string_tiling(a, b, 3)
        used_a, used_b = set(), set()
        for t in tiles:
            assert t.length >= 3 and a[t.i:t.i + t.length] == b[t.j:t.j + t.length]
            span_a, span_b = set(range(t.i, t.i + t.length)), set(range(t.j, t.j + t.length))
            assert not (span_a & used_a) and not (span_b & used_b)
            used_a |= span_a
            used_b |= span_b
        assert [t.length for t in tiles] == sorted((t.length for t in tiles), reverse=True)


def test_gst_known_cases():
    # a swapped pair of blocks is covered by two tiles, longest first
    a = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    b = [6, 7, 8, 9, 1, 2, 3, 4, 5]
    assert greedy_string_tiling(a, b, 3) == [Tile(0, 4, 5), Tile(5, 0, 4)]
    assert greedy_string_tiling(a, b, 5) == [Tile(0, 4, 5)]
    assert greedy_string_tiling([], b, 1) == [] and greedy_string_tiling(a, [], 1) == []
    # tokens beyond 63 bits of one window: exact keys with a narrower window
    big = [10**6, 3, 10**6 + 1, 4, 5, 6]
    assert greedy_string_tiling(big, [0] + big, 6) == [Tile(0, 1, 6)]
    with pytest.raises(ValueError):
        greedy_string_tiling(a, b, 0)
    with pytest.raises(ValueError):
        greedy_string_tiling([-1], [1], 1)
    with pytest.raises(ValueError):
        greedy_string_tiling(a, b, 2, marked_a=np.zeros(3, dtype=bool))


def test_similarity_measures():
    assert similarity(30, 40, 60, "avg") == pytest.approx(0.6)
    assert similarity(30, 40, 60, "max") == pytest.approx(0.75)
    assert similarity(0, 0, 10) == 0.0
    with pytest.raises(ValueError):
        similarity(1, 2, 3, "min")


def test_candidate_pairs_is_the_dice_of_window_sets():
    rng = np.random.default_rng(0)
    windows = [np.unique(rng.integers(0, 40, size=rng.integers(0, 30)).astype(np.uint64)) for _ in range(300)]
    got = {tuple(p) for p in candidate_pairs(windows, 0.4).tolist()}
    want = set()
    for a, b in itertools.combinations(range(len(windows)), 2):
        sa, sb = set(windows[a].tolist()), set(windows[b].tolist())
        if sa or sb:
            if 2 * len(sa & sb) / (len(sa) + len(sb)) >= 0.4:
                want.add((a, b))
    assert got == want
    assert len(candidate_pairs(windows[:5], 0.0)) == 10


ORIGINAL = """\
import java.util.Scanner;

public class Main {
    static int best(int[] values, int limit) {
        int total = 0;
        int count = 0;
        for (int i = 0; i < values.length; i++) {
            if (total + values[i] <= limit) {
                total += values[i];
                count++;
            }
        }
        return count;
    }

    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt();
        int limit = in.nextInt();
        int[] values = new int[n];
        for (int i = 0; i < n; i++) {
            values[i] = in.nextInt();
        }
        java.util.Arrays.sort(values);
        System.out.println(best(values, limit));
    }
}
"""

# renamed identifiers, a comment, reordered methods, dropped modifiers, different imports
COPY = """\
import java.util.*;

class Solution {
    public static void main(String[] argv) {
        // read input
        Scanner sc = new Scanner(System.in);
        int m = sc.nextInt();
        int cap = sc.nextInt();
        int[] arr = new int[m];
        for (int k = 0; k < m; k++) {
            arr[k] = sc.nextInt();
        }
        java.util.Arrays.sort(arr);
        System.out.println(solve(arr, cap));
    }

    private static int solve(int[] arr, int cap) {
        int sum = 0;
        int taken = 0;
        for (int k = 0; k < arr.length; k++) {
            if (sum + arr[k] <= cap) {
                sum += arr[k];
                taken++;
            }
        }
        return taken;
    }
}
"""

UNRELATED = """\
import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        BufferedReader br = new BufferedReader(new InputStreamReader(System.in));
        String s = br.readLine().trim();
        StringBuilder out = new StringBuilder();
        char last = 0;
        int run = 0;
        for (char c : s.toCharArray()) {
            if (c == last) {
                run++;
            } else {
                if (run > 0) {
                    out.append(last).append(run);
                }
                last = c;
                run = 1;
            }
        }
        if (run > 0) {
            out.append(last).append(run);
        }
        System.out.print(out);
    }
}
"""


def _frag(name: str, text: str) -> Fragment:
    return Fragment(name, 1, text.count("\n"), name, "java", text, text)


def test_program_tokens_drop_modifiers_and_imports_and_mark_base_lines():
    toks, marked = program_tokens(_frag("A.java", ORIGINAL))
    assert "import" not in toks and "public" not in toks and "static" not in toks
    assert toks[:4] == ["class", "ID", "{", "int"] and not any(marked)
    toks2, marked2 = program_tokens(_frag("A.java", ORIGINAL), frozenset({"int total = 0;"}))
    assert toks2 == toks and sum(marked2) == 5  # int ID = LIT ;


def test_renamed_reordered_copy_is_linked_and_unrelated_program_is_not(tmp_path: Path):
    for name, text in (("Main.java", ORIGINAL), ("Solution.java", COPY), ("Other.java", UNRELATED)):
        (tmp_path / name).write_text(text)
    report = scan([tmp_path], DetectConfig(granularity="file"))
    names = [Path(f.path).name for f in report.fragments]
    linked = {frozenset((names[p.a], names[p.b])): p for p in report.pairs}
    assert set(linked) == {frozenset(("Main.java", "Solution.java"))}
    pair = next(iter(linked.values()))
    assert pair.type == "T3" and pair.score == pair.similarity >= tiling.THRESHOLD
    assert report.config["decision"] == "tiling" and report.stats["tiling"]["min_match"] == tiling.MIN_MATCH
    # the similarity reported is the tiling's: recompute it from the two files' tokens
    (ta, _), (tb, _) = program_tokens(report.fragments[pair.a]), program_tokens(report.fragments[pair.b])
    vocab = {t: i for i, t in enumerate(sorted(set(ta) | set(tb)))}
    cov = tiling.coverage(greedy_string_tiling([vocab[t] for t in ta], [vocab[t] for t in tb], tiling.MIN_MATCH))
    assert pair.similarity == pytest.approx(similarity(cov, len(ta), len(tb)))
    json.dumps(report.to_json_dict())  # the JSON contract still serialises


def test_function_granularity_does_not_use_tiling(tmp_path: Path):
    for name, text in (("Main.java", ORIGINAL), ("Solution.java", COPY)):
        (tmp_path / name).write_text(text)
    report = scan([tmp_path], DetectConfig(min_lines=3))
    assert report.config["decision"] == "verifier" and "tiling" not in report.stats
    assert all(f.name not in ("Main.java", "Solution.java") for f in report.fragments)
