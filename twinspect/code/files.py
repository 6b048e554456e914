"""Source discovery: which files of the given paths are mined, and why the others are skipped.

:func:`discover` walks the PATH arguments of ``twinspect clones`` and returns the source files to
parse, sorted by relative path, together with :class:`ScanStats` counting every file that was
skipped and the reason. Rules, in the order they are applied:

1. ``.git``, ``.hg`` and ``.svn`` directories are never entered; symbolic links to directories are
   not followed (so link loops cannot hang the walk); symbolic links to files are followed.
2. ``--exclude`` globs (gitignore syntax, matched against the reported relative path; a directory
   that matches is pruned as a whole) -> ``"excluded"``.
3. ``.gitignore`` files inside the scanned tree (root and nested, with git's precedence: the deepest
   file's last matching pattern wins; ignored directories are pruned) -> ``"gitignored"``.
   Ignore files above the scanned directory, ``.git/info/exclude`` and the global ignore file are
   not read.
4. Files whose extension maps to no language (see :data:`~twinspect.code.languages.EXTENSIONS`)
   -> ``"unsupported"``; a file without extension whose ``#!`` line names a parsed language's
   interpreter (``python3``, ``node``, ``ruby``... :func:`~twinspect.code.languages.shebang_language`)
   is mined in that language. Files in a source language twinspect does not parse (by extension,
   :data:`~twinspect.code.languages.UNPARSED_EXTENSIONS`, or by shebang: ``.lua``, ``.sh``, a
   ``#!/bin/bash`` script...) are also counted per language in :attr:`ScanStats.unsupported_files`
   and listed in :attr:`ScanStats.unsupported_paths`, so a scan never ignores source code silently.
5. Files larger than ``max_file_bytes`` (checked with ``stat`` before reading) -> ``"too_large"``;
   files or directories that cannot be listed or stat-ed -> ``"unreadable"``.

Reading (:func:`twinspect.code.fragments.read_source`) adds ``"binary"`` (NUL byte in the first
8 KiB), ``"undecodable"`` (neither UTF-8, with or without BOM, nor Windows-1252/Latin-1 text) and
``"unreadable"`` (permission).
A pruned directory counts once under its reason. Files skipped for a reason in
:data:`LISTED_SKIP_REASONS` (the files a user may have expected to be mined) are also listed by path
in :attr:`ScanStats.skipped_files` (``twinspect clones scan --verbose`` prints them).
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import pathspec

from twinspect.code.languages import EXTENSIONS, UNPARSED_EXTENSIONS, canonical_language, shebang_language
from twinspect.errors import InputError

#: Reasons a file can be skipped, in report order.
SKIP_REASONS: tuple[str, ...] = (
    "excluded",
    "gitignored",
    "unsupported",
    "too_large",
    "binary",
    "undecodable",
    "unreadable",
    "unparsable",
)

#: Reasons whose files are also listed by path (``skipped_files``): not the deliberate exclusions
#: (``excluded``, ``gitignored``) nor the files in no supported language.
LISTED_SKIP_REASONS: frozenset[str] = frozenset({"too_large", "binary", "undecodable", "unreadable", "unparsable"})

_VCS_DIRS = frozenset({".git", ".hg", ".svn"})


@dataclass(frozen=True)
class SourceFile:
    """One source file selected for mining.

    Attributes:
        path: absolute path of the file.
        rel: path relative to the scan base (POSIX separators); this is ``Fragment.path``.
        language: one of :data:`~twinspect.code.languages.LANGUAGES`.
        size: size in bytes (from ``stat``).
    """

    path: Path
    rel: str
    language: str
    size: int


@dataclass
class ScanStats:
    """Counters of a scan, reported as ``"stats"`` in clone reports.

    Invariant after :func:`twinspect.code.fragments.mine`: ``files_seen`` = ``files_parsed`` +
    the files skipped as ``too_large``, ``binary``, ``undecodable``, ``unparsable`` and (file-level)
    ``unreadable``.

    Attributes:
        files_seen: files with a supported language that were neither excluded nor gitignored.
        files_parsed: files decoded and parsed by tree-sitter.
        fragments: fragments kept (at least ``min_lines`` lines, outside parse-error regions; whole
            files with ``granularity="file"``).
        fragments_too_short: functions dropped because they span fewer than ``min_lines`` lines.
        files_with_parse_errors: parsed files whose tree has ERROR/MISSING nodes (still mined).
        fragments_skipped_errors: functions dropped because they contain or lie inside an ERROR region.
        files_decoded_fallback: parsed files that were not UTF-8 and were decoded as Windows-1252
            / Latin-1 instead (see :func:`twinspect.code.fragments.read_source`).
        block_fragments: block fragments kept (``granularity="block"``; also in ``fragments``).
        block_keys_capped: statement windows found in more places than
            :data:`twinspect.code.blocks.MAX_OCCURRENCES_PER_KEY`, paired among their first
            occurrences only.
        block_files_changed: files holding a block that changed (or became unreadable) between
            parsing and cutting the block's text; their blocks are left out.
        token_run_fragments: block fragments that are copied token runs across syntax
            (:mod:`twinspect.code.token_runs`; also in ``block_fragments`` and ``fragments``).
        token_windows_capped: token windows found in more places than
            :data:`twinspect.code.token_runs.MAX_OCCURRENCES`, paired among their first occurrences only.
        skipped: reason -> number of files (or pruned directories) skipped; reasons in
            :data:`SKIP_REASONS`.
        skipped_files: ``{"path", "reason"}`` of each file (or unreadable directory) skipped for a
            reason in :data:`LISTED_SKIP_REASONS`; ``path`` is relative to the scan base when known.
        files_by_language: language -> number of files parsed in it.
        unsupported_files: language -> number of source files in a language twinspect does not
            parse (also counted in ``skipped["unsupported"]``).
        unsupported_paths: ``{"path", "language"}`` of each of those files.
        total_lines: physical lines of the files parsed (blank and comment lines included, a last
            line without a newline counted; jscpd's ``lines``), the denominator of the duplicated-lines
            percentage (:func:`twinspect.code.baseline.duplication`).
    """

    files_seen: int = 0
    files_parsed: int = 0
    fragments: int = 0
    fragments_too_short: int = 0
    files_with_parse_errors: int = 0
    fragments_skipped_errors: int = 0
    files_decoded_fallback: int = 0
    block_fragments: int = 0
    block_keys_capped: int = 0
    block_files_changed: int = 0
    token_run_fragments: int = 0
    token_windows_capped: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_files: list[dict[str, str]] = field(default_factory=list)
    files_by_language: dict[str, int] = field(default_factory=dict)
    unsupported_files: dict[str, int] = field(default_factory=dict)
    unsupported_paths: list[dict[str, str]] = field(default_factory=list)
    total_lines: int = 0

    def parsed(self, language: str, lines: int = 0) -> None:
        """Count one file parsed as ``language`` (``files_parsed`` and ``files_by_language``) that
        has ``lines`` physical lines (``total_lines``)."""
        self.files_parsed += 1
        self.total_lines += lines
        self.files_by_language[language] = self.files_by_language.get(language, 0) + 1

    def unsupported(self, path: str, language: str) -> None:
        """Count a source file in a language twinspect does not parse (skipped as ``"unsupported"``)."""
        self.skip("unsupported")
        self.unsupported_files[language] = self.unsupported_files.get(language, 0) + 1
        self.unsupported_paths.append({"path": path, "language": language})

    def skip(self, reason: str, n: int = 1, path: str | None = None) -> None:
        """Count ``n`` files skipped for ``reason``; list ``path`` in :attr:`skipped_files` when
        given and ``reason`` is in :data:`LISTED_SKIP_REASONS`."""
        self.skipped[reason] = self.skipped.get(reason, 0) + n
        if path is not None and reason in LISTED_SKIP_REASONS:
            self.skipped_files.append({"path": path, "reason": reason})

    def to_dict(self) -> dict:
        """JSON-ready dict of all counters; ``skipped`` keys in :data:`SKIP_REASONS` order,
        ``skipped_files`` sorted by path."""
        lists = ("skipped", "skipped_files", "files_by_language", "unsupported_files", "unsupported_paths")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in lists}
        order = {r: i for i, r in enumerate(SKIP_REASONS)}
        out["skipped"] = {
            k: self.skipped[k] for k in sorted(self.skipped, key=lambda r: (order.get(r, 99), r))
        }
        out["skipped_files"] = [dict(d) for d in sorted(self.skipped_files, key=lambda d: (d["path"], d["reason"]))]
        out["files_by_language"] = dict(sorted(self.files_by_language.items(), key=lambda kv: (-kv[1], kv[0])))
        out["unsupported_files"] = dict(sorted(self.unsupported_files.items(), key=lambda kv: (-kv[1], kv[0])))
        out["unsupported_paths"] = [dict(d) for d in sorted(self.unsupported_paths, key=lambda d: d["path"])]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ScanStats:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["skipped"] = dict(kwargs.get("skipped") or {})
        kwargs["skipped_files"] = [dict(d) for d in kwargs.get("skipped_files") or []]
        kwargs["files_by_language"] = dict(kwargs.get("files_by_language") or {})
        kwargs["unsupported_files"] = dict(kwargs.get("unsupported_files") or {})
        kwargs["unsupported_paths"] = [dict(d) for d in kwargs.get("unsupported_paths") or []]
        return cls(**kwargs)

    def merge(self, other: ScanStats) -> None:
        """Add ``other``'s counters (and listed skipped files) to this one in place."""
        for f in fields(self):
            if f.name == "skipped":
                for reason, n in other.skipped.items():
                    self.skip(reason, n)
            elif f.name in ("skipped_files", "unsupported_paths"):
                getattr(self, f.name).extend(dict(d) for d in getattr(other, f.name))
            elif f.name in ("files_by_language", "unsupported_files"):
                mine = getattr(self, f.name)
                for key, n in getattr(other, f.name).items():
                    mine[key] = mine.get(key, 0) + n
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def _posix_rel(path: str, base: str) -> str:
    rel = os.path.relpath(path, base)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


class _Walker:
    """Recursive directory walk applying exclude globs and nested ``.gitignore`` files."""

    def __init__(self, base: str, exclude: pathspec.PathSpec | None, respect_gitignore: bool,
                 language: str | None, max_file_bytes: int, stats: ScanStats):
        self.base = base
        self.exclude = exclude
        self.respect_gitignore = respect_gitignore
        self.language = language
        self.max_file_bytes = max_file_bytes
        self.stats = stats
        self.found: dict[str, SourceFile] = {}

    def _ignored(self, rel_from_root: str, ignores: list[tuple[str, pathspec.PathSpec]]) -> bool:
        """git precedence: the last decisive pattern of the deepest ignore file wins."""
        decision = None
        for prefix, spec in ignores:
            sub = rel_from_root[len(prefix):] if prefix else rel_from_root
            result = spec.check_file(sub)
            if result.include is not None:
                decision = result.include
        return bool(decision)

    def walk(self, root: str) -> None:
        """Walk directory ``root`` (absolute); paths are matched relative to the scan base."""
        rel = _posix_rel(root, self.base)
        self._walk_dir(root, root, "" if rel == "." else rel + "/", [])

    def excluded(self, rel: str) -> bool:
        """Whether an ``--exclude`` glob matches ``rel`` (relative to the scan base)."""
        return self.exclude is not None and self.exclude.match_file(rel)

    def _load_gitignore(self, directory: str, prefix: str,
                        ignores: list[tuple[str, pathspec.PathSpec]]) -> list[tuple[str, pathspec.PathSpec]]:
        if not self.respect_gitignore:
            return ignores
        path = os.path.join(directory, ".gitignore")
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            return ignores
        try:
            spec = pathspec.GitIgnoreSpec.from_lines(lines)
        except Exception:  # malformed pattern: ignore the file rather than abort the scan
            return ignores
        return [*ignores, (prefix, spec)]

    def _walk_dir(self, root: str, directory: str, prefix: str,
                  ignores: list[tuple[str, pathspec.PathSpec]]) -> None:
        ignores = self._load_gitignore(directory, prefix, ignores)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            self.stats.skip("unreadable", path=prefix.rstrip("/") or ".")
            return
        for entry in entries:
            name = entry.name
            rel_root = prefix + name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                self.stats.skip("unreadable", path=rel_root)
                continue
            if is_dir:
                if name in _VCS_DIRS:
                    continue
                dir_rel = rel_root + "/"
                if self.excluded(dir_rel):
                    self.stats.skip("excluded")
                    continue
                if ignores and self._ignored(dir_rel, ignores):
                    self.stats.skip("gitignored")
                    continue
                self._walk_dir(root, entry.path, dir_rel, ignores)
                continue
            try:
                if entry.is_symlink() and entry.is_dir():  # link to a directory: not followed
                    continue
            except OSError:
                pass
            if name == ".gitignore":
                continue
            if self.excluded(rel_root):
                self.stats.skip("excluded")
                continue
            if ignores and self._ignored(rel_root, ignores):
                self.stats.skip("gitignored")
                continue
            self._add_file(entry.path, entry)

    def _add_file(self, path: str, entry: os.DirEntry | None = None) -> None:
        ext = os.path.splitext(path)[1].lower()
        lang = EXTENSIONS.get(ext)
        if lang is None:
            other = UNPARSED_EXTENSIONS.get(ext)
            if other is None and not ext:
                lang, other = _script_language(path)
            if lang is None:
                if other is not None:
                    self.stats.unsupported(_posix_rel(path, self.base), other)
                else:
                    self.stats.skip("unsupported")
                return
        if self.language is not None:
            lang = self.language
        rel = _posix_rel(path, self.base)
        try:
            st = entry.stat() if entry is not None else os.stat(path)
        except OSError:
            self.stats.files_seen += 1
            self.stats.skip("unreadable", path=rel)
            return
        if not stat_mod.S_ISREG(st.st_mode):
            self.stats.skip("unsupported")
            return
        self.stats.files_seen += 1
        if st.st_size > self.max_file_bytes:
            self.stats.skip("too_large", path=rel)
            return
        if rel not in self.found:
            self.found[rel] = SourceFile(Path(path), rel, lang, st.st_size)
        else:  # the same file reached through two PATH arguments
            self.stats.files_seen -= 1


#: Bytes read from a file without extension to look for a ``#!`` line.
SHEBANG_BYTES = 256


def _script_language(path: str) -> tuple[str | None, str | None]:
    """``(parsed language, unparsed language)`` named by a file's ``#!`` line (see
    :func:`~twinspect.code.languages.shebang_language`); ``(None, None)`` when it has none or
    cannot be read."""
    try:
        if not stat_mod.S_ISREG(os.stat(path).st_mode):  # never open a FIFO or device
            return None, None
        with open(path, "rb") as fh:
            head = fh.read(SHEBANG_BYTES)
    except OSError:
        return None, None
    if not head.startswith(b"#!"):
        return None, None
    return shebang_language(head)


def scan_base(paths: Sequence[str | Path]) -> str:
    """The absolute directory that ``SourceFile.rel`` paths are relative to.

    The common directory of the PATH arguments, where a file argument stands for its parent
    directory (so one directory -> itself, one file -> its parent).

    Args:
        paths: the PATH arguments (they need not exist; non-directories count as files).

    Returns:
        An absolute path ("" when ``paths`` is empty).
    """
    dirs = []
    for p in paths:
        ap = os.path.abspath(os.fspath(p))
        dirs.append(ap if os.path.isdir(ap) else os.path.dirname(ap))
    return os.path.commonpath(dirs) if dirs else ""


def discover(
    paths: Sequence[str | Path],
    *,
    exclude: Sequence[str] = (),
    max_file_bytes: int = 1 << 20,
    respect_gitignore: bool = True,
    language: str | None = None,
    stats: ScanStats | None = None,
) -> tuple[list[SourceFile], ScanStats]:
    """Find the source files to mine under ``paths``.

    Each PATH may be a directory (walked recursively) or a file. Relative paths (``SourceFile.rel``,
    later ``Fragment.path``) are taken from the *scan base*: the common directory of the PATH
    arguments, where a file argument stands for its parent directory. So a single directory gives
    paths relative to it, a single file gives its file name, and several PATHs give unique paths
    relative to their common parent (``src/a.py``, ``tests/b.py``). See the module docstring for
    the skip rules.

    Args:
        paths: one or more files or directories.
        exclude: gitignore-style globs matched against ``rel`` (the path relative to the scan base,
            as reported), e.g. ``"vendor/**"``, ``"*_test.py"``, ``"build/"``.
        max_file_bytes: larger files are skipped as ``"too_large"`` (bytes).
        respect_gitignore: honour ``.gitignore`` files found in the scanned directories.
        language: force this language for every file with a known source extension (e.g. parse
            ``.h`` files as C++); a file named explicitly as a PATH is parsed as ``language`` whatever
            its extension.
        stats: counters to update in place (a new :class:`ScanStats` when None).

    Returns:
        ``(files, stats)``: the files sorted by ``rel`` and the updated counters.

    Raises:
        InputError: no PATH given, a PATH does not exist or cannot be read, ``language`` is unknown,
            or ``max_file_bytes`` is below 1.
    """
    stats = ScanStats() if stats is None else stats
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise InputError("no path given", hint="pass at least one file or directory")
    if max_file_bytes < 1:
        raise InputError(f"max_file_bytes must be at least 1, got {max_file_bytes}")
    forced = canonical_language(language) if language is not None else None
    roots: list[tuple[str, bool]] = []
    for p in paths:
        ap = os.path.abspath(os.fspath(p))
        if not os.path.exists(ap):
            if os.path.islink(ap):
                raise InputError("path is a broken symbolic link", p)
            raise InputError("path does not exist", p)
        is_dir = os.path.isdir(ap)
        if not os.access(ap, os.R_OK | (os.X_OK if is_dir else 0)):
            raise InputError(f"cannot read {'directory' if is_dir else 'file'} (permission denied)", p)
        if is_dir:
            try:
                os.scandir(ap).close()
            except OSError as exc:
                raise InputError(f"cannot read directory: {exc.strerror or exc}", p) from exc
        elif not os.path.isfile(ap):
            raise InputError("path is neither a regular file nor a directory", p)
        roots.append((ap, is_dir))
    base = scan_base([ap for ap, _ in roots])
    ex_spec = pathspec.GitIgnoreSpec.from_lines(list(exclude)) if exclude else None
    walker = _Walker(base, ex_spec, respect_gitignore, forced, max_file_bytes, stats)
    for ap, is_dir in roots:
        if not is_dir and walker.excluded(_posix_rel(ap, base)):
            stats.skip("excluded")
            continue
        if is_dir:
            walker.walk(ap)
        elif forced is not None:
            st = os.stat(ap)
            stats.files_seen += 1
            rel = _posix_rel(ap, base)
            if st.st_size > max_file_bytes:
                stats.skip("too_large", path=rel)
                continue
            if rel in walker.found:
                stats.files_seen -= 1
            walker.found[rel] = SourceFile(Path(ap), rel, forced, st.st_size)
        else:
            walker._add_file(ap)
    files = sorted(walker.found.values(), key=lambda sf: sf.rel)
    return files, stats
