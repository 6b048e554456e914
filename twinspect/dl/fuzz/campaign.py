"""A resumable MEMO campaign: seeds → reduction → threshold calibration → Algorithm-2 loop → findings.

State lives in the campaign directory: ``state.json`` (pool of model specs, selector, coverage, counters,
RNG state, findings, coverage over time; rewritten atomically after every model, so an interruption loses
at most the model in flight), ``work/`` (the model in flight) and ``findings/<id>/`` bundles.

Model executions go through an executor (:mod:`twinspect.dl.fuzz.executors`): local worker processes by
default, or Ray actors (``executor="ray"``); the state and findings do not depend on which one ran a model,
so a campaign started with one executor can be resumed with the other.

What the budget measures (the same for every variant): generation and testing only. Before the clock
starts, every backend worker is started and runs one tiny model (``startup_s``: process start, library
imports, first-run set-up), then the seeds are prepared (``seeding_s``). A new symptom found in the loop
is queued with its model, inputs and outputs (``pending_findings``); minimisation, root cause and the
findings bundle run once the budget is spent (``findings_after_s``). All three are reported apart in the
run record (``last_run``) and the summary.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from twinspect._io import atomic_path, write_json
from twinspect.dl.fuzz import backends as bk
from twinspect.dl.fuzz import graph, lemon, muffin, operators, oracles, prior_operators, seed_selection, seeds, triage
from twinspect.dl.fuzz.coverage import Coverage, model_coverage
from twinspect.dl.fuzz.executors import Executor, LocalExecutor, make_executor
from twinspect.dl.fuzz.seed_selection import SeedSelector
from twinspect.errors import InputError

STATE = "state.json"
MODEL_LOG = "models.jsonl"
FORMAT = "twinspect-fuzz-campaign/1"
#: a valid mutant's outputs hold at most this many elements per sample
MAX_OUTPUT_ELEMENTS = 1_000_000
#: and at most this many weights (scalars): the value spaces reach units/filters of 2048, and a model of
#: 10^8 weights (seen: a 410 MB .keras file) takes minutes per backend and times out as a false "hang".
#: A mutant of a larger seed may have up to :data:`SEED_WEIGHT_FACTOR` times its seed's weights instead
#: (ResNet50 has 8M weights even reduced: under a flat 2M cap no mutant of it would ever be valid).
MAX_WEIGHTS = 2_000_000
SEED_WEIGHT_FACTOR = 2.0
#: MEMO's seed-model pool holds at most this many models (the authors' ``architecture_pool=50``)
POOL_SIZE = 50
#: the model every backend runs once before the campaign clock starts (see the module docstring)
WARMUP_SPEC = {"input_shape": [4], "nodes": [{"name": "dense_0", "layer": "Dense", "params": {"units": 2},
                                               "inputs": ["input"]}], "outputs": ["dense_0"]}


class OversizeModel(ValueError):
    """A mutant Keras builds but the campaign refuses to run: outputs or weights over the caps (invalid, as
    a Keras build error is, but counted apart in ``invalid_reasons``)."""
#: generation strategies: MEMO and its ablations, and the two baselines (issue 20, item 5)
VARIANTS = ("memo", "memo_r", "memo_o", "memo_noreduce", "muffin", "lemon")


@dataclass
class Config:
    """Campaign settings.

    Attributes:
        backends: systems under test (full or short names).
        seeds: seed model names (see :mod:`twinspect.dl.fuzz.seeds`).
        variant: one of :data:`VARIANTS`: ``"memo"``, ``"memo_r"`` (random seed selection), ``"memo_o"``
            (the operators of DeepMutation, LEMON and Audee: :mod:`twinspect.dl.fuzz.prior_operators`),
            ``"memo_noreduce"`` (no model reduction of the seeds), ``"muffin"`` (random DAG models from
            scratch, :mod:`twinspect.dl.fuzz.muffin`; the seeds serve only to calibrate the threshold) or
            ``"lemon"`` (LEMON's rules and inconsistency-guided search on the seeds,
            :mod:`twinspect.dl.fuzz.lemon`). All variants share the catalogue, coverage, oracles and backends.
        seed: RNG seed.
        timeout_s: per-model time limit of each backend worker, seconds.
        threshold: fixed D_MAD threshold, or None to calibrate on the seed models.
        minimise_tries: backend runs spent minimising each new finding.
        max_added_layers: a mutant that adds coverage joins the model pool unless it has more than this
            many layers beyond its seed's (twinspect's cap, not the paper's: it keeps models, and their
            execution time, from growing without bound over a long campaign).
        mh_p: Metropolis–Hastings parameter of the seed selector, in (0, 1) (MEMO: 0.05).
        pool_size: MEMO's model pool holds at most this many models (seeds included); a mutant that adds
            coverage and runs without a crash or NaN output *joins* the pool (its parent stays), and while
            the pool is over this size a model drawn uniformly at random leaves it — as the authors' code
            does (``maybeLee/COMET``, ``run.py`` ``after_prediction`` → ``MutatorSelector.add_architecture``,
            ``architecture_pool=50``, ``pop_one_architecture``: shuffle, pop). Default :data:`POOL_SIZE`.
    """

    backends: list[str] = field(default_factory=lambda: ["keras-tensorflow", "keras-jax", "keras-torch", "onnxruntime"])
    seeds: list[str] = field(default_factory=lambda: list(seeds.SMALL_SEEDS))
    variant: str = "memo"
    seed: int = 0
    timeout_s: float = 60.0
    threshold: float | None = None
    minimise_tries: int = 6
    max_added_layers: int = 40
    mh_p: float = seed_selection.DEFAULT_P
    pool_size: int = POOL_SIZE

    def validate(self, differential: bool = True) -> list[str]:
        """Check every setting before any work; return the canonical backend names.

        Args:
            differential: require two distinct backends (:func:`run_campaign`, the entry of
                ``twinspect fuzz run``, does). :meth:`Campaign.create` accepts one backend: such a
                campaign can only find crashes and NaN outputs, which tests use to stay fast.

        Raises:
            InputError: an unknown variant or backend, fewer than two distinct backends when
                ``differential``, no backend at all, no seed model, ``timeout_s <= 0``,
                ``minimise_tries < 0``, ``max_added_layers < 0``, ``pool_size < 1``, or ``mh_p`` outside (0, 1).
        """
        if self.variant not in VARIANTS:
            raise InputError(f"unknown variant {self.variant!r}; choose from {', '.join(VARIANTS)}")
        names = [bk.canonical(b) for b in self.backends]
        if len(set(names)) < (2 if differential else 1):
            raise InputError(f"backends {', '.join(self.backends) or '(none)'}: a differential test needs at least "
                             "two distinct backends")
        if not self.seeds:
            raise InputError("no seed model given")
        bad = [s for s in self.seeds if s not in seeds.ALL_SEEDS]
        if bad:
            raise InputError(f"unknown seed model {bad[0]!r}; choose from {', '.join(seeds.ALL_SEEDS)}")
        if not self.timeout_s > 0:
            raise InputError(f"timeout {self.timeout_s} s must be positive")
        if self.minimise_tries < 0:
            raise InputError(f"minimise_tries {self.minimise_tries} must be >= 0")
        if self.max_added_layers < 0:
            raise InputError(f"max_added_layers {self.max_added_layers} must be >= 0")
        if self.pool_size < 1:
            raise InputError(f"pool_size {self.pool_size} must be >= 1")
        try:
            seed_selection.check_p(self.mh_p)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        return names


def holds_campaign(root: Path) -> bool:
    """Whether ``root`` holds a campaign (its ``state.json``); False for a missing or empty directory.

    Raises:
        InputError: ``root`` is a file, or a non-empty directory without a campaign (never written into).
    """
    if root.exists() and not root.is_dir():
        raise InputError("exists and is not a directory (a campaign is a directory)", root)
    if (root / STATE).exists():
        return True
    if root.exists() and any(root.iterdir()):
        raise InputError("exists, is not empty and holds no campaign (state.json)", root)
    return False


def parse_budget(text: str) -> float:
    """Seconds of a budget such as ``90s``, ``15m``, ``1h``, ``1h30m`` or a bare number of seconds.

    Raises:
        InputError: the text does not parse or is not positive.
    """
    import re

    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        val = float(t)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", t)
        if not parts or "".join(a + b for a, b in parts) != t:
            raise InputError(f"cannot parse budget {text!r}; use e.g. 90s, 15m, 1h or 1h30m")
        val = sum(float(a) * {"h": 3600, "m": 60, "s": 1}[b] for a, b in parts)
    if val <= 0:
        raise InputError(f"budget {text!r} must be positive")
    return val


def _rng_to_json(rng: random.Random) -> list:
    v, state, g = rng.getstate()
    return [v, list(state), g]


def _rng_from_json(data: list) -> random.Random:
    rng = random.Random()
    rng.setstate((data[0], tuple(data[1]), data[2]))
    return rng


class Campaign:
    """One campaign directory (created by :meth:`create`, reopened by :meth:`open`).

    Args:
        root: campaign directory.
        state: the loaded state dict.
    """

    def __init__(self, root: Path, state: dict):
        self.root = Path(root)
        self.state = state
        self.rng = _rng_from_json(state["rng"])
        self.cov = Coverage.from_json(state["coverage"])
        self.selector = SeedSelector.from_json(state["selector"])
        self.lemon = lemon.LemonSelector.from_json(state["lemon"]) if state.get("lemon") else None
        self.executor: Executor | None = None
        self.deadline = float("inf")  # perf_counter() time at which the current run's budget ends
        self._model_index: int | None = None  # set while a queued finding is finished: its mutant's index

    # ---------------------------------------------------------------- creation / loading
    @classmethod
    def create(cls, root: str | Path, config: Config) -> Campaign:
        """A new campaign state in ``root`` (not yet seeded; :meth:`run` seeds it)."""
        root = Path(root)
        if holds_campaign(root):
            return cls.open(root)
        names = config.validate(differential=False)
        ops = prior_operators.MEMO_O_OPERATORS if config.variant == "memo_o" else operators.MEMO_OPERATORS
        state = {
            "format": FORMAT, "config": {**config.__dict__, "backends": names}, "seeded": False,
            "elapsed_s": 0.0, "models_generated": 0, "models_valid": 0, "models_invalid": 0, "models_tested": 0,
            "rng": _rng_to_json(random.Random(config.seed)), "coverage": Coverage().to_json(),
            "selector": SeedSelector(ops, p=config.mh_p, mode="random" if config.variant == "memo_r" else "mh").to_json(),
            "pool": {}, "next_id": 0, "findings": [], "signatures": {}, "coverage_over_time": [],
            "threshold": config.threshold, "skipped_backends": {}, "reduction": {}, "invalid_reasons": {},
            "seed_distances": [],
            "lemon": lemon.LemonSelector(p=config.mh_p).to_json() if config.variant == "lemon" else None,
        }
        camp = cls(root, state)
        camp.save()
        return camp

    @classmethod
    def open(cls, root: str | Path) -> Campaign:
        """Reopen the campaign in ``root``.

        Raises:
            InputError: no state file, or a corrupt / foreign one.
        """
        path = Path(root) / STATE
        if not path.is_file():
            raise InputError("is not a twinspect fuzz campaign directory (no state.json)", root)
        try:
            state = json.loads(path.read_text())
            if state.get("format") != FORMAT:
                raise ValueError("format")
            return cls(Path(root), state)
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"corrupt or foreign campaign state ({type(exc).__name__}: {exc})", path) from exc

    def _save_timed(self) -> float:
        """:meth:`save`; returns the time it started (for :meth:`_tick`)."""
        t0 = time.perf_counter()
        self.save()
        return t0

    def save(self) -> None:
        """Write ``state.json`` atomically."""
        self.state["rng"] = _rng_to_json(self.rng)
        self.state["coverage"] = self.cov.to_json()
        self.state["selector"] = self.selector.to_json()
        if self.lemon is not None:
            self.state["lemon"] = self.lemon.to_json()
        write_json(self.root / STATE, self.state, indent=None)

    # ---------------------------------------------------------------- backends
    def _exec(self) -> Executor:
        if self.executor is None:
            self.executor = LocalExecutor(timeout_s=self.state["config"]["timeout_s"])
        return self.executor

    def _systems(self) -> list[str]:
        """The configured systems that can run on the executor (the others go to ``skipped_backends``).
        The executor first gets all of them ready at once (:meth:`Executor.start`: Ray actors created
        together, their workers' library imports under way)."""
        out = []
        ex = self._exec()
        start = getattr(ex, "start", None)  # an executor written before start() existed has none
        if start is not None:
            start(list(self.state["config"]["backends"]))
        for name in self.state["config"]["backends"]:
            why = ex.unavailable(name)
            if why:
                self.state["skipped_backends"][name] = why
            else:
                out.append(name)
        return out

    def _run_all(self, model_path: Path, inputs_path: Path, systems: list[str]) -> dict[str, dict]:
        return self._exec().run(systems, model_path, inputs_path)

    def close(self) -> None:
        """Stop the executor's workers (and a Ray instance it started)."""
        if self.executor is not None:
            self.executor.close()
            self.executor = None

    # ---------------------------------------------------------------- model files
    def _index(self) -> int:
        """Index of the model in hand: the mutant count, or the queued finding's mutant while it is finished."""
        return self.state["models_generated"] if self._model_index is None else self._model_index

    def _seeded_build(self, spec: dict):
        """:func:`graph.build` of ``spec`` with weights initialised under a seed derived from the campaign seed
        and :meth:`_index`, so two campaigns with the same --seed save the same weights (and reach the same
        findings), then the spec's weight edits (MEMO_o's DeepMutation rules,
        :func:`prior_operators.apply_weight_edits`). Returns the ``keras.Model``; raises what
        :func:`graph.build` raises (an invalid spec)."""
        graph.keras_module().utils.set_random_seed(int(self.state["config"]["seed"]) * 1_000_003 + self._index())
        model = graph.build(spec)
        prior_operators.apply_weight_edits(model, spec)
        return model

    def _save_model(self, spec: dict, name: str, model=None) -> tuple[Path, Path]:
        """Save ``spec`` as ``work/<name>.keras`` and its inputs (seeded by :meth:`_index`) as ``work/<name>.npz``;
        returns the two paths.

        Args:
            model: ``spec`` as :meth:`_seeded_build` built it for the current index (a caller that built it to
                check the spec passes it, so it is not built twice); None builds it here.

        Raises:
            Exception: the spec does not build, or Keras cannot save it.
        """
        work = self.root / "work"
        work.mkdir(parents=True, exist_ok=True)
        index = self._index()
        if model is None:
            model = self._seeded_build(spec)
        mpath, ipath = work / f"{name}.keras", work / f"{name}.npz"
        with atomic_path(mpath) as tmp:
            model.save(tmp)
        with atomic_path(ipath) as tmp:
            np.savez(tmp, x=graph.make_inputs(spec, seed=index))
        return mpath, ipath

    # ---------------------------------------------------------------- seeding
    def _seed(self, systems: list[str], verbose: int) -> None:
        """Prepare the seeds (:func:`seeds.prepared`: converted, reduced unless ``memo_noreduce``, cached across
        campaigns), add them to the pool and their coverage, and run them to calibrate the threshold.

        A Muffin campaign generates from scratch: its seeds are neither in the pool nor in its coverage, and are
        not even prepared when the threshold is given. A LEMON campaign runs its seeds even with a given
        threshold, since its search compares a mutant's inconsistency degree with its parent's."""
        cfg = self.state["config"]
        variant = cfg["variant"]
        calibrate = cfg["threshold"] is None and len(systems) > 1
        dists: list[float] = []
        for name in cfg["seeds"] if variant != "muffin" or calibrate else []:
            try:
                spec, info = seeds.prepared(name, reduce=variant != "memo_noreduce")
                if not info["cached"]:
                    graph.validate(graph.clone(spec))  # a freshly prepared seed must also run
            except InputError:
                raise
            except Exception as exc:
                self.state["reduction"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                continue
            self.state["reduction"][name] = info
            spec["origin"] = name
            self.state.setdefault("seed_weights", {})[name] = graph.count_params(graph.build(graph.clone(spec),
                                                                                              record_shapes=False))
            mid = None
            if variant != "muffin":
                self.state.setdefault("seed_specs", {})[name] = graph.clone(spec)
                mid = self._add_model(spec)
                self.cov.update(model_coverage(spec))
            if (calibrate or variant == "lemon") and len(systems) > 1:
                mpath, ipath = self._save_model(spec, f"seed-{name}")
                res = self._run_all(mpath, ipath, systems)
                ok = [s for s in systems if res[s]["status"] == "ok"]
                for i, a in enumerate(ok):
                    for b in ok[i + 1:]:
                        dists.append(oracles.d_mad(res[a]["outputs"], res[b]["outputs"]))
                if self.lemon is not None and mid is not None:
                    self.lemon.add_model(mid, lemon.inconsistency_degree(res))
        self.state["seed_distances"] = dists
        if self.state["threshold"] is None:
            self.state["threshold"] = oracles.calibrate_threshold(dists)
        self.state["seeded"] = True
        self._mark_time(0.0)
        self.save()

    def _add_model(self, spec: dict) -> str:
        mid = f"m{self.state['next_id']}"
        self.state["next_id"] += 1
        self.state["pool"][mid] = spec
        if self.lemon is not None:
            self.lemon.add_model(mid)
        else:
            self.selector.add_model(mid)
        return mid

    def _mark_time(self, elapsed: float) -> None:
        self.state["coverage_over_time"].append([round(elapsed, 2), *[round(r, 5) for r in self.cov.ratios()]])

    # ---------------------------------------------------------------- main loop
    def run(self, budget_s: float, max_models: int | None = None, verbose: int = 0,
            executor: Executor | None = None) -> dict:
        """Run (or resume) the campaign for ``budget_s`` more seconds (or ``max_models`` more mutants).

        Args:
            budget_s: seconds of search loop: generation and testing only (backend start-up, seeding and
                the minimisation of queued findings are outside it, see the module docstring).
            max_models: stop after this many more mutants (None: budget only).
            verbose: 0 silent, 1 progress bar.
            executor: where models run (see :mod:`twinspect.dl.fuzz.executors`); None = local worker
                processes. It is closed when the run ends.

        Returns:
            The summary dict of :func:`twinspect.dl.fuzz.report.summary`.
        """
        from twinspect.dl.fuzz import report
        from twinspect.progress import progress

        if executor is not None:
            self.close()
            self.executor = executor
        try:
            systems = self._systems()
            startup_s = self._warm_up(systems)  # every variant pays worker start-up here, outside the budget
            if not self.state["seeded"]:  # seeding (reduction, calibration) is outside the budget
                t_seed = time.perf_counter()
                self._seed(systems, verbose)
                self.state["seeding_s"] = round(time.perf_counter() - t_seed, 1)
                self.save()
            start = time.perf_counter()
            self.deadline = start + budget_s  # finding minimisation stops here too
            base = self.state["elapsed_s"]
            done = 0
            # what this run was asked to do; "complete" turns true only when it ends normally, so the
            # report of an interrupted (Ctrl-C, killed, crashed) run says it is incomplete
            last = self.state["last_run"] = {"budget_s": budget_s, "max_models": max_models, "loop_s": 0.0,
                                             "models": 0, "complete": False, "startup_s": startup_s}
            with progress("fuzz", total=None, quiet=verbose == 0) as bar:
                while time.perf_counter() - start < budget_s and (max_models is None or done < max_models):
                    self._step(systems)
                    done += 1
                    last["loop_s"], last["models"] = round(time.perf_counter() - start, 1), done
                    self.state["elapsed_s"] = base + time.perf_counter() - start  # loop time only
                    self._mark_time(self.state["elapsed_s"])
                    self._tick("state_write", self._save_timed())
                    t, p, q = self.cov.ratios()
                    bar.update(description=f"fuzz: {self.state['models_generated']} models, "
                               f"cov {t:.0%}/{p:.1%}/{q:.1%}, {len(self.state['findings'])} findings")
                    bar.advance(1)
            last["findings_after_s"] = self._finish_findings(systems)  # after the budget (module docstring)
            last["complete"] = True
        finally:
            if self.state["seeded"]:
                self.save()
            self.close()
        return report.summary(self.root)

    def _warm_up(self, systems: list[str]) -> float:
        """Start every backend worker and run :data:`WARMUP_SPEC` once on it, before the campaign clock (the
        same for every variant); returns the seconds it took (``startup_s`` of the run record, also added to
        ``state["startup_s"]``). The result is not judged: a tiny Dense model is no test."""
        if not systems:
            return 0.0
        t0 = time.perf_counter()
        try:
            mpath, ipath = self._save_model(graph.clone(WARMUP_SPEC), "warmup")
            res = self._run_all(mpath, ipath, systems)
            self.state["warmup_status"] = {s: r.get("status") for s, r in res.items()}
        except Exception as exc:  # noqa: BLE001 - the warm-up only saves time; the loop meets any real failure
            self.state["warmup_status"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        dt = round(time.perf_counter() - t0, 1)
        self.state["startup_s"] = round(float(self.state.get("startup_s", 0.0)) + dt, 1)
        return dt

    def _queue_finding(self, seen: str, f: dict, op: str, mutant: dict, res: dict[str, dict], mpath: Path,
                       ipath: Path) -> None:
        """Keep a new symptom for :meth:`_finish_findings`: the mutant's spec, copies of its model, inputs and
        each system's outputs (``work/pending/<k>*``, the loop overwrites the originals), the results without
        their arrays, and the loop time it was found at."""
        pend = self.state.setdefault("pending_findings", [])
        k = int(self.state.get("pending_next", 0))
        self.state["pending_next"] = k + 1
        d = self.root / "work" / "pending"
        d.mkdir(parents=True, exist_ok=True)
        mp, ip = d / f"{k}.keras", d / f"{k}.npz"
        shutil.copyfile(mpath, mp)
        shutil.copyfile(ipath, ip)
        rjson: dict[str, dict] = {}
        for s, r in res.items():
            r = {key: v for key, v in r.items() if key != "outputs"}
            if r.get("out") and Path(r["out"]).is_file():
                dest = d / f"{k}-out-{s}.npz"
                shutil.copyfile(r["out"], dest)
                r["out"] = str(dest.relative_to(self.root))  # paths relative to the campaign: it may move
            rjson[s] = r
        pend.append({"seen": seen, "finding": f, "op": op, "spec": mutant, "model": str(mp.relative_to(self.root)),
                     "inputs": str(ip.relative_to(self.root)),
                     "results": rjson, "duplicates": 0, "found_at_s": round(self.state["elapsed_s"], 1),
                     "index": self.state["models_generated"]})

    def _finish_findings(self, systems: list[str]) -> float:
        """Minimise, root-cause and bundle every queued finding (after the budget: nothing here stops at the
        run's deadline, each finding is bounded by ``minimise_tries`` runs); returns the seconds it took
        (also added to ``state["findings_after_s"]``). Each finding leaves the queue as it is done and the
        state is saved, so an interrupted run resumes with the rest."""
        from twinspect.dl.fuzz.executors import load_outputs

        pend = self.state.setdefault("pending_findings", [])
        if not pend:
            return 0.0
        t0 = time.perf_counter()
        self.deadline = float("inf")
        while pend:
            p = pend[0]
            res: dict[str, dict] = {}
            for s, r in p["results"].items():
                r = dict(r)
                if r.get("status") == "ok" and r.get("out"):
                    r["out"] = str(self.root / r["out"])
                    r["outputs"] = load_outputs(Path(r["out"]))
                res[s] = r
            # candidates get the weights' and inputs' seed of the mutant, as when minimised inside the loop
            self._model_index = int(p.get("index", self.state["models_generated"]))
            try:
                self._bundle(p["seen"], p["finding"], p["op"], p["spec"], res, self.root / p["model"], self.root / p["inputs"],
                             systems, 1 + int(p["duplicates"]), p["found_at_s"])
            finally:
                self._model_index = None
            pend.pop(0)
            self.save()
            for rel in [p["model"], p["inputs"], *[r["out"] for r in p["results"].values() if r.get("out")]]:
                (self.root / rel).unlink(missing_ok=True)  # the bundle holds its own copies
        dt = round(time.perf_counter() - t0, 1)
        self.state["findings_after_s"] = round(float(self.state.get("findings_after_s", 0.0)) + dt, 1)
        return dt

    def _step(self, systems: list[str]) -> None:
        """One iteration of Algorithm 2: pick a seed, mutate, check the mutant, run it everywhere, judge.

        The baselines change only the generation: ``muffin`` draws a fresh random DAG instead of a mutant, and
        ``lemon`` picks (model, rule) by LEMON's heuristics and keeps a mutant in the pool when it raised the
        inconsistency degree (after its run) instead of when it added coverage. Validity, coverage counting,
        the runs and the oracles are the same for every variant. MEMO and its ablations add a mutant that
        added coverage to the model pool after its runs, when they show no crash and no NaN/Inf
        (:func:`clean_run`, :meth:`_pool_add`); a new symptom is queued for :meth:`_finish_findings`.

        A mutant Keras rejects at build time (or whose outputs would exceed :data:`MAX_OUTPUT_ELEMENTS`
        elements per sample, or whose weights exceed :meth:`_weight_cap`) is *invalid*: the generator's fault, counted in ``models_invalid``. A mutant Keras builds is valid: it
        is run on every system, the reference keras-torch included, each in its worker process, so an
        exception, crash, abort or hang on any of them is a crash finding (:func:`oracles.judge`).
        """
        variant = self.state["config"]["variant"]
        self.state["models_generated"] += 1
        mid: str | None = None
        mutant: dict | None = None
        t = time.perf_counter()
        try:
            if variant == "muffin":  # a fresh random DAG, no parent
                op, mutant = "Muffin", muffin.generate(self.rng)
            elif self.lemon is not None:
                mid, op = self.lemon.pick(self.rng)
                mutant = lemon.apply(op, self.state["pool"][mid], self.rng)
            else:
                mid, op = self.selector.pick(self.rng)
                # MEMO_o's operators; a MEMO_o campaign of an older release selects LA/LR/LC/AR from operators.py
                mutate = prior_operators.apply if op in prior_operators.OPERATORS else operators.apply
                mutant = mutate(op, self.state["pool"][mid], self.cov, self.rng)
            t = self._tick("generate", t)
            if mutant is None:
                raise ValueError("operator does not apply")
            # Keras' build-time checks (records each node's output shape); the model built here is the one
            # saved and run, its weights seeded as every saved model's
            model = self._seeded_build(mutant)
            if graph.output_elements(mutant) > MAX_OUTPUT_ELEMENTS:
                raise OversizeModel("outputs too large")
            if graph.count_params(model) > self._weight_cap(mutant):
                raise OversizeModel("too many weights")
        except Exception as exc:  # an invalid mutant, never a finding
            self._tick("generate" if mutant is None else "check", t)
            self.state["models_invalid"] += 1
            key = f"{op}:{type(exc).__name__}"
            self.state["invalid_reasons"][key] = self.state["invalid_reasons"].get(key, 0) + 1
            if mid is not None and self.lemon is None:
                self.selector.feedback(mid, op, False)
            return
        t = self._tick("check", t)
        self.state["models_valid"] += 1
        mcov = model_coverage(mutant)  # the same coverage count for every variant, guided or not
        gained = self.cov.new_items(mcov) > 0
        self.cov.update(mcov)
        if mid is not None and self.lemon is None:  # MEMO and its ablations: coverage guidance
            self.selector.feedback(mid, op, gained)
        # MEMO and its ablations: a mutant that adds coverage joins the pool (its parent stays) once its runs
        # show no crash and no NaN output (the authors' rule) — unless it grew past max_added_layers
        join = gained and mid is not None and self.lemon is None
        if join:
            origin = self.state.get("seed_specs", {}).get(mutant.get("origin", ""))
            cap = self.state["config"].get("max_added_layers", Config.max_added_layers)  # older campaigns lack it
            if origin is not None and len(mutant["nodes"]) > len(origin["nodes"]) + cap:
                join = False
                self.state["pool_too_large"] = self.state.get("pool_too_large", 0) + 1
        self._log_model(mutant, op, mid or "", gained)
        t = self._tick("coverage", t)
        if not systems:
            if join:
                self._pool_add(mutant)
            return
        try:
            mpath, ipath = self._save_model(mutant, "current", model)
        except Exception as exc:
            self.state["invalid_reasons"][f"save:{type(exc).__name__}"] = self.state["invalid_reasons"].get(f"save:{type(exc).__name__}", 0) + 1
            return
        finally:
            t = self._tick("save_model", t)
        res = self._run_all(mpath, ipath, systems)
        t = self._tick("execute", t)
        self.state["models_tested"] += 1
        per_system = self.state.setdefault("system_s", {})  # the loop's execute seconds by system (worker wall time)
        for s, r in res.items():
            per_system[s] = round(per_system.get(s, 0.0) + float(r.get("seconds") or 0.0), 3)
        if join:
            if clean_run(res):
                self._pool_add(mutant)
            else:
                self.state["pool_not_clean"] = self.state.get("pool_not_clean", 0) + 1
        try:
            self._judge(mutant, op, mid, res, mpath, ipath, systems)
        finally:
            self._tick("findings", t)

    def _judge(self, mutant: dict, op: str, mid: str | None, res: dict[str, dict], mpath: Path, ipath: Path,
               systems: list[str]) -> None:
        """The end of :meth:`_step` for a tested mutant: LEMON's pool update, then the oracles, and for each new
        symptom minimisation, root cause and a findings bundle."""
        if self.lemon is not None and mid is not None:  # LEMON: the mutant joins the pool if it raised the degree
            degree = lemon.inconsistency_degree(res)
            if self.lemon.raised(mid, degree):
                self.lemon.raises[op] += 1
                self.lemon.add_model(self._add_model(mutant), degree)
        aliases = self.state.setdefault("signature_aliases", {})
        pending = {p["seen"]: p for p in self.state.setdefault("pending_findings", [])}
        here: set[str] = set()
        # the pairs of one deviating system (one faulty backend against three agreeing ones) get one key
        for f in triage.mark_deviating(oracles.judge(res, self.state["threshold"]), res):
            f["layer"] = triage.localise(mutant, f, res)
            seen = triage.signature(f)  # the symptom's signature on the mutant as generated
            if seen in here:  # a cause counts once per mutant, however many of its pairs were flagged
                continue
            here.add(seen)
            if seen in aliases or seen in self.state["signatures"]:
                root = aliases.get(seen, seen)
                self.state["signatures"][root] = self.state["signatures"].get(root, 0) + 1
                continue
            if seen in pending:  # a symptom queued earlier in this budget
                pending[seen]["duplicates"] += 1
                continue
            self._queue_finding(seen, f, op, mutant, res, mpath, ipath)
            pending[seen] = self.state["pending_findings"][-1]

    def _bundle(self, seen: str, f: dict, op: str, mutant: dict, res: dict[str, dict], mpath: Path, ipath: Path,
                systems: list[str], count: int, found_at_s: float) -> None:
        """A queued symptom's end: minimise the mutant, find the root-cause layer, and write a findings bundle
        unless the root-cause signature is already known (then its count grows by ``count``, the mutants
        that showed the symptom)."""
        aliases = self.state.setdefault("signature_aliases", {})
        small, sres, spaths = self._minimise(mutant, f, res, mpath, ipath, systems)
        if small is not mutant:  # the bundle holds the minimised model: describe its symptom, not the mutant's
            sfound = oracles.judge(sres, self.state["threshold"])
            f = {**f, "detail_before_minimising": f["detail"],
                 "detail": (oracles.symptom(sfound, f["kind"], f["systems"]) or f)["detail"]}
            s_ok = [s for s, r in sres.items() if r.get("status") == "ok"]
            s_pairs = [g["systems"] for g in sfound if g["kind"] == "inconsistency"]
            if f.get("deviating"):  # the minority decided on the mutant, unless the minimised model's runs contradict it
                f["deviating"] = triage.agrees(f["deviating"], s_ok, s_pairs)
            if f.get("all_differ"):  # likewise "every system differs", when the minimised model ran three or more
                f["all_differ"] = len(s_ok) < 3 or triage.all_differ(s_ok, s_pairs)
        # one cause, one finding: the signature names the deviating system(s) (else the pair) and the
        # root-cause layer of the minimised model
        f["symptom_layer"] = f["layer"]
        f["layer"], f["root_cause"], f["deviating"] = self._root_cause(
            small, f, sres, systems, [s for s, r in res.items() if r.get("status") == "ok"])
        sig = f["signature"] = triage.signature(f)
        aliases[seen] = sig
        if sig in self.state["signatures"]:  # another symptom of a cause already found
            self.state["signatures"][sig] += count
            return
        fid = triage.finding_id(sig)
        dest = triage.write_bundle(self.root / "findings", fid, f, small, spaths[0], spaths[1], sres,
                                   self.state["threshold"], {"operator": op, "layers_before_minimising": len(mutant["nodes"]),
                                                             "layers": len(small["nodes"])},
                                   timeout_s=float(self.state["config"]["timeout_s"]) + 120.0)
        self.state["signatures"][sig] = count
        self.state["findings"].append({"id": fid, "kind": f["kind"], "systems": f["systems"],
                                       "deviating": f.get("deviating"), "all_differ": bool(f.get("all_differ")),
                                       "signature": sig,
                                       "dir": str(dest.relative_to(self.root)), "layer": f.get("layer"),
                                       "symptom_layer": f.get("symptom_layer"), "root_cause": f.get("root_cause"),
                                       "found_at_s": found_at_s})

    def _pool_add(self, spec: dict) -> str:
        """Add ``spec`` to MEMO's model pool; while the pool is over ``pool_size``, a model drawn uniformly at
        random (the new one and the seeds included, as in the authors' ``pop_one_architecture``) leaves it
        with its (model, operator) seeds. Returns the new model's id."""
        mid = self._add_model(spec)
        self.state["pool_added"] = self.state.get("pool_added", 0) + 1
        cap = int(self.state["config"].get("pool_size", POOL_SIZE))  # older campaigns lack it
        pool = self.state["pool"]
        while len(pool) > cap:
            victim = self.rng.choice(sorted(pool, key=lambda m: int(m[1:])))
            pool.pop(victim)
            self.selector.remove_model(victim)
            self.state["pool_evicted"] = self.state.get("pool_evicted", 0) + 1
        return mid

    def _tick(self, phase: str, t0: float) -> float:
        """Add the seconds since ``t0`` to ``state["phase_s"][phase]`` (where the search loop's time goes:
        generate, check, coverage, save_model, execute, findings, state_write); returns the current time."""
        now = time.perf_counter()
        ph = self.state.setdefault("phase_s", {})
        ph[phase] = round(ph.get(phase, 0.0) + now - t0, 3)
        return now

    def _root_cause(self, spec: dict, f: dict, res: dict[str, dict], systems: list[str],
                    ran: list[str] | None = None) -> tuple[str | None, str, list[str] | None]:
        """Root-cause layer type of finding ``f`` on the minimised model ``spec`` (whose results are ``res``),
        and the deviating system(s) the signature names.

        Runs a probe — ``spec`` with every node as an output — on the finding's systems (one more backend
        run) and returns :func:`triage.root_cause_split` of it with method ``"probe"``; when the probe cannot
        be built or run, or shows no symptom at any node, falls back to the layer producing the symptomatic
        output of ``spec`` itself (:func:`triage.localise`, method ``"output"``). Crashes have no layer
        (their signature is the exception and top frame): ``(None, "crash", None)``. The deviating systems
        are ``f["deviating"]`` (decided on the outputs of the mutant, which every system in ``ran`` ran)
        unless the probe contradicts it at the root-cause node: the probe runs the finding's pair only, no
        more systems than before, so it cannot decide a majority itself.
        """
        dev = f.get("deviating")
        ran = ran if ran is not None else [s for s, r in res.items() if r.get("status") == "ok"]
        if f["kind"] == "crash":
            return None, "crash", None
        fallback = triage.localise(spec, f, res)
        involved = [s for s in systems if s in f["systems"]]
        if f["kind"] == "nan":  # a system without the NaN, to tell where they part
            involved += [s for s in systems if s not in f["systems"] and res.get(s, {}).get("status") == "ok"][:1]
        if len(involved) < 2 or time.perf_counter() >= self.deadline:
            return fallback, "output", dev
        probe = triage.probe_spec(spec)
        try:
            mp, ip = self._save_model(probe, "probe")
        except Exception:
            return fallback, "output", dev
        pres = self._run_all(mp, ip, involved)
        layer, minority = triage.root_cause_split(probe, f, pres, self.state["threshold"], ran)
        return (layer, "probe", minority) if layer is not None else (fallback, "output", dev)

    def _weight_cap(self, spec: dict) -> float:
        """Weights a valid model may have: :data:`MAX_WEIGHTS`, or :data:`SEED_WEIGHT_FACTOR` times the weights
        of the seed it descends from when that is more (seed weights are counted at seeding)."""
        seed_weights = self.state.get("seed_weights", {}).get(spec.get("origin", ""), 0)
        return max(MAX_WEIGHTS, SEED_WEIGHT_FACTOR * seed_weights)

    def _log_model(self, spec: dict, op: str, parent: str, gained: bool) -> None:
        """Append the valid mutant to ``models.jsonl`` (one JSON object per line: index, operator, parent id,
        whether it added coverage, spec) so the models of a campaign can be replayed, e.g. under coverage.py.
        A line cut short by an interruption is skipped by :func:`read_model_log`."""
        rec = {"i": self.state["models_generated"], "op": op, "parent": parent, "gained": gained, "spec": spec}
        with open(self.root / MODEL_LOG, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def _symptom(self, f: dict, res: dict[str, dict]) -> bool:
        """Whether the results ``res`` of a candidate model show finding ``f``'s symptom (:func:`oracles.symptom`)."""
        return oracles.symptom(oracles.judge(res, self.state["threshold"]), f["kind"], f["systems"]) is not None

    def _minimise(self, spec: dict, f: dict, res: dict, mpath: Path, ipath: Path, systems: list[str]):
        """Remove layers while the symptom persists (at most ``minimise_tries`` backend runs, and never past
        the run's deadline: a slow system must not spend the campaign's budget on one finding)."""
        best, bres, paths = spec, res, (mpath, ipath)
        t0 = time.perf_counter()
        tries = int(self.state["config"]["minimise_tries"])
        involved = [s for s in systems if s in f["systems"]] + [s for s in systems if s not in f["systems"]][:1]
        cands: list[dict] = []
        layer_out = [o for o in spec["outputs"] if any(n["name"] == o and n["layer"] == f.get("layer") for n in spec["nodes"])]
        if len(spec["outputs"]) > 1 and layer_out:
            one = graph.clone(spec)
            one["outputs"] = layer_out[:1]
            cands.append(graph.prune(one))
        for k in range(tries):
            if time.perf_counter() >= self.deadline:
                break
            if not cands:
                pres = [n for n in best["nodes"] if len(n["inputs"]) == 1 and n.get("shape") == graph.shape_of(best, n["inputs"][0])]
                if not pres:
                    break
                cands.append(operators.remove_node(best, self.rng.choice(pres)["name"]))
            cand = cands.pop(0)
            try:
                # build only: a candidate that crashes a library is what a crash finding keeps
                mp, ip = self._save_model(cand, f"min{k}")  # built (seeded) there
            except Exception:
                continue
            r = self._run_all(mp, ip, involved)
            if self._symptom(f, r):
                best, bres, paths = cand, {**r}, (mp, ip)
        self.state["minimise_s"] = round(self.state.get("minimise_s", 0.0) + time.perf_counter() - t0, 1)
        return best, bres, paths


def clean_run(res: dict[str, dict]) -> bool:
    """Whether every system ran the model (status ``ok``) and every output is free of NaN and infinity: the
    authors' condition for a coverage-adding mutant to join the pool (``run.py``, ``after_prediction``: only
    when ``status_crash_nan`` is false)."""
    return all(r.get("status") == "ok" and not any(oracles.nonfinite([np.asarray(o) for o in r.get("outputs") or []]).values())
               for r in res.values())


def read_model_log(root: str | Path) -> list[dict]:
    """The valid mutants a campaign logged, in order (records of ``models.jsonl``; see
    :meth:`Campaign._log_model`). A truncated last line is skipped.

    Raises:
        InputError: ``root`` holds no model log.
    """
    path = Path(root) / MODEL_LOG
    if not path.is_file():
        raise InputError("holds no model log (models.jsonl)", root)
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def run_campaign(root: str | Path, budget_s: float, config: Config | None = None, max_models: int | None = None,
                 verbose: int = 0, executor: str = "local", address: str | None = None, jobs: int = 1) -> dict:
    """Create or resume the campaign in ``root`` and run it for ``budget_s`` seconds; returns its summary.

    Args:
        executor: ``"local"`` (worker processes, the default) or ``"ray"``.
        address: Ray cluster to join (``executor="ray"`` only); None starts a local Ray instance.
        jobs: systems of one model run at the same time (``executor="local"`` only; default 1: one after
            another; see :class:`twinspect.dl.fuzz.executors.LocalExecutor`). Results do not depend on it.

    The run record (``last_run`` of the state and summary) gets where this run's wall time went, in
    seconds: ``wall_s`` = ``loop_s`` (the search loop) + ``overhead_s``, and the overhead split into
    ``executor_start_s`` (starting or joining Ray and creating its actors, all at once; 0 for local
    workers), ``startup_s`` (every backend worker started and run on one tiny model: process start,
    library imports, first-run set-up), ``seeding_s`` (0 when a resumed campaign was already seeded),
    ``findings_after_s`` (minimising and bundling the findings queued in the loop), ``executor_close_s``
    (stopping workers, actors and a Ray instance the run started) and ``overhead_other_s`` (the rest:
    opening or creating the campaign directory, state writes around the loop).

    Raises:
        InputError: a bad campaign directory or config (:meth:`Config.validate`), ``max_models < 1``,
            ``budget_s <= 0``, an unknown executor, ``jobs < 1`` (or not 1 with Ray), Ray missing or unreachable.
    """
    root = Path(root)
    config = config or Config()
    if max_models is not None and max_models < 1:
        raise InputError(f"max_models {max_models} must be >= 1 (or None for the budget only)")
    if not budget_s > 0:
        raise InputError(f"budget {budget_s} s must be positive")
    camp = Campaign.open(root) if holds_campaign(root) else None
    if camp is None:
        config.validate()  # before the executor starts workers
        from twinspect._io import check_output_dir

        check_output_dir(root, "campaign directory")
    # the executor starts before a new campaign directory is created, so a bad executor leaves nothing behind
    t0 = time.perf_counter()
    ex = make_executor(executor, timeout_s=camp.state["config"]["timeout_s"] if camp else config.timeout_s,
                       address=address, jobs=jobs)
    executor_start_s = time.perf_counter() - t0
    try:
        camp = camp or Campaign.create(root, config)
    except BaseException:
        ex.close()
        raise
    seeding_before = camp.state.get("seeding_s") if camp.state.get("seeded") else None
    summary = camp.run(budget_s, max_models=max_models, verbose=verbose, executor=ex)
    last = camp.state.get("last_run")
    if last is not None:  # the cost around the search loop, for this run (issue 20: Ray's start-up tax)
        wall = time.perf_counter() - t0
        timings = getattr(ex, "timings", {})
        # Ray's actors are created when the run asks for its systems, after make_executor returned
        start_s = executor_start_s + float(timings.get("actors_s", 0.0))
        close_s = float(timings.get("close_s", 0.0))
        seeding_s = float(camp.state.get("seeding_s") or 0.0) if seeding_before is None else 0.0
        overhead = wall - float(last["loop_s"])
        known = start_s + float(last.get("startup_s") or 0.0) + seeding_s + float(last.get("findings_after_s") or 0.0) + close_s
        last.update(executor=executor, jobs=jobs, executor_start_s=round(start_s, 1), wall_s=round(wall, 1),
                    seeding_s=seeding_s, executor_close_s=round(close_s, 1), overhead_s=round(overhead, 1),
                    overhead_other_s=round(overhead - known, 1))
        camp.save()
        summary["last_run"] = last  # the summary's other fields did not change since camp.run made it
    return summary
