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

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, cast

import typer

if TYPE_CHECKING:
    from rich.console import JustifyMethod

from twinspect.cli_options import DefaultCommandGroup as SharedDefaultGroup
from twinspect.cli_options import VerboseOpt as PlainVerboseOpt
from twinspect.code.clones import DetectConfig
from twinspect.errors import InputError

DEFAULT_COMMAND = "scan"
#: Option defaults come from DetectConfig (one source of truth, tuned by the benchmarks).
_D = DetectConfig()


class DefaultCommandGroup(SharedDefaultGroup):
    """The ``clones`` group: arguments that name no sub-command go to ``scan`` (:data:`DEFAULT_COMMAND`)."""

    default_command = DEFAULT_COMMAND


# ------------------------------------------------------------------------------- shared options
PathsArg = Annotated[
    list[Path], typer.Argument(help="Source files or directories to scan.", show_default=False, metavar="PATH...")
]
LanguageOpt = Annotated[
    Optional[str],
    typer.Option("--language", "-l", help="Parse every source file as this language (python, java, c, cpp, "
                 "javascript, typescript, tsx, go, rust, csharp, kotlin, swift, ruby, php, scala) instead of "
                 "detecting it from the extension (or the #! line of a script without one)."),
]
MinLinesOpt = Annotated[int, typer.Option("--min-lines", help="Ignore functions with fewer code lines than this (blank, comment and docstring lines do not count).")]
EncoderOpt = Annotated[str, typer.Option("--encoder", "-e", help="Fragment encoder: lexical, neural or semantic (clone-trained, shipped).")]
MaxTokensOpt = Annotated[
    Optional[int], typer.Option("--max-tokens", help="Neural encoder: tokens per fragment (truncation).")
]
RuntimeOpt = Annotated[
    Optional[str], typer.Option("--runtime", help="Neural encoder runtime: torch (reference), onnx, or onnx-int8 "
                                "(ONNX Runtime, dynamic int8 weights; fastest on CPU).")
]
BatchSizeOpt = Annotated[Optional[int], typer.Option("--batch-size", help="Neural encoder: batch size.")]
ModelPathOpt = Annotated[
    Optional[Path], typer.Option("--model-path", help="Neural encoder: directory of a (fine-tuned) model.")
]
IndexOpt = Annotated[str, typer.Option("--index", help="k-NN index: auto (exact search below 50,000 fragment "
                                       "representatives; above, HNSW over a 512-d SVD of the vectors with the "
                                       "neighbours re-scored by the full cosine, its recall against exact search "
                                       "measured and reported), exact or hnsw (full dimension).")]
TopKOpt = Annotated[int, typer.Option("--top-k", "-k", help="Neighbours retrieved per fragment (SSCD's topN).")]
ThresholdOpt = Annotated[float, typer.Option("--threshold", "-t", help="With --decision cosine: minimum cosine "
                                             "similarity of a clone pair; with the verifier: the cosine at which a "
                                             "semantic encoder's pair below the MT3 band is reported as T4.")]
ClassThresholdOpt = Annotated[
    Optional[float],
    typer.Option("--class-threshold", help="With --linkage pairs (default): minimum similarity of every pair a "
                 "clone class implies (at least --threshold; default --threshold). With the clustering "
                 "linkages: minimum similarity for merging, may be below --threshold (classes then also "
                 "join fragments that are not reported as a pair)."),
]
PairMarginOpt = Annotated[
    str,
    typer.Option("--pair-margin", metavar="MARGIN|none",
                 help="Report a neighbour pair only if its similarity is within MARGIN of the best match "
                 "of one of its two fragments (weaker neighbours are mostly near-misses); 0 keeps best "
                 "matches only, 'none' disables the rule. Exact (T1/T2) duplicates are always reported."),
]
LexMinT3Opt = Annotated[
    str,
    typer.Option("--lexical-min-t3", metavar="SIM|none",
                 help="Lexical encoder: report a Type-3 pair only if its abstracted-token similarity is at "
                 "least SIM (default 0.5 drops the WT3 band, whose lexical pairs were not clones on real code; "
                 "0.7 keeps the VST3/ST3 bands only: more precise, less recall); 'none' keeps every band."),
]
LinkageOpt = Annotated[
    str,
    typer.Option("--linkage", help="Clone classes: pairs (default; cliques of reported pairs: every member is in a reported "
                 "pair and every implied pair clears --class-threshold), or the clustering linkages single, "
                 "average, complete, none (T2 buckets only)."),
]
StockT4Opt = Annotated[
    str,
    typer.Option("--stock-t4", metavar="drop|keep",
                 help="T4 pairs of the stock neural encoder (-e neural without a clone-trained --model-path): "
                 "drop (default; 1 in 49 was a clone in a hand-labelled sample) or keep them as leads."),
]
UnusedCodeOpt = Annotated[
    str,
    typer.Option("--unused-code", metavar="drop|keep",
                 help="With --granularity file: drop (default) compares programs without the functions no code "
                 "reachable from their main refers to (unused template helpers; Java, C and C++ programs with a "
                 "main), keep compares whole files."),
]
GranularityOpt = Annotated[
    str,
    typer.Option("--granularity", "-g", help="Fragments: function (functions and methods), block (also copied runs "
                 "of statements inside and outside functions, and copied token runs across methods and "
                 "statements, as jscpd finds them) or file (whole files, as MOSS/JPlag compare programs: "
                 "JPlag's Greedy String Tiling decides file pairs)."),
]
SubfunctionOpt = Annotated[
    bool,
    typer.Option("--subfunction/--no-subfunction", help="At function granularity, also report the copied runs "
                 "inside functions (jscpd's token windows: at least --min-lines lines and 40 tokens, comments and "
                 "layout ignored) that no reported function pair holds, as pairs of sub-function fragments "
                 "(kind \"subfunction\" in the JSON report). On by default."),
]
DecisionOpt = Annotated[
    str,
    typer.Option("--decision", help="verifier (default): every embedding neighbour above --candidate-threshold and "
                 "every token-overlap candidate is decided by the calibrated clone verifier; cosine: the earlier "
                 "SSCD rule (--top-k neighbours at --threshold, --pair-margin); tiling: JPlag's Greedy String "
                 "Tiling of whole token sequences (what verifier means at --granularity file)."),
]
MaxNeighboursOpt = Annotated[int, typer.Option("--max-neighbours", help="Most candidates kept per fragment and "
                                               "source (counted in stats.capped when hit).")]
CandidateThresholdOpt = Annotated[Optional[float], typer.Option(
    "--candidate-threshold", help="Embedding cosine down to which neighbours become candidates (default: 0.4; "
    "0.8 with -e semantic, whose cosines run higher).")]
TokenOverlapOpt = Annotated[
    str,
    typer.Option("--token-overlap", metavar="SIM|none", help="SourcererCC token-overlap similarity down to which "
                 "token-bag candidates are collected; 'none' disables that source."),
]
VerifierOpt = Annotated[
    str,
    typer.Option("--verifier", metavar="default|strict|FILE", help="Clone verifier model: default (fitted on "
                 "BigCloneBench: Type-3 recall), strict (also fitted on blind-labelled real code: about 4 in 5 "
                 "reported pairs are clones, few MT3), or a model file from benchmarks/train_verifier.py."),
]
BaseCodeOpt = Annotated[
    str,
    typer.Option("--base-code", metavar="SHARE|none", help="Share of fragments (and at least 10) a source line must "
                 "occur in to count as base code, set aside when a candidate is verified (as MOSS ignores code "
                 "shared by many submissions); 'none' disables the rule."),
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
#: Default of --html-max-pairs: report.HTML_MAX_SIDE_BY_SIDE (a literal so that --help does not import the
#: report module; a test checks that the two agree).
HTML_MAX_PAIRS = 500
HtmlMaxPairsOpt = Annotated[int, typer.Option("--html-max-pairs", metavar="N",
                                              help="HTML report: pairs shown side by side (the most similar N; "
                                              "the pairs table lists more).")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also list the skipped files (path and reason) "
                                          "on stderr, after the one-line summary.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")]
BaselineOpt = Annotated[
    Optional[Path],
    typer.Option("--baseline", metavar="OLD_REPORT",
                 help="Report only the clone pairs that are not in OLD_REPORT, a JSON report written earlier "
                 "(twinspect clones PATH -f json -o OLD_REPORT, without --baseline). Fragments are matched by "
                 "path, name and a hash of their normalised code, so known pairs stay known when lines move; "
                 "a renamed, moved or edited fragment makes its pairs new. The summary says how many known "
                 "pairs are not shown."),
]
FailOverOpt = Annotated[
    Optional[float],
    typer.Option("--fail-over", metavar="PCT",
                 help="After writing the report, exit 1 when the duplicated-lines percentage is above PCT "
                 "(0-100; as jscpd's --threshold): the distinct lines of every clone copy but the first of "
                 "each group, over all physical lines of the parsed files (blank and comment lines "
                 "included). It is the whole tree's percentage, counted over all pairs found, the pairs "
                 "--baseline hides included. The percentage is in the summary and the JSON stats either way."),
]
FailOverTypesOpt = Annotated[
    Optional[str],
    typer.Option("--fail-over-types", metavar="TYPES",
                 help="The clone types whose pairs --fail-over counts, separated by commas (default: "
                 "T1,T2,T3,T4). jscpd counts exact copies only: T1,T2 is the closest to its --threshold. "
                 "Near-miss pairs make the all-types percentage several times jscpd's on test-heavy trees; "
                 "the summary and the JSON stats show the T1/T2 percentage (copied_lines_pct) either way."),
]
FailOnNewOpt = Annotated[
    bool,
    typer.Option("--fail-on-new", help="After writing the report, exit 1 when it lists any clone pair: with "
                 "--baseline, any pair not in the baseline (as jscpd's --exit-code)."),
]
ExecutorOpt = Annotated[str, typer.Option("--executor", help="Where parsing, the token-overlap index and the "
                                          "verifier's alignments run: local (worker processes on this machine) or "
                                          "ray (tasks on a Ray cluster; the tree must be at the same path on every "
                                          "node). Same report either way.")]
AddressOpt = Annotated[Optional[str], typer.Option("--address", help="With --executor ray: the cluster to join "
                                                   "(auto, HOST:6379 or ray://HOST:10001); without it a local Ray "
                                                   "instance is started and stopped.")]
WorkersOpt = Annotated[Optional[int], typer.Option("--workers", help="Processes (local) or Ray CPUs of a local "
                                                   "Ray instance; default 2 here, the cluster's CPUs when joining "
                                                   "one.")]
CacheOpt = Annotated[Optional[Path], typer.Option("--cache", metavar="DIR", help="Checkpoint directory: "
                                                  "each parsed file's fragments are kept there, so an interrupted "
                                                  "run resumes and the next run re-parses only changed files "
                                                  "(function and file granularity); the default detection also "
                                                  "keeps its candidate search and verification there, read back "
                                                  "when the fragments and settings are the same. Same report "
                                                  "either way.")]
ChangedOpt = Annotated[bool, typer.Option(
    "--changed", help="Check only the files added or changed since the full scan that filled --cache (which saves "
    "its state there): report the clone pairs with a fragment in one of them, found among the unchanged fragments "
    "similar to theirs. For CI on large trees; add --baseline to keep only new pairs. Needs --cache and the full "
    "scan's detection options.")]
UpdateStateOpt = Annotated[bool, typer.Option(
    "--update-state", help="With --changed: fold this check into the saved state, so the next --changed check is "
    "measured against this tree (a check per commit on a main branch). Without it every check is measured against "
    "the last full scan (a check per pull request).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (HNSW construction).")]
ThreadsOpt = Annotated[int, typer.Option("--threads", help="HNSW threads (-1 = all cores); 1 builds a reproducible "
                                         "graph for a given --seed.")]


def _parse_margin(value: str | float | None, option: str = "--pair-margin") -> float | None:
    """``--pair-margin`` (or another ``option`` taking a number or ``none``) as a float, or None
    for ``none``/``off``.

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
        raise InputError(f"{option} must be a number or 'none', got {value!r}") from None


def _fmt_margin(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _encoder_params(
    encoder: str, max_tokens: int | None, batch_size: int | None, model_path: Path | None, runtime: str | None = None
) -> dict | None:
    """Encoder keyword arguments from the CLI options; None (= the encoder's tuned defaults) when none given."""
    params: dict[str, Any] = {}
    if encoder == "neural":
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if batch_size is not None:
            params["batch_size"] = batch_size
        if runtime is not None:
            params["runtime"] = runtime
        if model_path is not None:
            from twinspect._io import require_readable

            require_readable(model_path, "model directory")
            params["model_path"] = str(model_path)
    elif any(v is not None for v in (max_tokens, batch_size, model_path, runtime)):
        raise InputError("--max-tokens, --batch-size, --model-path and --runtime apply to the neural encoder only",
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


#: DetectConfig fields whose validation messages name them, and the CLI options that set them.
_FIELD_FLAGS: dict[str, str] = {
    "top_k": "--top-k", "max_neighbours": "--max-neighbours", "token_overlap": "--token-overlap",
    "threshold": "--threshold", "class_threshold": "--class-threshold",
    "candidate_threshold": "--candidate-threshold", "pair_margin": "--pair-margin", "M": "--M",
    "ef_construction": "--ef-construction", "ef_search": "--ef-search", "min_lines": "--min-lines",
    "stock_t4": "--stock-t4", "lexical_min_t3": "--lexical-min-t3", "threads": "--threads",
    "base_code": "--base-code", "max_file_bytes": "--max-file-bytes", "unused_code": "--unused-code",
}


def _validate(config: Any) -> None:
    """``config.validate()``, with the library's field names (``min_lines``) in an error replaced by
    the CLI options that set them (``--min-lines``).

    Raises:
        InputError: the first invalid option, named as the user typed it.
    """
    import re

    try:
        config.validate()
    except InputError as exc:
        pattern = r"\b(" + "|".join(sorted(_FIELD_FLAGS, key=len, reverse=True)) + r")\b"
        message = re.sub(pattern, lambda m: _FIELD_FLAGS[m.group(1)], exc.message)
        message = message.replace("(or None to disable it)", "(or none)")
        raise InputError(message, exc.path, exc.hint) from None


def _check_max_file_bytes(value: int) -> None:
    if value < 1:
        raise InputError(f"--max-file-bytes must be at least 1, got {value}")


def _build_config(pair_margin: str | float | None = _fmt_margin(_D.pair_margin), **kw: Any):
    """A validated DetectConfig; options given as None keep DetectConfig's defaults.

    ``encoder_params=None`` resolves to the chosen encoder's defaults; ``pair_margin`` is the raw
    ``--pair-margin`` text (``"none"`` disables the rule).
    """
    from twinspect.code.clones import DetectConfig

    config = DetectConfig(**{key: value for key, value in kw.items() if value is not None})
    config.pair_margin = _parse_margin(pair_margin)
    _validate(config)
    return config


# ------------------------------------------------------------------------------------- commands
def scan_command(
    paths: PathsArg,
    language: LanguageOpt = None,
    min_lines: MinLinesOpt = _D.min_lines,
    granularity: GranularityOpt = _D.granularity,
    subfunction: SubfunctionOpt = _D.subfunction,
    encoder: EncoderOpt = _D.encoder,
    max_tokens: MaxTokensOpt = None,
    batch_size: BatchSizeOpt = None,
    model_path: ModelPathOpt = None,
    runtime: RuntimeOpt = None,
    index: IndexOpt = _D.index,
    decision: DecisionOpt = _D.decision,
    max_neighbours: MaxNeighboursOpt = _D.max_neighbours,
    candidate_threshold: CandidateThresholdOpt = None,
    token_overlap: TokenOverlapOpt = _fmt_margin(_D.token_overlap),
    base_code: BaseCodeOpt = _fmt_margin(_D.base_code),
    verifier: VerifierOpt = "default",
    top_k: TopKOpt = _D.top_k,
    threshold: ThresholdOpt = _D.threshold,
    class_threshold: ClassThresholdOpt = _D.class_threshold,
    linkage: LinkageOpt = _D.linkage,
    pair_margin: PairMarginOpt = _fmt_margin(_D.pair_margin),
    lexical_min_t3: LexMinT3Opt = _fmt_margin(_D.lexical_min_t3),
    stock_t4: StockT4Opt = _D.stock_t4,
    unused_code: UnusedCodeOpt = _D.unused_code,
    M: MOpt = _D.M,
    ef_construction: EfcOpt = _D.ef_construction,
    ef_search: EfsOpt = _D.ef_search,
    exclude: ExcludeOpt = None,
    no_gitignore: NoGitignoreOpt = False,
    max_file_bytes: MaxFileBytesOpt = 1 << 20,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    limit: LimitOpt = 20,
    html_max_pairs: HtmlMaxPairsOpt = HTML_MAX_PAIRS,
    executor: ExecutorOpt = "local",
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    cache: CacheOpt = None,
    baseline: BaselineOpt = None,
    fail_over: FailOverOpt = None,
    fail_over_types: FailOverTypesOpt = None,
    fail_on_new: FailOnNewOpt = False,
    changed: ChangedOpt = False,
    update_state: UpdateStateOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    seed: SeedOpt = _D.seed,
    threads: ThreadsOpt = _D.threads,
) -> None:
    """Find clone pairs and clone classes in source files/directories and report them.

    Functions and methods (or blocks, or files: --granularity) are collapsed into exact-duplicate groups (T1/T2), then candidate pairs come from an embedding range search and a SourcererCC token-overlap index, and a calibrated verifier (LCS alignment, token-bag overlaps, TF-IDF) decides each; pairs are typed T1-T4 with BigCloneBench's Type-3 bands. Clone classes are cliques of reported pairs (--linkage pairs).
    """
    from twinspect.code.clones import scan
    from twinspect.code.report import FORMATS, write_report

    _check_choice("--format", fmt, FORMATS)
    if html_max_pairs < 0:
        raise InputError(f"--html-max-pairs must be at least 0, got {html_max_pairs}")
    if fmt == "html" and output is None:
        raise InputError("the html format needs an output file", hint="pass -o report.html")
    if output is not None and output.is_dir():  # fail before the scan, not after it
        raise InputError(f"{output}: is a directory, expected a report file path",
                         hint=f"pass a file, e.g. -o {output / ('report.' + ('txt' if fmt == 'table' else fmt))}")
    _check_max_file_bytes(max_file_bytes)
    _check_paths(paths)
    from twinspect.code.executors import check_executor, make_shard_executor

    check_executor(executor, address, workers)
    from twinspect.code.baseline import check_fail_over, check_types

    check_fail_over(fail_over)
    counted = check_types(fail_over_types) if fail_over_types is not None else None
    if counted is not None and fail_over is None:
        raise InputError("--fail-over-types says which clone types --fail-over counts", hint="add --fail-over PCT")
    if changed and cache is None:
        raise InputError("--changed needs --cache DIR: the directory a full scan with --cache filled",
                         hint="run twinspect clones PATH --cache DIR once, then --changed --cache DIR")
    if changed and fail_over is not None:
        raise InputError("--fail-over measures the whole tree's duplicated lines; --changed checks only the changed "
                         "files", hint="use --fail-on-new with --changed")
    if changed and executor != "local":
        raise InputError("--changed runs in this process; drop --executor")
    if update_state and not changed:
        raise InputError("--update-state updates the state a --changed check starts from; add --changed",
                         hint="a full scan with --cache always saves a fresh state")
    known = None
    if baseline is not None:
        from twinspect.code.baseline import load_baseline

        if output is not None and output.resolve() == baseline.resolve():
            raise InputError(f"-o {output} is the --baseline file: a report written with --baseline lists only the "
                             "new pairs", hint="write the next baseline without --baseline")
        known = load_baseline(baseline)
    if output is not None:
        from twinspect._io import check_output_file

        check_output_file(output, "report file")
    config = _build_config(
        encoder=encoder, encoder_params=_encoder_params(encoder, max_tokens, batch_size, model_path, runtime),
        index=index, top_k=top_k, threshold=threshold, class_threshold=class_threshold, linkage=linkage,
        pair_margin=pair_margin, M=M, ef_construction=ef_construction, ef_search=ef_search, min_lines=min_lines, seed=seed,
        threads=threads, stock_t4=stock_t4, granularity=granularity, decision=decision, max_neighbours=max_neighbours,
        candidate_threshold=candidate_threshold, subfunction=subfunction,
    )
    config.lexical_min_t3 = _parse_margin(lexical_min_t3, "--lexical-min-t3")
    config.token_overlap = _parse_margin(token_overlap, "--token-overlap")
    config.base_code = _parse_margin(base_code, "--base-code")
    config.unused_code = unused_code
    config.verifier_path = None if verifier == "default" else verifier
    _validate(config)
    # the default (local, no --workers) keeps scan's own choice: worker processes for parsing only
    runner = None if executor == "local" and workers is None else make_shard_executor(
        executor, address=address, workers=workers)
    try:
        if changed:
            from twinspect.code.incremental import changed_scan

            assert cache is not None
            report = changed_scan(paths, config, cache, exclude=tuple(exclude or ()), max_file_bytes=max_file_bytes,
                                  respect_gitignore=not no_gitignore, language=language, quiet=quiet,
                                  update=update_state)
        else:
            report = scan(paths, config, exclude=tuple(exclude or ()), max_file_bytes=max_file_bytes,
                          respect_gitignore=not no_gitignore, language=language, quiet=quiet, executor=runner,
                          cache_dir=cache)
    finally:
        if runner is not None:
            runner.close()
    from twinspect.code.baseline import duplication, filter_report, new_pairs_message, over_threshold

    if not changed:  # the whole tree's, before --baseline hides known pairs
        report.stats.update(duplication(report, types=counted))
    if known is not None:
        report = filter_report(report, known)
    write_report(report, fmt, output, quiet=quiet, limit=limit, html_max_pairs=html_max_pairs)
    failed = [msg for msg in (new_pairs_message(report) if fail_on_new else None,
                              over_threshold(report.stats, fail_over) if fail_over is not None else None) if msg]
    if not quiet:
        from rich.console import Console
        from rich.text import Text

        err = Console(stderr=True)
        for line in (languages_summary(report.stats), skipped_summary(report.stats)):
            if line:
                err.print(Text(line), highlight=False, soft_wrap=True)
        if verbose:
            for entry in report.stats.get("skipped_files") or []:
                err.print(Text(skipped_file_line(entry)), highlight=False, soft_wrap=True)
            for entry in report.stats.get("unsupported_paths") or []:
                err.print(Text(f"  not parsed ({entry['language']}): {entry['path']}"), highlight=False, soft_wrap=True)
    if failed:
        from twinspect.progress import print_plain

        for msg in failed:
            print_plain(msg)
        raise typer.Exit(1)


def embed_command(
    paths: PathsArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="The .npz file to write (required).")],
    language: LanguageOpt = None,
    min_lines: MinLinesOpt = _D.min_lines,
    granularity: GranularityOpt = _D.granularity,
    encoder: EncoderOpt = _D.encoder,
    max_tokens: MaxTokensOpt = None,
    batch_size: BatchSizeOpt = None,
    model_path: ModelPathOpt = None,
    runtime: RuntimeOpt = None,
    exclude: ExcludeOpt = None,
    quiet: QuietOpt = False,
    verbose: PlainVerboseOpt = False,
) -> None:
    """Embed fragments and write them to a .npz file: paths, start_lines, end_lines, names, languages and
    float32 vectors (N x d, L2-normalised), the vectors the clone search uses."""
    from twinspect._io import check_output_file
    from twinspect.code.embed import embed, write_embeddings

    _check_paths(paths)
    if output.is_dir():
        raise InputError(f"{output}: is a directory, expected a .npz file path")
    check_output_file(output, ".npz file")
    frags, vecs = embed(paths, encoder=encoder,
                        encoder_params=_encoder_params(encoder, max_tokens, batch_size, model_path, runtime),
                        granularity=granularity, min_lines=min_lines, exclude=tuple(exclude or ()),
                        language=language, quiet=quiet)
    write_embeddings(output, frags, vecs)
    if not quiet:
        from twinspect.progress import print_plain

        print_plain(f"{len(frags)} fragments, {vecs.shape[1] if len(frags) else 0}-d vectors; wrote {output}")


def skipped_summary(stats: dict[str, Any]) -> str:
    """One line about files not mined (skipped by reason, decoded as Windows-1252/Latin-1), or ""."""
    skipped = {k: v for k, v in (stats.get("skipped") or {}).items() if v and k not in ("excluded", "gitignored", "unsupported")}
    parts = []
    if skipped:
        parts.append(f"skipped {sum(skipped.values())} files ("
                     + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in skipped.items()) + ")")
    if stats.get("files_decoded_fallback"):
        parts.append(f"decoded {stats['files_decoded_fallback']} non-UTF-8 files as Windows-1252/Latin-1")
    unsupported = stats.get("unsupported_files") or {}
    if unsupported:
        parts.append(f"ignored {sum(unsupported.values())} files in languages twinspect does not parse ("
                     + ", ".join(f"{k} {v}" for k, v in unsupported.items()) + ")")
    return "; ".join(parts)


def languages_summary(stats: dict[str, Any]) -> str:
    """One line counting the files parsed per language (``parsed 12 files: go 9, rust 3``), or ""."""
    by_lang = stats.get("files_by_language") or {}
    if not by_lang:
        return ""
    return f"parsed {sum(by_lang.values())} files: " + ", ".join(f"{k} {v}" for k, v in by_lang.items())


def skipped_file_line(entry: dict[str, str]) -> str:
    """One ``--verbose`` line about a skipped file: ``  REASON: PATH`` (indented under the summary;
    the path last, so that a path holding ``: `` stays readable)."""
    return f"  {entry['reason'].replace('_', ' ')}: {entry['path']}"


def _require_sources(paths: list[Path], **discover_options: Any) -> None:
    """Refuse, before any model is loaded or file parsed, a tree in which discovery finds no source
    file to parse (the same one-line errors as a scan of that tree: see
    :func:`twinspect.code.clones.check_parsed`).

    Raises:
        InputError: an empty tree, or only files twinspect does not parse, or all skipped.
    """
    from twinspect.code.clones import check_parsed, scan_root
    from twinspect.code.files import discover

    files, stats = discover(paths, **discover_options)
    if not files:
        check_parsed(stats, scan_root(paths))


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
    runtime: RuntimeOpt = None,
    index: IndexOpt = _D.index,
    M: MOpt = _D.M,
    ef_construction: EfcOpt = _D.ef_construction,
    ef_search: EfsOpt = _D.ef_search,
    exclude: ExcludeOpt = None,
    no_gitignore: NoGitignoreOpt = False,
    max_file_bytes: MaxFileBytesOpt = 1 << 20,
    quiet: QuietOpt = False,
    verbose: PlainVerboseOpt = False,
    seed: SeedOpt = _D.seed,
) -> None:
    """Build (or --update) a persistent clone index of source files, for later `clones query`."""
    import time

    from twinspect._io import check_output_dir
    from twinspect.code.store import CloneIndex

    _check_max_file_bytes(max_file_bytes)
    _check_paths(paths)
    config = _build_config(
        encoder=encoder, encoder_params=_encoder_params(encoder, max_tokens, batch_size, model_path, runtime),
        index=index, M=M, ef_construction=ef_construction, ef_search=ef_search, min_lines=min_lines, seed=seed,
    )
    check_output_dir(out_dir, "clone index", marker="manifest.json")
    if not update:
        _require_sources(paths, exclude=tuple(exclude or ()), max_file_bytes=max_file_bytes,
                         respect_gitignore=not no_gitignore, language=language)
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
        from twinspect.progress import print_plain

        print_plain(f"index {out_dir} {verb}: {len(store.fragments)} fragments, {time.perf_counter() - t0:.1f} s")


def query_command(
    index_dir: Annotated[Path, typer.Argument(help="Directory of an index built by `twinspect clones index`.",
                                              show_default=False, metavar="DIR")],
    target: Annotated[str, typer.Argument(help="FILE or FILE:LINE; the innermost function containing LINE "
                                          "(or the file's first function) is queried.", show_default=False,
                                          metavar="FILE[:LINE]")],
    top_k: TopKOpt = _D.top_k,
    threshold: ThresholdOpt = _D.threshold,
    language: LanguageOpt = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Report format: table or json.")] = "table",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the result to this file.")] = None,
    quiet: QuietOpt = False,
    verbose: PlainVerboseOpt = False,
) -> None:
    """Find the clones of one function in a persisted index (the file may lie outside the indexed tree)."""
    import json

    from rich.console import Console

    from twinspect._io import atomic_write, require_readable
    from twinspect.code.clones import scan_root
    from twinspect.code.query import query_clones, query_result, resolve_query_fragment
    from twinspect.code.report import fragment_label, output_console
    from twinspect.code.store import CloneIndex

    _check_choice("--format", fmt, ("table", "json"))
    if top_k < 1:
        raise InputError(f"--top-k must be at least 1, got {top_k}")
    require_readable(index_dir, "index directory")
    if output is not None:
        from twinspect._io import check_output_file

        check_output_file(output, "output file")
    store = CloneIndex.load(index_dir)
    root = scan_root(store.manifest.get("roots") or []) or None
    frag, _ = resolve_query_fragment(target, language=language, root=root)
    hits = query_clones(store, frag, top_k=top_k, threshold=threshold)
    clones = [(h.fragment, h.similarity, h.clone_type) for h in hits]
    if fmt == "json":
        text = json.dumps(query_result(index_dir, frag, top_k, threshold, hits), indent=2) + "\n"
        if output is None:
            typer.echo(text, nl=False)
        else:
            with atomic_write(output) as fh:
                fh.write(text)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for head, justify in (("#", "right"), ("clone", "left"), ("name", "left"), ("type", "left"),
                          ("similarity", "right")):
        table.add_column(head, justify=cast("JustifyMethod", justify), overflow="fold")
    for i, (o, s, ct) in enumerate(clones):
        table.add_row(str(i), Text(fragment_label(o)), Text(o.name), ct.type if ct.band is None else f"{ct.type} ({ct.band})",
                      f"{s:.3f}")  # paths and names as Text: no rich markup or emoji codes in them
    title = f"{len(clones)} clones of {fragment_label(frag)}" + (f" ({frag.name})" if frag.name else "")

    def emit(console: Console) -> None:
        if clones:
            console.print(table)
        console.print(Text(title), highlight=False)

    if output is not None:
        with atomic_write(output) as fh:
            emit(Console(file=fh, width=200, no_color=True))
    elif not quiet:
        emit(output_console())


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
    verbose: PlainVerboseOpt = False,
    seed: SeedOpt = _D.seed,
) -> None:
    """Fine-tune the neural encoder contrastively on labelled clone pairs (use it with --model-path)."""
    from twinspect._io import check_output_dir
    from twinspect.code.training_pairs import load_training_pairs

    check_output_dir(out_dir, "model directory")
    pairs = load_training_pairs(pairs_file, root=root, language=language)
    if len(pairs) < 2:
        raise InputError(f"found {len(pairs)} clone pairs; fine-tuning needs at least 2", pairs_file)
    from twinspect.code.encoders.finetune import finetune

    out = finetune(pairs, out_dir, base_model=base_model, epochs=epochs, batch_size=batch_size,
                   max_tokens=max_tokens, lr=lr, seed=seed, quiet=quiet)
    if not quiet:
        from twinspect.progress import print_plain

        print_plain(f"fine-tuned on {len(pairs)} pairs; model written to {out} (use --encoder neural --model-path {out})")


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
    clones.command("embed")(embed_command)
    clones.command("finetune")(finetune_command)
    from twinspect.code.cli_eval import register_eval

    register_eval(clones)
    app.add_typer(clones, name="clones")
