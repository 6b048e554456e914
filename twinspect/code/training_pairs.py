"""Labelled clone pairs for contrastive fine-tuning of the neural encoder, read from CSV or JSONL.

Used by ``twinspect clones finetune`` and :func:`twinspect.code.encoders.finetune.finetune`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twinspect.errors import InputError

_POSITION_COLUMNS = (
    ("path1", "start_line1", "end_line1", "path2", "start_line2", "end_line2"),
    ("private_path", "private_start_line", "private_end_line", "os_path", "os_path_start_line", "os_path_end_line"),
)
_TRUE = {"1", "true", "yes", "y", "t", "clone"}


def load_training_pairs(
    path: str | Path, root: str | Path | None = None, language: str | None = None
) -> list[tuple[Any, Any]]:
    """Read labelled clone pairs for fine-tuning from a CSV or JSONL file.

    Each row/record gives the two fragments either as code (``code1``, ``code2``) or as file
    positions (``path1, start_line1, end_line1, path2, start_line2, end_line2``; SSCD's
    ``private_path, private_start_line, ..., os_path_end_line`` columns are accepted too), with
    paths relative to ``root`` (default: the pairs file's directory) and 1-based inclusive lines.
    An optional ``label`` or ``is_clone`` column keeps only the rows marked as clones
    (1/true/yes); other rows are ignored (in-batch negatives come from the other pairs).

    Args:
        path: ``.csv`` (with a header row) or ``.jsonl`` file.
        root: directory that relative paths start from.
        language: language of the fragments (default: each file's extension for positional rows,
            the ``language`` column/field for code rows).

    Returns:
        A list of ``(Fragment, Fragment)`` clone pairs, in file order.

    Raises:
        InputError: the file is missing, unreadable, malformed, lacks the needed columns, or refers
            to missing files or line ranges outside a file (the message names the file and row).
    """
    import csv
    import json

    from twinspect._io import require_readable
    from twinspect.code.fragments import Fragment
    from twinspect.code.languages import language_for

    path = require_readable(path, "pairs file")
    base = Path(root) if root is not None else path.parent
    suffix = path.suffix.lower()
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            if suffix == ".csv":
                rows = list(csv.DictReader(fh))
            elif suffix in (".jsonl", ".ndjson"):
                rows = []
                for n, line in enumerate(fh, 1):
                    if line.strip():
                        try:
                            rec = json.loads(line)
                        except json.JSONDecodeError as exc:
                            raise InputError(f"line {n} is not valid JSON: {exc.msg}", path) from exc
                        if not isinstance(rec, dict):
                            raise InputError(f"line {n} is not a JSON object", path)
                        rows.append(rec)
            else:
                raise InputError("pairs file must be .csv or .jsonl", path)
    except UnicodeDecodeError as exc:
        raise InputError("pairs file is not UTF-8 text", path) from exc
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path) from exc
    if not rows:
        return []
    keys = set(rows[0])
    cols = next((c for c in _POSITION_COLUMNS if set(c) <= keys), None)
    if cols is None and not {"code1", "code2"} <= keys:
        raise InputError(
            "pairs file needs columns code1,code2 or path1,start_line1,end_line1,path2,start_line2,end_line2",
            path, hint=f"found: {', '.join(sorted(map(str, keys)))}",
        )
    label_key = next((k for k in ("label", "is_clone") if k in keys), None)
    cache: dict[Path, list[str]] = {}

    def lines_of(file: Path) -> list[str]:
        if file not in cache:
            try:
                cache[file] = file.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError as exc:
                raise InputError(f"cannot read source file: {exc.strerror or exc}", file) from exc
        return cache[file]

    def lang(p: str, n: int) -> str:
        found = language or language_for(p)
        if not found:
            raise InputError(f"row {n}: cannot tell the language of {p!r}", path, hint="pass --language")
        return found

    def positional(row: dict, n: int, i: int) -> Fragment:
        assert cols is not None
        rel, start, end = row[cols[3 * i]], row[cols[3 * i + 1]], row[cols[3 * i + 2]]
        try:
            start, end = int(start), int(end)
        except (TypeError, ValueError) as exc:
            raise InputError(f"row {n}: line numbers must be integers", path) from exc
        file = base / str(rel)
        src = lines_of(file)
        if not 1 <= start <= end <= len(src):
            raise InputError(f"row {n}: lines {start}-{end} are outside the file ({len(src)} lines)", file)
        return Fragment(str(rel), start, end, "", lang(str(rel), n), "\n".join(src[start - 1 : end]))

    pairs = []
    for n, row in enumerate(rows, 1):
        if label_key is not None and str(row.get(label_key)).strip().lower() not in _TRUE:
            continue
        if cols is not None:
            pairs.append((positional(row, n, 0), positional(row, n, 1)))
        else:
            a, b = row.get("code1"), row.get("code2")
            if not isinstance(a, str) or not isinstance(b, str) or not a.strip() or not b.strip():
                raise InputError(f"row {n}: code1 and code2 must be non-empty strings", path)
            la = language or str(row.get("language") or "")
            if not la:
                raise InputError(f"row {n}: no language for code1/code2", path,
                                 hint="add a 'language' column/field or pass --language")
            from twinspect.code.languages import canonical_language

            la = canonical_language(la)
            pairs.append((Fragment(f"row{n}.a", 1, a.count("\n") + 1, "", la, a),
                          Fragment(f"row{n}.b", 1, b.count("\n") + 1, "", la, b)))
    return pairs
