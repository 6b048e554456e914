"""``twinspect fuzz catalogue|run|report|tracker|confirm``: MEMO-style differential testing of Keras 3 backends and ONNX Runtime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperCommand

from twinspect.cli_options import QuietOpt, VerboseOpt, check_format, emit_text, format_option
from twinspect.progress import print_plain

fuzz_app = typer.Typer(help="MEMO coverage-guided model generation for DL-library differential testing.",
                       no_args_is_help=True)


#: ``--plots`` given without a value (the old flag form): plots go into the campaign directory.
_PLOTS_IN_CAMPAIGN = "\0campaign"


class _OldPlotsFlag(TyperCommand):
    """Accepts the old ``--plots`` flag (no value) of ``fuzz report``: a ``--plots`` that is last or
    followed by another option gets :data:`_PLOTS_IN_CAMPAIGN` as its value."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        fixed: list[str] = []
        for i, arg in enumerate(args):
            fixed.append(arg)
            if arg == "--plots" and (i + 1 == len(args) or args[i + 1].startswith("-")):
                fixed.append(_PLOTS_IN_CAMPAIGN)
        return super().parse_args(ctx, fixed)


@fuzz_app.command("catalogue")
def catalogue_cmd(
    fmt: str = format_option(("table", "json")),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the catalogue to this file (atomically)."),
    as_json: bool = typer.Option(False, "--json", hidden=True, help="Deprecated: use -f json."),
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Print the layer catalogue and the denominators of the three coverage criteria."""
    from twinspect.dl.fuzz import catalogue

    if as_json:
        print_plain("note: --json is deprecated; use -f json")
        fmt = "json"
    check_format(fmt, ("table", "json"))
    rows, den = catalogue.as_table(), catalogue.denominators()
    if fmt == "json":
        text = json.dumps({"denominators": den, "layers": rows}, indent=1) + "\n"
    else:
        lines = []
        for r in rows:
            mode = ",".join(f"{k}:{v}" for k, v in r["mode"].items())
            shape = ",".join(f"{k}:{v}" for k, v in r["shape"].items())
            lines.append(f"{r['layer']:<24} {r['category']:<14} ranks={r['in_ranks']}  shape[{shape}]  mode[{mode}]")
        lines.append(f"layer types {den['layer_type']}  layer pairs {den['layer_pair']}  "
                     f"layer parameter values {den['layer_param']}")
        text = "\n".join(lines) + "\n"
    emit_text(text, output, show=fmt == "json" or not quiet)


@fuzz_app.command("run")
def run_cmd(
    out: Path = typer.Option(..., "--output", "-o", "--out", help="Campaign directory (created, or resumed when it "
                             "holds one); its state.json holds the full summary."),
    budget: str = typer.Option("15m", "--budget", help="Time budget of the search loop (generation and testing; "
                               "backend start-up, seeding and finding minimisation come on top): 90s, 15m, 1h, 1h30m."),
    backends: str = typer.Option("tensorflow,jax,torch,onnxruntime", "--backends", help="Systems under test."),
    variant: str = typer.Option("memo", "--variant", help="memo | memo_r (random seed selection) | memo_o (DeepMutation's, "
                                "LEMON's and Audee's operators) | memo_noreduce (seeds not reduced) | muffin (Muffin-style random DAG models "
                                "from scratch) | lemon (LEMON-style mutation guided by inconsistency, not coverage)."),
    seed_models: str = typer.Option("LeNet5,AlexNet,LSTM1,LSTM2", "--seeds", help="Seed models, comma-separated (also ResNet50, DenseNet121, InceptionV3, InceptionResNetV2, MobileNetV2, Xception); 'all' for the paper's ten, 'small' for the first four."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    timeout: float = typer.Option(60.0, "--timeout", help="Per-model time limit of a backend, seconds."),
    max_models: int = typer.Option(0, "--max-models", help="Stop after this many mutants (0: budget only)."),
    mh_p: float = typer.Option(0.05, "--mh-p", help="Metropolis–Hastings parameter p of seed selection, in (0, 1) (MEMO: 0.05)."),
    executor: str = typer.Option("local", "--executor", help="local (worker processes on this machine) | ray (one Ray actor per backend; needs the 'ray' extra)."),
    address: str = typer.Option("", "--address", help="Ray cluster to join with --executor ray (auto, HOST:6379 or ray://HOST:10001); default: start a local Ray instance."),
    jobs: int = typer.Option(1, "--jobs", help="--executor local: run up to N backends of a model at the same time (one busy worker process each; default 1, one after another). Results do not depend on it."),
    fmt: str = format_option(("table", "json")),
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run (or resume) a campaign; prints a summary table (-f json: the JSON summary).

    Model executions run in local worker processes, or with ``--executor ray`` on Ray actors (one per
    backend, each owning a worker process) of a local Ray instance or the cluster at ``--address``; the
    campaign directory and summary have the same format either way. ``-o`` is the campaign directory
    (``--out`` is its older spelling); `twinspect fuzz report DIR` prints the summary again.
    """
    from twinspect.dl.fuzz import backends as bk
    from twinspect.dl.fuzz import executors, report
    from twinspect.dl.fuzz import seeds as sd
    from twinspect.dl.fuzz.campaign import Config, parse_budget, run_campaign
    from twinspect.errors import InputError

    check_format(fmt, ("table", "json"))
    seconds = parse_budget(budget)
    names = [bk.canonical(b) for b in backends.split(",") if b.strip()]
    seed_list = sd.parse_names(seed_models)
    executors.check(executor, address or None, jobs)
    if not 0.0 < mh_p < 1.0:
        raise InputError(f"--mh-p must be in (0, 1), got {mh_p}")
    cfg = Config(backends=names, seeds=seed_list, variant=variant, seed=seed, timeout_s=timeout, mh_p=mh_p)
    summ = run_campaign(out, seconds, cfg, max_models=max_models or None, verbose=0 if quiet else 1,
                        executor=executor, address=address or None, jobs=jobs)
    if fmt == "json":
        print(json.dumps({k: v for k, v in summ.items() if k != "coverage_over_time"}, indent=1, default=str))
    elif not quiet:
        print(report.table(summ))
        print(f"campaign: {out}  (twinspect fuzz report {out} -f json|html)")


@fuzz_app.command("report", cls=_OldPlotsFlag)
def report_cmd(
    campaign: Path = typer.Argument(..., help="Campaign directory."),
    fmt: str = format_option(("table", "json", "html")),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to this file (atomically)."),
    plots: Optional[str] = typer.Option(None, "--plots", metavar="DIR", help="Write coverage_over_time.png into DIR (created). Without DIR "
                                        "(deprecated): into the campaign directory."),
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Summarise a campaign: coverage, models per hour, findings."""
    from twinspect._io import check_output_dir, check_output_file
    from twinspect.dl.fuzz import report

    check_format(fmt, ("table", "json", "html"))
    if output is not None:
        check_output_file(output, "report file")
    plots_dir: Optional[Path] = None
    if plots == _PLOTS_IN_CAMPAIGN:
        print_plain("note: --plots without a directory is deprecated; give one (--plots DIR)")
        plots_dir = Path(campaign)
    elif plots is not None:
        plots_dir = Path(plots)
        check_output_dir(plots_dir, "plots directory")
    s = report.summary(campaign)
    if fmt == "json":
        text = json.dumps(s, indent=1, default=str) + "\n"
    elif fmt == "html":
        text = report.to_html(s) + "\n"
    else:
        text = report.table(s) + "\n"
    emit_text(text, output, show=fmt != "table" or not quiet)
    if plots_dir is not None:
        report.plot(s, plots_dir / "coverage_over_time.png")


@fuzz_app.command("tracker")
def tracker_cmd(
    campaign: Path = typer.Argument(..., help="Campaign directory."),
    finding: str = typer.Argument(..., help="Finding id (findings/<id>), or a unique prefix of it."),
    verdict: str = typer.Option(..., "--verdict", help="known | related | not-found: what a search of the "
                                "libraries' public issue trackers found for this finding's symptom."),
    link: list[str] = typer.Option([], "--link", help="URL of a matching thread (repeatable; needed for known and related)."),
    query: list[str] = typer.Option([], "--query", help="A search that was tried (repeatable; needed for not-found)."),
    note: str = typer.Option("", "--note", help="What differs (related), versions checked, ..."),
    fmt: str = format_option(("table", "json")),
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Record a finding's public issue-tracker verdict in its bundle (tracker.json); `fuzz report` shows it.

    twinspect does not search the trackers itself: search them (Keras, TensorFlow, JAX, PyTorch, ONNX Runtime,
    tf2onnx) for the finding's symptom, then record what you found here.
    """
    from twinspect.dl.fuzz import trackers, triage

    check_format(fmt, ("table", "json"))
    bundle = triage.bundle_dir(campaign, finding)
    rec = trackers.record(bundle, verdict, links=link, queries=query, note=note)
    if fmt == "json":
        print(json.dumps({"finding": bundle.name, **rec}, indent=1))
    elif not quiet:
        print_plain(f"{bundle.name}: {rec['verdict']}" + (f" ({', '.join(rec['links'])})" if rec["links"] else "")
                    + f" -> {bundle / trackers.TRACKER_FILE}")


@fuzz_app.command("confirm")
def confirm_cmd(
    campaign: Path = typer.Argument(..., help="Campaign directory."),
    finding: list[str] = typer.Option([], "--finding", help="Only this finding (id or unique prefix; repeatable)."),
    timeout: float = typer.Option(1800.0, "--timeout", min=1.0, help="Limit for one bundle's repro.py, seconds."),
    recorded: bool = typer.Option(False, "--recorded", help="Judge the outputs recorded in the bundles instead of "
                                  "running the systems (numpy only: checks the bundles' rule, not the libraries)."),
    resume: bool = typer.Option(False, "--resume", help="Keep the bundles already confirmed as they are."),
    fmt: str = format_option(("table", "json")),
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Re-run every finding's repro.py in a fresh process and record whether it reproduces (confirm.json).

    A symptom found in a campaign's long-lived workers can depend on their state; `fuzz report` shows each
    finding as reproduced, not reproduced or unconfirmed once this has run.
    """
    from twinspect.dl.fuzz import confirm, triage

    check_format(fmt, ("table", "json"))
    total = len(triage.bundle_dirs(campaign)) if not finding else len(finding)

    def done(bundle: Path, rec: dict) -> None:
        if not quiet and fmt == "table":
            verdict = "reproduces" if rec["reproduces"] else "does not reproduce"
            print_plain(f"{bundle.name}: {verdict} ({rec.get('seconds', 0):.0f} s)"
                        + (f"; {rec['error']}" if rec.get("error") else ""))

    if not quiet and fmt == "table":
        print_plain(f"re-running {total} finding bundle(s) in fresh processes")
    recs = confirm.confirm_all(campaign, ids=finding or None, timeout_s=timeout, recorded=recorded,
                               skip_done=resume, on_done=done)
    if fmt == "json":
        print(json.dumps(recs, indent=1, default=str))
    elif not quiet:
        n = sum(r["reproduces"] for r in recs.values())
        print(f"{n} of {len(recs)} findings reproduce in a fresh process")


def register(app: typer.Typer) -> None:
    """Add ``twinspect fuzz`` to the root app."""
    app.add_typer(fuzz_app, name="fuzz")
