"""Comment blanking: comments become spaces without moving any byte offset or line break.

Both fragment extraction (:mod:`twinspect.code.fragments`) and normalisation
(:mod:`twinspect.code.normalize`) need the comment-free code of a fragment with its line structure
and tree-sitter byte ranges intact; this module is that one operation.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

#: Byte translation table: every byte except LF and CR becomes a space.
BLANK = bytes(b if b in (10, 13) else 32 for b in range(256))


def blank_ranges(src: bytes, ranges: Iterable[tuple[int, int]]) -> bytes:
    """Replace the bytes of each ``[start, end)`` range by spaces, keeping line breaks.

    Args:
        src: UTF-8 (surrogatepass) source bytes.
        ranges: byte ranges, e.g. the ``(start_byte, end_byte)`` of tree-sitter comment nodes.

    Returns:
        Bytes of the same length with the same line breaks; ``src`` itself when ``ranges`` is empty.
    """
    buf: bytearray | None = None
    for s, e in ranges:
        if buf is None:
            buf = bytearray(src)
        buf[s:e] = src[s:e].translate(BLANK)
    return src if buf is None else bytes(buf)


@functools.lru_cache(maxsize=4096)
def strip_comments_text(text: str, language: str) -> str:
    """Source text with every comment blanked (tree-sitter comment nodes of ``language``).

    Args:
        text: source code of a supported language.
        language: canonical language name (see :mod:`twinspect.code.languages`).

    Returns:
        Text of the same length and the same lines, comments replaced by spaces.
    """
    import tree_sitter

    from twinspect.code.languages import get_parser, get_query

    src = text.encode("utf-8", "surrogatepass")
    tree = get_parser(language).parse(src)
    comments = tree_sitter.QueryCursor(get_query(language)).captures(tree.root_node).get("comment", [])
    if not comments:
        return text
    return blank_ranges(src, ((c.start_byte, c.end_byte) for c in comments)).decode("utf-8", "surrogatepass")
