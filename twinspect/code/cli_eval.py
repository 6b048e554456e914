"""``twinspect clones eval``: benchmark evaluation commands (SSCD Company-C, BigCloneBench, POJ-104).

Each command runs the clone detector (or, for POJ-104, its encoder) on one of the shared benchmark
data sets and prints the scores of :mod:`twinspect.code.evaluate` as a table or JSON. The data folder
defaults to ``../shared/data/clones/<name>`` relative to the current directory.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import typer

_DATA_HELP = "Data folder (default: ../shared/data/clones/{name} relative to the current directory)."


def _config(
    encoder: str,
    index: str,
    top_k: Optional[int],
    threshold: Optional[float],
    class_threshold: Optional[float],
    linkage: Optional[str],
    min_lines: Optional[int],
    identifier_weight: Optional[float],
    dim: Optional[int],
    model_path: Optional[Path],
    seed: int,
    encoder_param: Optional[list[str]] = None,
    verifier: Optional[str] = None,
) -> Any:
    """Build a DetectConfig from CLI options; unset options keep DetectConfig's defaults."""
    from twinspect.code.clones import DetectConfig

    cfg = DetectConfig(encoder=encoder, index=index, seed=seed)
    if verifier is not None and verifier != "default":
        cfg.verifier_path = verifier  # checked by cfg.validate() below, before the benchmark is read
    for name, value in (("top_k", top_k), ("threshold", threshold), ("linkage", linkage), ("min_lines", min_lines)):
        if value is not None:
            setattr(cfg, name, value)
    if class_threshold is not None:
        cfg.class_threshold = class_threshold
    params = dict(cfg.encoder_params or {})
    if encoder == "lexical":
        if identifier_weight is not None:
            params["identifier_weight"] = identifier_weight
        if dim is not None:
            params["dim"] = dim
    elif model_path is not None:
        params["model_path"] = str(model_path)
    params.update(_parse_params(encoder_param or []))
    cfg.encoder_params = params
    cfg.validate()
    return cfg


def _parse_params(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> dict; VALUE is parsed as JSON when it is valid JSON (numbers, true,
    [1, 3]...), else kept as a string.

    Raises:
        InputError: an item without ``=`` or with an empty key.
    """
    from twinspect.errors import InputError

    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key:
            raise InputError(f"--encoder-param expects KEY=VALUE, got {item!r}", hint="e.g. literal_mode=keep")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _pct(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else 100.0 * float(x)


def _check_format(fmt: str) -> None:
    """Refuse an unknown ``--format`` before the benchmark runs (minutes), not after it."""
    from twinspect.cli_options import check_format

    check_format(fmt, ("table", "json"))


def _emit(result: dict, rows: list[list[Any]], headers: list[str], title: str, fmt: str, output: Optional[Path],
          quiet: bool = False) -> None:
    from twinspect.cli_options import emit_report

    emit_report(result, rows, headers, title, fmt, output=output, quiet=quiet)


def register_eval(clones: typer.Typer) -> None:
    """Add the ``eval`` sub-group (``sscd``, ``bcb``, ``poj104``) to the ``clones`` group."""
    ev_app = typer.Typer(help="Score the clone detector on real benchmarks (SSCD Company-C, BigCloneBench, POJ-104).",
                         no_args_is_help=True)

    # common detector options
    enc_opt = typer.Option("lexical", "--encoder", "-e", help="lexical, neural or semantic.")
    idx_opt = typer.Option("exact", "--index", help="exact or hnsw.")
    k_opt = typer.Option(None, "--top-k", help="Neighbours per fragment (default: the detector's).")
    thr_opt = typer.Option(None, "--threshold", help="Minimum cosine of a reported pair (default: the detector's).")
    cthr_opt = typer.Option(None, "--class-threshold", help="Class-merging threshold (default: --threshold).")
    link_opt = typer.Option(None, "--linkage", help="Class linkage: single, average, complete, none.")
    minl_opt = typer.Option(None, "--min-lines", help="Minimum fragment lines (default 6).")
    idw_opt = typer.Option(None, "--identifier-weight", help="Lexical encoder: weight of identifier sub-tokens in [0, 1).")
    dim_opt = typer.Option(None, "--dim", help="Lexical encoder: hashed dimension.")
    model_opt = typer.Option(None, "--model-path", help="Neural encoder: model directory (default: bundled MiniLM).")
    seed_opt = typer.Option(0, "--seed", help="Random seed (HNSW, subsampling).")
    ver_opt = typer.Option("default", "--verifier", metavar="default|strict|FILE",
                           help="Clone verifier model (as for `twinspect clones`).")
    par_opt = typer.Option(None, "--encoder-param", "-P",
                           help="Encoder keyword KEY=VALUE (repeatable; VALUE parsed as JSON), "
                                "e.g. literal_mode=keep, ngram_range=[1,4], sublinear_tf=false.")
    fmt_opt = typer.Option("table", "--format", "-f", help="Report format: table or json.")
    out_opt = typer.Option(None, "-o", "--output", help="Also write the JSON result to this file (atomically).")
    quiet_opt = typer.Option(False, "--quiet", "-q", help="No progress output, no table.")
    verbose_opt = typer.Option(False, "--verbose", "-v", help="Also let third-party libraries log to stderr.")

    @ev_app.command("sscd")
    def sscd_cmd(
        data: Optional[Path] = typer.Option(None, "--data", help=_DATA_HELP.format(name="sscd")),
        encoder: str = enc_opt, index: str = idx_opt, top_k: Optional[int] = k_opt,
        threshold: Optional[float] = thr_opt, class_threshold: Optional[float] = cthr_opt,
        linkage: Optional[str] = link_opt, min_lines: Optional[int] = minl_opt,
        identifier_weight: Optional[float] = idw_opt, dim: Optional[int] = dim_opt,
        model_path: Optional[Path] = model_opt, seed: int = seed_opt,
        encoder_param: Optional[list[str]] = par_opt, verifier: str = ver_opt,
        fmt: str = fmt_opt, output: Optional[Path] = out_opt, quiet: bool = quiet_opt, verbose: bool = verbose_opt,
    ) -> None:
        """SSCD Company-C: pair recall/precision (70 % line overlap) and query-mode recall@k / MRR."""
        from twinspect.code.evaluate import run_sscd

        _check_format(fmt)
        cfg = _config(encoder, index, top_k, threshold, class_threshold, linkage, min_lines, identifier_weight, dim,
                      model_path, seed, encoder_param, verifier)
        res = run_sscd(data, cfg, quiet=quiet)
        res["config"] = cfg.to_dict()
        rows = [
            ["recall (pairs)", _pct(res["recall"]), "60.76", "86.08"],
            ["precision (private pairs)", _pct(res["precision"]), "84.21", "14.81"],
            ["precision (copy-aware)", _pct(res["precision_copies"]), "", ""],
            ["query recall@1", _pct(res.get("recall@1")), "", ""],
            ["query recall@10", _pct(res.get("recall@10")), "", ""],
            ["query MRR", _pct(res.get("mrr")), "", ""],
        ]
        _emit(res, rows, ["metric (%)", "twinspect", "SSCD paper", "SourcererCC"],
              f"SSCD Company-C ({res['found']}/{res['labels']} labelled pairs found, {res['fragments']} fragments)",
              fmt, output, quiet)

    @ev_app.command("bcb")
    def bcb_cmd(
        data: Optional[Path] = typer.Option(None, "--data", help=_DATA_HELP.format(name="bigclonebench")),
        encoder: str = enc_opt, index: str = idx_opt, top_k: Optional[int] = k_opt,
        threshold: Optional[float] = thr_opt, class_threshold: Optional[float] = cthr_opt,
        linkage: Optional[str] = link_opt, min_lines: Optional[int] = minl_opt,
        identifier_weight: Optional[float] = idw_opt, dim: Optional[int] = dim_opt,
        model_path: Optional[Path] = model_opt, seed: int = seed_opt,
        encoder_param: Optional[list[str]] = par_opt, verifier: str = ver_opt,
        fraction: float = typer.Option(1.0, "--fraction", help="Score this share of each type's labelled pairs (quick runs)."),
        split: Optional[str] = typer.Option(None, "--split", help="Score one half split by functionality: tune or "
                                            "test (tune settings on one, report the other); default all labels."),
        fmt: str = fmt_opt, output: Optional[Path] = out_opt, quiet: bool = quiet_opt, verbose: bool = verbose_opt,
    ) -> None:
        """BigCloneBench typed subset: per-type pair recall and class-implied recall (pair or same class), each with its false-positive rate."""
        from twinspect.code.evaluate import run_bcb
        from twinspect.errors import InputError

        _check_format(fmt)
        if not 0.0 < fraction <= 1.0:
            raise InputError(f"--fraction must be in (0, 1], got {fraction}")
        cfg = _config(encoder, index, top_k, threshold, class_threshold, linkage, min_lines, identifier_weight, dim,
                      model_path, seed, encoder_param, verifier)
        res = run_bcb(data, cfg, fraction=fraction, seed=seed, split=split, quiet=quiet)
        res["config"] = cfg.to_dict()
        rec, prec = res["recall"], res["pair"]["recall"]
        published = {"T1": "100", "T2": "97", "ST3": "96 / 80", "MT3": "27", "WT3/T4": "1"}
        rows = [[t, _pct(prec.get(t)), _pct(rec.get(t)), published[t]] for t in ("T1", "T2", "ST3", "MT3", "WT3/T4")]
        rows.append(["false positives", _pct(res["pair"]["fp_rate"]), _pct(res["fp_rate"]), ""])
        part = f", {split} half by functionality" if split else ""
        _emit(res, rows, ["type", "pair recall %", "class-implied recall %", "SSCD paper"],
              f"BigCloneBench ({res['functions']} functions{part}, {res['unmined']} unmined, {res['pairs']} pairs, "
              f"largest class {res['largest_class']})", fmt, output, quiet)

    @ev_app.command("poj104")
    def poj_cmd(
        data: Optional[Path] = typer.Option(None, "--data", help=_DATA_HELP.format(name="poj104")),
        encoder: str = enc_opt,
        identifier_weight: Optional[float] = idw_opt, dim: Optional[int] = dim_opt,
        model_path: Optional[Path] = model_opt, seed: int = seed_opt,
        encoder_param: Optional[list[str]] = par_opt,
        limit: Optional[int] = typer.Option(None, "--limit", help="Score a random subset of this many programs."),
        fmt: str = fmt_opt, output: Optional[Path] = out_opt, quiet: bool = quiet_opt, verbose: bool = verbose_opt,
    ) -> None:
        """POJ-104: MAP@R of every program against all the others (CodeXGLUE's retrieval metric)."""
        from twinspect.code.evaluate import run_poj104

        _check_format(fmt)
        cfg = _config(encoder, "exact", None, None, None, None, None, identifier_weight, dim, model_path, seed,
                      encoder_param)
        res = run_poj104(data, cfg, limit=limit, seed=seed)
        res["config"] = cfg.to_dict()
        rows = [["MAP@R", _pct(res["map_at_r"]), "55.12", "82.67"]]
        _emit(res, rows, ["metric (%)", "twinspect", "Aroma", "CodeBERT"],
              f"POJ-104 ({res['programs']} programs, {res['labels']} problems)", fmt, output, quiet)

    clones.add_typer(ev_app, name="eval")
