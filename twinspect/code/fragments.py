"""Fragments: functions and methods mined from source files with tree-sitter.

The :class:`Fragment` record is the unit every code-side stage passes around.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fragment:
    """One function or method of a source file.

    Attributes:
        path: file path, relative to the scanned root (POSIX separators).
        start_line: first line, 1-based, inclusive.
        end_line: last line, 1-based, inclusive.
        name: function/method name ("" when anonymous), qualified with enclosing classes where known.
        language: one of ``"python"``, ``"java"``, ``"c"``, ``"cpp"``.
        text: the source text of the fragment, comments included.
        code: the same text with comments blanked out (line structure kept), filled at extraction
            from the parse tree; "" when not computed (normalisation then strips comments itself).
    """

    path: str
    start_line: int
    end_line: int
    name: str
    language: str
    text: str
    code: str = ""

    @property
    def loc(self) -> int:
        """Number of lines spanned (end_line - start_line + 1)."""
        return self.end_line - self.start_line + 1

    @property
    def key(self) -> str:
        """Stable identifier ``path:start-end`` used in indexes and reports."""
        return f"{self.path}:{self.start_line}-{self.end_line}"
