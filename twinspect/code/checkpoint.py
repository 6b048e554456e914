"""The parse checkpoint of ``twinspect clones --cache DIR``: every parsed file's fragments, kept on disk.

Parsing is the stage that reads every file; on a large tree it is minutes of work (42,700 files of a
``site-packages`` tree: about 2 minutes on 2 cores). With a cache directory, :func:`~twinspect.code.fragments.mine`
stores each file's result — its fragments (text and comment-blanked code), its scan counters and the
T1 tokens and normalised lines lexed with it — in an SQLite database, committed after every shard of
files. So:

* an interrupted run resumes: the files parsed before the interruption are read back, not parsed;
* the next run on a changed tree re-parses only the files whose size or modification time changed
  (and files new to the tree); removed files simply are not asked for.

A file's entry is valid for one ``(size, mtime_ns, language)`` and one set of mining options
(``min_lines``, ``granularity``, parse-error policy and the twinspect version); a cache written with
other options is emptied on open (``reset`` in :attr:`ParseCache.counters`). Entries are zlib-compressed
JSON, never pickles, so a cache directory cannot run code; a file's token and line lists are stored as
one vocabulary and base64 uint32 ids into it (read back without a string object per token). Block
granularity (whose per-file statement tables feed a global pass) is not cached.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import sys
import zlib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from twinspect import __version__
from twinspect.code.files import ScanStats, SourceFile
from twinspect.code.fragments import Fragment
from twinspect.errors import InputError

#: granularities whose parse results can be cached
CACHED_GRANULARITIES = ("function", "file")
_SCHEMA = 2  # 2: tokens and lines as a vocabulary and uint32 ids (1: lists of strings)

#: one file's parse result: fragments, counters, T1 token lists and normalised lines (per fragment)
FileResult = tuple[list[Fragment], ScanStats, list[tuple[str, ...]] | None, list[list[str]] | None]


def file_key(sf: SourceFile) -> str | None:
    """A file's cache key, ``"size:mtime_ns:language"``; None when the file cannot be stat-ed."""
    try:
        st = sf.path.stat()
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}:{sf.language}"


def _pack(lists: Sequence[Sequence[str]]) -> dict[str, Any]:
    """String lists as one vocabulary and little-endian uint32 ids (base64): see :func:`_unpack`."""
    vocab: dict[str, int] = {}
    ids = [vocab.setdefault(t, len(vocab)) for seq in lists for t in seq]
    return {"vocab": list(vocab), "lens": [len(seq) for seq in lists],
            "ids": base64.b64encode(np.asarray(ids, dtype="<u4").tobytes()).decode("ascii")}


def _unpack(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """The string tuples of :func:`_pack`, their entries the interned vocabulary's own objects.

    A file's tokens are read back without one new string object per token (only one per distinct
    token, interned): decoding 40 M tokens one object each left ~2 GB of CPython's small-object arenas
    pinned by the long-lived objects allocated between them, for the rest of a 10-MLOC scan.
    """
    vocab = np.empty(len(doc["vocab"]), dtype=object)
    vocab[:] = [sys.intern(str(t)) for t in doc["vocab"]]
    ids = np.frombuffer(base64.b64decode(doc["ids"]), dtype="<u4")
    bounds = np.concatenate([[0], np.cumsum(np.asarray(doc["lens"], dtype=np.int64))])
    if bounds[-1] != len(ids) or (len(ids) and int(ids.max()) >= len(vocab)):
        raise ValueError("token ids do not match their vocabulary")
    return [tuple(vocab[ids[lo:hi]]) for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


def _encode(result: FileResult) -> bytes:
    frags, stats, toks, lines = result
    doc = {"fragments": [f.to_dict() for f in frags], "stats": asdict(stats),
           "toks": None if toks is None else _pack(toks), "lines": None if lines is None else _pack(lines)}
    return zlib.compress(json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"), 1)


def _decode(payload: bytes) -> FileResult:
    doc = json.loads(zlib.decompress(payload).decode("utf-8", "surrogatepass"))
    frags = [Fragment.from_dict(d) for d in doc["fragments"]]
    stats = ScanStats(**doc["stats"])
    toks = None if doc["toks"] is None else _unpack(doc["toks"])
    lines = None if doc["lines"] is None else [list(ls) for ls in _unpack(doc["lines"])]
    return frags, stats, toks, lines


class ParseCache:
    """Per-file parse results in ``DIR/parse.sqlite`` (see the module doc).

    Args:
        directory: the cache directory (created if missing).

    Attributes:
        counters: ``{"hits", "parsed", "reset"}`` — files read back, files parsed and stored, and
            whether :meth:`load` emptied the cache because it was written under other mining options.

    Raises:
        InputError: ``directory`` is a file or cannot be created, or the database cannot be opened or is
            not a twinspect cache.
    """

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise InputError(f"{self.directory}: is a file, expected a cache directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{self.directory}: cannot create the cache directory: {exc.strerror or exc}") from exc
        self.path = self.directory / "parse.sqlite"
        self.counters: dict[str, Any] = {"hits": 0, "parsed": 0, "reset": False}
        self._keys: dict[str, str | None] = {}
        try:
            self._db = sqlite3.connect(self.path)
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            self._db.execute("CREATE TABLE IF NOT EXISTS files (rel TEXT PRIMARY KEY, key TEXT, payload BLOB)")
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def _unusable(self, exc: sqlite3.DatabaseError) -> InputError:
        return InputError(f"cannot use the parse cache: {exc}", self.path,
                          hint="delete the cache directory or pass another --cache")

    def _use_options(self, options: dict[str, Any]) -> None:
        """Empty the cache when its entries were written under other mining options (or another version)."""
        if options.get("granularity") not in CACHED_GRANULARITIES:
            raise InputError(f"--cache works with --granularity {' or '.join(CACHED_GRANULARITIES)}, "
                             f"not {options.get('granularity')}")
        wanted = json.dumps({**options, "version": __version__, "schema": _SCHEMA}, sort_keys=True)
        try:
            row = self._db.execute("SELECT v FROM meta WHERE k = 'options'").fetchone()
            if row is None or row[0] != wanted:
                self.counters["reset"] = row is not None
                self._db.execute("DELETE FROM files")
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('options', ?)", (wanted,))
                self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc

    def load(self, files: Sequence[SourceFile], options: dict[str, Any]) -> list[FileResult | None]:
        """The stored result of each file, or None where it is missing or stale.

        Args:
            files: the files of this scan (as discovered).
            options: the mining options the results depend on (those of
                :func:`twinspect.code.fragments.mine`: ``min_lines``, ``errors``, ``pretokenize``,
                ``granularity``); a cache written under others is emptied first.

        Returns:
            One entry per file, in order.

        Raises:
            InputError: the granularity is not cached (block), or the database is damaged.
        """
        self._use_options(options)
        out: list[FileResult | None] = []
        for sf in files:
            key = file_key(sf)  # taken before the file is parsed: a file edited during the run is parsed again
            self._keys[sf.rel] = key
            row = self._db.execute("SELECT key, payload FROM files WHERE rel = ?", (sf.rel,)).fetchone()
            result = None
            if row is not None and key is not None and row[0] == key:
                try:
                    result = _decode(row[1])
                except (ValueError, KeyError, TypeError, zlib.error):
                    result = None  # a damaged entry: parse the file again
            out.append(result)
        self.counters["hits"] += sum(r is not None for r in out)
        return out

    @property
    def file_keys(self) -> dict[str, str | None]:
        """rel path -> the key :meth:`load` saw for each file asked for so far (None: not stat-able)."""
        return dict(self._keys)

    def store(self, items: Sequence[tuple[SourceFile, FileResult]]) -> None:
        """Store the results of parsed files and commit (a later run resumes from here).

        Each entry is stored under the size and modification time :meth:`load` saw before the file was
        parsed; a file that could not be stat-ed then is not stored.
        """
        rows = []
        for sf, result in items:
            key = self._keys.get(sf.rel)
            if key is not None:
                rows.append((sf.rel, key, _encode(result)))
        self._db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", rows)
        self._db.commit()
        self.counters["parsed"] += len(items)

    def close(self) -> None:
        """Close the database."""
        self._db.close()
