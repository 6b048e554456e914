"""Clone checks in CI: a baseline of known clone pairs, and the duplicated-lines percentage.

``twinspect clones PATHS --baseline OLD.json`` reports only the clone pairs that are not in an
earlier JSON report (:func:`load_baseline`, :func:`filter_report`); ``--fail-over PCT`` exits 1 when
the duplicated-lines percentage of the tree (:func:`duplication`) is above PCT, as jscpd's
``--threshold`` does.

**Matching a pair to the baseline.** A fragment is identified by its path, its name and a hash of
its code after layout and comment normalisation (:func:`code_hash`, the T1 key that decides Type-1
clones; the JSON report stores it per fragment as ``code_hash``), not by its line numbers: a known
pair stays known when lines are added or removed above or between its fragments, or when its code
is re-indented or its comments change. A pair counts as new when one of its fragments was renamed,
moved to another file, or its code changed (a new statement, a renamed variable). A baseline written
before ``code_hash`` existed is matched by ``(path, name, start_line, end_line)`` instead (its pairs
then reappear as new when their lines move). Two fragments with the same path, name and code (a
function defined twice in one file) are one identity.

**Exact-duplicate groups too large to list pair by pair** (the report's ``identical_groups`` and
``group_pairs``): a baseline group makes every pair of its members known, a baseline group pair
every pair across its two sides. A current group whose member pairs are all known is dropped; one
that gained members is kept whole and lists, as ``baseline_members``, the members whose mutual pairs
the baseline already had. A current group pair is dropped when all its cross pairs are known, else
kept whole.

**Duplicated lines** (:func:`duplication`) follow jscpd 5 (``cpd-finder/src/statistics.rs``: the
lines of each clone's *first* fragment summed, over every line of the scanned files, blank and
comment lines included): twinspect reports every pair of a group of copies, so summing one side per
pair would count a line many times and exceed 100 %; instead the fragments of each connected
component of the pair graph except its first one (by path, then line) are the copies, and the
duplicated lines are the distinct lines of those copies. For two copies of an N-line function this
is N, and for three copies 2N, the numbers jscpd reports.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from twinspect.code.clones import CloneReport, lowest_id_components
from twinspect.code.fragments import Fragment
from twinspect.errors import InputError

#: The JSON report's per-fragment field holding :func:`code_hash`.
HASH_FIELD = "code_hash"

#: A fragment identity: ``("h", path, name, code_hash)`` or, for a baseline without hashes,
#: ``("l", path, name, start_line, end_line)``.
Key = tuple

_WRITE_HINT = "write one with: twinspect clones PATH... -f json -o FILE"


def code_hash(fragment: Fragment) -> str:
    """The fragment's code hash: 32 hex digits (BLAKE2b-128) of its tokens after layout and comment
    normalisation (:func:`twinspect.code.normalize.t1_key`), independent of its line numbers."""
    from twinspect.code.normalize import t1_key

    return t1_key(fragment)


def add_json_fields(doc: dict, report: CloneReport) -> dict:
    """Add this module's fields to a JSON report dict: :data:`HASH_FIELD` to each fragment entry, and
    ``baseline_members`` to the identical groups :func:`filter_report` kept.

    Args:
        doc: ``report.to_json_dict()`` (lists, changed in place) or ``dict(report.json_fields())``
            (one-shot iterators, replaced by iterators that add the fields as entries pass);
            ``doc["fragments"]`` describes ``report.fragments`` in order and ``doc["identical_groups"]``
            ``report.identical_groups``.
        report: the report.

    Returns:
        ``doc``.
    """

    def hashed(entries: Iterable[dict]) -> Iterator[dict]:
        for i, entry in zip(range(len(report.fragments)), entries):
            entry[HASH_FIELD] = report.code_hash(i)
            yield entry

    def with_members(entries: Iterable[dict]) -> Iterator[dict]:
        for entry, g in zip(entries, report.identical_groups):
            if "baseline_members" in g:
                entry["baseline_members"] = [int(m) for m in g["baseline_members"]]
            yield entry

    for key, add in (("fragments", hashed), ("identical_groups", with_members)):
        entries = doc.get(key)
        if isinstance(entries, list):
            for _ in add(entries):
                pass
        elif entries is not None:
            doc[key] = add(entries)
    return doc


def content_key(f: Fragment, known_hash: str | None = None) -> Key:
    """A fragment's line-shift-stable identity ``("h", path, name, code_hash)``; ``known_hash`` is its
    :func:`code_hash` when already known (e.g. :meth:`CloneReport.code_hash`), else it is computed."""
    return ("h", f.path, f.name, code_hash(f) if known_hash is None else known_hash)


def line_key(f: Fragment) -> Key:
    """A fragment's identity by lines ``("l", path, name, start_line, end_line)`` (old baselines)."""
    return ("l", f.path, f.name, int(f.start_line), int(f.end_line))


@dataclasses.dataclass
class Baseline:
    """The clone pairs of an earlier JSON report, by fragment identity (:data:`Key`).

    Attributes:
        path: the baseline file, as given.
        pairs: unordered known pairs, as frozensets of one or two keys.
        groups_of: key -> indices of the baseline's ``identical_groups`` holding that fragment.
        sides_of: key -> ``(group pair index, side 0 or 1)`` of the baseline's ``group_pairs``.
        hashed: True when every baseline fragment had a ``code_hash`` (matching by content); False
            when some had none (those are matched by their line span).
        n_pairs: pairs listed in the baseline's ``pairs``.
    """

    path: str
    pairs: set[frozenset] = dataclasses.field(default_factory=set)
    groups_of: dict[Key, set[int]] = dataclasses.field(default_factory=dict)
    sides_of: dict[Key, set[tuple[int, int]]] = dataclasses.field(default_factory=dict)
    hashed: bool = True
    n_pairs: int = 0

    def known(self, x: Key, y: Key) -> bool:
        """True when the pair of fragments ``x``, ``y`` is in the baseline: listed in its ``pairs``,
        both members of one identical group, or on opposite sides of one group pair."""
        if frozenset((x, y)) in self.pairs:
            return True
        gx, gy = self.groups_of.get(x), self.groups_of.get(y)
        if gx and gy and not gx.isdisjoint(gy):
            return True
        sx, sy = self.sides_of.get(x), self.sides_of.get(y)
        return bool(sx and sy and any((g, 1 - s) in sy for g, s in sx))


def _not_a_report(path: str | Path, what: str) -> InputError:
    return InputError(f"not a twinspect clones JSON report: {what}", path, hint=_WRITE_HINT)


def _ids(value: Any, n: int, path: str | Path, where: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise _not_a_report(path, f"{where} is not a list of fragment ids")
    if any(not 0 <= i < n for i in value):
        raise _not_a_report(path, f"{where} names a fragment id outside 0..{n - 1}")
    return value


def parse_baseline(doc: Any, path: str | Path) -> Baseline:
    """Read the known pairs out of a parsed JSON clone report.

    Args:
        doc: the parsed JSON (:meth:`CloneReport.to_json_dict`, with or without ``code_hash``).
        path: the file it came from (named in errors and kept in :attr:`Baseline.path`).

    Returns:
        The :class:`Baseline`.

    Raises:
        InputError: ``doc`` is not a clones report (a SARIF log, another twinspect report, a
            fragment without path/name/lines, a pair naming a fragment that does not exist).
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("fragments"), list) or not isinstance(
            doc.get("pairs"), list):
        kind = "a SARIF log" if isinstance(doc, dict) and "runs" in doc else "no \"fragments\" and \"pairs\" lists"
        raise _not_a_report(path, kind)
    keys: list[Key] = []
    hashed = True
    for i, e in enumerate(doc["fragments"]):
        if not (isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("name"), str)
                and isinstance(e.get("start_line"), int) and isinstance(e.get("end_line"), int)):
            raise _not_a_report(path, f"fragment {i} lacks path, name, start_line or end_line")
        h = e.get(HASH_FIELD)
        if isinstance(h, str) and h:
            keys.append(("h", e["path"], e["name"], h))
        else:
            hashed = False
            keys.append(("l", e["path"], e["name"], e["start_line"], e["end_line"]))
    n = len(keys)
    base = Baseline(path=str(path), hashed=hashed)
    for j, p in enumerate(doc["pairs"]):
        if not isinstance(p, dict):
            raise _not_a_report(path, f"pair {j} is not an object")
        a, b = _ids([p.get("a"), p.get("b")], n, path, f"pair {j}")
        base.pairs.add(frozenset((keys[a], keys[b])))
    base.n_pairs = len(doc["pairs"])
    for gi, g in enumerate(doc.get("identical_groups") or []):
        members = _ids(g.get("members") if isinstance(g, dict) else None, n, path, f"identical group {gi}")
        for m in members:
            base.groups_of.setdefault(keys[m], set()).add(gi)
    for gi, g in enumerate(doc.get("group_pairs") or []):
        for side, name in enumerate(("a", "b")):
            ids = _ids(g.get(name) if isinstance(g, dict) else None, n, path, f"group pair {gi}")
            for m in ids:
                base.sides_of.setdefault(keys[m], set()).add((gi, side))
    return base


def load_baseline(path: str | Path) -> Baseline:
    """Read a baseline: a JSON report written by ``twinspect clones ... -f json -o FILE``.

    Args:
        path: the report file.

    Returns:
        The :class:`Baseline` (see :func:`parse_baseline`).

    Raises:
        InputError: the file is missing, a directory, unreadable, not JSON, or not a clones report;
            one line naming the file.
    """
    from twinspect._io import read_json

    if Path(path).is_dir():
        raise InputError("is a directory, expected a JSON clone report", path, hint=_WRITE_HINT)
    if not Path(path).exists():
        raise InputError("file does not exist", path, hint=_WRITE_HINT)
    return parse_baseline(read_json(path), path)


def _combinations(n: int) -> int:
    return n * (n - 1) // 2


def filter_report(report: CloneReport, baseline: Baseline) -> CloneReport:
    """The report without the clone pairs (and exact-duplicate groups) already in ``baseline``.

    Fragments (and so ids) are unchanged; ``pairs``, ``identical_groups`` and ``group_pairs`` keep
    what is new (see the module doc); ``classes`` keep the clone classes holding at least one new
    pair (whole, known members included, so a new copy is shown with the class it joined). The
    stats' pair and class counts are recomputed, and the stats gain ``baseline`` (the file),
    ``baseline_hashed`` (matched by code hash, or by line span for an old baseline),
    ``baseline_pairs_suppressed`` (entries of ``pairs`` dropped) and ``baseline_groups_suppressed``
    (identical groups and group pairs dropped).

    Args:
        report: the clone report of the current tree.
        baseline: the known pairs (:func:`load_baseline`).

    Returns:
        A new :class:`CloneReport`; ``report`` is not modified.
    """
    frags = report.fragments
    hkeys: dict[int, Key] = {}  # computed for the fragments of pairs only

    def hkey(i: int) -> Key:
        if i not in hkeys:
            hkeys[i] = content_key(frags[i], report.code_hash(i))
        return hkeys[i]

    def known(a: int, b: int) -> bool:
        return baseline.known(hkey(a), hkey(b)) or (
            not baseline.hashed and baseline.known(line_key(frags[a]), line_key(frags[b])))

    def groups(i: int) -> set[int]:
        out = set(baseline.groups_of.get(hkey(i), ()))
        if not baseline.hashed:
            out |= baseline.groups_of.get(line_key(frags[i]), set())
        return out

    pairs = [p for p in report.pairs if not known(p.a, p.b)]
    kept_groups: list[dict] = []
    for g in report.identical_groups:
        members = list(g["members"])
        counts: dict[int, int] = {}
        for m in members:
            for gi in groups(m):
                counts[gi] = counts.get(gi, 0) + 1
        if counts and max(counts.values()) == len(members):
            continue  # one baseline group held them all
        old: list[int] = []
        for m in members:  # greedy: members whose pairs with every earlier old member are known
            if all(known(m, o) for o in old):
                old.append(m)
        if len(old) == len(members):
            continue
        entry = dict(g)
        if len(old) >= 2:
            entry["baseline_members"] = old
        kept_groups.append(entry)
    kept_group_pairs = [g for g in report.group_pairs
                        if not all(known(a, b) for a in g["a"] for b in g["b"])]
    out = report.restricted(pairs, kept_groups, kept_group_pairs)
    stats = out.stats
    stats["baseline"] = baseline.path
    stats["baseline_hashed"] = baseline.hashed
    stats["baseline_pairs_suppressed"] = len(report.pairs) - len(pairs)
    stats["baseline_groups_suppressed"] = (len(report.identical_groups) - len(kept_groups)
                                           + len(report.group_pairs) - len(kept_group_pairs))
    return out


def _lines_of(frags: Sequence[Fragment], ids: Iterable[int]) -> int:
    by_path: dict[str, set[int]] = {}
    for i in ids:
        f = frags[i]
        by_path.setdefault(f.path, set()).update(range(f.start_line, f.end_line + 1))
    return sum(len(s) for s in by_path.values())


#: The clone types a duplicated-lines percentage counts by default (every type twinspect reports).
ALL_TYPES = ("T1", "T2", "T3", "T4")
#: The copies in jscpd's sense: the types whose duplicated lines the summary shows beside all types'.
COPY_TYPES = ("T1", "T2")


def _pct(part: int, total: int) -> float:
    return round(min(100.0, 100.0 * part / total), 4) if total > 0 else 0.0


def duplication(report: CloneReport, total_lines: int | None = None,
                types: Sequence[str] | None = None) -> dict[str, Any]:
    """The duplicated-lines percentage of a scan, as jscpd defines it (see the module doc).

    Duplicated lines: the distinct source lines (``path``, line number) spanned by the copies, i.e.
    by every fragment of a clone pair except the first fragment (lowest path, then line) of each
    connected component of the pair graph. Total lines: every physical line of the parsed files,
    blank and comment lines included (``stats["total_lines"]``, jscpd's ``lines``).

    jscpd counts exact token-sequence copies only; twinspect's pairs include near-miss (T3) and
    semantic (T4) clones, whose lines are counted whole, so on a test-heavy tree the percentage over
    all types can be several times jscpd's. The same count over the T1/T2 pairs alone is returned
    beside it (``copied_lines``), and ``types`` restricts the main count (``--fail-over-types``).

    Args:
        report: a clone report (all pairs found; pass the report before :func:`filter_report` for
            the percentage of the whole tree).
        total_lines: the denominator; None reads ``report.stats["total_lines"]``.
        types: the clone types (``"T1"``–``"T4"``) whose pairs are counted; None: all of them.

    Returns:
        ``{"duplicated_lines": int, "total_lines": int, "duplicated_lines_pct": float in [0, 100]
        (0.0 when there are no lines), "lines_in_clones": int, "copied_lines": int,
        "copied_lines_pct": float}``; ``lines_in_clones`` counts the distinct lines of every
        fragment in a counted pair, first copies included; ``copied_lines`` is
        ``duplicated_lines`` over the T1/T2 pairs only. With ``types``, also ``"duplicated_types":
        [str]``, the types counted.

    Raises:
        InputError: a type in ``types`` that is not one of ``T1``–``T4``.
    """
    counted = check_types(types)  # all four when None
    total = int(report.stats.get("total_lines", 0) if total_lines is None else total_lines)

    def copies_of(kinds: Sequence[str]) -> tuple[list[int], list[int]]:
        # a component's lowest id is its first fragment (fragments are sorted by path, then line)
        first = lowest_id_components((), ((p.a, p.b) for p in report.pairs if p.type in kinds))
        involved = list(first)
        return involved, [i for i in involved if first[i] != i]

    involved, copies = copies_of(counted)
    dup = _lines_of(report.fragments, copies)
    copied = _lines_of(report.fragments, copies_of(COPY_TYPES)[1])
    out: dict[str, Any] = {
        "duplicated_lines": dup,
        "total_lines": total,
        "duplicated_lines_pct": _pct(dup, total),
        "lines_in_clones": _lines_of(report.fragments, involved),
        "copied_lines": copied,
        "copied_lines_pct": _pct(copied, total),
    }
    if types is not None:
        out["duplicated_types"] = list(counted)
    return out


def check_types(types: Sequence[str] | str | None) -> tuple[str, ...]:
    """Validate ``--fail-over-types``: clone types as a sequence or one comma-separated string.

    Returns:
        The distinct types in ``T1``–``T4`` order (all four when ``types`` is None).

    Raises:
        InputError: an empty list or a name that is not ``T1``–``T4`` (case-insensitive).
    """
    if types is None:
        return ALL_TYPES
    names = types.split(",") if isinstance(types, str) else list(types)
    wanted = {n.strip().upper() for n in names if n.strip()}
    bad = sorted(wanted - set(ALL_TYPES))
    if bad or not wanted:
        raise InputError(f"--fail-over-types takes clone types among T1,T2,T3,T4 separated by commas, "
                         f"got {types if isinstance(types, str) else ','.join(names)!r}")
    return tuple(t for t in ALL_TYPES if t in wanted)


def check_fail_over(pct: float | None) -> float | None:
    """Validate ``--fail-over PCT``.

    Returns:
        ``pct`` (None when not given).

    Raises:
        InputError: ``pct`` is not a number in [0, 100].
    """
    if pct is not None and (math.isnan(pct) or not 0.0 <= pct <= 100.0):
        raise InputError(f"--fail-over must be a percentage in [0, 100], got {pct:g}")
    return pct


def over_threshold(stats: dict, pct: float) -> str | None:
    """The one-line failure message when ``stats["duplicated_lines_pct"]`` exceeds ``pct``, else None.

    Args:
        stats: report stats holding ``duplicated_lines_pct`` (:func:`duplication`).
        pct: the ``--fail-over`` percentage; exceeding means strictly above (as jscpd's ``--threshold``).

    Returns:
        e.g. ``"duplicated lines 7.3 % > --fail-over 5 %"``, or None.
    """
    value = float(stats.get("duplicated_lines_pct", 0.0))
    if value <= pct:
        return None
    shown = f"{value:.1f}"
    if float(shown) <= pct:  # rounding would hide why it failed
        shown = f"{value:.4f}".rstrip("0")
    types = stats.get("duplicated_types")
    of = f" ({'/'.join(types)} pairs)" if types and tuple(types) != ALL_TYPES else ""
    return f"duplicated lines{of} {shown} % > --fail-over {pct:g} %"


def new_pairs_message(report: CloneReport) -> str | None:
    """The one-line failure message of ``--fail-on-new`` when the report lists any clone pair (after
    :func:`filter_report`: any pair, exact-duplicate group or group pair not in the baseline), else None.

    Returns:
        e.g. ``"2 new clone pairs not in the baseline old.json (--fail-on-new)"``, or without a
        baseline ``"18 clone pairs (--fail-on-new)"``; None when there is nothing to report.
    """
    st = report.stats
    if not (report.pairs or report.identical_groups or report.group_pairs):
        return None
    n = len(report.pairs)
    noun = "clone pair" if n == 1 else "clone pairs"
    if "baseline" in st:
        return f"{n} new {noun} not in the baseline {st['baseline']} (--fail-on-new)"
    return f"{n} {noun} (--fail-on-new)"
