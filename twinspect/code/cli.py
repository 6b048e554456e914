"""CLI of the code side: the ``twinspect clones`` group (scan, index, query, eval).

``twinspect clones`` both takes PATHs and has sub-commands. It is a :class:`DefaultCommandGroup`:
when its first argument is not the name of a sub-command (nor ``-h``/``--help``), the arguments
are handed to the default ``scan`` command, so ``twinspect clones src/`` is
``twinspect clones scan src/``. A directory that happens to be named like a sub-command
(``index``, ``query``, ``eval``, ``scan``...) must be scanned as ``twinspect clones scan index``.

Heavy libraries (tree-sitter grammars, numpy-heavy modules, torch) are imported inside the
command functions so that ``twinspect --help`` stays fast. User errors are raised as
:class:`twinspect.errors.TwinspectError`; the root CLI prints them on one line and exits 2.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from twinspect.code.clones import DetectConfig
from twinspect.errors import InputError

DEFAULT_COMMAND = "scan"
#: Option defaults come from DetectConfig (one source of truth, tuned by the benchmarks).
_D = DetectConfig()


class DefaultCommandGroup(TyperGroup):
    """A typer group that routes arguments to a default sub-command.

    If the first argument is neither a registered sub-command nor a help option, the default
    command's name (:attr:`default_command`) is inserted in front of the arguments.
    """

    default_command = DEFAULT_COMMAND

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        help_names = set(ctx.help_option_names or ["--help"])
        if args and args[0] not in self.commands and args[0] not in help_names:
            first = args[0]
            if not first.startswith("-") and not os.path.exists(first):
                close = difflib.get_close_matches(first, list(self.commands), n=1)
                if close:  # a mistyped sub-command rather than a missing PATH
                    ctx.fail(f"No such command or path {first!r}. Did you mean {close[0]!r}?")
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


# ------------------------------------------------------------------------------- shared options
PathsArg = Annotated[
    list[Path], typer.Argument(help="Source files or directories to scan.", show_default=False, metavar="PATH...")
]
LanguageOpt = Annotated[
    Optional[str],
    typer.Option("--language", "-l", help="Parse every source file as this language (python, java, c, cpp) "
                 "instead of detecting it from the extension."),
]
MinLinesOpt = Annotated[int, typer.Option("--min-lines", help="Ignore functions shorter than this many lines.")]
EncoderOpt = Annotated[str, typer.Option("--encoder", "-e", help="Fragment encoder: lexical or neural.")]
MaxTokensOpt = Annotated[
    Optional[int], typer.Option("--max-tokens", help="Neural encoder: tokens per fragment (truncation).")
]
BatchSizeOpt = Annotated[Optional[int], typer.Option("--batch-size", help="Neural encoder: batch size.")]
ModelPathOpt = Annotated[
    Optional[Path], typer.Option("--model-path", help="Neural encoder: directory of a (fine-tuned) model.")
]
IndexOpt = Annotated[str, typer.Option("--index", help="k-NN index: exact or hnsw.")]
TopKOpt = Annotated[int, typer.Option("--top-k", "-k", help="Neighbours retrieved per fragment (SSCD's topN).")]
ThresholdOpt = Annotated[float, typer.Option("--threshold", "-t", help="Minimum cosine similarity of a clone pair.")]
ClassThresholdOpt = Annotated[
    float,
    typer.Option("--class-threshold", help="Minimum similarity for merging clone classes. May be below "
                 "--threshold: classes then also join fragments that are not reported as a pair."),
]
PairMarginOpt = Annotated[
    str,
    typer.Option("--pair-margin", metavar="MARGIN|none",
                 help="Report a neighbour pair only if its similarity is within MARGIN of the best match "
                 "of one of its two fragments (weaker neighbours are mostly near-misses); 0 keeps best "
                 "matches only, 'none' disables the rule. Exact (T1/T2) duplicates are always reported."),
]
LinkageOpt = Annotated[
    str,
    typer.Option("--linkage", help="Clone-class linkage: single, average, complete or none (buckets only)."),
]
MOpt = Annotated[int, typer.Option("--M", help="HNSW graph degree.")]
EfcOpt = Annotated[int, typer.Option("--ef-construction", help="HNSW build-time candidate list size.")]
EfsOpt = Annotated[int, typer.Option("--ef-search", help="HNSW query-time candidate list size.")]
ExcludeOpt = Annotated[
    Optional[list[str]],
    typer.Option("--exclude", "-x", help="Skip files matching this gitignore-style glob (repeatable)."),
]
NoGitignoreOpt = Annotated[bool, typer.Option("--no-gitignore", help="Also scan files ignored by .gitignore.")]
MaxFileBytesOpt = Annotated[int, typer.Option("--max-file-bytes", help="Skip files larger than this (bytes).")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="Report format: table, json, sarif or html.")]
OutputOpt = Annotated[
    Optional[Path],
    typer.Option("--output", "-o", help="Write the report to this file (json/sarif go to stdout without it; "
                 "html needs it)."),
]
LimitOpt = Annotated[int, typer.Option("--limit", help="Rows of the terminal table.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (HNSW construction).")]


def _parse_margin(value: str | float | None) -> float | None:
    """``--pair-margin`` as a float, or None for ``none``/``off``.

    Raises:
        InputError: neither a number nor ``none``.
    """
    if value is None or isinstance(value, (int, float)):
        return value
    text = value.strip().lower()
    if text in ("none", "off", "no"):
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError(f"--pair-margin must be a number or 'none', got {value!r}") from None


def _fmt_margin(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _encoder_params(
    encoder: str, max_tokens: int | None, batch_size: int | None, model_path: Path | None
) -> dict | None:
    """Encoder keyword arguments from the CLI options; None (= the encoder's tuned defaults) when none given."""
    params: dict[str, Any] = {}
    if encoder == "neural":
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if batch_size is not None:
            params["batch_size"] = batch_size
        if model_path is not None:
            from twinspect._io import require_readable

            require_readable(model_path, "model directory")
            params["model_path"] = str(model_path)
    elif any(v is not None for v in (max_tokens, batch_size, model_path)):
        raise InputError("--max-tokens, --batch-size and --model-path apply to the neural encoder only",
                         hint="add --encoder neural")
    return params or None


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def _check_paths(paths: list[Path]) -> None:
    from twinspect._io import require_readable

    if not paths:
        raise InputError("no path given", hint="pass at least one file or directory")
    for p in paths:
        require_readable(p, "directory" if p.is_dir() else "path")


def _build_config(pair_margin: str | float | None = _fmt_margin(_D.pair_margin), **kw: Any):
    """A validated DetectConfig; options given as None keep DetectConfig's defaults.

    ``encoder_params=None`` resolves to the chosen encoder's defaults; ``pair_margin`` is the raw
    ``--pair-margin`` text (``"none"`` disables the rule).
    """
    from twinspect.code.clones import DetectConfig

    config = DetectConfig(**{key: value for key, value in kw.items() if value is not None})
    config.pair_margin = _parse_margin(pair_margin)
    config.validate()
    return config


# ------------------------------------------------------------------------------------- commands
def scan_command(
    paths: PathsArg,
    language: LanguageOpt = None,
    min_lines: MinLinesOpt = _D.min_lines,
    encoder: EncoderOpt = _D.encoder,
    max_tokens: MaxTokensOpt = None,
    batch_size: BatchSizeOpt = None,
    model_path: ModelPathOpt = None,
    index: IndexOpt = _D.index,
    top_k: TopKOpt = _D.top_k,
    threshold: ThresholdOpt = _D.threshold,
    class_threshold: ClassThresholdOpt = _D.effective_class_threshold,
    linkage: LinkageOpt = _D.linkage,
    pair_margin: PairMarginOpt = _fmt_margin(_D.pair_margin),
    M: MOpt = _D.M,
    ef_construction: EfcOpt = _D.ef_construction,
    ef_search: EfsOpt = _D.ef_search,
    exclude: ExcludeOpt = None,
    no_gitignore: NoGitignoreOpt = False,
    max_file_bytes: MaxFileBytesOpt = 1 << 20,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    limit: LimitOpt = 20,
    quiet: QuietOpt = False,
    seed: SeedOpt = _D.seed,
) -> None:
    """Find clone pairs and clone classes in source files/directories and report them.

    Functions and methods are embedded; their nearest neighbours above --threshold (and within --pair-margin of a best match) become clone pairs typed T1-T4 (BigCloneBench bands for Type-3). Clone classes are grouped along neighbour edges above --class-threshold (--linkage).
    """
    from twinspect.code.clones import scan
    from twinspect.code.report import FORMATS, write_report

    _check_choice("--format", fmt, FORMATS)
    if fmt == "html" and output is None:
        raise InputError("the html format needs an output file", hint="pass -o report.html")
    _check_paths(paths)
    config = _build_config(
        encoder=encoder, encoder_params=_encoder_params(encoder, max_tokens, batch_size, model_path),
        index=index, top_k=top_k, threshold=threshold, class_threshold=class_threshold, linkage=linkage,
        pair_margin=pair_margin, M=M, ef_construction=ef_construction, ef_search=ef_search, min_lines=min_lines, seed=seed,
    )
    report = scan(paths, config, exclude=tuple(exclude or ()), max_file_bytes=max_file_bytes,
                  respect_gitignore=not no_gitignore, language=language, quiet=quiet)
    write_report(report, fmt, output, quiet=quiet, limit=limit)


def index_command(
    paths: PathsArg,
    out_dir: Annotated[Path, typer.Option("--output", "-o", help="Directory of the persisted index.")],
    update: Annotated[bool, typer.Option("--update", help="Update an existing index in DIR incrementally "
                                          "(re-embed only changed files) instead of rebuilding it.")] = False,
    language: LanguageOpt = None,
    min_lines: MinLinesOpt = _D.min_lines,
    encoder: EncoderOpt = _D.encoder,
    max_tokens: MaxTokensOpt = None,
    batch_size: BatchSizeOpt = None,
    model_path: ModelPathOpt = None,
    index: IndexOpt = _D.index,
    M: MOpt = _D.M,
    ef_construction: EfcOpt = _D.ef_construction,
    ef_search: EfsOpt = _D.ef_search,
    exclude: ExcludeOpt = None,
    no_gitignore: NoGitignoreOpt = False,
    max_file_bytes: MaxFileBytesOpt = 1 << 20,
    quiet: QuietOpt = False,
    seed: SeedOpt = _D.seed,
) -> None:
    """Build (or --update) a persistent clone index of source files, for later `clones query`."""
    import time

    from rich.console import Console

    from twinspect.code.store import CloneIndex

    _check_paths(paths)
    config = _build_config(
        encoder=encoder, encoder_params=_encoder_params(encoder, max_tokens, batch_size, model_path),
        index=index, M=M, ef_construction=ef_construction, ef_search=ef_search, min_lines=min_lines, seed=seed,
    )
    t0 = time.perf_counter()
    if update:
        store = CloneIndex.load(out_dir)
        changes = store.update(paths, quiet=quiet)
        detail = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in changes.items() if isinstance(v, int)
                           and not isinstance(v, bool))
        verb = f"updated ({detail})"
    else:
        from twinspect.code.encoders import make_encoder

        index_params = {"M": M, "ef_construction": ef_construction, "ef_search": ef_search, "seed": seed} \
            if index == "hnsw" else {}
        store = CloneIndex.build(
            paths, out_dir, encoder=make_encoder(encoder, **config.encoder_params), index_kind=index,
            index_params=index_params, min_lines=min_lines, exclude=tuple(exclude or ()),
            max_file_bytes=max_file_bytes, respect_gitignore=not no_gitignore, language=language, quiet=quiet,
        )
        verb = "built"
    if not quiet:
        Console(stderr=True).print(
            f"index {out_dir} {verb}: {len(store.fragments)} fragments, {time.perf_counter() - t0:.1f} s",
            highlight=False, soft_wrap=True,
        )


def _parse_target(target: str) -> tuple[Path, int | None]:
    """Split ``FILE[:LINE]`` (a file whose own name ends in ``:digits`` is taken whole if it exists)."""
    path = Path(target)
    if not path.exists() and ":" in target:
        head, _, tail = target.rpartition(":")
        if tail.isdigit():
            line = int(tail)
            if line < 1:
                raise InputError(f"line numbers start at 1, got {line}", head)
            return Path(head), line
    return path, None


def resolve_query_fragment(
    target: str, *, language: str | None = None, root: str | Path | None = None
) -> tuple[Any, Path]:
    """Parse ``FILE[:LINE]`` on the fly and pick the fragment to query.

    The innermost fragment containing LINE is chosen; without LINE, the file's first fragment.
    Fragments of any length are considered (no minimum number of lines).

    Args:
        target: ``path/to/file.py`` or ``path/to/file.py:42``.
        language: force the language of the file.
        root: the indexed root; when the file lies under it, the fragment's path is made relative
            to it (so it matches the index's own fragments).

    Returns:
        ``(fragment, file_path)``.

    Raises:
        InputError: the file does not exist or cannot be read, holds no function, or no function
            contains LINE.
    """
    import dataclasses
    import os

    from twinspect._io import require_readable
    from twinspect.code.fragments import fragment_at, mine

    path, line = _parse_target(target)
    require_readable(path, "file")
    if path.is_dir():
        raise InputError("is a directory; query takes FILE[:LINE]", path)
    fragments, _ = mine([path], language=language, min_lines=1, respect_gitignore=False, quiet=True)
    if not fragments:
        raise InputError("no function or method found in the file", path,
                         hint="is the language supported? try --language")
    frag = fragment_at(fragments, fragments[0].path, line)
    if root is not None:
        ap, ar = os.path.abspath(path), os.path.abspath(root)
        if os.path.commonpath([ap, ar]) == ar:
            frag = dataclasses.replace(frag, path=Path(os.path.relpath(ap, ar)).as_posix())
        else:  # outside the indexed tree: an absolute path never collides with an indexed one
            frag = dataclasses.replace(frag, path=Path(ap).as_posix())
    return frag, path


def query_command(
    index_dir: Annotated[Path, typer.Argument(help="Directory of an index built by `twinspect clones index`.",
                                              show_default=False, metavar="DIR")],
    target: Annotated[str, typer.Argument(help="FILE or FILE:LINE; the innermost function containing LINE "
                                          "(or the file's first function) is queried.", show_default=False,
                                          metavar="FILE[:LINE]")],
    top_k: TopKOpt = _D.top_k,
    threshold: ThresholdOpt = _D.threshold,
    language: LanguageOpt = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Output format: table or json.")] = "table",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the result to this file.")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Find the clones of one function in a persisted index (the file may lie outside the indexed tree)."""
    import json

    from rich.console import Console

    from twinspect._io import atomic_write, require_readable
    from twinspect.code.clone_types import classify_pair
    from twinspect.code.clones import overlaps, scan_root
    from twinspect.code.report import fragment_label, output_console
    from twinspect.code.store import CloneIndex

    _check_choice("--format", fmt, ("table", "json"))
    if top_k < 1:
        raise InputError(f"--top-k must be at least 1, got {top_k}")
    require_readable(index_dir, "index directory")
    store = CloneIndex.load(index_dir)
    root = scan_root(store.manifest.get("roots") or []) or None
    frag, _ = resolve_query_fragment(target, language=language, root=root)
    hits = store.query(frag, k=top_k, threshold=threshold)
    clones = []
    for other, sim in hits:
        if overlaps(frag, other):  # the queried function itself (or its parent/child) when indexed
            continue
        ct = classify_pair(frag, other)
        clones.append((other, float(sim), ct))
        if len(clones) >= top_k:
            break
    if fmt == "json":
        doc = {
            "index": str(index_dir),
            "query": {"path": frag.path, "start_line": frag.start_line, "end_line": frag.end_line,
                      "name": frag.name, "language": frag.language},
            "top_k": top_k,
            "threshold": threshold,
            "clones": [
                {"path": o.path, "start_line": o.start_line, "end_line": o.end_line, "name": o.name,
                 "language": o.language, "similarity": round(s, 6), "type": ct.type, "band": ct.band,
                 "t3_similarity": None if ct.t3_similarity is None else round(ct.t3_similarity, 6)}
                for o, s, ct in clones
            ],
        }
        text = json.dumps(doc, indent=2) + "\n"
        if output is None:
            typer.echo(text, nl=False)
        else:
            with atomic_write(output) as fh:
                fh.write(text)
        return
    from rich.table import Table

    table = Table()
    for head, justify in (("#", "right"), ("clone", "left"), ("name", "left"), ("type", "left"),
                          ("similarity", "right")):
        table.add_column(head, justify=justify, overflow="fold")
    for i, (o, s, ct) in enumerate(clones):
        table.add_row(str(i), fragment_label(o), o.name, ct.type if ct.band is None else f"{ct.type} ({ct.band})",
                      f"{s:.3f}")
    title = f"{len(clones)} clones of {fragment_label(frag)}" + (f" ({frag.name})" if frag.name else "")

    def emit(console: Console) -> None:
        if clones:
            console.print(table)
        console.print(title, highlight=False)

    if output is not None:
        with atomic_write(output) as fh:
            emit(Console(file=fh, width=200, no_color=True))
    elif not quiet:
        emit(output_console())


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


def finetune_command(
    pairs_file: Annotated[Path, typer.Argument(help="CSV or JSONL of clone pairs (code1,code2 or "
                                               "path1,start_line1,end_line1,path2,start_line2,end_line2).",
                                               show_default=False, metavar="PAIRS")],
    out_dir: Annotated[Path, typer.Option("--output", "-o", help="Directory to write the fine-tuned model to.")],
    root: Annotated[Optional[Path], typer.Option("--root", help="Directory relative paths in PAIRS start from "
                                                 "(default: PAIRS's directory).")] = None,
    base_model: Annotated[Optional[Path], typer.Option("--base-model", help="Model directory to start from "
                                                       "(default: all-MiniLM-L6-v2).")] = None,
    epochs: Annotated[int, typer.Option("--epochs", help="Passes over the pairs.")] = 1,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Pairs per step (in-batch negatives).")] = 16,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Truncation length while training.")] = 128,
    lr: Annotated[float, typer.Option("--lr", help="Peak AdamW learning rate.")] = 2e-5,
    language: LanguageOpt = None,
    quiet: QuietOpt = False,
    seed: SeedOpt = _D.seed,
) -> None:
    """Fine-tune the neural encoder contrastively on labelled clone pairs (use it with --model-path)."""
    from rich.console import Console

    pairs = load_training_pairs(pairs_file, root=root, language=language)
    if len(pairs) < 2:
        raise InputError(f"found {len(pairs)} clone pairs; fine-tuning needs at least 2", pairs_file)
    from twinspect.code.encoders.finetune import finetune

    out = finetune(pairs, out_dir, base_model=base_model, epochs=epochs, batch_size=batch_size,
                   max_tokens=max_tokens, lr=lr, seed=seed, quiet=quiet)
    if not quiet:
        Console(stderr=True).print(f"fine-tuned on {len(pairs)} pairs; model written to {out} "
                                   f"(use --encoder neural --model-path {out})", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the ``clones`` command group to the root app."""
    clones = typer.Typer(
        cls=DefaultCommandGroup,
        help="Scalable code clone detection (SSCD pipeline).\n\n"
        "`twinspect clones PATH... [OPTIONS]` scans PATHs (same as `twinspect clones scan PATH...`); "
        "the sub-commands build and query persistent indexes and evaluate on benchmarks.",
        no_args_is_help=True,
        subcommand_metavar="[PATH]... | COMMAND [ARGS]...",
    )
    clones.command("scan")(scan_command)
    clones.command("index")(index_command)
    clones.command("query")(query_command)
    clones.command("finetune")(finetune_command)
    from twinspect.code.cli_eval import register_eval

    register_eval(clones)
    app.add_typer(clones, name="clones")
