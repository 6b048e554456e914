"""``twinspect fuzz catalogue|run|report``: MEMO-style differential testing of Keras 3 backends and ONNX Runtime."""

from __future__ import annotations

import json
from pathlib import Path

import typer

fuzz_app = typer.Typer(help="MEMO coverage-guided model generation for DL-library differential testing.",
                       no_args_is_help=True)


@fuzz_app.command("catalogue")
def catalogue_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the catalogue as JSON."),
) -> None:
    """Print the layer catalogue and the denominators of the three coverage criteria."""
    from twinspect.dl.fuzz import catalogue

    rows, den = catalogue.as_table(), catalogue.denominators()
    if as_json:
        print(json.dumps({"denominators": den, "layers": rows}, indent=1))
        return
    for r in rows:
        mode = ",".join(f"{k}:{v}" for k, v in r["mode"].items())
        shape = ",".join(f"{k}:{v}" for k, v in r["shape"].items())
        print(f"{r['layer']:<24} {r['category']:<14} ranks={r['in_ranks']}  shape[{shape}]  mode[{mode}]")
    print(f"layer types {den['layer_type']}  layer pairs {den['layer_pair']}  layer parameter values {den['layer_param']}")


@fuzz_app.command("run")
def run_cmd(
    out: Path = typer.Option(..., "-o", "--out", help="Campaign directory (created, or resumed when it holds one)."),
    budget: str = typer.Option("15m", "--budget", help="Time budget: 90s, 15m, 1h, 1h30m."),
    backends: str = typer.Option("tensorflow,jax,torch,onnxruntime", "--backends", help="Systems under test."),
    variant: str = typer.Option("memo", "--variant", help="memo | memo_r | memo_o | memo_noreduce."),
    seed_models: str = typer.Option("LeNet5,AlexNet,LSTM1,LSTM2", "--seeds", help="Seed models (also ResNet50, DenseNet121, InceptionV3, InceptionResNetV2, MobileNetV2, Xception)."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    timeout: float = typer.Option(60.0, "--timeout", help="Per-model time limit of a backend, seconds."),
    max_models: int = typer.Option(0, "--max-models", help="Stop after this many mutants (0: budget only)."),
    mh_p: float = typer.Option(0.05, "--mh-p", help="Metropolis–Hastings parameter p of seed selection, in (0, 1) (MEMO: 0.05)."),
    executor: str = typer.Option("local", "--executor", help="local (worker processes on this machine) | ray (one Ray actor per backend; needs the 'ray' extra)."),
    address: str = typer.Option("", "--address", help="Ray cluster to join with --executor ray (auto, HOST:6379 or ray://HOST:10001); default: start a local Ray instance."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress."),
) -> None:
    """Run (or resume) a campaign; prints the JSON summary.

    Model executions run in local worker processes, or with ``--executor ray`` on Ray actors (one per
    backend, each owning a worker process) of a local Ray instance or the cluster at ``--address``; the
    campaign directory and summary have the same format either way.
    """
    from twinspect.dl.fuzz import backends as bk
    from twinspect.dl.fuzz import executors
    from twinspect.dl.fuzz import seeds as sd
    from twinspect.dl.fuzz.campaign import Config, parse_budget, run_campaign
    from twinspect.errors import InputError

    seconds = parse_budget(budget)
    names = [bk.canonical(b) for b in backends.split(",") if b.strip()]
    seed_list = [s.strip() for s in seed_models.split(",") if s.strip()]
    for s in seed_list:
        if s not in sd.ALL_SEEDS:
            raise InputError(f"unknown seed model {s!r}; choose from {', '.join(sd.ALL_SEEDS)}")
    executors.check(executor, address or None)
    if not 0.0 < mh_p < 1.0:
        raise InputError(f"--mh-p must be in (0, 1), got {mh_p}")
    cfg = Config(backends=names, seeds=seed_list, variant=variant, seed=seed, timeout_s=timeout, mh_p=mh_p)
    summ = run_campaign(out, seconds, cfg, max_models=max_models or None, verbose=0 if quiet else 1,
                        executor=executor, address=address or None)
    summ.pop("coverage_over_time", None)
    print(json.dumps(summ, indent=1, default=str))


@fuzz_app.command("report")
def report_cmd(
    campaign: Path = typer.Argument(..., help="Campaign directory."),
    fmt: str = typer.Option("table", "--format", help="table | json | html."),
    plots: bool = typer.Option(False, "--plots", help="Write coverage_over_time.png into the campaign directory."),
) -> None:
    """Summarise a campaign: coverage, models per hour, findings."""
    from twinspect.dl.fuzz import report
    from twinspect.errors import InputError

    if fmt not in ("table", "json", "html"):
        raise InputError(f"unknown format {fmt!r}; use table, json or html")
    s = report.summary(campaign)
    if plots:
        report.plot(s, Path(campaign) / "coverage_over_time.png")
    if fmt == "json":
        print(json.dumps(s, indent=1, default=str))
    elif fmt == "html":
        print(report.to_html(s))
    else:
        print(report.table(s))


def register(app: typer.Typer) -> None:
    """Add ``twinspect fuzz`` to the root app."""
    app.add_typer(fuzz_app, name="fuzz")
