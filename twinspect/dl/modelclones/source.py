"""Source-code level of model clone analysis: the training programs of two models compared three ways.

Wu et al. (ICPC 2020) compare the programs that build and train the models with two plagiarism
tools; twinspect runs both, through their own packages, next to its own clone machinery:

* ``pycode_similar`` — **asymmetric AST score** (the ``pycode-similar`` PyPI package, used as a
  library): every function (and, here, the module-level code) of the *reference* program is matched
  with its most similar function of the *candidate* by AST diff; the score is
  ``|common AST nodes| / |reference AST nodes|`` ("how much of A is found in B"). Python only.
* ``copydetect`` — **MOSS-style winnowing** (Schleimer, Wilkerson & Aiken, SIGMOD 2003) through the
  ``copydetect`` PyPI package: k-gram fingerprints (k = 25 tokens, winnowing window 6, copydetect's
  defaults) of the pygments-tokenised, identifier-abstracted programs; the score is the fraction of
  the reference's tokens covered by fingerprints shared with the candidate. Any language pygments
  knows.
* ``token_lcs`` — twinspect's own clone machinery (:mod:`twinspect.code`): functions extracted with
  tree-sitter (:func:`~twinspect.code.fragments.extract_fragments`), T2-abstracted tokens
  (:func:`~twinspect.code.normalize.abstract_tokens`), and for each reference function its best
  :func:`~twinspect.code.normalize.token_similarity` (BigCloneBench's min-ratio LCS) with a candidate
  function; the score is the token-weighted mean. Module-level code counts as one more fragment.
  Python, Java, C, C++.

All three are asymmetric: ``matrix[i][j]`` is the share of program *i* found in program *j*.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinspect.dl.modelclones.measures import names
from twinspect.errors import InputError

#: The source-code measures, in report order (from the registry :mod:`twinspect.dl.modelclones.measures`).
CODE_MEASURES = names("code")

#: copydetect's defaults (noise threshold 25 tokens, guarantee threshold 30 → window 6).
COPYDETECT_K = 25
COPYDETECT_WINDOW = 6


@dataclass(frozen=True)
class Program:
    """A model's training program: one file or the concatenation of a folder's source files.

    Attributes:
        path: what the user gave.
        files: the source files read, sorted.
        text: their contents joined with newlines.
        language: twinspect's language name of the files' extension, or None when unknown.
        suffix: the extension used for tokenisers (``".py"``).
    """

    path: str
    files: tuple[str, ...]
    text: str
    language: str | None
    suffix: str


def read_program(path: str | Path) -> Program:
    """Read a program file, or every source file of a folder (recursively, one language).

    Raises:
        InputError: the path does not exist, a folder holds no source file, a file is not UTF-8.
    """
    from twinspect.code.languages import EXTENSIONS, language_for

    p = Path(path)
    if not p.exists():
        raise InputError("code file does not exist", p)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in EXTENSIONS)
        if not files:
            raise InputError(f"folder holds no source file ({', '.join(sorted(set(EXTENSIONS)))})", p)
        # one language per program: the most common among its files
        langs = [language_for(f) for f in files]
        main = max(set(langs), key=langs.count)
        files = [f for f, lang in zip(files, langs) if lang == main]
    else:
        files = [p]
    texts = []
    for f in files:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError("code file is not UTF-8 text", f) from exc
        except OSError as exc:
            raise InputError(f"cannot read code file ({exc.strerror or exc})", f) from exc
    return Program(str(p), tuple(str(f) for f in files), "\n".join(texts), language_for(files[0]), files[0].suffix.lower())


class NotApplicable(ValueError):
    """A measure does not apply to these programs (e.g. pycode_similar on Java); the message says why."""


def pycode_similar_score(ref: Program, cand: Program) -> float:
    """pycode_similar's share of the reference's AST found in the candidate, in [0, 1].

    Raises:
        NotApplicable: a program is not Python or does not parse.
    """
    if ref.language != "python" or cand.language != "python":
        raise NotApplicable("pycode_similar compares Python programs only")
    import pycode_similar

    try:
        result = pycode_similar.detect([ref.text, cand.text], module_level=True)
    except SyntaxError as exc:
        raise NotApplicable(f"a program does not parse as Python ({exc.msg}, line {exc.lineno})") from exc
    except pycode_similar.NoFuncException as exc:
        raise NotApplicable("the reference program has no code to compare") from exc
    _, diffs = result[0]
    return float(pycode_similar.summarize(diffs)[0])


def stable_kgram_hashes(string: str, k: int) -> np.ndarray:
    """copydetect's ``utils.hashed_kgrams`` with a hash that is the same in every process.

    copydetect 0.5 hashes each k-gram with Python's ``hash()``, which is salted per process
    (``PYTHONHASHSEED``), so winnowing keeps different fingerprints in every run and
    ``code_copydetect`` moved between runs (0.148 vs 0.138 for the same two files). Here each k-gram
    is hashed by BLAKE2b (8 bytes, as a signed int64); everything else in copydetect is unchanged.

    Args:
        string: copydetect's filtered token text.
        k: k-gram length in characters.

    Returns:
        int64 array of ``max(len(string) - k + 1, 0)`` hashes.
    """
    import hashlib

    data = [string[i:i + k].encode("utf-8", "surrogatepass") for i in range(len(string) - k + 1)]
    return np.array([int.from_bytes(hashlib.blake2b(d, digest_size=8).digest(), "little", signed=True)
                     for d in data], dtype=np.int64)


def _fingerprint(prog: Program):
    import copydetect.utils
    from copydetect import CodeFingerprint

    original = copydetect.utils.hashed_kgrams
    copydetect.utils.hashed_kgrams = stable_kgram_hashes  # reproducible fingerprints (see stable_kgram_hashes)
    try:
        return CodeFingerprint("program" + prog.suffix, COPYDETECT_K, COPYDETECT_WINDOW, fp=io.StringIO(prog.text))
    finally:
        copydetect.utils.hashed_kgrams = original


def copydetect_scores(programs: Sequence[Program]) -> list[list[float | None]]:
    """copydetect's winnowing overlap for every ordered pair: ``m[i][j]`` = share of program i's
    tokens shared with program j (None on the diagonal's complement when a program is too short to
    fingerprint)."""
    from copydetect import compare_files

    prints = []
    for p in programs:
        try:
            prints.append(_fingerprint(p))
        except Exception:  # noqa: BLE001 - pygments cannot tokenise / too short
            prints.append(None)
    n = len(programs)
    out: list[list[float | None]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if prints[i] is None or prints[j] is None:
                continue
            if i == j:
                out[i][j] = 1.0
                continue
            if j < i:
                continue
            _, (si, sj), _ = compare_files(prints[i], prints[j])
            out[i][j], out[j][i] = float(si), float(sj)
    return out


def _fragments(prog: Program):
    from twinspect.code.fragments import Fragment, extract_fragments

    frags = extract_fragments(prog.text, Path(prog.path).name, prog.language or "python", min_lines=1)
    covered: set[int] = set()
    for f in frags:
        covered.update(range(f.start_line, f.end_line + 1))
    lines = prog.text.splitlines()
    rest = "\n".join("" if i + 1 in covered else line for i, line in enumerate(lines))
    if rest.strip():
        frags = [*frags, Fragment(Path(prog.path).name, 1, max(len(lines), 1), "<module>", prog.language or "python", rest)]
    return frags


def token_lcs_scores(programs: Sequence[Program]) -> list[list[float | None]]:
    """twinspect's fragment-matching share for every ordered pair (see the module docstring); None
    for programs in a language twinspect.code does not parse."""
    from twinspect.code.normalize import abstract_tokens, token_similarity

    toks: list[list[list[str]] | None] = []
    for p in programs:
        if p.language is None:
            toks.append(None)
            continue
        toks.append([t for t in (abstract_tokens(f) for f in _fragments(p)) if t])
    n = len(programs)
    out: list[list[float | None]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            ti, tj = toks[i], toks[j]
            if ti is None or tj is None or not ti or not tj:
                continue
            if i == j:
                out[i][j] = 1.0
                continue
            total = sum(len(t) for t in ti)
            got = sum(len(t) * max(token_similarity(t, u) for u in tj) for t in ti)
            out[i][j] = got / total
    return out
