"""Run a deviated-behaviour search over many seed inputs: parallel, resumable, reproducible.

:func:`run_search` searches every seed image with one algorithm (:data:`ALGORITHMS`) and writes a
run directory (:mod:`twinspect.dl.deviate.results`). Each seed's search draws its randomness from
``numpy.random.default_rng(SeedSequence([run_seed, seed_index]))``, so its result does not depend
on the number of workers, on scheduling, or on which seeds ran before (timeouts aside, which
depend on machine speed).

With ``workers > 1`` seeds run in worker processes started with ``spawn`` (``forkserver`` where
available); each worker loads both models itself from their *specs* (model objects are not
pickled), and only the main process writes files, so results.jsonl never interleaves.

A model spec is one of:

* a :class:`~twinspect.dl.adapters.base.Classifier` (only with ``workers=1``);
* ``{"path": str, "preprocess": name|dict|None, "output": "auto"|..., "name": str|None}``, loaded
  with :func:`twinspect.dl.adapters.load_classifier`;
* ``{"factory": "package.module:callable", "kwargs": {...}}``: a callable returning a Classifier
  (for models built in code, e.g. in tests).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from twinspect import __version__
from twinspect._mp import guarded_initializer, mp_context
from twinspect.dl.adapters.base import Classifier, check_compatible
from twinspect.dl.deviate.dflare import DFlare
from twinspect.dl.deviate.diffchaser import DiffChaser
from twinspect.dl.deviate.margin import MarginSearch
from twinspect.dl.deviate.pair_search import PairSearch
from twinspect.dl.deviate.results import RunDir, SearchResult, records_in_order, summarize
from twinspect.errors import InputError
from twinspect.progress import progress

#: Algorithm names and what they are.
ALGORITHMS: dict[str, str] = {
    "margin": "margin search: the compressed model's margin, square-window changes near the seed (black-box on both)",
    "dflare": "DFlare: Metropolis–Hastings operator choice, fitness D/δ + O",
    "dflare-r": "DFlare_R: uniform random operator choice, fitness D/δ + O",
    "dflare-d": "DFlare_D: Metropolis–Hastings operator choice, fitness D only",
    "diffchaser": "DiffChaser: genetic algorithm, k-uncertainty fitness",
    "guided": "guided search: the margin search started where the original's (or a surrogate's) gradient meets "
              "its decision boundary (white-box on the original, black-box on the compressed model)",
    "auto": "the default: the guided search when the original (or a surrogate) gives an input gradient, else the "
            "margin search",
}


def resolve_algorithm(algorithm: str, orig: Classifier, params: Mapping[str, Any] | None = None) -> str:
    """The search ``algorithm`` names: ``"auto"`` becomes ``"guided"`` when a surrogate is given in
    ``params`` or the original gives an input gradient
    (:func:`twinspect.dl.adapters.differentiable.logit_fn`), else ``"margin"``; other names are
    returned as they are.

    Args:
        algorithm: one of :data:`ALGORITHMS`.
        orig: the original model.
        params: the search parameters (only ``surrogate`` is read).
    """
    if algorithm != "auto":
        return algorithm
    if (params or {}).get("surrogate") is not None:
        return "guided"
    from twinspect.dl.adapters.differentiable import logit_fn  # noqa: PLC0415 - imports torch

    return "guided" if logit_fn(orig, keras=True)[0] is not None else "margin"

ModelSpec = Classifier | Mapping[str, Any]


def build_searcher(
    algorithm: str, orig: Classifier, comp: Classifier, params: Mapping[str, Any] | None = None, seed: Any = 0
) -> PairSearch:
    """Instantiate the search of ``algorithm`` with keyword ``params``.

    Args:
        algorithm: one of :data:`ALGORITHMS` (``"auto"`` as :func:`resolve_algorithm` resolves it).
        orig: original model.
        comp: compressed model.
        params: keyword arguments of :class:`DFlare` / :class:`DiffChaser` / :class:`MarginSearch` /
            :class:`~twinspect.dl.deviate.guided.GuidedSearch` (e.g. max_queries, timeout, delta,
            pop_size); ``selection``/``fitness`` are implied by the DFlare variants; the guided
            search's ``surrogate`` is a model spec (see :func:`load_model`); its ``second`` is
            dropped when ``"auto"`` resolves to the margin search.
        seed: default random seed of the searcher.

    Raises:
        InputError: unknown algorithm or parameter.
    """
    params = dict(params or {})
    algorithm = resolve_algorithm(algorithm, orig, params)
    try:
        if algorithm == "dflare":
            return DFlare(orig, comp, seed=seed, **{"fitness": "full", **params})  # selection: the preset's
        if algorithm == "dflare-r":
            return DFlare(orig, comp, seed=seed, **{**params, "selection": "uniform", "fitness": "full"})
        if algorithm == "dflare-d":
            return DFlare(orig, comp, seed=seed, **{**params, "fitness": "distance"})
        if algorithm == "diffchaser":
            return DiffChaser(orig, comp, seed=seed, **params)
        if algorithm == "margin":
            params.pop("second", None)  # the guided search's step 5 is this search: nothing to add
            params.pop("pair_gradient", None)  # a step of the guided search's approach, which -a auto skips here
            params.pop("pair_standin", None)
            params.pop("second_max_queries", None)
            params.pop("pair_restarts", None)
            return MarginSearch(orig, comp, seed=seed, **params)
        if algorithm == "guided":
            from twinspect.dl.deviate.guided import GuidedSearch  # noqa: PLC0415 - imports torch

            sur = params.pop("surrogate", None)
            return GuidedSearch(orig, comp, seed=seed, surrogate=None if sur is None else load_model(sur), **params)
    except TypeError as exc:
        raise InputError(f"bad parameter for {algorithm}: {exc}") from exc
    raise InputError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")


def load_model(spec: ModelSpec) -> Classifier:
    """Turn a model spec (see the module docstring) into a Classifier.

    Raises:
        InputError / ModelError: bad spec, missing or unreadable model file.
    """
    if isinstance(spec, Classifier):
        return spec
    if not isinstance(spec, Mapping):
        raise InputError(f"a model spec must be a Classifier or a dict, got {type(spec).__name__}")
    if "factory" in spec:
        mod_name, _, attr = str(spec["factory"]).partition(":")
        try:
            fn = getattr(importlib.import_module(mod_name), attr)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"cannot import model factory {spec['factory']!r}: {exc}") from exc
        clf = fn(**dict(spec.get("kwargs", {})))
        if not isinstance(clf, Classifier):
            raise InputError(f"model factory {spec['factory']!r} did not return a Classifier")
        return clf
    if "path" in spec:
        from twinspect.dl.adapters import load_classifier  # noqa: PLC0415 - heavy, helper E's factory

        kw = {k: spec[k] for k in ("preprocess", "output", "name") if spec.get(k) is not None}
        return load_classifier(spec["path"], **kw)
    raise InputError("a model spec needs 'path' or 'factory'")


def model_config(spec: ModelSpec, clf: Classifier) -> dict:
    """JSON description of a model for run.json (stable across runs: used to check resumes)."""
    out: dict[str, Any] = {}
    if isinstance(spec, Mapping) and "path" in spec:
        out["path"] = str(Path(spec["path"]).resolve())
    elif isinstance(spec, Mapping) and "factory" in spec:
        out["factory"] = spec["factory"]
        out["kwargs"] = dict(spec.get("kwargs", {}))
    else:
        out["path"] = None
    out.update(
        name=clf.name,
        adapter=type(clf).__name__,
        preprocess=clf.preprocess.to_dict(),
        input_shape=list(clf.input_shape),
        num_classes=clf.num_classes,
    )
    return out


def _is_picklable_spec(spec: ModelSpec) -> bool:
    return isinstance(spec, Mapping) and ("path" in spec or "factory" in spec)


def seed_rng(run_seed: int, seed_index: int) -> np.random.Generator:
    """The random generator of one seed input's search (depends only on the two numbers)."""
    return np.random.default_rng(np.random.SeedSequence([int(run_seed), int(seed_index)]))


# --------------------------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _limit_threads(workers: int) -> None:
    """Share the cores between worker processes (torch's default thread pool oversubscribes)."""
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, workers)))


def _worker_init(orig_spec, comp_spec, algorithm, params, run_seed, workers) -> None:
    orig, comp = load_model(orig_spec), load_model(comp_spec)
    _limit_threads(workers)
    _WORKER["searcher"] = build_searcher(algorithm, orig, comp, params, seed=run_seed)
    _WORKER["run_seed"] = run_seed


def _worker_task(task: tuple[int, int, np.ndarray]) -> tuple[int, int, SearchResult]:
    seed_index, true_label, image = task
    searcher: PairSearch = _WORKER["searcher"]
    return seed_index, true_label, searcher.search(image, seed=seed_rng(_WORKER["run_seed"], seed_index), label=true_label)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def make_config(
    orig_spec: ModelSpec,
    comp_spec: ModelSpec,
    orig: Classifier,
    comp: Classifier,
    algorithm: str,
    params: Mapping[str, Any],
    seed_indices: Sequence[int],
    run_seed: int,
    dataset: str | None,
) -> dict:
    """The run.json content (normalised through JSON so that it compares equal after a reload)."""
    cfg = {
        "algorithm": algorithm,
        "models": {"original": model_config(orig_spec, orig), "compressed": model_config(comp_spec, comp)},
        "dataset": dataset,
        "seed": int(run_seed),
        "params": dict(params),
        "seed_indices": [int(i) for i in seed_indices],
        "num_seeds": len(seed_indices),
        "twinspect_version": __version__,
    }
    return json.loads(json.dumps(cfg))


def run_search(
    orig_spec: ModelSpec,
    comp_spec: ModelSpec,
    images: np.ndarray,
    labels: np.ndarray | None,
    seed_indices: Sequence[int],
    algorithm: str,
    out_dir: str | Path,
    workers: int = 1,
    resume: bool = False,
    quiet: bool = True,
    *,
    seed: int = 0,
    params: Mapping[str, Any] | None = None,
    dataset: str | None = None,
    models: tuple[Classifier, Classifier] | None = None,
    on_result: Callable[[dict], None] | None = None,
) -> dict:
    """Search every seed image and write the run directory.

    Args:
        orig_spec: original model spec (see the module docstring).
        comp_spec: compressed model spec.
        images: (N, H, W, C) or (N, H, W) uint8/float dataset in the 0–255 pixel scale.
        labels: (N,) true labels (recorded as ``true_label``; −1 when None).
        seed_indices: indices into ``images`` of the seed inputs, in order.
        algorithm: ``"margin"``, ``"guided"``, ``"auto"`` (resolved by :func:`resolve_algorithm`; the run
            records the search it resolved to), ``"dflare"``, ``"dflare-r"``, ``"dflare-d"`` or
            ``"diffchaser"``.
        out_dir: run directory (created).
        workers: worker processes (1 = in this process).
        resume: continue the run in ``out_dir``: seeds already in results.jsonl are skipped; the
            existing run.json must have the same configuration (seed list aside).
        quiet: no progress bar.
        seed: run seed (each seed input's generator derives from it and the seed index).
        params: algorithm parameters (max_queries, timeout, delta, pop_size, ...).
        dataset: dataset name/path recorded in run.json.
        models: already loaded (orig, comp) classifiers for the specs (skips loading them again
            in this process; workers still load their own).
        on_result: called with each new results.jsonl record (e.g. for live reporting).

    Returns:
        The summary (see :func:`~twinspect.dl.deviate.results.summarize`) of all finished seeds of
        the run, also written to ``summary.json``, with ``"algorithm"`` and ``"out_dir"`` added.

    Raises:
        InputError: bad seed indices, unknown algorithm/parameter, a run directory holding another
            run; ModelError / IncompatibleModelsError: models that cannot be loaded or compared.
            All are raised before anything is written.
    """
    params = dict(params or {})
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if workers > 1 and not (_is_picklable_spec(orig_spec) and _is_picklable_spec(comp_spec)):
        raise InputError("parallel workers need model specs with a path or factory, not model objects")
    images = np.asarray(images)
    if images.ndim not in (3, 4):
        raise InputError(f"images must be (N, H, W) or (N, H, W, C), got shape {tuple(images.shape)}")
    n = images.shape[0]
    seed_indices = [int(i) for i in seed_indices]
    bad = [i for i in seed_indices if not 0 <= i < n]
    if bad:
        raise InputError(f"seed indices out of range 0..{n - 1}: {bad[:5]}")
    if len(set(seed_indices)) != len(seed_indices):
        raise InputError("seed indices contain duplicates")
    if labels is not None and len(labels) != n:
        raise InputError(f"{len(labels)} labels for {n} images")

    orig, comp = models if models is not None else (load_model(orig_spec), load_model(comp_spec))
    check_compatible(orig, comp)
    algorithm = resolve_algorithm(algorithm, orig, params)
    searcher = build_searcher(algorithm, orig, comp, params, seed=seed)  # validates the parameters
    shape = images.shape[1:] if images.ndim == 4 else images.shape[1:] + (1,)
    if tuple(shape) != orig.input_shape:
        raise InputError(
            f"images of shape {tuple(images.shape[1:])} do not fit the models' input shape {orig.input_shape}"
        )
    full_params = searcher.params()
    config = make_config(orig_spec, comp_spec, orig, comp, algorithm, full_params, seed_indices, seed, dataset)

    run = RunDir(out_dir)
    done = run.start(config, resume)  # the first write happens here, after every check
    todo = [i for i in seed_indices if i not in done]

    def true_label(i: int) -> int:
        return -1 if labels is None else int(labels[i])

    counts = {"found": 0, "timeout": 0, "finished": 0}
    limit_s = full_params.get("timeout")

    def finish(i: int, tl: int, res: SearchResult, bar: Any) -> None:
        rel = run.write_trigger(i, res)
        rec = res.record(i, tl, rel)
        run.append(rec)
        done[i] = rec
        if on_result is not None:
            on_result(rec)
        counts["finished"] += 1
        counts["found"] += bool(rec["success"])
        counts["timeout"] += rec["status"] == "timeout"
        bar.update(description=f"{algorithm} seeds: {counts['found']} found, {counts['timeout']} at the time limit")
        bar.advance()
        warn_slow_run(counts, len(todo), limit_s, workers, quiet)

    with progress(f"{algorithm} seeds", total=len(todo), quiet=quiet) as bar:
        if workers == 1 or len(todo) <= 1:
            for i in todo:
                res = searcher.search(images[i], seed=seed_rng(seed, i), label=true_label(i))
                finish(i, true_label(i), res, bar)
        else:
            ctx = mp_context()
            tasks = [(i, true_label(i), images[i]) for i in todo]
            init, initargs = guarded_initializer(  # workers exit if this process is killed
                _worker_init, (dict(cast(Mapping[str, Any], orig_spec)), dict(cast(Mapping[str, Any], comp_spec)),
                               algorithm, params, seed, workers))
            with ctx.Pool(processes=min(workers, len(todo)), initializer=init, initargs=initargs) as pool:
                for i, tl, res in pool.imap_unordered(_worker_task, tasks):
                    finish(i, tl, res, bar)
                # a graceful shutdown: leaving the block terminates the pool, which kills a worker that is still
                # in its initializer when the others have done every seed (so the run's behaviour, e.g. how many
                # model loads happened, depended on timing); close + join lets every worker finish and exit
                pool.close()
                pool.join()

    all_seeds = list(dict.fromkeys(list(_previous_seeds(run)) + seed_indices))
    summary = summarize(records_in_order(done, all_seeds))
    summary = {"algorithm": algorithm, **summary}
    run.write_summary(summary)
    return {**summary, "out_dir": str(run.path)}


#: Seeds finished before :func:`warn_slow_run` judges a run (all of them at the time limit → warn once).
SLOW_RUN_SEEDS = 3


def warn_slow_run(counts: dict[str, int], total: int, limit_s: float | None, workers: int, quiet: bool) -> bool:
    """Warn once on stderr when the first seeds of a run all end at the per-seed time limit.

    Such a run takes about ``total × limit_s / workers`` seconds and finds little (e.g. DFlare with a
    tight ``--max-linf``: every seed searches for its full 180 s); a user should know at once, not
    after an hour (issue 17).

    Args:
        counts: ``{"finished", "found", "timeout"}`` so far in this run.
        total: seeds in this run.
        limit_s: the per-seed time limit in seconds (None: no limit, never warns).
        workers: worker processes.
        quiet: print nothing.

    Returns:
        True when the warning was printed by this call.
    """
    if quiet or not limit_s or counts["finished"] != SLOW_RUN_SEEDS or counts["timeout"] != SLOW_RUN_SEEDS:
        return False
    from twinspect.progress import print_plain

    left = total - counts["finished"]
    minutes = left * float(limit_s) / max(1, workers) / 60.0
    print_plain(f"the first {SLOW_RUN_SEEDS} seeds all ran to the {float(limit_s):g} s time limit; the other {left} "
                f"may take about {minutes:.0f} more minutes. A looser change budget (--max-linf/--max-l0/--max-l2), "
                "a smaller --timeout or more --workers shorten it; Ctrl-C keeps the finished seeds (--resume continues).",
                prefix="warning: ")
    return True


def _previous_seeds(run: RunDir) -> list[int]:
    try:
        return [int(i) for i in json.loads(run.run_json.read_text(encoding="utf-8")).get("seed_indices", [])]
    except (OSError, ValueError):
        return []
